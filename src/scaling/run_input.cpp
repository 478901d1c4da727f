// Measurements from the run store (docs/run-format.md): every finished run is
// one repetition at the point its params give.
#include "trainscope/scaling/run_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "scaling/number_text.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::scaling {

absl::StatusOr<RankAggregation> parse_rank_aggregation(std::string_view name) {
  const std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "mean") return RankAggregation::kMean;
  if (n == "max") return RankAggregation::kMax;
  if (n == "min") return RankAggregation::kMin;
  if (n == "sum") return RankAggregation::kSum;
  return absl::InvalidArgumentError(
      fmt::format("unknown rank aggregation '{}': use mean, max, min or sum", name));
}

namespace {

constexpr std::string_view kMetricPrefix = "metric:";
constexpr const char* kStats[] = {"mean",  "median", "min", "max",  "total",
                                  "count", "p95",    "p99", "last", "rate"};
// How many available keys an error lists.
constexpr std::size_t kMaxListed = 12;

std::string list_names(const std::set<std::string>& names) {
  std::string out;
  std::size_t listed = 0;
  for (const std::string& name : names) {
    if (listed == kMaxListed) {
      out += fmt::format(", ... ({} more)", names.size() - listed);
      break;
    }
    if (listed++ > 0) out += ", ";
    out += "\"" + name + "\"";
  }
  return out;
}

struct MeasuredSelection {
  bool metric = false;  // "metric:<name>"
  std::string name;     // the region key or metric name
  Device device = Device::kCPU;
};

absl::StatusOr<MeasuredSelection> check_selection(const RunSelection& selection) {
  if (selection.parameters.empty()) {
    return absl::InvalidArgumentError("no run parameters selected: name at least one (e.g. \"p\")");
  }
  for (std::size_t i = 0; i < selection.parameters.size(); ++i) {
    if (std::find(selection.parameters.begin(),
                  selection.parameters.begin() + static_cast<std::ptrdiff_t>(i),
                  selection.parameters[i]) !=
        selection.parameters.begin() + static_cast<std::ptrdiff_t>(i)) {
      return absl::InvalidArgumentError(
          fmt::format("parameter \"{}\" selected twice", selection.parameters[i]));
    }
  }
  const auto named = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const auto& [list, field] :
       {std::pair{&selection.by, "by"}, std::pair{&selection.repetitions, "repetitions"}}) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string& name = (*list)[i];
      if (name.empty())
        return absl::InvalidArgumentError(fmt::format("{}: an empty param name", field));
      if (named(selection.parameters, name)) {
        return absl::InvalidArgumentError(
            fmt::format("param \"{}\" is both a model parameter and in {}", name, field));
      }
      if (std::find(list->begin(), list->begin() + static_cast<std::ptrdiff_t>(i), name) !=
          list->begin() + static_cast<std::ptrdiff_t>(i)) {
        return absl::InvalidArgumentError(fmt::format("{}: param \"{}\" given twice", field, name));
      }
    }
  }
  for (const std::string& name : selection.by) {
    if (named(selection.repetitions, name)) {
      return absl::InvalidArgumentError(
          fmt::format("param \"{}\" is both in by and in repetitions", name));
    }
  }
  MeasuredSelection out;
  std::string_view what = selection.what;
  if (what.substr(0, kMetricPrefix.size()) == kMetricPrefix) {
    out.metric = true;
    what.remove_prefix(kMetricPrefix.size());
  }
  out.name = std::string(what);
  if (out.name.empty()) {
    return absl::InvalidArgumentError(out.metric ? "no metric named after \"metric:\""
                                                 : "no region key selected");
  }
  if (std::find(std::begin(kStats), std::end(kStats), selection.stat) == std::end(kStats)) {
    return absl::InvalidArgumentError(fmt::format(
        "unknown statistic \"{}\": expected mean, median, min, max, total, count, p95, p99, last "
        "(metrics) or rate (regions)",
        selection.stat));
  }
  if (selection.stat == "last" && !out.metric) {
    return absl::InvalidArgumentError(fmt::format(
        "statistic \"last\" applies to metrics (\"metric:NAME\"), not to the region \"{}\"",
        out.name));
  }
  if (selection.stat == "rate" && out.metric) {
    return absl::InvalidArgumentError(fmt::format(
        "statistic \"rate\" (count per second) applies to region keys, not to the metric \"{}\"",
        out.name));
  }
  if (selection.device == "cpu" || selection.device == "CPU") {
    out.device = Device::kCPU;
  } else if (selection.device == "gpu" || selection.device == "GPU") {
    out.device = Device::kGPU;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("unknown device \"{}\": expected cpu or gpu", selection.device));
  }
  if (!std::isfinite(selection.scale)) {
    return absl::InvalidArgumentError(fmt::format("scale {} is not finite", selection.scale));
  }
  return out;
}

// The statistic of one rank's samples; NaN-free only when samples exist.
double statistic(const std::vector<double>& samples, const std::string& stat) {
  if (stat == "last") return samples.back();
  const TimeStats stats = compute_time_stats(samples);
  if (stat == "mean") return stats.mean;
  if (stat == "median") return stats.median;
  if (stat == "min") return stats.min;
  if (stat == "max") return stats.max;
  if (stat == "total") return stats.total;
  if (stat == "count") return static_cast<double>(stats.count);
  if (stat == "p95") return stats.p95;
  if (stat == "p99") return stats.p99;
  // rate: regions per second of region time
  return static_cast<double>(stats.count) / stats.total;
}

double aggregate(const std::vector<double>& per_rank, RankAggregation how) {
  switch (how) {
    case RankAggregation::kMax:
      return *std::max_element(per_rank.begin(), per_rank.end());
    case RankAggregation::kMin:
      return *std::min_element(per_rank.begin(), per_rank.end());
    case RankAggregation::kSum:
    case RankAggregation::kMean: {
      long double sum = 0.0L;
      for (double v : per_rank) sum += v;
      if (how == RankAggregation::kSum) return static_cast<double>(sum);
      return static_cast<double>(sum / static_cast<long double>(per_rank.size()));
    }
  }
  return 0.0;
}

// One run's value, or an error naming the run and what is missing.
absl::StatusOr<double> run_value(const RunReader& reader, const MeasuredSelection& selected,
                                 const RunSelection& selection) {
  std::vector<double> per_rank;
  std::set<std::string> available;
  std::vector<double> samples;
  for (const RankState& rank : reader.ranks()) {
    samples.clear();
    const std::uint32_t r = rank.rank.rank;
    if (selected.metric) {
      absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(r);
      if (absl::IsNotFound(metrics.status())) continue;
      if (!metrics.ok()) return metrics.status();
      for (const MetricPoint& m : metrics->rows) {
        if (m.key == selected.name) {
          samples.push_back(m.value);
        } else {
          available.insert(m.key);
        }
      }
    } else {
      absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(r);
      if (absl::IsNotFound(regions.status())) continue;
      if (!regions.ok()) return regions.status();
      for (const RegionRow& row : regions->rows) {
        if (row.device != selected.device) continue;
        if (row.key == selected.name) {
          samples.push_back(static_cast<double>(row.duration_ns) * 1e-9);
        } else {
          available.insert(row.key);
        }
      }
    }
    if (!samples.empty()) per_rank.push_back(statistic(samples, selection.stat));
  }
  // Hardware readings live in the hosts' files (format 2): each host's
  // host-wide series and each rank's process-tree series is one entry.
  if (selected.metric) {
    for (const std::string& host : reader.hosts()) {
      absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_host_metrics(host);
      if (!metrics.ok()) return metrics.status();
      std::map<std::uint32_t, std::vector<double>> by_rank;
      for (const MetricPoint& m : metrics->rows) {
        if (m.key == selected.name) {
          by_rank[m.rank].push_back(m.value);
        } else {
          available.insert(m.key);
        }
      }
      for (const auto& [rank, values] : by_rank)
        per_rank.push_back(statistic(values, selection.stat));
    }
  }
  if (per_rank.empty()) {
    const std::string kind = selected.metric ? "metric" : "region";
    const std::string where =
        selected.metric ? std::string()
                        : fmt::format(" on {}", std::string(device_name(selected.device)));
    return absl::InvalidArgumentError(
        fmt::format("{}: no rank recorded the {} \"{}\"{} ({} {}s: {})", reader.dir(), kind,
                    selected.name, where, available.empty() ? "no" : "recorded", kind,
                    available.empty() ? "none" : list_names(available)));
  }
  const double value = aggregate(per_rank, selection.ranks) * selection.scale;
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the {} of \"{}\" is {} (not a finite measurement)", reader.dir(),
                    selection.stat, selected.name, value));
  }
  return value;
}

// Param values as text, ordered as numbers when both are numbers, else as
// text (numbers first).
bool value_less(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  const bool a_number = detail::parse_number(detail::trim(a), &x) == detail::NumberResult::kOk;
  const bool b_number = detail::parse_number(detail::trim(b), &y) == detail::NumberResult::kOk;
  if (a_number && b_number && x != y) return x < y;
  if (a_number != b_number) return a_number;
  return a < b;
}

struct ValuesLess {
  bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), value_less);
  }
};

// How a param that a run lacks is shown beside the values of runs that set it.
constexpr char kUnset[] = "(unset)";

// A run measured: its place (group, coordinate), its value and the params
// that must be equal between repetitions.
struct UsedRun {
  std::string dir;
  std::vector<std::string> group;  // values of selection.by
  std::vector<double> coordinate;
  double value = 0;
  std::map<std::string, std::string> others;
};

std::string point_text(const RunSelection& selection, const UsedRun& run) {
  std::string out;
  for (std::size_t i = 0; i < selection.parameters.size(); ++i) {
    out += fmt::format("{}{}={:g}", i == 0 ? "" : ",", selection.parameters[i], run.coordinate[i]);
  }
  for (std::size_t i = 0; i < selection.by.size(); ++i) {
    out += fmt::format(",{}={}", selection.by[i], run.group[i]);
  }
  return out;
}

std::string value_of(const std::map<std::string, std::string>& params, const std::string& name) {
  const auto it = params.find(name);
  return it == params.end() ? std::string(kUnset) : it->second;
}

// OK when the runs at each point agree on every param that is not a model
// parameter, a `by` param or a repetition; otherwise the error that names
// what differs, an example and the ways out.
absl::Status check_repetitions(const std::vector<std::string>& paths, const RunSelection& selection,
                               const std::vector<UsedRun>& used) {
  std::map<std::pair<std::vector<std::string>, std::vector<double>>, const UsedRun*> first;
  std::set<std::string> differing;
  const UsedRun* example_a = nullptr;
  const UsedRun* example_b = nullptr;
  for (const UsedRun& run : used) {
    const auto [it, inserted] = first.emplace(std::pair{run.group, run.coordinate}, &run);
    if (inserted) continue;
    const UsedRun& other = *it->second;
    std::set<std::string> names;
    for (const auto& [name, value] : run.others) names.insert(name);
    for (const auto& [name, value] : other.others) names.insert(name);
    for (const std::string& name : names) {
      if (value_of(run.others, name) == value_of(other.others, name)) continue;
      differing.insert(name);
      if (example_a == nullptr) {
        example_a = &other;
        example_b = &run;
      }
    }
  }
  if (differing.empty()) return absl::OkStatus();
  std::string listed;
  std::string example;
  for (const std::string& name : differing) {
    std::set<std::string, bool (*)(const std::string&, const std::string&)> values(value_less);
    for (const UsedRun& run : used) values.insert(value_of(run.others, name));
    std::vector<std::string> shown(values.begin(), values.end());
    if (shown.size() > kMaxListed) {
      const std::size_t more = shown.size() - kMaxListed;
      shown.resize(kMaxListed);
      shown.push_back(fmt::format("... ({} more)", more));
    }
    listed += fmt::format("{}{} ({})", listed.empty() ? "" : ", ", name, fmt::join(shown, ", "));
    if (value_of(example_a->others, name) != value_of(example_b->others, name)) {
      example += fmt::format("{}{}: {} and {}", example.empty() ? "" : "; ", name,
                             value_of(example_a->others, name), value_of(example_b->others, name));
    }
  }
  const std::string names = fmt::format("{}", fmt::join(differing, ","));
  const std::string where = paths.size() == 1 ? paths.front() + ": " : std::string();
  return absl::InvalidArgumentError(fmt::format(
      "{}the runs at one point differ in {}: as repetitions their values would be averaged into "
      "one\n"
      "  (e.g. {} and {} at {}: {})\n"
      "  fit one model per value: --by {} (Python: by=[...]); model it too: --params {},{};\n"
      "  or, if its values are repetitions (a seed): --repetition {} (Python: repetitions=[...])",
      where, listed, example_a->dir, example_b->dir, point_text(selection, *example_a), example,
      names, fmt::join(selection.parameters, ","), names, names));
}

}  // namespace

absl::StatusOr<MeasurementSet> read_runs(const std::vector<std::string>& paths,
                                         const RunSelection& selection,
                                         std::vector<std::string>* warnings) {
  absl::StatusOr<MeasuredSelection> selected = check_selection(selection);
  if (!selected.ok()) return selected.status();
  absl::StatusOr<std::vector<std::string>> runs = find_run_dirs(paths);
  if (!runs.ok()) return runs.status();

  const auto warn = [&](std::string message) {
    if (warnings != nullptr) warnings->push_back(std::move(message));
  };
  const auto list_params = [](const std::map<std::string, std::string>& params) {
    std::set<std::string> names;
    for (const auto& [key, value] : params) names.insert(key);
    return names.empty() ? std::string("it has no params") : "its params: " + list_names(names);
  };
  std::vector<UsedRun> used;
  std::map<std::string, std::string> seen;  // run id -> directory
  std::size_t skipped = 0;
  std::size_t damaged = 0;
  for (const std::string& dir : *runs) {
    // A damaged run is skipped and named (run_check.hpp), never the whole study.
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    if (!reader.ok()) {
      ++damaged;
      warn(fmt::format("{}: skipped: {}", dir, std::string(reader.status().message())));
      continue;
    }
    absl::StatusOr<std::vector<RunProblem>> problems = check_run(*reader);
    if (problems.ok()) {
      if (absl::Status lost = run_problems_error(*problems); !lost.ok()) problems = lost;
    }
    if (!problems.ok()) {
      ++damaged;
      warn(fmt::format("{}: skipped: {}", dir, std::string(problems.status().message())));
      continue;
    }
    for (const std::string& warning : run_problem_warnings(*problems)) warn(warning);
    const RunInfo& info = reader->info();
    if (const auto [it, inserted] = seen.emplace(info.id, dir); !inserted) {
      warn(fmt::format("{}: skipped: the same run as {} (given twice)", dir, it->second));
      continue;
    }
    if (info.status != RunStatus::kFinished) {
      ++skipped;
      warn(info.status == RunStatus::kRunning
               ? fmt::format("{}: skipped: the run is still RUNNING", dir)
               : fmt::format("{}: skipped: the run {} (only finished runs are measurements)", dir,
                             reader->crashed()
                                 ? std::string("crashed")
                                 : "was " + std::string(run_status_name(info.status))));
      continue;
    }
    UsedRun run;
    run.dir = dir;
    run.others = info.params;
    for (const std::string& parameter : selection.parameters) {
      const auto param = info.params.find(parameter);
      if (param == info.params.end()) {
        return absl::InvalidArgumentError(fmt::format("{}: the run has no param \"{}\" ({})", dir,
                                                      parameter, list_params(info.params)));
      }
      double value;
      if (detail::parse_number(detail::trim(param->second), &value) != detail::NumberResult::kOk) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: param \"{}\" is \"{}\", not a finite number", dir, parameter, param->second));
      }
      run.coordinate.push_back(value);
      run.others.erase(parameter);
    }
    for (const std::string& name : selection.by) {
      const auto param = info.params.find(name);
      if (param == info.params.end()) {
        return absl::InvalidArgumentError(fmt::format("{}: the run has no param \"{}\" (by) ({})",
                                                      dir, name, list_params(info.params)));
      }
      run.group.push_back(param->second);
      run.others.erase(name);
    }
    for (const std::string& name : selection.repetitions) run.others.erase(name);
    absl::StatusOr<double> value = run_value(*reader, *selected, selection);
    // A bad line or an unreadable file is damage; a run without the key is an error.
    if (!value.ok() && !absl::IsInvalidArgument(value.status())) {
      ++damaged;
      warn(fmt::format("{}: skipped: {}", dir, std::string(value.status().message())));
      continue;
    }
    if (!value.ok()) return value.status();
    run.value = *value;
    used.push_back(std::move(run));
  }
  if (used.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "no finished run to measure ({} run{} skipped: still running, failed or killed; {} "
        "damaged)",
        skipped, skipped == 1 ? "" : "s", damaged));
  }
  if (absl::Status same = check_repetitions(paths, selection, used); !same.ok()) return same;

  // Repetitions per coordinate, per group.
  std::map<std::vector<std::string>, std::map<std::vector<double>, std::vector<double>>, ValuesLess>
      groups;
  for (const UsedRun& run : used) groups[run.group][run.coordinate].push_back(run.value);
  MeasurementSet set;
  set.parameters = selection.parameters;
  for (auto& [group, points] : groups) {
    Series series;
    series.callpath = selected->name;
    series.metric = selection.stat;
    for (std::size_t i = 0; i < selection.by.size(); ++i) {
      series.group.emplace_back(selection.by[i], group[i]);
    }
    for (auto& [coordinate, values] : points) {
      series.points.push_back(Point{coordinate, std::move(values)});
    }
    set.series.push_back(std::move(series));
  }
  return set;
}

}  // namespace trainscope::scaling
