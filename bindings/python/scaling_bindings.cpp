// trainscope._core._scaling: the scaling models (include/trainscope/scaling/)
// for Python, re-exported by trainscope/scaling.py under the C++ names.
//
// Same names and semantics as C++. Conveniences that change no result:
// enums also accept their names as str ("mean", "extrap"), option structs take
// their fields as keyword arguments, fit()/fit_extrap() also take a
// MeasurementSet and a callpath/metric, Model.evaluate() also takes keyword
// arguments by parameter name, read_runs() emits its warnings with
// warnings.warn (TrainscopeWarning). A failed absl::Status raises as elsewhere
// in the module (ThrowIfError): ValueError for invalid input, FileNotFoundError
// for a missing file, RuntimeError otherwise.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "py_timers.hpp"
#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/run_input.hpp"
#include "trainscope/scaling/svg_plot.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace py = pybind11;
namespace sc = trainscope::scaling;

namespace trainscope::python {
namespace {

// The enums from their names (case-insensitive), as the CLI spells them.
template <typename Enum>
Enum FromName(absl::StatusOr<Enum> parsed) {
  if (!parsed.ok()) throw py::value_error(std::string(parsed.status().message()));
  return *parsed;
}
sc::Measure MeasureFromName(const std::string& name) { return FromName(sc::parse_measure(name)); }
sc::Modeler ModelerFromName(const std::string& name) { return FromName(sc::parse_modeler(name)); }
sc::RankAggregation RankAggregationFromName(const std::string& name) {
  return FromName(sc::parse_rank_aggregation(name));
}

}  // namespace
}  // namespace trainscope::python

// Wherever one of the three enums is taken (arguments, attributes), a str
// naming a member works too; an unknown name raises ValueError with the
// choices (not pybind11's "incompatible function arguments").
namespace pybind11::detail {
#define TRAINSCOPE_ENUM_FROM_STR(Enum, FromName)         \
  template <>                                            \
  struct type_caster<Enum> : type_caster_base<Enum> {    \
    bool load(handle src, bool convert) {                \
      if (isinstance<str>(src)) {                        \
        parsed_ = FromName(src.cast<std::string>());     \
        value = &parsed_;                                \
        return true;                                     \
      }                                                  \
      return type_caster_base<Enum>::load(src, convert); \
    }                                                    \
                                                         \
   private:                                              \
    Enum parsed_{};                                      \
  };
TRAINSCOPE_ENUM_FROM_STR(sc::Measure, trainscope::python::MeasureFromName)
TRAINSCOPE_ENUM_FROM_STR(sc::Modeler, trainscope::python::ModelerFromName)
TRAINSCOPE_ENUM_FROM_STR(sc::RankAggregation, trainscope::python::RankAggregationFromName)
#undef TRAINSCOPE_ENUM_FROM_STR
}  // namespace pybind11::detail

namespace trainscope::python {
namespace {

std::string Repr(py::handle object) { return py::repr(object).cast<std::string>(); }

// "Name(a=1, b=[2.0])" of the named attributes.
std::string FieldsRepr(py::handle self, const char* name,
                       std::initializer_list<const char*> fields) {
  std::string out = std::string(name) + "(";
  bool first = true;
  for (const char* field : fields) {
    if (!first) out += ", ";
    first = false;
    out += std::string(field) + "=" + Repr(self.attr(field));
  }
  return out + ")";
}

// T() with its fields set from keyword arguments (through the bound
// attributes, so types are checked as on assignment). An unknown name is a
// TypeError, as for any Python callable.
template <typename T>
T FromKwargs(const char* type_name, const py::kwargs& kwargs) {
  T out;
  py::object view = py::cast(&out, py::return_value_policy::reference);
  for (auto item : kwargs) {
    const std::string key = item.first.cast<std::string>();
    if (key.empty() || key[0] == '_' || !py::hasattr(view, key.c_str()) ||
        PyCallable_Check(view.attr(key.c_str()).ptr())) {
      throw py::type_error(
          fmt::format("{}() got an unexpected keyword argument '{}'", type_name, key));
    }
    view.attr(key.c_str()) = item.second;
  }
  return out;
}

// One path or an iterable of paths.
std::vector<std::string> ToPaths(py::handle paths) {
  if (py::isinstance<py::str>(paths) || py::hasattr(paths, "__fspath__")) return {ToPath(paths)};
  std::vector<std::string> out;
  for (py::handle path : py::iter(paths)) out.push_back(ToPath(path));
  return out;
}

bool IsSequence(py::handle object) {
  return !py::isinstance<py::str>(object) && !py::isinstance<py::bytes>(object) &&
         PySequence_Check(object.ptr()) != 0;
}

// A coordinate in `parameters` order from a sequence of numbers, one number
// (a single-parameter model), or a mapping of parameter names to numbers.
std::vector<double> ToCoordinate(const std::vector<std::string>& parameters, py::handle object) {
  if (py::isinstance<py::dict>(object) || py::hasattr(object, "keys")) {
    if (parameters.empty())
      throw py::type_error("a point by parameter name needs a model with parameters");
    py::dict named = py::dict(py::reinterpret_borrow<py::object>(object));
    std::vector<double> out;
    for (const std::string& name : parameters) {
      if (!named.contains(name))
        throw py::type_error(fmt::format("no value for parameter '{}'", name));
      out.push_back(named[py::str(name)].cast<double>());
    }
    if (named.size() != parameters.size()) {
      for (auto item : named) {
        const std::string key = py::str(item.first).cast<std::string>();
        if (std::find(parameters.begin(), parameters.end(), key) == parameters.end()) {
          throw py::type_error(fmt::format("'{}' is not a parameter of the model (parameters: {})",
                                           key, fmt::join(parameters, ", ")));
        }
      }
    }
    return out;
  }
  if (IsSequence(object)) return object.cast<std::vector<double>>();
  return {object.cast<double>()};
}

// The series of a measurement set: by callpath and metric, either of which
// may be left out when it leaves one candidate.
sc::Series SelectSeries(const sc::MeasurementSet& set, const std::optional<std::string>& callpath,
                        const std::optional<std::string>& metric) {
  std::vector<const sc::Series*> matches;
  std::string available;
  bool groups = false;
  for (const sc::Series& s : set.series) {
    available += fmt::format("{}'{}' / '{}'", available.empty() ? "" : ", ", s.callpath, s.metric);
    for (std::size_t i = 0; i < s.group.size(); ++i) {
      available +=
          fmt::format("{}{}={}", i == 0 ? " [" : ", ", s.group[i].first, s.group[i].second);
    }
    if (!s.group.empty()) available += "]";
    groups = groups || !s.group.empty();
    if ((!callpath || s.callpath == *callpath) && (!metric || s.metric == *metric))
      matches.push_back(&s);
  }
  if (matches.size() == 1) return *matches.front();
  const std::string wanted =
      fmt::format("callpath {} / metric {}", callpath ? "'" + *callpath + "'" : "any",
                  metric ? "'" + *metric + "'" : "any");
  if (matches.empty()) {
    throw py::value_error(fmt::format("no series matches {} (the measurements have: {})", wanted,
                                      available.empty() ? "none" : available));
  }
  throw py::value_error(
      fmt::format("{} series match {}: {} (the measurements have: {})", matches.size(), wanted,
                  groups ? "one per group (RunSelection.by): fit each of measurements.series"
                         : "name the callpath and metric",
                  available));
}

// An Extra-P option value as Extra-P's command line would spell it.
std::string OptionText(py::handle value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "True" : "False";
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (IsSequence(value)) {  // poly_exponents=[1, 2, 0.5]
    std::string out;
    for (py::handle item : value)
      out += (out.empty() ? "" : ",") + py::str(item).cast<std::string>();
    return out;
  }
  return py::str(value).cast<std::string>();
}

// fixed for the derived views: given, or (one parameter) a placeholder that
// the resource replaces.
std::vector<double> FixedOrDefault(const std::optional<std::vector<double>>& fixed,
                                   std::size_t dimension, const char* what) {
  if (fixed) return *fixed;
  if (dimension == 1) return {0.0};
  throw py::type_error(fmt::format(
      "{}: fixed (one value per parameter) is needed with {} parameters", what, dimension));
}

template <typename T>
T Value(absl::StatusOr<T> result) {
  ThrowIfError(result.status());
  return std::move(*result);
}

void BindEnums(py::module_& m) {
  py::enum_<sc::Measure>(
      m, "Measure",
      "Which statistic of a point's repetitions is modeled (Extra-P's --measure).\n"
      "Wherever a Measure is taken, its name as a str works too: 'mean', 'median',\n"
      "'minimum' ('min'), 'maximum' ('max').")
      .value("MEAN", sc::Measure::kMean)
      .value("MEDIAN", sc::Measure::kMedian)
      .value("MINIMUM", sc::Measure::kMinimum)
      .value("MAXIMUM", sc::Measure::kMaximum);
  py::enum_<sc::Modeler>(
      m, "Modeler",
      "TRAINSCOPE (default): Extra-P's search plus negative exponents, minus models that\n"
      "predict values <= 0; EXTRAP: Extra-P 4.2.5's default modeler exactly.\n"
      "A str works too: 'trainscope' ('default'), 'extrap'.")
      .value("TRAINSCOPE", sc::Modeler::kTrainscope)
      .value("EXTRAP", sc::Modeler::kExtrap);
  py::enum_<sc::RankAggregation>(
      m, "RankAggregation",
      "How the ranks of one run make one value: MEAN (Extra-Deep), MAX (the slowest\n"
      "rank), MIN, SUM. A str works too: 'mean', 'max', 'min', 'sum'.")
      .value("MEAN", sc::RankAggregation::kMean)
      .value("MAX", sc::RankAggregation::kMax)
      .value("MIN", sc::RankAggregation::kMin)
      .value("SUM", sc::RankAggregation::kSum);
}

void BindMeasurements(py::module_& m) {
  py::class_<sc::Point>(
      m, "Point",
      "One point of the parameter space and the repetitions measured there.\n\n"
      "Point(coordinate=[], values=[]). List attributes are copies: assign a new list\n"
      "(point.values = [...]); appending to point.values changes nothing.")
      .def(py::init([](std::vector<double> coordinate, std::vector<double> values) {
             return sc::Point{std::move(coordinate), std::move(values)};
           }),
           py::arg("coordinate") = std::vector<double>{}, py::arg("values") = std::vector<double>{})
      .def_readwrite("coordinate", &sc::Point::coordinate,
                     "One value per parameter, in MeasurementSet.parameters order.")
      .def_readwrite("values", &sc::Point::values, "The repetitions (at least one).")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "Point", {"coordinate", "values"});
      });

  py::class_<sc::Series>(
      m, "Series",
      "Everything measured for one region (callpath) and metric, in input order.\n\n"
      "Series(callpath='', metric='', points=[]). points is a copy: assign a new list.")
      .def(py::init([](std::string callpath, std::string metric, std::vector<sc::Point> points) {
             return sc::Series{std::move(callpath), std::move(metric), std::move(points), {}};
           }),
           py::arg("callpath") = "", py::arg("metric") = "",
           py::arg("points") = std::vector<sc::Point>{})
      .def_readwrite("callpath", &sc::Series::callpath, "The region.")
      .def_readwrite("metric", &sc::Series::metric, "The metric.")
      .def_readwrite("points", &sc::Series::points, "The points (a copy), in input order.")
      .def_property(
          "group",
          [](const sc::Series& s) {
            py::dict out;  // in `by` order
            for (const auto& [name, value] : s.group) out[py::str(name)] = value;
            return out;
          },
          [](sc::Series& s, const py::dict& group) {
            s.group.clear();
            for (auto item : group) {
              s.group.emplace_back(item.first.cast<std::string>(), item.second.cast<std::string>());
            }
          },
          "read_runs with RunSelection.by: the values this series is a group of\n"
          "({'lr': '0.1'}, a copy); {} otherwise.")
      .def(
          "__len__", [](const sc::Series& s) { return s.points.size(); }, "The number of points.")
      .def("__repr__", [](const sc::Series& s) {
        std::string group;
        for (const auto& [name, value] : s.group) {
          group += fmt::format("{}{}: {}", group.empty() ? "" : ", ", Repr(py::str(name)),
                               Repr(py::str(value)));
        }
        return fmt::format("Series(callpath={}, metric={}, {}points=<{} points>)",
                           Repr(py::str(s.callpath)), Repr(py::str(s.metric)),
                           s.group.empty() ? std::string() : "group={" + group + "}, ",
                           s.points.size());
      });

  py::class_<sc::MeasurementSet>(
      m, "MeasurementSet",
      "Named parameters and, per (callpath, metric), a Series.\n\n"
      "MeasurementSet(parameters=[], series=[]). The lists are copies: assign new ones.")
      .def(py::init([](std::vector<std::string> parameters, std::vector<sc::Series> series) {
             sc::MeasurementSet set;
             set.parameters = std::move(parameters);
             set.series = std::move(series);
             return set;
           }),
           py::arg("parameters") = std::vector<std::string>{},
           py::arg("series") = std::vector<sc::Series>{})
      .def_readwrite("parameters", &sc::MeasurementSet::parameters,
                     "Parameter names, in coordinate order.")
      .def_readwrite("series", &sc::MeasurementSet::series,
                     "The series (a copy), in the order first seen.")
      .def_readwrite("coordinates", &sc::MeasurementSet::coordinates,
                     "The coordinates of the experiment as Extra-P counts them (an Extra-P\n"
                     "file's POINTS or legacy \"coordinates\", else every measured point); empty\n"
                     "for run directories.")
      .def(
          "missing_coordinates",
          [](const sc::MeasurementSet& set, const sc::Series& series) {
            return sc::missing_coordinates(set, series);
          },
          py::arg("series"),
          "The coordinates at which series has no measurement (Extra-P refuses such an\n"
          "input; fit() models the points measured).")
      .def(
          "find",
          [](const sc::MeasurementSet& set, const std::string& callpath,
             const std::string& metric) -> std::optional<sc::Series> {
            const sc::Series* s = set.find(callpath, metric);
            if (s == nullptr) return std::nullopt;
            return *s;
          },
          py::arg("callpath"), py::arg("metric"),
          "The series of (callpath, metric) (a copy), or None.")
      .def("__repr__", [](const sc::MeasurementSet& set) {
        std::string series;
        for (const sc::Series& s : set.series) {
          series += fmt::format("{}({}, {})", series.empty() ? "" : ", ", Repr(py::str(s.callpath)),
                                Repr(py::str(s.metric)));
        }
        return fmt::format("MeasurementSet(parameters={}, series=[{}])",
                           Repr(py::cast(set.parameters)), series);
      });
}

void BindModel(py::module_& m) {
  py::class_<sc::Exponent>(
      m, "Exponent",
      "An exponent as Extra-P writes it ('1/2', '-1', '0.75'); value is what is computed "
      "with.\n\nExponent(value=0.0, text='0'); see also Exponent.Fraction, Exponent.Number.")
      .def(py::init([](double value, std::string text) {
             return sc::Exponent{value, std::move(text)};
           }),
           py::arg("value") = 0.0, py::arg("text") = "0")
      .def_static(
          "Fraction",
          [](int numerator, int denominator) {
            if (denominator == 0) throw py::value_error("Exponent.Fraction: the denominator is 0");
            return sc::Exponent::Fraction(numerator, denominator);
          },
          py::arg("numerator"), py::arg("denominator"),
          "numerator/denominator reduced; text 'n/d', or 'n' when the denominator is 1.\n"
          "ValueError when the denominator is 0.")
      .def_static("Number", &sc::Exponent::Number, py::arg("value"),
                  "value, with Python's repr as its text.")
      .def_readwrite("value", &sc::Exponent::value, "The number computed with.")
      .def_readwrite("text", &sc::Exponent::text, "How formulas print it.")
      .def("is_zero", &sc::Exponent::is_zero, "value == 0.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "Exponent", {"value", "text"});
      });

  py::class_<sc::Factor>(
      m, "Factor",
      "x_p**poly * log2(x_p)**log for one parameter p (either exponent may be zero).\n\n"
      "Factor(parameter=0, poly=Exponent(), log=Exponent()).")
      .def(py::init([](int parameter, sc::Exponent poly, sc::Exponent log) {
             return sc::Factor{parameter, std::move(poly), std::move(log)};
           }),
           py::arg("parameter") = 0, py::arg("poly") = sc::Exponent{},
           py::arg("log") = sc::Exponent{})
      .def_readwrite("parameter", &sc::Factor::parameter, "Index into Model.parameters.")
      .def_readwrite("poly", &sc::Factor::poly, "Polynomial exponent.")
      .def_readwrite("log", &sc::Factor::log, "Exponent of log2(x).")
      .def("evaluate", &sc::Factor::evaluate, py::arg("x"), "The factor at x.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "Factor", {"parameter", "poly", "log"});
      });

  py::class_<sc::Term>(m, "Term",
                       "coefficient * product of factors (over distinct parameters).\n\n"
                       "Term(coefficient=1.0, factors=[]). factors is a copy: assign a new list.")
      .def(py::init([](double coefficient, std::vector<sc::Factor> factors) {
             return sc::Term{coefficient, std::move(factors)};
           }),
           py::arg("coefficient") = 1.0, py::arg("factors") = std::vector<sc::Factor>{})
      .def_readwrite("coefficient", &sc::Term::coefficient, "The coefficient.")
      .def_readwrite("factors", &sc::Term::factors, "The factors (a copy).")
      .def(
          "evaluate",
          [](const sc::Term& t, const std::vector<double>& coordinate) {
            return t.evaluate(coordinate);
          },
          py::arg("coordinate"),
          "The term at coordinate (NaN when a factor's parameter is missing).")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "Term", {"coefficient", "factors"});
      });

  py::class_<sc::ModelCosts>(
      m, "ModelCosts",
      "Extra-P's cost figures. With the single-parameter modeler and cross-validation "
      "they are\nthe leave-one-out values, as Extra-P reports them.")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::ModelCosts>("ModelCosts", kwargs);
      }))
      .def_readwrite("rss", &sc::ModelCosts::rss, "Residual sum of squares.")
      .def_readwrite("rrss", &sc::ModelCosts::rrss, "Relative RSS.")
      .def_readwrite("nrss", &sc::ModelCosts::nrss, "Normalized RSS.")
      .def_readwrite("smape", &sc::ModelCosts::smape,
                     "Symmetric mean absolute percentage error (percent).")
      .def_readwrite("ar2", &sc::ModelCosts::ar2, "Adjusted R^2.")
      .def_readwrite("re", &sc::ModelCosts::re, "Mean relative error.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "ModelCosts", {"rss", "rrss", "nrss", "smape", "ar2", "re"});
      });

  py::class_<sc::Model>(m, "Model", R"doc(
A fitted performance model in the performance model normal form (PMNF):
  f(x) = constant + sum_k c_k * prod_(p in term k) x_p**i * log2(x_p)**j
with its costs and warnings. repr() and str() show formula().

Model(parameters=[], constant=0.0, terms=[], costs=ModelCosts(), warnings=[]).
The list attributes are copies: assign new lists.)doc")
      .def(py::init([](std::vector<std::string> parameters, double constant,
                       std::vector<sc::Term> terms, sc::ModelCosts costs,
                       std::vector<std::string> warnings) {
             sc::Model model;
             model.parameters = std::move(parameters);
             model.constant = constant;
             model.terms = std::move(terms);
             model.costs = costs;
             model.warnings = std::move(warnings);
             return model;
           }),
           py::arg("parameters") = std::vector<std::string>{}, py::arg("constant") = 0.0,
           py::arg("terms") = std::vector<sc::Term>{}, py::arg("costs") = sc::ModelCosts{},
           py::arg("warnings") = std::vector<std::string>{})
      .def_readwrite("parameters", &sc::Model::parameters, "Parameter names, in coordinate order.")
      .def_readwrite("constant", &sc::Model::constant, "c0.")
      .def_readwrite("terms", &sc::Model::terms, "The terms (a copy); empty for a constant model.")
      .def_readwrite("costs", &sc::Model::costs, "ModelCosts.")
      .def_readwrite(
          "warnings", &sc::Model::warnings,
          "What the modeler wants the user to know (too few points, log terms dropped, ...).")
      .def_readwrite("too_few_points", &sc::Model::too_few_points,
                     "True when a parameter has fewer than 5 distinct values (Extra-P's rule for\n"
                     "a fit of its exponent): the points cannot tell how the value scales;\n"
                     "warnings[0] says so in words, predict_with_band widens the band.")
      .def(
          "evaluate",
          [](const sc::Model& model, const py::args& args, const py::kwargs& kwargs) {
            std::vector<double> coordinate;
            if (!kwargs.empty()) {
              if (!args.empty())
                throw py::type_error(
                    "evaluate() takes a coordinate or keyword arguments, not both");
              coordinate = ToCoordinate(model.parameters, kwargs);
            } else if (args.size() == 1) {
              coordinate = ToCoordinate(model.parameters, args[0]);
            } else {
              coordinate = args.cast<std::vector<double>>();
            }
            if (!model.parameters.empty() && coordinate.size() != model.parameters.size()) {
              throw py::value_error(fmt::format(
                  "evaluate(): {} coordinate value(s) for {} parameter(s) ({})", coordinate.size(),
                  model.parameters.size(), fmt::join(model.parameters, ", ")));
            }
            return model.evaluate(coordinate);
          },
          R"doc(The model at a point: evaluate([64, 8]), evaluate(64, 8), evaluate(p=64, n=8) or
evaluate({"p": 64, "n": 8}); evaluate(64) for one parameter. ValueError when the
number of values is not the number of parameters.)doc")
      .def("is_constant", &sc::Model::is_constant, "True when the model has no terms.")
      .def("formula", &sc::Model::formula,
           "Extra-P's text: '11.68 + 100.36 * p^(-1)'; coefficients as Python's repr.")
      .def("python", &sc::Model::python,
           "A Python expression of identifiers(); eval() it with `from math import log2`.")
      .def(
          "identifiers",
          [](const sc::Model& model) {
            py::dict out;
            const std::vector<std::string> ids = model.identifiers();
            for (std::size_t i = 0; i < ids.size() && i < model.parameters.size(); ++i) {
              out[py::str(model.parameters[i])] = ids[i];
            }
            return out;
          },
          "{parameter name: the identifier python() and cpp() use for it}: names that are not\n"
          "identifiers ('batch-size') become valid ones ('batch_size').")
      .def("cpp", &sc::Model::cpp,
           "A C++ expression of the parameter names (<cmath>: std::pow, std::log2).")
      .def("__str__", &sc::Model::formula)
      .def("__repr__", [](const sc::Model& model) {
        return fmt::format("Model({}: {})", fmt::join(model.parameters, ", "), model.formula());
      });
}

void BindOptions(py::module_& m) {
  py::class_<sc::ExtrapOptions>(m, "ExtrapOptions", R"doc(
Extra-P's modeler options under Extra-P's names. Single-parameter options also
apply to the single-parameter step of the multi-parameter modeler.

ExtrapOptions(**fields), e.g. ExtrapOptions(allow_negative_exponents=True).
Attributes are set unchecked, as in C++; set(key, value) parses and checks the
value as Extra-P's --options KEY=VALUE does.)doc")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::ExtrapOptions>("ExtrapOptions", kwargs);
      }))
      .def_readwrite("measure", &sc::ExtrapOptions::measure,
                     "Measure of the repetitions (or its name).")
      .def_readwrite("allow_log_terms", &sc::ExtrapOptions::allow_log_terms, "Search log2 factors.")
      .def_readwrite("use_crossvalidation", &sc::ExtrapOptions::use_crossvalidation,
                     "Choose hypotheses by leave-one-out cross-validated SMAPE.")
      .def_readwrite("compare_with_RSS", &sc::ExtrapOptions::compare_with_RSS,
                     "Compare hypotheses by RSS.")
      .def_readwrite("minimum_term_contribution", &sc::ExtrapOptions::minimum_term_contribution,
                     "Terms contributing less are dropped.")
      .def_readwrite("poly_exponents", &sc::ExtrapOptions::poly_exponents,
                     "Comma-separated polynomial exponents, as Extra-P: '1,2,0.5' ('' = default).")
      .def_readwrite("log_exponents", &sc::ExtrapOptions::log_exponents,
                     "Comma-separated log exponents.")
      .def_readwrite("retain_default_exponents", &sc::ExtrapOptions::retain_default_exponents,
                     "Keep the default exponents besides the given ones.")
      .def_readwrite("force_combination_exponents", &sc::ExtrapOptions::force_combination_exponents,
                     "Combine every polynomial with every log exponent.")
      .def_readwrite("allow_negative_exponents", &sc::ExtrapOptions::allow_negative_exponents,
                     "Also search negative exponents.")
      .def_readwrite("single_parameter_point_selection",
                     &sc::ExtrapOptions::single_parameter_point_selection,
                     "Multi-parameter: auto | smallest | all.")
      .def_readwrite("allow_combinations_of_sums_and_products",
                     &sc::ExtrapOptions::allow_combinations_of_sums_and_products,
                     "Multi-parameter: also try mixed sums and products.")
      .def(
          "set",
          [](sc::ExtrapOptions& options, const std::string& key, py::handle value) {
            ThrowIfError(options.set(key, OptionText(value)));
          },
          py::arg("key"), py::arg("value"),
          "Sets one option from its Extra-P name; value as Extra-P parses it (True/False,\n"
          "numbers, strings; a list of exponents is joined with commas). ValueError naming\n"
          "the key and value when either is unknown or bad.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(
            self, "ExtrapOptions",
            {"measure", "allow_log_terms", "use_crossvalidation", "compare_with_RSS",
             "minimum_term_contribution", "poly_exponents", "log_exponents",
             "retain_default_exponents", "force_combination_exponents", "allow_negative_exponents",
             "single_parameter_point_selection", "allow_combinations_of_sums_and_products"});
      });

  py::class_<sc::ModelOptions>(m, "ModelOptions", R"doc(
Options of fit(): ModelOptions(**fields), e.g. ModelOptions(modeler="extrap").

modeler EXTRAP: all of Extra-P's options (extrap). modeler TRAINSCOPE: extrap is
the base of the search (measure, exponents, cross-validation), plus
negative_exponents and reject_nonphysical. options.extrap is the options' own
ExtrapOptions, so options.extrap.set(...) changes them.)doc")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::ModelOptions>("ModelOptions", kwargs);
      }))
      .def_readwrite("modeler", &sc::ModelOptions::modeler, "Modeler (or its name).")
      .def_readwrite("extrap", &sc::ModelOptions::extrap, "ExtrapOptions.")
      .def_readwrite("negative_exponents", &sc::ModelOptions::negative_exponents,
                     "TRAINSCOPE: also search negative exponents (t = a + b/p, b/sqrt(p), ...).")
      .def_readwrite(
          "reject_nonphysical", &sc::ModelOptions::reject_nonphysical,
          "TRAINSCOPE: with all values positive, reject hypotheses predicting a value <= 0 from\n"
          "the smallest measured point to extrapolation_factor times the largest.")
      .def_readwrite("extrapolation_factor", &sc::ModelOptions::extrapolation_factor,
                     "See reject_nonphysical.")
      .def_readwrite("significance", &sc::ModelOptions::significance,
                     "TRAINSCOPE: a term stays only when an F-test against the constant (noise\n"
                     "from the spread of the repetitions) rejects at this level; 0: no test.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "ModelOptions",
                          {"modeler", "extrap", "negative_exponents", "reject_nonphysical",
                           "extrapolation_factor", "significance"});
      });

  py::class_<sc::BandOptions>(m, "BandOptions",
                              "Options of the bootstrap prediction band: BandOptions(**fields).\n"
                              "measure should be the one the model was fitted with.")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::BandOptions>("BandOptions", kwargs);
      }))
      .def_readwrite("resamples", &sc::BandOptions::resamples, "Bootstrap resamples.")
      .def_readwrite("confidence", &sc::BandOptions::confidence,
                     "Coverage of the central interval, in (0, 1).")
      .def_readwrite("seed", &sc::BandOptions::seed,
                     "Random seed (results are deterministic for a seed).")
      .def_readwrite("measure", &sc::BandOptions::measure,
                     "Measure of the repetitions (or its name).")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "BandOptions", {"resamples", "confidence", "seed", "measure"});
      });

  py::class_<sc::PlotOptions>(m, "PlotOptions", "Options of render_svg(): PlotOptions(**fields).")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::PlotOptions>("PlotOptions", kwargs);
      }))
      .def_readwrite("x_parameter", &sc::PlotOptions::x_parameter,
                     "Index of the x axis' parameter.")
      .def_readwrite("fixed", &sc::PlotOptions::fixed,
                     "The other parameters' values (a copy; [] = the line with the most points).")
      .def_readwrite("extrapolate_to", &sc::PlotOptions::extrapolate_to,
                     "Largest x drawn; 0 = 4x the largest measured.")
      .def_readwrite("log_x", &sc::PlotOptions::log_x, "log2 x axis.")
      .def_readwrite("log_y", &sc::PlotOptions::log_y, "log y axis.")
      .def_readwrite("title", &sc::PlotOptions::title, "Title; '' = 'callpath / metric'.")
      .def_readwrite("width", &sc::PlotOptions::width, "Width in pixels (at least 240).")
      .def_readwrite("height", &sc::PlotOptions::height, "Height in pixels (at least 160).")
      .def_readwrite("band", &sc::PlotOptions::band, "BandOptions of the drawn band.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "PlotOptions",
                          {"x_parameter", "fixed", "extrapolate_to", "log_x", "log_y", "title",
                           "width", "height", "band"});
      });

  py::class_<sc::RunSelection>(m, "RunSelection", R"doc(
What read_runs() measures in each run: RunSelection(**fields), e.g.
RunSelection(parameters=["p"], what="EPOCH", stat="median", ranks="max").

what: a region key ("BATCH") or "metric:NAME" for a logged metric.
stat: mean | median | min | max | total | count | p95 | p99 | last (metrics) |
      rate (count / total seconds).)doc")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::RunSelection>("RunSelection", kwargs);
      }))
      .def_readwrite("parameters", &sc::RunSelection::parameters,
                     "Run params used as model parameters, e.g. ['p', 'batch_size'] (a copy).")
      .def_readwrite("what", &sc::RunSelection::what, "Region key, or 'metric:NAME'.")
      .def_readwrite("stat", &sc::RunSelection::stat, "Statistic of each run's samples.")
      .def_readwrite("device", &sc::RunSelection::device, "cpu | gpu, for region keys.")
      .def_readwrite("ranks", &sc::RunSelection::ranks, "RankAggregation (or its name).")
      .def_readwrite("scale", &sc::RunSelection::scale,
                     "Multiplies every value (e.g. samples per batch).")
      .def_readwrite("by", &sc::RunSelection::by,
                     "Run params to split by: one series per value, with Series.group\n"
                     "(`trainscope model --by`; a copy).")
      .def_readwrite("repetitions", &sc::RunSelection::repetitions,
                     "Run params whose values are repetitions, e.g. ['seed']\n"
                     "(`trainscope model --repetition`; a copy).")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(
            self, "RunSelection",
            {"parameters", "what", "stat", "device", "ranks", "scale", "by", "repetitions"});
      });
}

void BindResults(py::module_& m) {
  py::class_<sc::Prediction>(m, "Prediction",
                             "The model at a point with its band: lower <= value <= upper.")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::Prediction>("Prediction", kwargs);
      }))
      .def_readwrite("coordinate", &sc::Prediction::coordinate, "The point, in parameter order.")
      .def_readwrite("value", &sc::Prediction::value, "The model at coordinate.")
      .def_readwrite("lower", &sc::Prediction::lower, "Band's lower end (bootstrap).")
      .def_readwrite("upper", &sc::Prediction::upper, "Band's upper end (bootstrap).")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "Prediction", {"coordinate", "value", "lower", "upper"});
      });

  py::class_<sc::ScalingView>(
      m, "ScalingView",
      "One row of a derived view against resource r: time T(r), speedup T(r0)/T(r),\n"
      "efficiency speedup*r0/r, cost T(r)*r.")
      .def(py::init([](const py::kwargs& kwargs) {
        return FromKwargs<sc::ScalingView>("ScalingView", kwargs);
      }))
      .def_readwrite("resource", &sc::ScalingView::resource, "r.")
      .def_readwrite("time", &sc::ScalingView::time,
                     "T(r): the measured statistic or the model's value.")
      .def_readwrite("speedup", &sc::ScalingView::speedup, "T(r0) / T(r).")
      .def_readwrite("efficiency", &sc::ScalingView::efficiency, "speedup * r0 / r.")
      .def_readwrite("cost", &sc::ScalingView::cost, "T(r) * r.")
      .def("__repr__", [](py::handle self) {
        return FieldsRepr(self, "ScalingView",
                          {"resource", "time", "speedup", "efficiency", "cost"});
      });
}

void BindInput(py::module_& m) {
  auto parser =
      [](absl::StatusOr<sc::MeasurementSet> (*parse)(std::string_view, std::string_view)) {
        return [parse](const std::string& text, const std::string& name) {
          absl::StatusOr<sc::MeasurementSet> set;
          {
            py::gil_scoped_release release;
            set = parse(text, name);
          }
          return Value(std::move(set));
        };
      };
  m.def("parse_extrap_text", parser(&sc::parse_extrap_text), py::arg("text"),
        py::arg("name") = "<string>",
        "Extra-P's text format (PARAMETER / POINTS / REGION / METRIC / DATA lines) from a str.\n"
        "ValueError '<name>:<line>: what is wrong' on bad input.");
  m.def("parse_extrap_json", parser(&sc::parse_extrap_json), py::arg("text"),
        py::arg("name") = "<string>",
        "Extra-P's JSON (the 'parameters'+'measurements' layout or the legacy one) from a str.");
  m.def("parse_extrap_jsonl", parser(&sc::parse_extrap_jsonl), py::arg("text"),
        py::arg("name") = "<string>",
        "Extra-P's JSON Lines "
        "({\"params\":{\"p\":4},\"value\":1.2,\"callpath\":...,\"metric\":...}) from a str.");
  m.def(
      "read_extrap_file",
      [](py::handle path) {
        const std::string p = ToPath(path);
        absl::StatusOr<sc::MeasurementSet> set;
        {
          py::gil_scoped_release release;
          set = sc::read_extrap_file(p);
        }
        return Value(std::move(set));
      },
      py::arg("path"),
      "An Extra-P measurement file; the format from the extension (.txt, .json, .jsonl),\n"
      "else from the content. FileNotFoundError when it is missing, ValueError on bad input.");
  m.def(
      "read_runs",
      [](py::handle paths, sc::RunSelection selection) {
        const std::vector<std::string> dirs = ToPaths(paths);
        std::vector<std::string> warnings;
        absl::StatusOr<sc::MeasurementSet> set;
        {
          py::gil_scoped_release release;
          set = sc::read_runs(dirs, selection, &warnings);
        }
        if (!warnings.empty()) {
          py::object category = py::module_::import("trainscope._core").attr("TrainscopeWarning");
          for (const std::string& w : warnings) {
            if (PyErr_WarnEx(category.ptr(), w.c_str(), 1) != 0) throw py::error_already_set();
          }
        }
        return Value(std::move(set));
      },
      py::arg("paths"), py::arg("selection"),
      R"doc(Measurements from trainscope runs: one point per value of selection.parameters,
the runs there its repetitions, the ranks of a run aggregated by selection.ranks.
paths: a run, a directory holding runs, a sweep directory (its runs/), or a list
of them (trainscope._core.find_run_dirs). The result has one series (callpath
selection.what, metric selection.stat), or with selection.by one per value of
those params (Series.group).

Runs at one point that differ in another param (a sweep of batch_size and lr
read against batch_size) raise ValueError naming the param, its values and the
ways out: by=["lr"] (one series per value), add it to parameters, or
repetitions=["lr"] when its values are repetitions (a seed).

Runs that are not FINISHED (or given twice) are skipped with a TrainscopeWarning
(warnings.warn) each; catch them with warnings.catch_warnings(record=True).
ValueError when a run lacks a parameter or the selected key, FileNotFoundError
for a missing directory, RuntimeError when no finished run is left.)doc");
}

void BindModeling(py::module_& m) {
  m.def(
      "measure_of",
      [](const std::vector<double>& values, sc::Measure measure) {
        return sc::measure_of(values, measure);
      },
      py::arg("values"), py::arg("measure") = sc::Measure::kMean,
      "The statistic `measure` of values (NaN when values is empty).");

  auto fit_series = [](const std::vector<std::string>& parameters, sc::Series series,
                       sc::ModelOptions options) {
    absl::StatusOr<sc::Model> model;
    {
      py::gil_scoped_release release;
      model = sc::fit(parameters, series, options);
    }
    return Value(std::move(model));
  };
  m.def("fit", fit_series, py::arg("parameters"), py::arg("series"),
        py::arg_v("options", sc::ModelOptions{}, "ModelOptions()"),
        R"doc(Fits one series: fit(parameters, series, options=ModelOptions()) or
fit(measurements, callpath=None, metric=None, options=ModelOptions()).

With a MeasurementSet, callpath and metric pick the series; either may be left
out when that leaves one. Where the series lacks some of measurements.coordinates,
modeler "extrap" raises ValueError (Extra-P refuses such an input) and the default
models the points measured, the first of Model.warnings naming what is missing.
ValueError with the reason: no points, dimension mismatch, non-finite values,
fewer than 3 distinct values of a parameter.)doc");
  m.def(
      "fit",
      [](const sc::MeasurementSet& set, const std::optional<std::string>& callpath,
         const std::optional<std::string>& metric, const sc::ModelOptions& options) {
        const sc::Series series = SelectSeries(set, callpath, metric);
        absl::StatusOr<sc::Model> model;
        {
          py::gil_scoped_release release;
          model = sc::fit_series(set, series, options);  // refuses/warns on missing coordinates
        }
        return Value(std::move(model));
      },
      py::arg("measurements"), py::arg("callpath") = py::none(), py::arg("metric") = py::none(),
      py::arg_v("options", sc::ModelOptions{}, "ModelOptions()"));

  auto fit_extrap_series = [](const std::vector<std::string>& parameters, sc::Series series,
                              sc::ExtrapOptions options) {
    absl::StatusOr<sc::Model> model;
    {
      py::gil_scoped_release release;
      model = sc::fit_extrap(parameters, series, options);
    }
    return Value(std::move(model));
  };
  m.def("fit_extrap", fit_extrap_series, py::arg("parameters"), py::arg("series"),
        py::arg_v("options", sc::ExtrapOptions{}, "ExtrapOptions()"),
        R"doc(Extra-P 4.2.5's default modeler for the number of parameters (1: Basic, 2-4:
Multi-Parameter): fit_extrap(parameters, series, options=ExtrapOptions()) or
fit_extrap(measurements, callpath=None, metric=None, options=ExtrapOptions()).
Errors as fit(); fewer than 5 points is a warning in Model.warnings, as in Extra-P.)doc");
  m.def(
      "fit_extrap",
      [fit_extrap_series](const sc::MeasurementSet& set, const std::optional<std::string>& callpath,
                          const std::optional<std::string>& metric,
                          const sc::ExtrapOptions& options) {
        return fit_extrap_series(set.parameters, SelectSeries(set, callpath, metric), options);
      },
      py::arg("measurements"), py::arg("callpath") = py::none(), py::arg("metric") = py::none(),
      py::arg_v("options", sc::ExtrapOptions{}, "ExtrapOptions()"));

  m.def(
      "predict_with_band",
      [](const sc::Model& model, sc::Series series, py::iterable points, sc::BandOptions options) {
        std::vector<std::vector<double>> coordinates;
        for (py::handle point : points)
          coordinates.push_back(ToCoordinate(model.parameters, point));
        sc::Model copy = model;
        absl::StatusOr<std::vector<sc::Prediction>> predictions;
        {
          py::gil_scoped_release release;
          predictions = sc::predict_with_band(copy, series, coordinates, options);
        }
        return Value(std::move(predictions));
      },
      py::arg("model"), py::arg("series"), py::arg("points"),
      py::arg_v("options", sc::BandOptions{}, "BandOptions()"),
      R"doc(Predictions of `model` (fitted to `series`) at `points`, each with a bootstrap band
that resamples each point's repetitions (or, with one per point, the residuals).
A point is a sequence in parameter order, a mapping {name: value}, or (one
parameter) a number. Deterministic for a given options.seed.)doc");
}

void BindViews(py::module_& m) {
  m.def(
      "measured_scaling",
      [](const sc::Series& series, int resource_parameter,
         const std::optional<std::vector<double>>& fixed, sc::Measure measure) {
        const std::size_t dimension =
            series.points.empty() ? 1 : series.points.front().coordinate.size();
        const std::vector<double> f = FixedOrDefault(fixed, dimension, "measured_scaling");
        return Value(sc::measured_scaling(series, resource_parameter, f, measure));
      },
      py::arg("series"), py::arg("resource_parameter") = 0, py::arg("fixed") = py::none(),
      py::arg("measure") = sc::Measure::kMean,
      R"doc(Speedup, efficiency and cost against the resource parameter (an index) from the
measured points whose other coordinates equal `fixed` (one value per parameter;
the resource's entry is ignored; may be left out with one parameter), sorted by
resource; r0 is the smallest. ValueError when fewer than two points match or a
time or resource is not positive.)doc");
  m.def(
      "modeled_scaling",
      [](const sc::Model& model, int resource_parameter,
         const std::optional<std::vector<double>>& fixed, const std::vector<double>& resources) {
        const std::vector<double> f = FixedOrDefault(
            fixed, model.parameters.empty() ? 1 : model.parameters.size(), "modeled_scaling");
        return Value(sc::modeled_scaling(model, resource_parameter, f, resources));
      },
      py::arg("model"), py::arg("resource_parameter"), py::arg("fixed"), py::arg("resources"),
      R"doc(The derived views from the model at `resources` (r0 = resources[0]), the other
parameters at `fixed` (one value per parameter, the resource's entry ignored;
None with one parameter). ValueError when a resource or the model's time there
is not positive.)doc");
  m.def(
      "render_svg",
      [](const sc::Model& model, sc::Series series, sc::PlotOptions options) {
        sc::Model copy = model;
        absl::StatusOr<std::string> svg;
        {
          py::gil_scoped_release release;
          svg = sc::render_svg(copy, series, options);
        }
        return Value(std::move(svg));
      },
      py::arg("model"), py::arg("series"), py::arg_v("options", sc::PlotOptions{}, "PlotOptions()"),
      "A self-contained SVG document (str): measured points with their spread, the model\n"
      "and the prediction band past the largest measured point. Write it to a .svg file.");
}

}  // namespace

void RegisterScaling(py::module_& core) {
  py::module_ m = core.def_submodule(
      "_scaling", "Scaling models (Extra-P's PMNF) from trainscope's C++; use trainscope.scaling.");
  BindEnums(m);
  BindMeasurements(m);
  BindModel(m);
  BindOptions(m);
  BindResults(m);
  BindInput(m);
  BindModeling(m);
  BindViews(m);
}

}  // namespace trainscope::python
