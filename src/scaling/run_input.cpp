// Measurements from the run store (docs/run-format.md): every finished run is
// one repetition at the point its params give.
#include "trainscope/scaling/run_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "scaling/number_text.hpp"
#include "trainscope/run/run_check.hpp"
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

namespace fs = std::filesystem;

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

struct Selection {
  bool metric = false;  // "metric:<name>"
  std::string name;     // the region key or metric name
  Device device = Device::kCPU;
};

absl::StatusOr<Selection> check_selection(const RunSelection& selection) {
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
  Selection out;
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

// A run, or what is left of one without its run.json: read_runs skips it by
// name rather than leaving it out silently.
bool is_run_dir(const fs::path& dir) { return holds_run_files(dir.string()); }

// The run directories `paths` name, in order; a directory holding runs gives
// its runs sorted by name.
absl::StatusOr<std::vector<std::string>> find_runs(const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no run directories given");
  std::vector<std::string> runs;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (status.type() == fs::file_type::not_found) {
      return absl::NotFoundError(fmt::format("{}: no such run directory", path));
    }
    if (error) return absl::ErrnoToStatus(error.value(), fmt::format("{}: cannot access", path));
    if (!fs::is_directory(status))
      return absl::InvalidArgumentError(fmt::format("{}: not a directory", path));
    if (is_run_dir(path)) {
      runs.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      std::error_code type_error;
      if (it->is_directory(type_error) && is_run_dir(it->path()))
        found.push_back(it->path().string());
    }
    if (error)
      return absl::ErrnoToStatus(error.value(), fmt::format("{}: cannot list the directory", path));
    if (found.empty()) {
      return absl::NotFoundError(
          fmt::format("{}: not a run directory (no run.json) and no run directory in it", path));
    }
    std::sort(found.begin(), found.end());
    runs.insert(runs.end(), found.begin(), found.end());
  }
  return runs;
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
absl::StatusOr<double> run_value(const RunReader& reader, const Selection& selected,
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

}  // namespace

absl::StatusOr<MeasurementSet> read_runs(const std::vector<std::string>& paths,
                                         const RunSelection& selection,
                                         std::vector<std::string>* warnings) {
  absl::StatusOr<Selection> selected = check_selection(selection);
  if (!selected.ok()) return selected.status();
  absl::StatusOr<std::vector<std::string>> runs = find_runs(paths);
  if (!runs.ok()) return runs.status();

  const auto warn = [&](std::string message) {
    if (warnings != nullptr) warnings->push_back(std::move(message));
  };
  // Repetitions per coordinate.
  std::map<std::vector<double>, std::vector<double>> points;
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
    std::vector<double> coordinate;
    for (const std::string& parameter : selection.parameters) {
      const auto param = info.params.find(parameter);
      if (param == info.params.end()) {
        std::set<std::string> names;
        for (const auto& [key, value] : info.params) names.insert(key);
        return absl::InvalidArgumentError(
            fmt::format("{}: the run has no param \"{}\" ({})", dir, parameter,
                        names.empty() ? "it has no params" : "its params: " + list_names(names)));
      }
      double value;
      if (detail::parse_number(detail::trim(param->second), &value) != detail::NumberResult::kOk) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: param \"{}\" is \"{}\", not a finite number", dir, parameter, param->second));
      }
      coordinate.push_back(value);
    }
    absl::StatusOr<double> value = run_value(*reader, *selected, selection);
    // A bad line or an unreadable file is damage; a run without the key is an error.
    if (!value.ok() && !absl::IsInvalidArgument(value.status())) {
      ++damaged;
      warn(fmt::format("{}: skipped: {}", dir, std::string(value.status().message())));
      continue;
    }
    if (!value.ok()) return value.status();
    points[coordinate].push_back(*value);
  }
  if (points.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "no finished run to measure ({} run{} skipped: still running, failed or killed; {} "
        "damaged)",
        skipped, skipped == 1 ? "" : "s", damaged));
  }

  MeasurementSet set;
  set.parameters = selection.parameters;
  Series series;
  series.callpath = selected->name;
  series.metric = selection.stat;
  for (auto& [coordinate, values] : points)
    series.points.push_back(Point{coordinate, std::move(values)});
  set.series.push_back(std::move(series));
  return set;
}

}  // namespace trainscope::scaling
