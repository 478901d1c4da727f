// radT's YAML sweep (radt/schedule/schedule.py, itu-rad/radt) and a W&B sweep
// file (the same shape: method, parameters with values), read with yaml-cpp.
//
// radT: name, experiment, collocation, devices, listeners, file, method,
// parameters {k: {values: [...]}}; radT requires all of them, we require only
// method and parameters (and a program from `file`, `program` or the command
// line). radT runs the combinations one after another (one workload each):
// its jobs get group = combination index. Combinations its `status` map marks
// FINISHED ("FINISHED <run> (--k v ...)") are skipped, as radT does. radT's
// `method: random` shuffles an iterator and fails; we shuffle the grid.
// W&B: program, method (grid|random; bayes needs a metric loop we do not
// have), parameters {k: {values | value | distribution, min, max, q}},
// run_cap, command with ${env} ${interpreter} ${program} ${args}.
// W&B runs `random` until stopped; we need `count` or `run_cap`, except when
// every parameter is discrete (then the shuffled grid).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "sweep/inputs_util.hpp"
#include "trainscope/sweep/inputs.hpp"
#include "yaml-cpp/yaml.h"

namespace trainscope::sweep {
namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;  // discrete choices (values or value)
  std::vector<double> probabilities;
  std::string distribution;  // random only: uniform, int_uniform, log_uniform_values, q_uniform
  double min = 0, max = 0, q = 1;
};

std::string where(absl::string_view name, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? std::string(name) : absl::StrCat(name, ":", mark.line + 1);
}

std::string shortest(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// Uniform in [0, 1) from 53 bits: the same on every platform (the standard
// distributions are not).
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

absl::StatusOr<std::vector<Axis>> read_parameters(const YAML::Node& parameters,
                                                  absl::string_view name, bool random) {
  std::vector<Axis> axes;
  if (!parameters.IsMap() || parameters.size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(name, parameters), ": key 'parameters' must be a non-empty map"));
  }
  for (const auto& item : parameters) {
    Axis axis;
    axis.key = item.first.as<std::string>();
    const YAML::Node& spec = item.second;
    const std::string at = absl::StrCat(where(name, spec), ": key 'parameters.", axis.key, "'");
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": ", what));
    };
    if (!spec.IsMap()) return bad("must be a map with values, value or distribution");
    if (spec["parameters"]) return bad("nested parameters are not supported");
    if (const YAML::Node values = spec["values"]) {
      if (!values.IsSequence() || values.size() == 0) return bad("values must be a non-empty list");
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (!values[i].IsScalar()) return bad(absl::StrCat("values[", i, "] must be a scalar"));
        axis.values.push_back(values[i].Scalar());
      }
      if (const YAML::Node probabilities = spec["probabilities"]) {
        if (!probabilities.IsSequence() || probabilities.size() != values.size()) {
          return bad("probabilities must be a list as long as values");
        }
        for (const auto& p : probabilities) {
          double value = -1;
          if (!p.IsScalar() || !absl::SimpleAtod(p.Scalar(), &value) || !(value >= 0)) {
            return bad("probabilities must be numbers >= 0");
          }
          axis.probabilities.push_back(value);
        }
      }
    } else if (const YAML::Node value = spec["value"]) {
      if (!value.IsScalar()) return bad("value must be a scalar");
      axis.values.push_back(value.Scalar());
    } else if (const YAML::Node distribution = spec["distribution"]; distribution || spec["min"]) {
      if (!random) return bad("a distribution needs method: random (grid takes values)");
      axis.distribution = distribution ? distribution.Scalar() : "uniform";
      if (spec["min"] && spec["max"] && spec["min"].IsScalar() && spec["max"].IsScalar()) {
        if (!absl::SimpleAtod(spec["min"].Scalar(), &axis.min) ||
            !absl::SimpleAtod(spec["max"].Scalar(), &axis.max) || !(axis.min <= axis.max)) {
          return bad("min and max must be numbers, min <= max");
        }
      } else {
        return bad("a distribution needs min and max");
      }
      if (spec["q"] && (!spec["q"].IsScalar() || !absl::SimpleAtod(spec["q"].Scalar(), &axis.q) ||
                        !(axis.q > 0))) {
        return bad("q must be a number > 0");
      }
      static const std::set<std::string> kKnown = {"uniform", "int_uniform", "log_uniform_values",
                                                   "q_uniform"};
      if (kKnown.count(axis.distribution) == 0) {
        return bad(absl::StrCat("distribution '", axis.distribution,
                                "' is not supported (uniform, int_uniform, "
                                "log_uniform_values, q_uniform)"));
      }
      if (axis.distribution == "log_uniform_values" && !(axis.min > 0)) {
        return bad("log_uniform_values needs min > 0");
      }
    } else {
      return bad("needs values, value or distribution");
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::string sample(const Axis& axis, std::mt19937_64& rng) {
  if (axis.distribution.empty()) {
    if (axis.probabilities.empty()) return axis.values[rng() % axis.values.size()];
    double sum = 0;
    for (double p : axis.probabilities) sum += p;
    double x = unit(rng) * sum;
    for (std::size_t i = 0; i < axis.values.size(); ++i) {
      if (x < axis.probabilities[i]) return axis.values[i];
      x -= axis.probabilities[i];
    }
    return axis.values.back();
  }
  const double u = unit(rng);
  if (axis.distribution == "int_uniform") {
    const auto lo = static_cast<long long>(std::ceil(axis.min));
    const auto hi = static_cast<long long>(std::floor(axis.max));
    if (hi < lo) return std::to_string(lo);
    return std::to_string(lo +
                          static_cast<long long>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
  }
  if (axis.distribution == "log_uniform_values") {
    return shortest(std::exp(std::log(axis.min) + u * (std::log(axis.max) - std::log(axis.min))));
  }
  double value = axis.min + u * (axis.max - axis.min);
  if (axis.distribution == "q_uniform") value = std::round(value / axis.q) * axis.q;
  return shortest(value);
}

absl::StatusOr<std::vector<std::string>> command_of(const YAML::Node& root, absl::string_view name,
                                                    const std::vector<std::string>& program) {
  if (!program.empty()) return program;
  std::string file;
  if (const YAML::Node node = root["program"]; node && node.IsScalar()) file = node.Scalar();
  if (const YAML::Node node = root["file"]; node && node.IsScalar()) file = node.Scalar();
  if (const YAML::Node command = root["command"]) {
    if (!command.IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(name, command), ": key 'command' must be a list"));
    }
    std::vector<std::string> out;
    for (const auto& word : command) {
      const std::string text = word.IsScalar() ? word.Scalar() : std::string();
      if (text == "${env}" || text == "${args}") continue;  // env: ours; args: the params
      if (text == "${interpreter}") {
        out.emplace_back("python");
      } else if (text == "${program}") {
        out.push_back(file);
      } else if (text.find("${") != std::string::npos || !word.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(name, word), ": key 'command': '", text,
                         "' is not supported (${env}, ${interpreter}, ${program}, ${args})"));
      } else {
        out.push_back(text);
      }
    }
    if (!out.empty()) return out;
  }
  if (file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": no program: give `file` (radT), `program` (W&B) or `-- program` on the command "
        "line"));
  }
  return std::vector<std::string>{"python", file};
}

}  // namespace

absl::StatusOr<Plan> parse_sweep_yaml(std::string_view text_in, std::string_view name_in,
                                      const std::vector<std::string>& program, std::uint64_t seed) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view name(name_in.data(), name_in.size());
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", e.mark.line + 1, ": not YAML: ", e.msg));
  }
  auto bad = [&](const YAML::Node& node, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(where(name, node), ": ", what));
  };
  try {
    if (!root.IsMap()) return bad(root, "a sweep file must be a map (method, parameters, ...)");
    const YAML::Node method_node = root["method"];
    if (!method_node || !method_node.IsScalar()) {
      return bad(root, "key 'method' is missing (grid or random)");
    }
    const std::string method = method_node.Scalar();
    if (method != "grid" && method != "random") {
      return bad(method_node,
                 absl::StrCat("key 'method': '", method, "' is not supported (grid or random)"));
    }
    const bool random = method == "random";
    if (!root["parameters"]) return bad(root, "key 'parameters' is missing");
    absl::StatusOr<std::vector<Axis>> axes = read_parameters(root["parameters"], name, random);
    if (!axes.ok()) return axes.status();
    absl::StatusOr<std::vector<std::string>> command = command_of(root, name, program);
    if (!command.ok()) return command.status();

    const bool radt = static_cast<bool>(root["file"]) || static_cast<bool>(root["experiment"]);
    Job base;
    base.command = *command;
    if (const YAML::Node devices = root["devices"]) {
      if (!devices.IsScalar()) return bad(devices, "key 'devices' must be like 0 or 0+1");
      for (absl::string_view part : absl::StrSplit(devices.Scalar(), '+')) {
        int index = -1;
        part = absl::StripAsciiWhitespace(part);
        if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit) ||
            !absl::SimpleAtoi(part, &index)) {
          return bad(devices, absl::StrCat("key 'devices': '", devices.Scalar(),
                                           "' is not a GPU index or indices joined by '+'"));
        }
        base.devices.push_back(index);
      }
    }
    if (const YAML::Node collocation = root["collocation"]) {
      const std::string value = collocation.IsScalar() ? collocation.Scalar() : "?";
      const std::string lower = absl::AsciiStrToLower(value);
      if (lower.empty() || lower == "-") {
        base.collocation = "-";
      } else if (lower == "mps") {
        base.collocation = "mps";
      } else if (std::isdigit(static_cast<unsigned char>(lower[0])) &&
                 lower.find("g.") != std::string::npos) {
        base.collocation = value;
      } else {
        return bad(collocation, absl::StrCat("key 'collocation': '", value,
                                             "' is not '-', 'mps' or a MIG profile (3g.20gb)"));
      }
    }
    if (const YAML::Node listeners = root["listeners"]) {
      if (!listeners.IsScalar()) return bad(listeners, "key 'listeners' must be like smi+top");
      for (absl::string_view part : absl::StrSplit(listeners.Scalar(), '+')) {
        std::string listener = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
        if (!listener.empty()) base.listeners.push_back(std::move(listener));
      }
    }

    // Combinations radT's status marks FINISHED: "FINISHED <run> (--k v ...)".
    std::set<std::string> finished;
    if (const YAML::Node status = root["status"]; status && status.IsMap()) {
      for (const auto& item : status) {
        if (!item.second.IsScalar()) continue;
        const std::string value = item.second.Scalar();
        if (value.find("FINISHED") == std::string::npos) continue;
        const std::size_t open = value.find('('), close = value.rfind(')');
        if (open != std::string::npos && close != std::string::npos && close > open) {
          finished.insert(value.substr(open + 1, close - open - 1));
        }
      }
    }

    std::size_t count = 0;
    for (const char* key : {"count", "run_cap"}) {
      if (const YAML::Node node = root[key]) {
        long long value = 0;
        if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &value) || value < 1 ||
            static_cast<std::size_t>(value) > kMaxPlanJobs) {
          return bad(node,
                     absl::StrCat("key '", key, "' must be a count from 1 to ", kMaxPlanJobs));
        }
        if (count == 0) count = static_cast<std::size_t>(value);
      }
    }

    std::vector<std::vector<std::string>> rows;  // one value per axis
    std::mt19937_64 rng(seed);
    const bool discrete = std::all_of(axes->begin(), axes->end(),
                                      [](const Axis& a) { return a.distribution.empty(); });
    if (random && count > 0) {
      for (std::size_t n = 0; n < count; ++n) {
        std::vector<std::string> row;
        for (const Axis& axis : *axes) row.push_back(sample(axis, rng));
        rows.push_back(std::move(row));
      }
    } else {
      if (random && !discrete) {
        return bad(root, "method random with a distribution needs `count` or `run_cap`");
      }
      std::size_t total = 1;
      for (const Axis& axis : *axes) {
        total *= axis.values.size();
        if (total > kMaxPlanJobs) {
          return bad(root, absl::StrCat("the grid has more than ", kMaxPlanJobs, " combinations"));
        }
      }
      std::vector<std::size_t> at(axes->size(), 0);
      for (std::size_t n = 0; n < total; ++n) {
        std::vector<std::string> row;
        for (std::size_t k = 0; k < axes->size(); ++k) row.push_back((*axes)[k].values[at[k]]);
        rows.push_back(std::move(row));
        for (std::size_t k = axes->size(); k-- > 0;) {
          if (++at[k] < (*axes)[k].values.size()) break;
          at[k] = 0;
        }
      }
      if (random) {  // Fisher-Yates with our generator: the same order everywhere
        for (std::size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng() % i]);
      }
    }

    Plan plan;
    plan.name =
        root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : detail::stem_of(name);
    detail::UniqueIds ids;
    for (std::size_t n = 0; n < rows.size(); ++n) {
      Job job = base;
      std::string radt_params;
      for (std::size_t k = 0; k < axes->size(); ++k) {
        job.params.emplace_back((*axes)[k].key, rows[n][k]);
        absl::StrAppend(&radt_params, k ? " " : "", "--", (*axes)[k].key, " ", rows[n][k]);
      }
      job.id = ids.take(detail::params_id(job.params));
      job.group = radt ? static_cast<int>(n) : -1;
      job.source = absl::StrCat(name, ": parameters, combination ", n);
      if (radt && finished.count(radt_params) != 0) continue;
      plan.jobs.push_back(std::move(job));
    }
    return plan;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<Plan> read_sweep_yaml(const std::string& path,
                                     const std::vector<std::string>& program, std::uint64_t seed) {
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_sweep_yaml(*text, path, program, seed);
}

}  // namespace trainscope::sweep
