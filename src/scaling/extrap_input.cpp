// Extra-P's text, JSON and JSON Lines measurement files (as read by Extra-P
// 4.2.5's text_file_reader.py, json_file_reader.py and
// jsonlines_file_reader.py), with every defect reported as
// "<name>:<line>: <what is wrong>" instead of a Python traceback.
//
// Differences from Extra-P, all on input it would misread or reject later:
// non-finite numbers are errors; the text format rejects PARAMETER after
// POINTS/DATA and unbalanced parentheses; JSON Lines rejects "params" keys that
// differ from the first line's; legacy JSON ids are looked up by value (not
// by position in the sorted list); repetitions measured twice at the same
// point of one series are merged into that point.
#include "trainscope/scaling/extrap_input.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "scaling/number_text.hpp"

namespace trainscope::scaling {
namespace {

using detail::is_space;
using detail::NumberResult;
using detail::parse_number;
using detail::trim;

using Json = nlohmann::ordered_json;

constexpr std::size_t kMaxTextParameters = 4;
// Longest excerpt of the input quoted in a message.
constexpr std::size_t kMaxQuoted = 60;

// --- messages --------------------------------------------------------------

// Length of the valid UTF-8 sequence at s[i], 0 if invalid.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// Input text fit for a message: control characters and invalid UTF-8 as \xNN,
// at most kMaxQuoted bytes (then "...").
std::string printable(std::string_view s, std::size_t max = kMaxQuoted) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (i >= max) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string in_quotes(std::string_view s) { return "\"" + printable(s) + "\""; }

std::string join_quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += in_quotes(n);
  }
  return out;
}

// "name:line: what"
absl::Status line_error(std::string_view name, std::size_t line, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}", printable(name, 4096), line, what));
}

// "name: path: what", for a value of a parsed JSON document.
absl::Status path_error(std::string_view name, const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}: {}", printable(name, 4096), path, what));
}

// 1-based line of byte `offset` (0-based) of `text`.
std::size_t line_of(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// The line a problem at the end of the input is reported on.
std::size_t last_line(std::string_view text) {
  std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') ++lines;
  return std::max<std::size_t>(lines, 1);
}

bool all_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

// A UTF-8 byte order mark (Windows editors write one) is not content.
std::string_view skip_bom(std::string_view s) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (s.substr(0, kBom.size()) == kBom) s.remove_prefix(kBom.size());
  return s;
}

// --- numbers ---------------------------------------------------------------

// "\"abc\" is not a number" etc., or empty when fine.
std::string number_problem(std::string_view token, double* out) {
  switch (parse_number(token, out)) {
    case NumberResult::kOk:
      return {};
    case NumberResult::kNotANumber:
      return fmt::format("{} is not a number", in_quotes(token));
    case NumberResult::kNotFinite:
      return fmt::format("{} is not a finite number", in_quotes(token));
  }
  return {};
}

// --- building the set ------------------------------------------------------

// Series in order of first appearance; points of a series likewise, values
// measured again at a point of a series become more repetitions of it.
class Builder {
 public:
  MeasurementSet& set() { return set_; }

  // twice_is_two: Extra-P counts a point given again as a second measurement
  // (text, current JSON) rather than more repetitions (JSON Lines, legacy JSON).
  void add(const std::string& callpath, const std::string& metric,
           const std::vector<double>& coordinate, const std::vector<double>& values,
           bool twice_is_two = false) {
    auto [series_it, new_series] =
        series_index_.try_emplace({callpath, metric}, set_.series.size());
    if (new_series) {
      set_.series.push_back(Series{callpath, metric, {}, {}});
      point_index_.emplace_back();
    }
    Series& series = set_.series[series_it->second];
    declare(coordinate);
    auto [point_it, new_point] =
        point_index_[series_it->second].try_emplace(coordinate, series.points.size());
    if (new_point) {
      series.points.push_back(Point{coordinate, {}});
    } else if (twice_is_two && repeated_.insert({callpath, metric, coordinate}).second) {
      set_.repeated.push_back(RepeatedPoint{callpath, metric, coordinate});
    }
    std::vector<double>& out = series.points[point_it->second].values;
    out.insert(out.end(), values.begin(), values.end());
  }

  // A coordinate of the experiment (MeasurementSet::coordinates), measured or not.
  void declare(const std::vector<double>& coordinate) {
    if (declared_.insert(coordinate).second) set_.coordinates.push_back(coordinate);
  }

 private:
  MeasurementSet set_;
  std::set<std::vector<double>> declared_;
  std::set<std::tuple<std::string, std::string, std::vector<double>>> repeated_;
  std::map<std::pair<std::string, std::string>, std::size_t> series_index_;
  std::vector<std::map<std::vector<double>, std::size_t>> point_index_;
};

// --- text ------------------------------------------------------------------

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) words.push_back(s.substr(start, i - start));
  }
  return words;
}

std::string join_words(const std::vector<std::string_view>& words, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < words.size(); ++i) {
    if (i > from) out += ' ';
    out.append(words[i]);
  }
  return out;
}

class TextParser {
 public:
  TextParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  absl::StatusOr<MeasurementSet> parse() {
    if (all_space(text_))
      return line_error(name_, 1, "empty file: expected PARAMETER, POINTS and DATA lines");
    std::size_t start = 0;
    while (start < text_.size()) {
      std::size_t stop = text_.find('\n', start);
      if (stop == std::string_view::npos) stop = text_.size();
      ++line_;
      absl::Status status = parse_line(text_.substr(start, stop - start));
      if (!status.ok()) return status;
      start = stop + 1;
    }
    MeasurementSet& set = builder_.set();
    if (set.series.empty()) {
      const char* what = set.parameters.empty() ? "no PARAMETER line: nothing to model"
                         : points_.empty()      ? "no POINTS line: nothing to model"
                                                : "no DATA line: nothing was measured";
      return line_error(name_, last_line(text_), what);
    }
    return std::move(set);
  }

 private:
  absl::Status error(std::string_view what) const { return line_error(name_, line_, what); }

  absl::Status parse_line(std::string_view line) {
    const std::string_view content = trim(line);
    if (content.empty() || content.front() == '#') return absl::OkStatus();
    std::size_t field_end = 0;
    while (field_end < content.size() && !is_space(content[field_end])) ++field_end;
    const std::string_view field = content.substr(0, field_end);
    const std::string_view value = trim(content.substr(field_end));
    if (field == "PARAMETER") return parameter(value);
    if (field == "POINTS") return points(value);
    if (field == "REGION" || field == "METRIC") {
      const std::string joined = join_words(split_words(value), 0);
      if (joined.empty()) return error(fmt::format("{} without a name", field));
      (field == "REGION" ? callpath_ : metric_) = joined;
      point_index_ = 0;
      return absl::OkStatus();
    }
    if (field == "DATA") return data(value);
    return error(fmt::format(
        "Encountered wrong field {}: expected PARAMETER, POINTS, REGION, METRIC or DATA",
        in_quotes(field)));
  }

  absl::Status parameter(std::string_view value) {
    if (!points_.empty() || !builder_.set().series.empty()) {
      return error("PARAMETER after POINTS or DATA: declare every parameter first");
    }
    const std::vector<std::string_view> names = split_words(value);
    if (names.empty()) return error("PARAMETER without a name");
    std::vector<std::string>& parameters = builder_.set().parameters;
    for (std::string_view name : names) {
      if (std::find(parameters.begin(), parameters.end(), name) != parameters.end()) {
        return error(fmt::format("duplicate parameter {}", in_quotes(name)));
      }
      if (parameters.size() == kMaxTextParameters) {
        return error(fmt::format(
            "more than {} parameters ({}, {}): the text format supports at most {}",
            kMaxTextParameters, join_quoted(parameters), in_quotes(name), kMaxTextParameters));
      }
      parameters.emplace_back(name);
    }
    return absl::OkStatus();
  }

  absl::Status coordinate(const std::vector<std::string_view>& tokens, std::string_view group) {
    const std::size_t n = builder_.set().parameters.size();
    if (tokens.size() != n) {
      return error(
          fmt::format("POINTS: coordinate ({}) has {} value{}, expected {} (one per parameter: {})",
                      printable(trim(group)), tokens.size(), tokens.size() == 1 ? "" : "s", n,
                      join_quoted(builder_.set().parameters)));
    }
    std::vector<double> point(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string problem = number_problem(tokens[i], &point[i]);
      if (!problem.empty()) return error(fmt::format("POINTS: coordinate value {}", problem));
    }
    builder_.declare(point);
    points_.push_back(std::move(point));
    return absl::OkStatus();
  }

  absl::Status points(std::string_view value) {
    const std::vector<std::string>& parameters = builder_.set().parameters;
    if (parameters.empty()) return error("POINTS before PARAMETER: declare the parameters first");
    if (value.empty()) return error("POINTS without coordinates");
    if (value.find_first_of("()") == std::string_view::npos) {
      const std::vector<std::string_view> tokens = split_words(value);
      if (parameters.size() > 1) {
        return error(fmt::format(
            "POINTS: with {} parameters each point needs parentheses, e.g. \"POINTS ( 4 64 ) "
            "( 8 64 )\"",
            parameters.size()));
      }
      for (std::string_view token : tokens) {
        absl::Status status = coordinate({token}, token);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }
    std::size_t i = 0;
    while (i < value.size()) {
      if (is_space(value[i])) {
        ++i;
        continue;
      }
      if (value[i] == ')') {
        return error(fmt::format("POINTS: unbalanced parentheses: \")\" without \"(\" at {}",
                                 in_quotes(value.substr(i))));
      }
      if (value[i] != '(') {
        return error(
            fmt::format("POINTS: expected \"(\" at {}: put every point in parentheses, or none",
                        in_quotes(value.substr(i))));
      }
      const std::size_t open = i++;
      const std::size_t close = value.find_first_of("()", i);
      if (close == std::string_view::npos || value[close] == '(') {
        return error(fmt::format("POINTS: unbalanced parentheses: \"(\" at {} is not closed",
                                 in_quotes(value.substr(open))));
      }
      const std::string_view group = value.substr(i, close - i);
      absl::Status status = coordinate(split_words(group), group);
      if (!status.ok()) return status;
      i = close + 1;
    }
    return absl::OkStatus();
  }

  absl::Status data(std::string_view value) {
    if (builder_.set().parameters.empty())
      return error("DATA before PARAMETER: declare the parameters first");
    if (points_.empty()) return error("DATA before POINTS: list the measurement points first");
    if (point_index_ >= points_.size()) {
      return error(fmt::format("more DATA lines than POINTS ({}) for region {}, metric {}",
                               points_.size(), in_quotes(callpath_), in_quotes(metric_)));
    }
    const std::vector<std::string_view> tokens = split_words(value);
    if (tokens.empty()) return error("DATA without values");
    std::vector<double> values(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string problem = number_problem(tokens[i], &values[i]);
      if (!problem.empty()) return error(fmt::format("DATA: {}", problem));
    }
    builder_.add(callpath_, metric_, points_[point_index_++], values, true);
    return absl::OkStatus();
  }

  std::string_view text_;
  std::string_view name_;
  std::size_t line_ = 0;
  Builder builder_;
  std::vector<std::vector<double>> points_;  // every POINTS line's, in order
  std::string callpath_;                     // Extra-P's defaults: Callpath(""), Metric("")
  std::string metric_;
  std::size_t point_index_ = 0;  // the point the next DATA line measures
};

// --- JSON ------------------------------------------------------------------

// Parses one document; a syntax error names the line it is on.
absl::StatusOr<Json> parse_json(std::string_view text, std::string_view name,
                                std::size_t first_line, const char* what) {
  try {
    return Json::parse(text.data(), text.data() + text.size());
  } catch (const Json::parse_error& e) {
    std::string detail = e.what();
    // "[json.exception.parse_error.101] parse error at line 2, column 8: syntax error ..."
    const std::size_t column = detail.find("column ");
    const std::size_t colon =
        column == std::string::npos ? std::string::npos : detail.find(": ", column);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    return line_error(name, first_line - 1 + line_of(text, offset),
                      fmt::format("{}: {}", what, printable(detail, 300)));
  } catch (const Json::exception& e) {
    // Number overflow ("[json.exception.out_of_range.406] number overflow parsing '1e999'").
    std::string detail = e.what();
    const std::size_t bracket = detail.find("] ");
    if (bracket != std::string::npos) detail = detail.substr(bracket + 2);
    std::size_t line = first_line;
    const std::size_t quote = detail.find('\'');
    if (quote != std::string::npos && detail.size() > quote + 2) {
      const std::size_t at =
          text.find(std::string_view(detail).substr(quote + 1, detail.size() - quote - 2));
      if (at != std::string_view::npos) line = first_line - 1 + line_of(text, at);
    }
    return line_error(name, line, fmt::format("{}: {}", what, printable(detail, 300)));
  }
}

bool simple_key(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '/' || c == ':';
  });
}

// "measurements.epoch", "measurements[\"data aug\"]"
std::string member_path(const std::string& parent, const std::string& key) {
  if (simple_key(key)) return parent.empty() ? key : parent + "." + key;
  return fmt::format("{}[{}]", parent, in_quotes(key));
}

std::string index_path(const std::string& parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

// "string \"4\"", "array", "number 4" for messages.
std::string describe(const Json& value) {
  if (value.is_string())
    return fmt::format("string {}", in_quotes(value.get_ref<const std::string&>()));
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return fmt::format("number {}", value.get<double>());
  return value.type_name();
}

// A finite number (or, where Extra-P converts with float(), a numeric string).
std::string json_number(const Json& value, bool allow_string, double* out) {
  if (value.is_number()) {
    const double v = value.get<double>();
    if (!std::isfinite(v)) return fmt::format("{} is not a finite number", v);
    *out = v;
    return {};
  }
  if (allow_string && value.is_string())
    return number_problem(trim(value.get_ref<const std::string&>()), out);
  return fmt::format("expected a number, got {}", describe(value));
}

// Values: a number or a non-empty list of numbers.
std::string json_values(const Json& value, std::vector<double>* out) {
  out->clear();
  if (value.is_number()) {
    double v;
    std::string problem = json_number(value, false, &v);
    if (problem.empty()) out->push_back(v);
    return problem;
  }
  if (!value.is_array())
    return fmt::format("expected a non-empty list of numbers, got {}", describe(value));
  if (value.empty()) return "expected a non-empty list of numbers, got an empty list";
  out->reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    double v;
    std::string problem = json_number(value[i], false, &v);
    if (!problem.empty()) return fmt::format("[{}]: {}", i, problem);
    out->push_back(v);
  }
  return {};
}

// The ids of a legacy (before Extra-P 4) document: each list sorted by id,
// and id -> position in it.
struct LegacyIds {
  std::vector<std::string> parameters, callpaths, metrics;
  std::map<long long, std::size_t> parameter_ids, callpath_ids, metric_ids, coordinate_ids;
  std::vector<std::pair<long long, std::vector<double>>> coordinates;  // id, values
};

// (coordinate, callpath, metric) positions in LegacyIds.
using LegacyKey = std::tuple<std::size_t, std::size_t, std::size_t>;

class JsonDocument {
 public:
  JsonDocument(const Json& root, std::string_view name) : root_(root), name_(name) {}

  absl::StatusOr<MeasurementSet> read() {
    absl::Status status = root_.contains("callpaths") ? read_legacy() : read_current();
    if (!status.ok()) return status;
    if (builder_.set().series.empty())
      return path_error(name_, "measurements", "no measurements: nothing to model");
    return std::move(builder_.set());
  }

 private:
  absl::Status error(const std::string& path, std::string_view what) const {
    return path_error(name_, path, what);
  }

  // root_[key], which must exist and have the type (array or object).
  absl::StatusOr<const Json*> member(const Json& parent, const std::string& parent_path,
                                     const std::string& key, Json::value_t type,
                                     const char* description) const {
    const std::string path = member_path(parent_path, key);
    const auto it = parent.find(key);
    if (it == parent.end()) {
      return parent_path.empty() ? error(key, fmt::format("missing (expected {})", description))
                                 : error(path, fmt::format("missing (expected {})", description));
    }
    if (it->type() != type)
      return error(path, fmt::format("expected {}, got {}", description, describe(*it)));
    return &*it;
  }

  absl::Status parameters_named(const std::vector<std::string>& names, const std::string& path) {
    if (names.empty()) return error(path, "no parameters: need at least one");
    std::vector<std::string>& parameters = builder_.set().parameters;
    for (const std::string& p : names) {
      if (std::find(parameters.begin(), parameters.end(), p) != parameters.end()) {
        return error(path, fmt::format("duplicate parameter {}", in_quotes(p)));
      }
      parameters.push_back(p);
    }
    return absl::OkStatus();
  }

  // --- current layout ---

  // {"parameters": ["p", "q"],
  //  "measurements": {"callpath": {"metric": [{"point": [..], "values": [..]}]}}}
  absl::Status read_current() {
    std::vector<std::string> names;
    absl::Status status = read_parameter_names(&names);
    if (!status.ok()) return status;
    absl::StatusOr<const Json*> measurements =
        member(root_, "", "measurements", Json::value_t::object,
               "an object of callpaths holding objects of metrics");
    if (!measurements.ok()) return measurements.status();
    for (const auto& [callpath, metrics] : (*measurements)->items()) {
      const std::string callpath_path = member_path("measurements", callpath);
      if (!metrics.is_object()) {
        return error(callpath_path,
                     fmt::format("expected an object of metrics, got {}", describe(metrics)));
      }
      for (const auto& [metric, list] : metrics.items()) {
        status = read_metric(callpath, metric, list, member_path(callpath_path, metric), names);
        if (!status.ok()) return status;
      }
    }
    return absl::OkStatus();
  }

  absl::Status read_parameter_names(std::vector<std::string>* names) {
    absl::StatusOr<const Json*> parameters =
        member(root_, "", "parameters", Json::value_t::array, "a list of parameter names");
    if (!parameters.ok()) return parameters.status();
    for (std::size_t i = 0; i < (*parameters)->size(); ++i) {
      const Json& p = (**parameters)[i];
      if (!p.is_string()) {
        return error(index_path("parameters", i),
                     fmt::format("expected a name, got {}", describe(p)));
      }
      names->push_back(p.get<std::string>());
    }
    return parameters_named(*names, "parameters");
  }

  // [{"point": [..], "values": [..]}, ...] of one callpath and metric.
  absl::Status read_metric(const std::string& callpath, const std::string& metric, const Json& list,
                           const std::string& metric_path, const std::vector<std::string>& names) {
    if (!list.is_array()) {
      return error(metric_path,
                   fmt::format("expected a list of {{\"point\": [...], \"values\": [...]}}, got {}",
                               describe(list)));
    }
    std::vector<double> coordinate, values;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Json& m = list[i];
      const std::string path = index_path(metric_path, i);
      if (!m.is_object()) {
        return error(path, fmt::format("expected {{\"point\": [...], \"values\": [...]}}, got {}",
                                       describe(m)));
      }
      absl::Status status = read_point(m, path, names, &coordinate);
      if (!status.ok()) return status;
      const auto found = m.find("values");
      if (found == m.end())
        return error(path + ".values", "missing (expected a non-empty list of numbers)");
      const std::string problem = json_values(*found, &values);
      if (!problem.empty()) return values_error(path + ".values", problem);
      builder_.add(callpath, metric, coordinate, values, true);
    }
    return absl::OkStatus();
  }

  // m["point"]: one value per parameter, or with one parameter a number.
  absl::Status read_point(const Json& m, const std::string& path,
                          const std::vector<std::string>& names,
                          std::vector<double>* coordinate) const {
    const std::size_t n = names.size();
    const auto point = m.find("point");
    if (point == m.end())
      return error(path + ".point", "missing (expected a list of parameter values)");
    coordinate->clear();
    if (point->is_array()) {
      if (point->size() != n) {
        return error(
            path + ".point",
            fmt::format("has {} value{}, expected {} (one per parameter: {})", point->size(),
                        point->size() == 1 ? "" : "s", n, join_quoted(names)));
      }
      for (std::size_t k = 0; k < n; ++k) {
        double v;
        const std::string problem = json_number((*point)[k], false, &v);
        if (!problem.empty()) return error(index_path(path + ".point", k), problem);
        coordinate->push_back(v);
      }
    } else if (point->is_number() && n == 1) {
      double v;
      const std::string problem = json_number(*point, false, &v);
      if (!problem.empty()) return error(path + ".point", problem);
      coordinate->push_back(v);
    } else {
      return error(path + ".point", fmt::format("expected a list of {} parameter value{}, got {}",
                                                n, n == 1 ? "" : "s", describe(*point)));
    }
    return absl::OkStatus();
  }

  // problem is "[3]: what" (an element) or "what" (the whole value).
  absl::Status values_error(const std::string& path, const std::string& problem) const {
    if (problem.front() == '[') {
      const std::size_t colon = problem.find(": ");
      return error(path + problem.substr(0, colon), problem.substr(colon + 2));
    }
    return error(path, problem);
  }

  // --- legacy layout ---

  // An id: an integer number or string, as Python's int().
  absl::StatusOr<long long> id_of(const Json& object, const std::string& path,
                                  const char* key) const {
    const auto it = object.find(key);
    const std::string at = member_path(path, key);
    if (it == object.end()) return error(at, "missing (expected an integer id)");
    if (it->is_number_integer()) {
      if (it->is_number_unsigned() && it->get<unsigned long long>() > (1ULL << 62)) {
        return error(at, fmt::format("id {} is out of range", it->get<unsigned long long>()));
      }
      return it->get<long long>();
    }
    if (it->is_number_float()) {
      const double v = it->get<double>();
      if (v == std::floor(v) && std::fabs(v) <= static_cast<double>(1LL << 53))
        return static_cast<long long>(v);
    }
    if (it->is_string()) {
      const std::string_view s = trim(it->get_ref<const std::string&>());
      long long v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return v;
    }
    return error(at, fmt::format("expected an integer id, got {}", describe(*it)));
  }

  // [{"id": 1, "name": "p"}, ...] sorted by id; *ids gets id -> position.
  absl::Status named_list(const char* key, std::vector<std::string>* names,
                          std::map<long long, std::size_t>* ids) {
    absl::StatusOr<const Json*> list =
        member(root_, "", key, Json::value_t::array, "a list of {\"id\": ..., \"name\": ...}");
    if (!list.ok()) return list.status();
    std::vector<std::pair<long long, std::string>> entries;
    for (std::size_t i = 0; i < (*list)->size(); ++i) {
      const Json& entry = (**list)[i];
      const std::string path = index_path(key, i);
      if (!entry.is_object()) {
        return error(
            path, fmt::format("expected {{\"id\": ..., \"name\": ...}}, got {}", describe(entry)));
      }
      absl::StatusOr<long long> id = id_of(entry, path, "id");
      if (!id.ok()) return id.status();
      const auto name = entry.find("name");
      if (name == entry.end() || !name->is_string()) {
        return error(path + ".name", name == entry.end()
                                         ? std::string("missing")
                                         : "expected a string, got " + describe(*name));
      }
      entries.emplace_back(*id, name->get<std::string>());
      if (!ids->emplace(*id, 0).second) {
        return error(path + ".id", fmt::format("duplicate id {}", *id));
      }
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < entries.size(); ++i) {
      (*ids)[entries[i].first] = i;
      names->push_back(entries[i].second);
    }
    return absl::OkStatus();
  }

  static std::string id_range(const std::map<long long, std::size_t>& ids) {
    if (ids.empty()) return "none are defined";
    return fmt::format("ids are {}..{}", ids.begin()->first, ids.rbegin()->first);
  }

  // Extra-P before 4: parameters, callpaths, metrics and coordinates with ids,
  // and one measurement per repetition referring to them.
  absl::Status read_legacy() {
    LegacyIds ids;
    absl::Status status = named_list("parameters", &ids.parameters, &ids.parameter_ids);
    if (status.ok()) status = parameters_named(ids.parameters, "parameters");
    if (status.ok()) status = named_list("callpaths", &ids.callpaths, &ids.callpath_ids);
    if (status.ok()) status = named_list("metrics", &ids.metrics, &ids.metric_ids);
    if (status.ok()) status = read_coordinates(&ids);
    if (!status.ok()) return status;
    for (const auto& [id, coordinate] : ids.coordinates) builder_.declare(coordinate);
    return read_legacy_measurements(ids);
  }

  // "coordinates": [{"id": ..., "parameter_value_pairs": [...]}, ...], sorted by id.
  absl::Status read_coordinates(LegacyIds* ids) {
    absl::StatusOr<const Json*> coordinates =
        member(root_, "", "coordinates", Json::value_t::array,
               "a list of {\"id\": ..., \"parameter_value_pairs\": [...]}");
    if (!coordinates.ok()) return coordinates.status();
    for (std::size_t i = 0; i < (*coordinates)->size(); ++i) {
      const Json& entry = (**coordinates)[i];
      const std::string path = index_path("coordinates", i);
      if (!entry.is_object()) {
        return error(path, fmt::format("expected an object, got {}", describe(entry)));
      }
      absl::StatusOr<long long> id = id_of(entry, path, "id");
      if (!id.ok()) return id.status();
      if (!ids->coordinate_ids.emplace(*id, 0).second)
        return error(path + ".id", fmt::format("duplicate id {}", *id));
      std::vector<double> coordinate;
      absl::Status status = read_pairs(entry, path, *ids, &coordinate);
      if (!status.ok()) return status;
      ids->coordinates.emplace_back(*id, std::move(coordinate));
    }
    std::stable_sort(ids->coordinates.begin(), ids->coordinates.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < ids->coordinates.size(); ++i) {
      ids->coordinate_ids[ids->coordinates[i].first] = i;
    }
    return absl::OkStatus();
  }

  // entry["parameter_value_pairs"]: a value for each parameter, once.
  absl::Status read_pairs(const Json& entry, const std::string& path, const LegacyIds& ids,
                          std::vector<double>* coordinate) const {
    const std::size_t n = ids.parameters.size();
    absl::StatusOr<const Json*> pairs =
        member(entry, path, "parameter_value_pairs", Json::value_t::array,
               "a list of {\"parameter_id\": ..., \"parameter_value\": ...}");
    if (!pairs.ok()) return pairs.status();
    const std::string pairs_path = path + ".parameter_value_pairs";
    if ((*pairs)->size() != n) {
      return error(pairs_path, fmt::format("has {} value{}, expected {} (one per parameter: {})",
                                           (*pairs)->size(), (*pairs)->size() == 1 ? "" : "s", n,
                                           join_quoted(ids.parameters)));
    }
    coordinate->assign(n, 0.0);
    std::vector<bool> seen(n, false);
    for (std::size_t k = 0; k < n; ++k) {
      absl::Status status =
          read_pair((**pairs)[k], index_path(pairs_path, k), ids, &seen, coordinate);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // {"parameter_id": ..., "parameter_value": ...}
  absl::Status read_pair(const Json& pair, const std::string& pair_path, const LegacyIds& ids,
                         std::vector<bool>* seen, std::vector<double>* coordinate) const {
    if (!pair.is_object())
      return error(pair_path, fmt::format("expected an object, got {}", describe(pair)));
    absl::StatusOr<long long> parameter_id = id_of(pair, pair_path, "parameter_id");
    if (!parameter_id.ok()) return parameter_id.status();
    const auto parameter = ids.parameter_ids.find(*parameter_id);
    if (parameter == ids.parameter_ids.end()) {
      return error(pair_path + ".parameter_id",
                   fmt::format("{} is not the id of a parameter ({})", *parameter_id,
                               id_range(ids.parameter_ids)));
    }
    if ((*seen)[parameter->second]) {
      return error(pair_path + ".parameter_id",
                   fmt::format("parameter {} appears twice", *parameter_id));
    }
    (*seen)[parameter->second] = true;
    const auto value = pair.find("parameter_value");
    if (value == pair.end()) {
      return error(pair_path + ".parameter_value", "missing (expected a number)");
    }
    const std::string problem = json_number(*value, true, &(*coordinate)[parameter->second]);
    if (!problem.empty()) return error(pair_path + ".parameter_value", problem);
    return absl::OkStatus();
  }

  // "measurements": one per repetition; repetitions of a (coordinate,
  // callpath, metric) merged, in Extra-P's order (callpaths, metrics and
  // coordinates by id).
  absl::Status read_legacy_measurements(const LegacyIds& ids) {
    absl::StatusOr<const Json*> measurements =
        member(root_, "", "measurements", Json::value_t::array,
               "a list of {\"coordinate_id\": ..., \"callpath_id\": ..., \"metric_id\": ..., "
               "\"value\": ...}");
    if (!measurements.ok()) return measurements.status();
    // Repetitions per key, in order of first appearance.
    std::map<LegacyKey, std::size_t> index;
    std::vector<std::pair<LegacyKey, std::vector<double>>> aggregated;
    for (std::size_t i = 0; i < (*measurements)->size(); ++i) {
      const Json& m = (**measurements)[i];
      const std::string path = index_path("measurements", i);
      if (!m.is_object())
        return error(path, fmt::format("expected an object, got {}", describe(m)));
      absl::StatusOr<LegacyKey> key = measurement_key(m, path, ids);
      if (!key.ok()) return key.status();
      const auto value = m.find("value");
      if (value == m.end()) return error(path + ".value", "missing (expected a number)");
      double v;
      const std::string problem = json_number(*value, true, &v);
      if (!problem.empty()) return error(path + ".value", problem);
      const auto [it, inserted] = index.try_emplace(*key, aggregated.size());
      if (inserted) aggregated.emplace_back(*key, std::vector<double>{});
      aggregated[it->second].second.push_back(v);
    }
    std::stable_sort(aggregated.begin(), aggregated.end(), [](const auto& a, const auto& b) {
      const auto& [ca, pa, ma] = a.first;
      const auto& [cb, pb, mb] = b.first;
      return std::tie(pa, ma, ca) < std::tie(pb, mb, cb);
    });
    for (const auto& [key, values] : aggregated) {
      builder_.add(ids.callpaths[std::get<1>(key)], ids.metrics[std::get<2>(key)],
                   ids.coordinates[std::get<0>(key)].second, values);
    }
    return absl::OkStatus();
  }

  // A measurement's coordinate_id, callpath_id and metric_id as positions.
  absl::StatusOr<LegacyKey> measurement_key(const Json& m, const std::string& path,
                                            const LegacyIds& ids) const {
    std::size_t positions[3];
    const std::pair<const char*, const std::map<long long, std::size_t>*> refs[3] = {
        {"coordinate_id", &ids.coordinate_ids},
        {"callpath_id", &ids.callpath_ids},
        {"metric_id", &ids.metric_ids}};
    for (int r = 0; r < 3; ++r) {
      absl::StatusOr<long long> id = id_of(m, path, refs[r].first);
      if (!id.ok()) return id.status();
      const auto found = refs[r].second->find(*id);
      if (found == refs[r].second->end()) {
        const std::string_view kind =
            std::string_view(refs[r].first).substr(0, std::strlen(refs[r].first) - 3);
        return error(member_path(path, refs[r].first),
                     fmt::format("{} is out of range: not the id of any {} ({})", *id, kind,
                                 id_range(*refs[r].second)));
      }
      positions[r] = found->second;
    }
    return std::make_tuple(positions[0], positions[1], positions[2]);
  }

  const Json& root_;
  std::string_view name_;
  Builder builder_;
};

// Extra-P reads a .json file that is not one document as JSON Lines when its
// non-empty lines all start with '{'.
bool looks_like_json_lines(std::string_view text) {
  bool any = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t stop = text.find('\n', start);
    if (stop == std::string_view::npos) stop = text.size();
    const std::string_view line = trim(text.substr(start, stop - start));
    if (!line.empty()) {
      if (line.front() != '{') return false;
      any = true;
    }
    start = stop + 1;
  }
  return any;
}

}  // namespace

absl::StatusOr<MeasurementSet> parse_extrap_text(std::string_view text, std::string_view name) {
  text = skip_bom(text);
  return TextParser(text, name).parse();
}

absl::StatusOr<MeasurementSet> parse_extrap_json(std::string_view text, std::string_view name) {
  text = skip_bom(text);
  if (all_space(text)) return line_error(name, 1, "empty file: expected a JSON object");
  absl::StatusOr<Json> root = parse_json(text, name, 1, "not valid JSON");
  if (!root.ok()) {
    if (looks_like_json_lines(text)) return parse_extrap_jsonl(text, name);
    return root.status();
  }
  if (!root->is_object()) {
    return line_error(
        name, 1, fmt::format("expected a JSON object at the top level, got {}", describe(*root)));
  }
  // One JSON Lines record is also one JSON document.
  if (!root->contains("parameters") && !root->contains("measurements") &&
      root->contains("params")) {
    return parse_extrap_jsonl(text, name);
  }
  return JsonDocument(*root, name).read();
}

absl::StatusOr<MeasurementSet> parse_extrap_jsonl(std::string_view text, std::string_view name) {
  text = skip_bom(text);
  if (all_space(text)) return line_error(name, 1, "empty file: expected one JSON object per line");
  Builder builder;
  std::vector<std::string>& parameters = builder.set().parameters;
  std::size_t first_line = 0;  // the line whose "params" set the parameters
  std::size_t line = 0;
  std::vector<double> coordinate, values;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t stop = text.find('\n', start);
    if (stop == std::string_view::npos) stop = text.size();
    const std::string_view content = text.substr(start, stop - start);
    start = stop + 1;
    ++line;
    if (all_space(content)) continue;
    const auto error = [&](std::string_view what) { return line_error(name, line, what); };
    absl::StatusOr<Json> record = parse_json(content, name, line, "not valid JSON");
    if (!record.ok()) return record.status();
    if (!record->is_object())
      return error(fmt::format("expected a JSON object, got {}", describe(*record)));

    const auto params = record->find("params");
    if (params == record->end()) return error("missing \"params\" (an object of parameter values)");
    if (!params->is_object()) {
      return error(fmt::format("\"params\" must be an object of parameter values, got {}",
                               describe(*params)));
    }
    if (first_line == 0) {
      if (params->empty()) return error("\"params\" is empty: need at least one parameter");
      for (const auto& item : params->items()) parameters.push_back(item.key());
      first_line = line;
    }
    coordinate.assign(parameters.size(), 0.0);
    for (std::size_t k = 0; k < parameters.size(); ++k) {
      const auto value = params->find(parameters[k]);
      if (value == params->end()) {
        return error(fmt::format("\"params\" lacks parameter {} (line {} has {})",
                                 in_quotes(parameters[k]), first_line, join_quoted(parameters)));
      }
      const std::string problem = json_number(*value, false, &coordinate[k]);
      if (!problem.empty())
        return error(fmt::format("{}: {}", member_path("params", parameters[k]), problem));
    }
    if (params->size() != parameters.size()) {
      for (const auto& item : params->items()) {
        if (std::find(parameters.begin(), parameters.end(), item.key()) == parameters.end()) {
          return error(
              fmt::format("\"params\" has parameter {}, which line {} does not have (it has {})",
                          in_quotes(item.key()), first_line, join_quoted(parameters)));
        }
      }
    }

    const auto value = record->find("value");
    if (value == record->end()) return error("missing \"value\" (a number or a list of numbers)");
    std::string problem = json_values(*value, &values);
    if (!problem.empty()) {
      return error(problem.front() == '[' ? "value" + problem : "value: " + problem);
    }

    std::string names[2] = {"<root>", "<default>"};  // Extra-P's defaults
    const char* keys[2] = {"callpath", "metric"};
    for (int i = 0; i < 2; ++i) {
      const auto found = record->find(keys[i]);
      if (found == record->end()) continue;
      if (!found->is_string())
        return error(fmt::format("\"{}\" must be a string, got {}", keys[i], describe(*found)));
      names[i] = found->get<std::string>();
    }
    builder.add(names[0], names[1], coordinate, values);
  }
  return std::move(builder.set());
}

absl::StatusOr<MeasurementSet> read_extrap_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    return absl::ErrnoToStatus(error, fmt::format("{}: cannot open", printable(path, 4096)));
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed)
    return absl::ErrnoToStatus(error, fmt::format("{}: cannot read", printable(path, 4096)));

  const std::size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::size_t dot = base.find_last_of('.');
  const std::string extension =
      dot == std::string::npos ? "" : absl::AsciiStrToLower(base.substr(dot));
  if (extension == ".txt") return parse_extrap_text(text, path);
  if (extension == ".jsonl") return parse_extrap_jsonl(text, path);
  if (extension == ".json") return parse_extrap_json(text, path);
  const std::string_view content = trim(skip_bom(text));
  if (!content.empty() && content.front() == '{') return parse_extrap_json(text, path);
  return parse_extrap_text(text, path);
}

}  // namespace trainscope::scaling
