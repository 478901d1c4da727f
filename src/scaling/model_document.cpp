#include "trainscope/scaling/model_document.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::scaling {
namespace {

using Json = nlohmann::ordered_json;

// --- Writing ---------------------------------------------------------------

// NaN/inf are not JSON: null.
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json factor_json(const Factor& f, const std::vector<std::string>& parameters) {
  Json j;
  const auto index = static_cast<std::size_t>(f.parameter);
  j["parameter"] = index < parameters.size() ? parameters[index] : std::string();
  j["poly"] = f.poly.text;
  j["poly_value"] = f.poly.value;
  j["log"] = f.log.text;
  j["log_value"] = f.log.value;
  return j;
}

Json views_json(const std::vector<ScalingView>& views) {
  Json out = Json::array();
  for (const ScalingView& v : views) {
    out.push_back({{"resource", number(v.resource)},
                   {"time", number(v.time)},
                   {"speedup", number(v.speedup)},
                   {"efficiency", number(v.efficiency)},
                   {"cost", number(v.cost)}});
  }
  return out;
}

Json predictions_json(const std::vector<Prediction>& predictions,
                      const std::vector<std::string>& parameters) {
  Json out = Json::array();
  for (const Prediction& p : predictions) {
    Json point = Json::object();
    for (std::size_t i = 0; i < parameters.size() && i < p.coordinate.size(); ++i) {
      point[parameters[i]] = number(p.coordinate[i]);
    }
    out.push_back({{"point", std::move(point)},
                   {"value", number(p.value)},
                   {"lower", number(p.lower)},
                   {"upper", number(p.upper)}});
  }
  return out;
}

Json series_json(const ModeledSeries& s, const std::vector<std::string>& parameters) {
  const Model& model = s.model;
  Json j;
  j["callpath"] = s.callpath;
  j["metric"] = s.metric;
  Json group = Json::object();  // in `by` order
  for (const auto& [name, value] : s.group) group[name] = value;
  j["group"] = std::move(group);
  j["points"] = s.points;  // what the fit used
  j["values"] = s.values;
  j["too_few_points"] = model.too_few_points;
  j["formula"] = model.formula();
  j["python"] = model.python();
  j["cpp"] = model.cpp();
  // How the parameters are named in "python" and "cpp" (valid identifiers),
  // keys sorted.
  nlohmann::json identifiers = nlohmann::json::object();
  const std::vector<std::string> ids = model.identifiers();
  for (std::size_t i = 0; i < ids.size() && i < model.parameters.size(); ++i) {
    identifiers[model.parameters[i]] = ids[i];
  }
  j["identifiers"] = std::move(identifiers);
  j["constant"] = number(model.constant);
  j["terms"] = Json::array();
  for (const Term& t : model.terms) {
    Json term;
    term["coefficient"] = number(t.coefficient);
    term["factors"] = Json::array();
    for (const Factor& f : t.factors) term["factors"].push_back(factor_json(f, parameters));
    j["terms"].push_back(std::move(term));
  }
  const ModelCosts& c = model.costs;
  j["costs"] = {{"rss", number(c.rss)},     {"rrss", number(c.rrss)}, {"nrss", number(c.nrss)},
                {"smape", number(c.smape)}, {"ar2", number(c.ar2)},   {"re", number(c.re)}};
  j["warnings"] = model.warnings;
  j["predictions"] = predictions_json(s.predictions, parameters);
  if (!s.measured_scaling.empty() || !s.modeled_scaling.empty()) {
    j["scaling"] = {{"measured", views_json(s.measured_scaling)},
                    {"model", views_json(s.modeled_scaling)}};
  }
  return j;
}

// --- Reading ---------------------------------------------------------------

std::string shown(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out = absl::Utf8SafeCHexEscape(std::string(text.substr(0, kMax)));
  if (text.size() > kMax) out += "...";
  return out;
}

std::string quoted_text(std::string_view text) { return "\"" + shown(text) + "\""; }

const char* type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "something else";
  }
}

// The text trainscope writes for an exponent of this value: Fraction's
// reduced "n" or "n/d", or Number's repr of the value.
bool exponent_text_matches(const std::string& text, double value) {
  if (text == Exponent::Number(value).text) return true;
  constexpr int kLimit = 1 << 20;
  const std::size_t slash = text.find('/');
  int numerator = 0;
  int denominator = 1;
  if (!absl::SimpleAtoi(text.substr(0, slash), &numerator) || numerator > kLimit ||
      numerator < -kLimit) {
    return false;
  }
  if (slash != std::string::npos && (!absl::SimpleAtoi(text.substr(slash + 1), &denominator) ||
                                     denominator <= 0 || denominator > kLimit)) {
    return false;
  }
  const Exponent e = Exponent::Fraction(numerator, denominator);
  return e.text == text && e.value == value;
}

class Reader {
 public:
  explicit Reader(std::string_view name) : name_(name) {}

  absl::StatusOr<ModelDocument> read(std::string_view text) {
    Json doc;
    try {
      doc = Json::parse(text.data(), text.data() + text.size());
    } catch (const Json::exception& e) {
      std::string detail = e.what();
      const std::size_t bracket = detail.find("] ");
      if (bracket != std::string::npos) detail = detail.substr(bracket + 2);
      return absl::InvalidArgumentError(
          fmt::format("{}: not a JSON document: {}", shown(name_), shown(detail)));
    }
    if (!doc.is_object())
      return error("", fmt::format("expected an object, got {}", type_name(doc)));
    ModelDocument out;
    const Json* parameters = field(doc, "", "parameters", Json::value_t::array, "an array");
    if (parameters == nullptr) return status_;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < parameters->size(); ++i) {
      const Json& p = (*parameters)[i];
      const std::string path = fmt::format("parameters[{}]", i);
      if (!p.is_string())
        return error(path, fmt::format("expected a string, got {}", type_name(p)));
      std::string parameter = p.get<std::string>();
      if (parameter.empty()) return error(path, "an empty parameter name");
      if (!seen.insert(parameter).second) {
        return error(path, fmt::format("{} is given twice", quoted_text(parameter)));
      }
      out.parameters.push_back(std::move(parameter));
    }
    if (out.parameters.empty()) return error("parameters", "no parameter");
    const Json* modeler = field(doc, "", "modeler", Json::value_t::string, "a string");
    if (modeler == nullptr) return status_;
    const std::string modeler_text = modeler->get<std::string>();
    if (modeler_text == "trainscope") {
      out.modeler = Modeler::kTrainscope;
    } else if (modeler_text == "extrap") {
      out.modeler = Modeler::kExtrap;
    } else {
      return error("modeler", fmt::format("{}: expected \"trainscope\" or \"extrap\"",
                                          quoted_text(modeler_text)));
    }
    const Json* models = field(doc, "", "models", Json::value_t::array, "an array");
    if (models == nullptr) return status_;
    for (std::size_t i = 0; i < models->size(); ++i) {
      ModeledSeries series;
      if (!read_series((*models)[i], fmt::format("models[{}]", i), out.parameters, &series)) {
        return status_;
      }
      out.models.push_back(std::move(series));
    }
    return out;
  }

 private:
  // Records the error that read() returns; false.
  bool fail(const std::string& path, std::string_view what) {
    status_ = absl::InvalidArgumentError(path.empty()
                                             ? fmt::format("{}: {}", shown(name_), what)
                                             : fmt::format("{}: {}: {}", shown(name_), path, what));
    return false;
  }
  absl::Status error(const std::string& path, std::string_view what) {
    fail(path, what);
    return status_;
  }

  static std::string join(const std::string& parent, std::string_view key) {
    return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
  }

  static bool has_type(const Json& j, Json::value_t type) {
    if (type == Json::value_t::number_float) return j.is_number();
    return j.type() == type;
  }

  // The member `key` of object `j` with the type; nullptr after error().
  const Json* field(const Json& j, const std::string& parent, std::string_view key,
                    Json::value_t type, const char* description) {
    const std::string path = join(parent, key);
    const auto it = j.find(std::string(key));
    if (it == j.end()) {
      fail(path, fmt::format("missing (expected {})", description));
      return nullptr;
    }
    if (!has_type(*it, type)) {
      fail(path, fmt::format("expected {}, got {}", description, type_name(*it)));
      return nullptr;
    }
    return &*it;
  }

  // A number, or null for a value that is not finite.
  bool number_field(const Json& j, const std::string& parent, std::string_view key, double* out) {
    const std::string path = join(parent, key);
    const auto it = j.find(std::string(key));
    if (it == j.end()) {
      fail(path, "missing (expected a number or null)");
      return false;
    }
    if (it->is_null()) {
      *out = stats::kNaN;
      return true;
    }
    if (!it->is_number()) {
      fail(path, fmt::format("expected a number or null, got {}", type_name(*it)));
      return false;
    }
    *out = it->get<double>();
    return true;
  }

  bool string_field(const Json& j, const std::string& parent, std::string_view key,
                    std::string* out) {
    const Json* value = field(j, parent, key, Json::value_t::string, "a string");
    if (value == nullptr) return false;
    *out = value->get<std::string>();
    return true;
  }

  bool object(const Json& j, const std::string& path) {
    if (j.is_object()) return true;
    fail(path, fmt::format("expected an object, got {}", type_name(j)));
    return false;
  }

  bool read_exponent(const Json& j, const std::string& parent, std::string_view key,
                     Exponent* out) {
    if (!string_field(j, parent, key, &out->text)) return false;
    const std::string value_key = fmt::format("{}_value", key);
    const Json* value = field(j, parent, value_key, Json::value_t::number_float, "a number");
    if (value == nullptr) return false;
    out->value = value->get<double>();
    if (!exponent_text_matches(out->text, out->value)) {
      fail(join(parent, key),
           fmt::format("{} is not the exponent {} (\"n\", reduced \"n/d\" or the value's repr)",
                       quoted_text(out->text), Exponent::Number(out->value).text));
      return false;
    }
    return true;
  }

  bool read_term(const Json& j, const std::string& path, const std::vector<std::string>& parameters,
                 Term* out) {
    if (!object(j, path) || !number_field(j, path, "coefficient", &out->coefficient)) return false;
    const Json* factors = field(j, path, "factors", Json::value_t::array, "an array");
    if (factors == nullptr) return false;
    if (factors->empty()) {
      fail(join(path, "factors"), "a term needs at least one factor");
      return false;
    }
    std::set<int> used;
    for (std::size_t i = 0; i < factors->size(); ++i) {
      const Json& f = (*factors)[i];
      const std::string at = fmt::format("{}.factors[{}]", path, i);
      Factor factor;
      std::string parameter;
      if (!object(f, at) || !string_field(f, at, "parameter", &parameter)) return false;
      factor.parameter = -1;
      for (std::size_t p = 0; p < parameters.size(); ++p) {
        if (parameters[p] == parameter) factor.parameter = static_cast<int>(p);
      }
      if (factor.parameter < 0) {
        std::string names;
        for (const std::string& p : parameters)
          names += (names.empty() ? "" : ", ") + quoted_text(p);
        fail(join(at, "parameter"),
             fmt::format("{} is not one of the parameters ({})", quoted_text(parameter), names));
        return false;
      }
      if (!used.insert(factor.parameter).second) {
        fail(join(at, "parameter"),
             fmt::format("{} has a factor of this term already", quoted_text(parameter)));
        return false;
      }
      if (!read_exponent(f, at, "poly", &factor.poly) ||
          !read_exponent(f, at, "log", &factor.log)) {
        return false;
      }
      out->factors.push_back(std::move(factor));
    }
    return true;
  }

  bool read_views(const Json& j, const std::string& path, std::vector<ScalingView>* out) {
    if (!j.is_array()) {
      fail(path, fmt::format("expected an array, got {}", type_name(j)));
      return false;
    }
    for (std::size_t i = 0; i < j.size(); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      ScalingView v;
      if (!object(j[i], at) || !number_field(j[i], at, "resource", &v.resource) ||
          !number_field(j[i], at, "time", &v.time) ||
          !number_field(j[i], at, "speedup", &v.speedup) ||
          !number_field(j[i], at, "efficiency", &v.efficiency) ||
          !number_field(j[i], at, "cost", &v.cost)) {
        return false;
      }
      out->push_back(v);
    }
    return true;
  }

  bool read_prediction(const Json& j, const std::string& path,
                       const std::vector<std::string>& parameters, Prediction* out) {
    if (!object(j, path)) return false;
    const Json* point = field(j, path, "point", Json::value_t::object, "an object");
    if (point == nullptr) return false;
    const std::string point_path = join(path, "point");
    for (const auto& item : point->items()) {
      bool known = false;
      for (const std::string& p : parameters) known = known || p == item.key();
      if (!known) {
        fail(point_path, fmt::format("{} is not a parameter", quoted_text(item.key())));
        return false;
      }
    }
    out->coordinate.assign(parameters.size(), 0.0);
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      if (!number_field(*point, point_path, parameters[i], &out->coordinate[i])) return false;
    }
    return number_field(j, path, "value", &out->value) &&
           number_field(j, path, "lower", &out->lower) &&
           number_field(j, path, "upper", &out->upper);
  }

  bool read_series(const Json& j, const std::string& path,
                   const std::vector<std::string>& parameters, ModeledSeries* out) {
    if (!object(j, path) || !string_field(j, path, "callpath", &out->callpath) ||
        !string_field(j, path, "metric", &out->metric)) {
      return false;
    }
    // Derived: the measurements the fit used, when the document says.
    for (auto [name, count] : {std::pair<const char*, std::size_t*>{"points", &out->points},
                               std::pair<const char*, std::size_t*>{"values", &out->values}}) {
      const auto it = j.find(name);
      if (it != j.end() && it->is_number_unsigned()) *count = it->template get<std::size_t>();
    }
    // Later fields: a document written before them reads as {} and false.
    if (const auto group = j.find("group"); group != j.end()) {
      const std::string group_path = join(path, "group");
      if (!object(*group, group_path)) return false;
      for (const auto& item : group->items()) {
        if (!item.value().is_string()) {
          fail(join(group_path, item.key()),
               fmt::format("expected a string, got {}", type_name(item.value())));
          return false;
        }
        out->group.emplace_back(item.key(), item.value().template get<std::string>());
      }
    }
    Model& model = out->model;
    model.parameters = parameters;
    if (const auto few = j.find("too_few_points"); few != j.end()) {
      if (!few->is_boolean()) {
        fail(join(path, "too_few_points"),
             fmt::format("expected a boolean, got {}", type_name(*few)));
        return false;
      }
      model.too_few_points = few->template get<bool>();
    }
    if (!number_field(j, path, "constant", &model.constant)) return false;
    const Json* terms = field(j, path, "terms", Json::value_t::array, "an array");
    if (terms == nullptr) return false;
    for (std::size_t i = 0; i < terms->size(); ++i) {
      Term term;
      if (!read_term((*terms)[i], fmt::format("{}.terms[{}]", path, i), parameters, &term)) {
        return false;
      }
      model.terms.push_back(std::move(term));
    }
    const Json* costs = field(j, path, "costs", Json::value_t::object, "an object");
    if (costs == nullptr) return false;
    const std::string costs_path = join(path, "costs");
    ModelCosts& c = model.costs;
    if (!number_field(*costs, costs_path, "rss", &c.rss) ||
        !number_field(*costs, costs_path, "rrss", &c.rrss) ||
        !number_field(*costs, costs_path, "nrss", &c.nrss) ||
        !number_field(*costs, costs_path, "smape", &c.smape) ||
        !number_field(*costs, costs_path, "ar2", &c.ar2) ||
        !number_field(*costs, costs_path, "re", &c.re)) {
      return false;
    }
    const Json* warnings = field(j, path, "warnings", Json::value_t::array, "an array");
    if (warnings == nullptr) return false;
    for (std::size_t i = 0; i < warnings->size(); ++i) {
      const Json& w = (*warnings)[i];
      if (!w.is_string()) {
        fail(fmt::format("{}.warnings[{}]", path, i),
             fmt::format("expected a string, got {}", type_name(w)));
        return false;
      }
      model.warnings.push_back(w.get<std::string>());
    }
    const Json* predictions = field(j, path, "predictions", Json::value_t::array, "an array");
    if (predictions == nullptr) return false;
    for (std::size_t i = 0; i < predictions->size(); ++i) {
      Prediction p;
      if (!read_prediction((*predictions)[i], fmt::format("{}.predictions[{}]", path, i),
                           parameters, &p)) {
        return false;
      }
      out->predictions.push_back(std::move(p));
    }
    const auto scaling = j.find("scaling");
    if (scaling != j.end()) {
      const std::string scaling_path = join(path, "scaling");
      if (!object(*scaling, scaling_path)) return false;
      const Json* measured =
          field(*scaling, scaling_path, "measured", Json::value_t::array, "an array");
      const Json* modeled = measured == nullptr ? nullptr
                                                : field(*scaling, scaling_path, "model",
                                                        Json::value_t::array, "an array");
      if (modeled == nullptr ||
          !read_views(*measured, join(scaling_path, "measured"), &out->measured_scaling) ||
          !read_views(*modeled, join(scaling_path, "model"), &out->modeled_scaling)) {
        return false;
      }
    }
    return true;
  }

  std::string name_;
  absl::Status status_;
};

}  // namespace

const char* modeler_name(Modeler modeler) noexcept {
  return modeler == Modeler::kExtrap ? "extrap" : "trainscope";
}

std::string model_document_json(const ModelDocument& document) {
  Json doc;
  doc["parameters"] = document.parameters;
  doc["modeler"] = modeler_name(document.modeler);
  doc["models"] = Json::array();
  for (const ModeledSeries& s : document.models) {
    doc["models"].push_back(series_json(s, document.parameters));
  }
  return doc.dump(1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<ModelDocument> parse_model_document(std::string_view text, std::string_view name) {
  return Reader(name).read(text);
}

absl::StatusOr<ModelDocument> read_model_document(const std::string& path) {
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_model_document(*text, path);
}

}  // namespace trainscope::scaling
