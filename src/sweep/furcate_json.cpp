// Furcate's JSON config (mattstruble/furcate, furcate/config_reader.py and
// runner.py, read 2021-04) expanded into a Plan.
//
// Where we follow Furcate and where not (each marked "Furcate:" below):
// - Furcate merges its default config under the user's ({**defaults, **data}),
//   so a key that is also a default (log_dir, learning_rate, verbose, cache,
//   seed, prefetch, meta) takes the default's place in the key order. That
//   order decides the product's order and the folder name's key order; we
//   keep it. The defaults' values are Furcate-tf's, not the program's: they
//   are not added to the config.
// - Furcate shuffles the configs and numbers them as it starts them; we number
//   them in product order (stable ids across re-reads).
// - Furcate applies exclude_configs only when there is more than one config;
//   we always apply it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "nlohmann/json.hpp"
#include "sweep/inputs_util.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;

// Python's repr() of a float: the shortest round-trip digits, fixed notation
// for exponents -4..15, else d.ddde+XX.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  std::string sign;
  if (!text.empty() && text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const std::size_t e = text.find('e');
  const int exponent = std::stoi(text.substr(e + 1));
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&mantissa, ".", digits.substr(1));
    const int magnitude = exponent < 0 ? -exponent : exponent;
    return absl::StrCat(sign, mantissa, "e", exponent < 0 ? "-" : "+", magnitude < 10 ? "0" : "",
                        magnitude);
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) return absl::StrCat(sign, "0.", std::string(-point, '0'), digits);
  if (point >= static_cast<int>(digits.size())) {
    return absl::StrCat(sign, digits, std::string(point - digits.size(), '0'), ".0");
  }
  return absl::StrCat(sign, digits.substr(0, point), ".", digits.substr(point));
}

// str() of the value Python's json module would have loaded. Objects and lists
// (only inside a passed-through object) are written as JSON, not Python's repr.
std::string python_str(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      return value.get<std::string>();
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::null:
      return "None";
    case Json::value_t::number_float:
      return python_float(value.get<double>());
    default:
      return value.dump();
  }
}

// The value as the program gets it after --key: strings as they are, the rest as JSON.
std::string param_text(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Python's ==: numbers and booleans compare by value (True == 1, 2 == 2.0).
bool python_equal(const Json& a, const Json& b) {
  const bool a_number = a.is_number() || a.is_boolean();
  const bool b_number = b.is_number() || b.is_boolean();
  if (a_number && b_number) {
    auto as_double = [](const Json& v) {
      return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>();
    };
    if (!a.is_number_float() && !b.is_number_float()) {
      auto as_int = [](const Json& v) -> long double {
        if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
        if (v.is_number_unsigned()) return static_cast<long double>(v.get<std::uint64_t>());
        return static_cast<long double>(v.get<std::int64_t>());
      };
      return as_int(a) == as_int(b);
    }
    return as_double(a) == as_double(b);
  }
  return a == b;
}

}  // namespace

absl::StatusOr<Plan> parse_furcate_json(std::string_view text_in, std::string_view name_in,
                                        const std::vector<std::string>& program) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view name(name_in.data(), name_in.size());
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
  };
  if (program.empty()) {
    return bad(
        "a Furcate config needs the program after `--` (trainscope sweep config.json -- "
        "python train.py)");
  }
  Json config;
  try {
    config = Json::parse(text, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxDepth) throw std::length_error("nested deeper than 64 levels");
      return true;
    });
  } catch (const Json::parse_error& e) {
    std::size_t line = 1;
    for (std::size_t i = 0; i < std::min<std::size_t>(e.byte, text.size()); ++i) {
      line += text[i] == '\n';
    }
    return absl::InvalidArgumentError(absl::StrCat(name, ":", line, ": not JSON: ", e.what()));
  } catch (const std::length_error& e) {
    return bad(e.what());
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    return bad(absl::StrCat("not JSON: ", e.what()));
  }
  if (!config.is_object()) return bad("the config must be a JSON object");

  Plan plan;
  plan.name = detail::stem_of(name);
  plan.allow_cpu = false;  // Furcate: meta.allow_cpu defaults to false
  Json excludes = Json::array();
  if (auto meta = config.find("meta"); meta != config.end()) {
    if (!meta->is_object()) return bad("key 'meta' must be an object");
    if (auto it = meta->find("max_threads"); it != meta->end()) {
      if (!it->is_number_integer()) return bad("key 'meta.max_threads' must be an integer");
      // Furcate: max(1, max_threads), its default -1 thus 1 thread whatever
      // the GPUs (a known defect); here <= 0 means every free slot.
      const std::int64_t threads = it->get<std::int64_t>();
      plan.max_parallel =
          threads > 0 ? static_cast<int>(std::min<std::int64_t>(threads, 1 << 20)) : 0;
    }
    if (auto it = meta->find("allow_cpu"); it != meta->end()) {
      if (!it->is_boolean()) return bad("key 'meta.allow_cpu' must be true or false");
      plan.allow_cpu = it->get<bool>();
    }
    if (auto it = meta->find("exclude_configs"); it != meta->end()) {
      if (!it->is_array()) return bad("key 'meta.exclude_configs' must be a list of objects");
      for (std::size_t i = 0; i < it->size(); ++i) {
        if (!(*it)[i].is_object()) {
          return bad(absl::StrCat("key 'meta.exclude_configs[", i, "]' must be an object"));
        }
      }
      excludes = *it;
    }
  }

  // Furcate's key order: its defaults' keys first (where the user set them).
  static const char* const kDefaultOrder[] = {"log_dir", "learning_rate", "verbose", "cache",
                                              "seed",    "prefetch",      "meta"};
  std::vector<std::string> order;
  for (const char* key : kDefaultOrder) {
    if (config.contains(key)) order.emplace_back(key);
  }
  for (const auto& item : config.items()) {
    if (std::find(order.begin(), order.end(), item.key()) == order.end()) {
      order.push_back(item.key());
    }
  }

  // The choices for each key: a top-level list expands, scalars and objects pass.
  std::vector<std::vector<const Json*>> choices(order.size());
  std::vector<bool> permutable(order.size(), false);
  std::size_t total = 1;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::string& key = order[k];
    const Json& value = config[key];
    if (value.is_null())
      return bad(absl::StrCat("key '", key, "' is null (not a list or a value)"));
    if (value.is_array()) {
      if (value.empty()) return bad(absl::StrCat("key '", key, "' is an empty list: no config"));
      for (std::size_t i = 0; i < value.size(); ++i) {
        const Json& element = value[i];
        if (element.is_array() || element.is_null()) {
          return bad(absl::StrCat("key '", key, "[", i, "]' is ",
                                  element.is_null() ? "null" : "a list",
                                  ": a list's values must be scalars or objects"));
        }
        choices[k].push_back(&element);
      }
      permutable[k] = true;
    } else {
      choices[k].push_back(&value);
    }
    total *= choices[k].size();
    if (total > kMaxPlanJobs) {
      return bad(absl::StrCat("expands to more than ", kMaxPlanJobs, " configs"));
    }
  }

  // The product, first key outermost (Furcate's recursion), then exclusions.
  std::vector<std::vector<std::size_t>> picks;
  std::vector<std::size_t> at(order.size(), 0);
  std::vector<std::size_t> matched(excludes.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    bool excluded = false;
    for (std::size_t e = 0; e < excludes.size(); ++e) {
      bool all = true;
      for (const auto& item : excludes[e].items()) {
        const auto pos = std::find(order.begin(), order.end(), item.key());
        if (pos == order.end() || item.key() == "meta" ||
            !python_equal(*choices[pos - order.begin()][at[pos - order.begin()]], item.value())) {
          all = false;
          break;
        }
      }
      if (all) {
        ++matched[e];
        excluded = true;
      }
    }
    if (!excluded) picks.push_back(at);
    for (std::size_t k = order.size(); k-- > 0;) {
      if (++at[k] < choices[k].size()) break;
      at[k] = 0;
    }
  }
  for (std::size_t e = 0; e < excludes.size(); ++e) {
    if (matched[e] == 0) {
      trainscope::warn(absl::StrCat(name, ": key 'meta.exclude_configs[", e, "]' (",
                                    excludes[e].dump(), ") matches no config"));
    }
  }
  if (picks.empty()) return bad("meta.exclude_configs excludes every config");

  const std::string data_name =
      config.contains("data_name") ? std::string() : detail::stem_of(name);  // see below
  detail::UniqueIds ids;
  for (std::size_t index = 0; index < picks.size(); ++index) {
    const std::vector<std::size_t>& pick = picks[index];
    Job job;
    job.command = program;
    job.source = absl::StrCat(name, ": config ", index);
    Json expanded = Json::object();
    // config_json and params in the file's key order.
    for (const auto& item : config.items()) {
      const std::size_t k = std::find(order.begin(), order.end(), item.key()) - order.begin();
      const Json& value = *choices[k][pick[k]];
      expanded[item.key()] = value;
      if (item.key() != "meta") job.params.emplace_back(item.key(), param_text(value));
    }
    job.config_json = expanded.dump();
    // Furcate's folder: {data_name}{id}_{basename(data_dir)}, then
    // _{initials of the key's words}{value with '.' -> '-'} for every key that
    // was a list (data_dir excepted), in Furcate's key order. Where the config
    // has no data_name (Furcate requires one) the file's stem stands in; no
    // data_dir, no "_{dir}" part. os.path.basename("foo/") is "" in Furcate,
    // while its README shows "example0_foo_bs32": we strip trailing slashes,
    // as the README shows.
    std::string folder =
        absl::StrCat(data_name.empty() ? python_str(expanded["data_name"]) : data_name, index);
    if (expanded.contains("data_dir")) {
      std::string dir = python_str(expanded["data_dir"]);
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      absl::StrAppend(&folder, "_", dir.substr(dir.find_last_of('/') + 1));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (!permutable[k] || order[k] == "data_dir") continue;
      std::string initials;
      for (absl::string_view word : absl::StrSplit(order[k], '_', absl::SkipEmpty())) {
        initials.push_back(word[0]);
      }
      std::string value = python_str(*choices[k][pick[k]]);
      std::replace(value.begin(), value.end(), '.', '-');
      absl::StrAppend(&folder, "_", initials, value);
    }
    job.id = ids.take(detail::safe_id(folder));
    plan.jobs.push_back(std::move(job));
  }
  return plan;
}

absl::StatusOr<Plan> read_furcate_json(const std::string& path,
                                       const std::vector<std::string>& program) {
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_furcate_json(*text, path, program);
}

}  // namespace trainscope::sweep
