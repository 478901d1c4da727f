#include "report/run_data.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "report/downsample.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/ledger.hpp"

namespace trainscope::report::detail {
namespace {

using nlohmann::json;

constexpr std::uint64_t kChunkBytes = std::uint64_t{16} << 20;
constexpr std::string_view kSystemPrefix = host::kSystemMetricPrefix;
constexpr std::size_t kMaxDatasetsPerChart = 16;
constexpr std::size_t kLogTailBytes = 6000;

std::string megabytes(std::uint64_t bytes) {
  return fmt::format("{:.0f} MB", static_cast<double>(bytes) / 1e6);
}

// Reads bytes of several files and reports how far it is, at most every 0.2 s.
class ReadProgress {
 public:
  ReadProgress(const ProgressFn& progress, std::string what, std::uint64_t total)
      : progress_(progress), what_(std::move(what)), total_(std::max<std::uint64_t>(total, 1)) {}
  void add(std::uint64_t bytes, std::uint64_t rows) {
    done_ += bytes;
    rows_ += rows;
    const auto now = std::chrono::steady_clock::now();
    if (!progress_ || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    progress_(fmt::format("reading {}: {:3.0f}% of {}, {} rows", what_,
                          100.0 * static_cast<double>(done_) / static_cast<double>(total_),
                          megabytes(total_), rows_),
              /*transient=*/true);
  }

 private:
  const ProgressFn& progress_;
  std::string what_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  std::uint64_t rows_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// Appends one metric file's points to `out`, grouped by key, host and rank.
void add_points(const std::vector<MetricPoint>& points, const std::string& host,
                std::vector<MetricColumns>* out,
                absl::flat_hash_map<std::string, std::size_t>* index) {
  for (const MetricPoint& p : points) {
    std::string id = fmt::format("{}\x1f{}\x1f{}", p.key, host, p.rank);
    auto [it, inserted] = index->try_emplace(std::move(id), out->size());
    if (inserted) {
      MetricColumns& c = out->emplace_back();
      c.key = p.key;
      c.host = host;
      c.rank = p.rank;
    }
    MetricColumns& c = (*out)[it->second];
    c.timestamp_ms.push_back(p.timestamp_ms);
    c.step.push_back(static_cast<double>(p.step));
    c.value.push_back(p.value);
  }
}

json rounded(const std::vector<double>& values, int digits) {
  json out = json::array();
  for (double v : values) out.push_back(round_significant(v, digits));
  return out;
}

// Seconds since the run's start, to the millisecond.
json seconds_axis(const std::vector<double>& seconds) {
  json out = json::array();
  for (double v : seconds) out.push_back(std::round(v * 1000.0) / 1000.0);
  return out;
}

json line_json(const Line& line, bool x_is_time) {
  return json{{"rows", line.rows},
              {"downsampled", line.downsampled},
              {"x", x_is_time ? seconds_axis(line.x) : rounded(line.x, 9)},
              {"y", rounded(line.y, 6)}};
}

std::string device_string(Device device) { return std::string(device_name(device)); }

// The rows of `c` by start time (indices), without sorting when they are.
std::vector<std::size_t> time_order(const RegionColumns& c) {
  std::vector<std::size_t> order(c.start_ns.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (!std::is_sorted(c.start_ns.begin(), c.start_ns.end())) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return c.start_ns[a] < c.start_ns[b]; });
  }
  return order;
}

// "gpu.0.util_pct" -> family "gpu", instance "0", quantity "util_pct".
struct MetricName {
  std::string family;
  std::string instance;
  std::string quantity;
};
MetricName split_metric(std::string_view key) {
  if (key.substr(0, kSystemPrefix.size()) == kSystemPrefix) key.remove_prefix(kSystemPrefix.size());
  MetricName name;
  const std::size_t first = key.find('.');
  const std::size_t last = key.rfind('.');
  if (first == std::string_view::npos) {
    name.quantity = std::string(key);
    return name;
  }
  name.family = std::string(key.substr(0, first));
  name.quantity = std::string(key.substr(last + 1));
  if (last > first) name.instance = std::string(key.substr(first + 1, last - first - 1));
  return name;
}

// Charts shown first, in this order (the rest follow by name).
// A chart is "<family>.<quantity>" (hardware_json): built from the writers' names.
int chart_priority(const std::string& chart) {
  const auto host_chart = [](std::string_view metric) {
    return std::string(metric.substr(kSystemPrefix.size()));
  };
  const auto of = [](std::string_view family, std::string_view quantity) {
    return fmt::format("{}.{}", family, quantity);
  };
  static const std::vector<std::string> kOrder = {
      of(host::kGpuFamily, host::kGpuUtilQuantity),
      of(host::kGpuFamily, host::kGpuMemUsedQuantity),
      host_chart(host::kProcCpuMetric),
      host_chart(host::kProcRssMbMetric),
      of(host::kGpuFamily, host::kGpuProcUtilQuantity),
      host_chart(host::kCpuUtilMetric),
      host_chart(host::kDiskReadMbPerSecMetric),
      of(host::kDiskFamily, host::kWriteMbPerSecQuantity),
      host_chart(host::kMemUsedMbMetric),
      of(host::kNetFamily, host::kRxMbPerSecQuantity),
      of(host::kNetFamily, host::kTxMbPerSecQuantity),
      of(host::kGpuFamily, host::kGpuPowerQuantity),
      of(host::kGpuFamily, host::kGpuTempQuantity),
      of(host::kGpuFamily, host::kGpuSmActiveQuantity)};
  for (int i = 0; i < static_cast<int>(kOrder.size()); ++i) {
    if (chart == kOrder[i]) return i;
  }
  return 1000;
}

std::string unit_of(const std::string& quantity) {
  if (absl::EndsWith(quantity, "_pct")) return "%";
  if (absl::EndsWith(quantity, "_mb_s")) return "MB/s";
  if (absl::EndsWith(quantity, "_mb")) return "MB";
  if (absl::EndsWith(quantity, "_iops")) return "IO/s";
  if (absl::EndsWith(quantity, "_w")) return "W";
  if (absl::EndsWith(quantity, "_j")) return "J";
  if (absl::EndsWith(quantity, "_c")) return "°C";
  if (absl::EndsWith(quantity, "_mhz")) return "MHz";
  return "";
}

// Natural order of instance names ("2" before "10").
bool natural_less(const std::string& a, const std::string& b) {
  const bool a_num = !a.empty() && std::all_of(a.begin(), a.end(), ::isdigit);
  const bool b_num = !b.empty() && std::all_of(b.begin(), b.end(), ::isdigit);
  if (a_num && b_num && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

json hardware_json(const RunData& run, std::size_t max_points) {
  // chart -> its series (index into run.hardware).
  std::map<std::string, std::vector<std::size_t>> charts;
  for (std::size_t i = 0; i < run.hardware.size(); ++i) {
    const MetricName name = split_metric(run.hardware[i].key);
    std::string chart = name.family.empty() ? name.quantity : name.family + "." + name.quantity;
    // Per-process GPU readings are a chart of their own ("gpu.proc.util_pct").
    if (name.family == host::kGpuFamily && absl::EndsWith(name.instance, ".proc")) {
      chart = fmt::format("{}.proc.{}", host::kGpuFamily, name.quantity);
    }
    charts[chart].push_back(i);
  }
  std::vector<std::pair<std::string, std::vector<std::size_t>>> ordered(charts.begin(),
                                                                        charts.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return chart_priority(a.first) < chart_priority(b.first);
  });
  const double t0_ms = static_cast<double>(run.info.start_time_ms);
  const bool several_hosts = run.hosts.size() > 1;
  json out = json::array();
  for (auto& [chart, members] : ordered) {
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      const MetricColumns& x = run.hardware[a];
      const MetricColumns& y = run.hardware[b];
      const std::string xi = split_metric(x.key).instance;
      const std::string yi = split_metric(y.key).instance;
      if (xi != yi) return natural_less(xi, yi);
      return std::tie(x.host, x.rank) < std::tie(y.host, y.rank);
    });
    // The readings of a process tree taken before its rank recorded (no rank
    // yet) continue that rank's series when the host has one rank for it: one
    // line, not "total" for the first seconds and "total rank 0" after.
    std::map<std::size_t, std::size_t> before;  // ranked member -> its no-rank readings
    for (std::size_t i : members) {
      const MetricColumns& c = run.hardware[i];
      if (c.rank != kNoRank) continue;
      std::optional<std::size_t> only;
      std::size_t ranked = 0;
      for (std::size_t j : members) {
        const MetricColumns& r = run.hardware[j];
        if (r.rank == kNoRank || r.host != c.host ||
            split_metric(r.key).instance != split_metric(c.key).instance)
          continue;
        ++ranked;
        only = j;
      }
      if (ranked == 1) before[*only] = i;
    }
    members.erase(std::remove_if(members.begin(), members.end(),
                                 [&](std::size_t i) {
                                   return std::any_of(before.begin(), before.end(),
                                                      [i](const auto& b) { return b.second == i; });
                                 }),
                  members.end());
    const std::size_t total = members.size();
    if (members.size() > kMaxDatasetsPerChart) members.resize(kMaxDatasetsPerChart);
    json datasets = json::array();
    std::uint64_t rows = 0;
    bool downsampled = false;
    for (std::size_t i : members) {
      const MetricColumns& c = run.hardware[i];
      std::vector<double> x, y;
      const auto append = [&](const MetricColumns& from) {
        for (std::size_t j = 0; j < from.timestamp_ms.size(); ++j) {
          x.push_back((static_cast<double>(from.timestamp_ms[j]) - t0_ms) / 1000.0);
          y.push_back(from.value[j]);
        }
      };
      if (const auto early = before.find(i); early != before.end()) {
        const MetricColumns& e = run.hardware[early->second];
        // Only the readings before the rank's first: the two never overlap.
        const std::int64_t first = c.timestamp_ms.empty() ? 0 : c.timestamp_ms.front();
        for (std::size_t j = 0; j < e.timestamp_ms.size(); ++j) {
          if (c.timestamp_ms.empty() || e.timestamp_ms[j] < first) {
            x.push_back((static_cast<double>(e.timestamp_ms[j]) - t0_ms) / 1000.0);
            y.push_back(e.value[j]);
          }
        }
      }
      append(c);
      const Line line = minmax_line(x, y, max_points);
      rows += line.rows;
      downsampled = downsampled || line.downsampled;
      std::string label = split_metric(c.key).instance;
      if (c.rank != kNoRank) label += fmt::format("{}rank {}", label.empty() ? "" : " ", c.rank);
      if (label.empty()) label = "total";
      if (several_hosts) label += " @" + c.host;
      json d = line_json(line, /*x_is_time=*/true);
      d["label"] = label;
      d["key"] = c.key;
      datasets.push_back(std::move(d));
    }
    const MetricName name = split_metric(run.hardware[members.front()].key);
    out.push_back(json{{"chart", chart},
                       {"unit", unit_of(name.quantity)},
                       {"rows", rows},
                       {"downsampled", downsampled},
                       {"series_total", total},
                       {"primary", chart_priority(chart) < 1000},
                       {"datasets", std::move(datasets)}});
  }
  return out;
}

json metrics_json(const RunData& run, std::size_t max_points) {
  std::map<std::string, std::vector<const MetricColumns*>> by_key;
  for (const MetricColumns& c : run.metrics) by_key[c.key].push_back(&c);
  json out = json::array();
  for (const auto& [key, members] : by_key) {
    json datasets = json::array();
    for (const MetricColumns* c : members) {
      json d = line_json(minmax_line(c->step, c->value, max_points), /*x_is_time=*/false);
      d["label"] = c->rank == kNoRank ? std::string("all") : fmt::format("rank {}", c->rank);
      datasets.push_back(std::move(d));
    }
    out.push_back(json{{"key", key}, {"datasets", std::move(datasets)}});
  }
  return out;
}

// Per step, each rank's total time of `c`'s key; the slowest rank and its lag
// behind the (lower) median rank, as trainscope.read_run's stragglers().
json stragglers_json(const RegionColumns& c, std::size_t max_points) {
  std::map<std::uint32_t, absl::flat_hash_map<std::int64_t, double>> per_rank;
  for (std::size_t i = 0; i < c.seconds.size(); ++i) per_rank[c.rank[i]][c.step[i]] += c.seconds[i];
  std::vector<std::uint32_t> ranks;
  for (const auto& entry : per_rank) ranks.push_back(entry.first);
  std::map<std::int64_t, std::vector<std::pair<double, std::uint32_t>>> steps;
  for (const auto& [rank, times] : per_rank) {
    for (const auto& [step, seconds] : times) steps[step].emplace_back(seconds, rank);
  }
  std::vector<double> x;
  std::vector<double> lag;
  std::map<std::uint32_t, std::uint64_t> slowest_count;
  double lag_total = 0;
  for (auto& [step, times] : steps) {
    if (times.size() < 2) continue;
    std::sort(times.begin(), times.end());
    const double median = times[(times.size() - 1) / 2].first;
    const double slowest = times.back().first;
    x.push_back(static_cast<double>(step));
    lag.push_back(slowest - median);
    lag_total += slowest - median;
    ++slowest_count[times.back().second];
  }
  json counts = json::array();
  for (std::uint32_t rank : ranks) counts.push_back(slowest_count[rank]);
  return json{{"key", c.key},
              {"device", device_string(c.device)},
              {"ranks", ranks},
              {"steps", x.size()},
              {"slowest_count", counts},
              {"lag_total_s", lag_total},
              {"lag", envelope_json(envelope(x, lag, max_points), /*x_is_time=*/false)}};
}

}  // namespace

json envelope_json(const Envelope& e, bool x_is_time) {
  return json{{"rows", e.rows},
              {"bucket", e.bucket},
              {"window", e.window},
              {"x", x_is_time ? seconds_axis(e.x) : rounded(e.x, 9)},
              {"lo", rounded(e.lo, 5)},
              {"hi", rounded(e.hi, 5)},
              {"median", rounded(e.median, 5)},
              {"p95", rounded(e.p95, 5)}};
}

absl::StatusOr<RunData> read_run_data(const std::string& dir, const ReadOptions& options,
                                      const ProgressFn& progress) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  if (!reader.ok()) return reader.status();
  RunData run;
  run.dir = reader->dir();
  run.info = reader->info();
  run.ranks = reader->ranks();
  run.launchers = reader->launchers();
  run.hosts = reader->hosts();
  run.world_size = reader->world_size();
  run.crashed = reader->crashed();
  for (const RankState& r : run.ranks) {
    run.last_heartbeat_ms = std::max(run.last_heartbeat_ms, r.heartbeat_ms);
  }
  for (const LauncherState& l : run.launchers) {
    run.last_heartbeat_ms = std::max(run.last_heartbeat_ms, l.heartbeat_ms);
  }

  // The bytes to read, for progress: the ranks' files and the hosts'.
  std::uint64_t total = 0;
  for (const RunFile& file : reader->files()) {
    const bool of_rank = std::any_of(run.ranks.begin(), run.ranks.end(),
                                     [&](const RankState& r) { return r.rank.rank == file.rank; });
    const bool of_host =
        std::find(run.hosts.begin(), run.hosts.end(), file.host) != run.hosts.end();
    switch (file.kind) {
      case RunFileKind::kRegions:
        if (of_rank) total += file.size_bytes;
        break;
      case RunFileKind::kMetrics:
        if (of_rank && (options.metrics || options.hardware)) total += file.size_bytes;
        break;
      case RunFileKind::kHostMetrics:
        if (of_host && options.hardware) total += file.size_bytes;
        break;
      case RunFileKind::kSummary:
        break;
    }
  }
  absl::StatusOr<std::string> environment = reader->environment();
  if (environment.ok()) {
    run.environment = *std::move(environment);
  } else if (!absl::IsNotFound(environment.status())) {
    run.notes.push_back(std::string(environment.status().message()));  // damaged: say so
  }
  run.stdout_tail = reader->log_tail(RunLog::kStdout, kLogTailBytes).value_or("");
  run.stderr_tail = reader->log_tail(RunLog::kStderr, kLogTailBytes).value_or("");
  for (const LauncherState& l : run.launchers) {
    RunData::LauncherOutput output;
    output.launcher = l.id();
    absl::StatusOr<std::string> own = reader->environment(l);
    if (own.ok()) {
      output.environment = *std::move(own);
    } else if (!absl::IsNotFound(own.status())) {
      run.notes.push_back(std::string(own.status().message()));
    }
    absl::StatusOr<std::string> out = reader->log_tail(RunLog::kStdout, kLogTailBytes, l);
    absl::StatusOr<std::string> err = reader->log_tail(RunLog::kStderr, kLogTailBytes, l);
    if (own.ok() || out.ok() || err.ok()) {
      output.stdout_tail = out.value_or("");
      output.stderr_tail = err.value_or("");
      run.outputs.push_back(std::move(output));
    }
  }
  if (run.outputs.size() < 2) run.outputs.clear();
  const std::string what = run.info.name.empty() ? run.dir : run.info.name;
  ReadProgress read_progress(progress, what, total);

  absl::flat_hash_map<std::string, std::size_t> region_index;
  absl::flat_hash_map<std::string, std::size_t> metric_index;
  absl::flat_hash_map<std::string, std::size_t> hardware_index;
  // The rows of each rank's file by key and device, for check_run (a file cut short).
  RegionCounts counted;
  for (const RankState& r : run.ranks) {
    const std::uint32_t rank = r.rank.rank;
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> rows_of_column;
    bool found = true;
    for (;;) {
      absl::StatusOr<Chunk<RegionRow>> chunk = reader->read_regions(rank, offset, kChunkBytes);
      if (absl::IsNotFound(chunk.status())) {
        found = false;
        const std::string name = run_data_file_name(RunFileKind::kRegions, rank);
        run.notes.push_back(r.status == RunStatus::kRunning
                                ? fmt::format("rank {} has no {} yet", rank, name)
                                : fmt::format("rank {} ended {} without {}", rank,
                                              run_status_name(r.status), name));
        break;
      }
      if (!chunk.ok()) return chunk.status();
      for (RegionRow& row : chunk->rows) {
        std::string id = row.key;
        id.push_back(row.device == Device::kGPU ? '\x01' : '\x00');
        auto [it, inserted] = region_index.try_emplace(std::move(id), run.regions.size());
        if (inserted) {
          RegionColumns& c = run.regions.emplace_back();
          c.key = row.key;
          c.device = row.device;
        }
        if (it->second >= rows_of_column.size()) rows_of_column.resize(it->second + 1);
        ++rows_of_column[it->second];
        RegionColumns& c = run.regions[it->second];
        c.seconds.push_back(static_cast<double>(row.duration_ns) * 1e-9);
        c.start_ns.push_back(row.start_unix_ns);
        c.step.push_back(row.step);
        c.rank.push_back(row.rank);
      }
      run.region_rows += chunk->rows.size();
      read_progress.add(chunk->next_offset - offset, chunk->rows.size());
      if (chunk->next_offset == offset) break;  // nothing more, or a cut last line
      offset = chunk->next_offset;
    }
    if (found) {
      std::vector<RegionCount>& rows = counted[rank];
      for (std::size_t i = 0; i < rows_of_column.size(); ++i) {
        if (rows_of_column[i] > 0) {
          rows.push_back(RegionCount{run.regions[i].key, run.regions[i].device, rows_of_column[i]});
        }
      }
    }
    if (options.metrics || options.hardware) {
      absl::StatusOr<Chunk<MetricPoint>> chunk = reader->read_metrics(rank);
      if (!chunk.ok() && !absl::IsNotFound(chunk.status())) return chunk.status();
      if (chunk.ok()) {
        std::vector<MetricPoint> user;
        std::vector<MetricPoint> system;
        for (MetricPoint& p : chunk->rows) {
          (p.key.rfind(kSystemPrefix, 0) == 0 ? system : user).push_back(std::move(p));
        }
        if (options.metrics) {
          add_points(user, r.host, &run.metrics, &metric_index);
          run.metric_rows += user.size();
        }
        if (options.hardware) {  // format 1: hardware readings in the rank's metrics
          add_points(system, r.host, &run.hardware, &hardware_index);
          run.hardware_rows += system.size();
        }
        read_progress.add(chunk->next_offset, 0);
      }
    }
  }
  // What the rows say against the summaries (run_check.hpp): lost rows fail the
  // run, naming the file; a file cut short or a damaged summary is said on the page.
  absl::StatusOr<std::vector<RunProblem>> problems = check_run(*reader, &counted);
  if (!problems.ok()) return problems.status();
  if (absl::Status lost = run_problems_error(*problems); !lost.ok()) return lost;
  for (std::string& warning : run_problem_warnings(*problems)) {
    run.warnings.push_back(warning);
    run.notes.push_back(std::move(warning));
  }
  std::sort(run.regions.begin(), run.regions.end(),
            [](const RegionColumns& a, const RegionColumns& b) {
              return std::tie(a.key, a.device) < std::tie(b.key, b.device);
            });

  if (options.hardware) {
    for (const std::string& host : run.hosts) {
      std::uint64_t offset = 0;
      for (;;) {
        absl::StatusOr<Chunk<MetricPoint>> chunk =
            reader->read_host_metrics(host, offset, kChunkBytes);
        if (!chunk.ok()) return chunk.status();
        // The launcher's copy of the ledger for the exporters (docs/ledger.md):
        // the page shows the ledger it derives from the steps, not this.
        std::vector<MetricPoint>& rows = chunk->rows;
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [](const MetricPoint& p) {
                                    return p.key.rfind(steps::kLedgerMetricPrefix, 0) == 0;
                                  }),
                   rows.end());
        add_points(rows, host, &run.hardware, &hardware_index);
        run.hardware_rows += rows.size();
        read_progress.add(chunk->next_offset - offset, chunk->rows.size());
        if (chunk->next_offset == offset) break;
        offset = chunk->next_offset;
      }
    }
  }
  return run;
}

std::string display_status(const RunData& run) {
  return std::string(process_status_name(ProcessStatus{run.info.status, run.crashed}));
}

double duration_s(const RunData& run) {
  std::int64_t end = run.info.end_time_ms;
  if (end == 0 || run.info.status == RunStatus::kRunning) end = run.last_heartbeat_ms;
  if (end < run.info.start_time_ms) return 0.0;
  return static_cast<double>(end - run.info.start_time_ms) / 1000.0;
}

json stats_json(const TimeStats& s) {
  json out = json::object();
  for (const TimeStatsField& f : kTimeStatsFields) {
    switch (f.kind) {
      case TimeStatsFieldKind::kInteger:
        out[f.name] = s.*f.integer;
        break;
      case TimeStatsFieldKind::kDouble:
        out[f.name] = s.*f.number;  // NaN is written as null
        break;
      case TimeStatsFieldKind::kBoolean:
        out[f.name] = s.*f.boolean;
        break;
    }
  }
  return out;
}

json run_meta_json(const RunData& run) {
  json ranks = json::array();
  for (const RankState& r : run.ranks) {
    ranks.push_back(json{{"rank", r.rank.rank},
                         {"host", r.host},
                         {"pid", r.pid},
                         {"status", std::string(run_status_name(r.status))},
                         {"crashed", r.crashed},
                         {"start_ms", r.start_time_ms},
                         {"end_ms", r.end_time_ms},
                         {"heartbeat_ms", r.heartbeat_ms}});
  }
  json launchers = json::array();
  std::vector<std::string> command;
  for (const LauncherState& l : run.launchers) {
    if (command.empty()) command = l.command;
    launchers.push_back(json{{"host", l.host},
                             {"pid", l.pid},
                             {"status", std::string(run_status_name(l.status))},
                             {"crashed", l.crashed},
                             {"lost", l.lost},
                             {"command", l.command},
                             {"exit_code", l.exit_code},
                             {"term_signal", l.term_signal}});
  }
  json meta{{"id", run.info.id},
            {"name", run.info.name},
            {"experiment", run.info.experiment},
            {"dir", run.dir},
            {"status", display_status(run)},
            {"recorded_status", std::string(run_status_name(run.info.status))},
            {"crashed", run.crashed},
            {"in_progress", run.info.status == RunStatus::kRunning && !run.crashed},
            {"start_ms", run.info.start_time_ms},
            {"end_ms", run.info.end_time_ms},
            {"heartbeat_ms", run.last_heartbeat_ms},
            {"duration_s", duration_s(run)},
            {"params", run.info.params},
            {"tags", run.info.tags},
            {"world_size", run.world_size},
            {"hosts", run.hosts},
            {"ranks", std::move(ranks)},
            {"launchers", std::move(launchers)},
            {"command", command},
            {"region_rows", run.region_rows},
            {"hardware_rows", run.hardware_rows},
            {"metric_rows", run.metric_rows},
            {"notes", run.notes}};
  return meta;
}

json run_page_json(const RunData& run, std::size_t max_points) {
  json out;
  json meta = run_meta_json(run);
  if (!run.environment.empty()) {
    json parsed = json::parse(run.environment, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) meta["environment"] = std::move(parsed);
  }
  meta["stdout_tail"] = run.stdout_tail;
  meta["stderr_tail"] = run.stderr_tail;
  if (!run.outputs.empty()) {
    json outputs = json::array();
    for (const RunData::LauncherOutput& o : run.outputs) {
      json parsed = json::parse(o.environment, nullptr, /*allow_exceptions=*/false);
      outputs.push_back(json{{"launcher", o.launcher},
                             {"environment", parsed.is_discarded() ? json() : std::move(parsed)},
                             {"stdout_tail", o.stdout_tail},
                             {"stderr_tail", o.stderr_tail}});
    }
    meta["outputs"] = std::move(outputs);
  }
  out["run"] = std::move(meta);

  const double t0_ns = static_cast<double>(run.info.start_time_ms) * 1e6;
  json stats = json::array();
  json rank_stats = json::array();
  json histograms = json::array();
  json series = json::array();
  const RegionColumns* straggler_key = nullptr;
  for (const RegionColumns& c : run.regions) {
    const std::string device = device_string(c.device);
    json entry = stats_json(compute_time_stats(c.seconds));
    entry["key"] = c.key;
    entry["device"] = device;
    stats.push_back(std::move(entry));

    std::map<std::uint32_t, std::vector<double>> by_rank;
    for (std::size_t i = 0; i < c.seconds.size(); ++i) by_rank[c.rank[i]].push_back(c.seconds[i]);
    if (by_rank.size() > 1 || run.world_size > 1) {
      for (const auto& [rank, seconds] : by_rank) {
        json r = stats_json(compute_time_stats(seconds));
        r["key"] = c.key;
        r["device"] = device;
        r["rank"] = rank;
        rank_stats.push_back(std::move(r));
      }
    }
    if (by_rank.size() > 1 && c.device == Device::kCPU &&
        (straggler_key == nullptr || c.key == "BATCH" ||
         (straggler_key->key != "BATCH" && c.seconds.size() > straggler_key->seconds.size()))) {
      straggler_key = &c;
    }

    const Histogram h = histogram(c.seconds, 60);
    json counts = json::array();
    for (std::uint64_t n : h.counts) counts.push_back(n);
    histograms.push_back(json{{"key", c.key},
                              {"device", device},
                              {"log", h.log},
                              {"edges", rounded(h.edges, 6)},
                              {"counts", std::move(counts)}});

    const std::vector<std::size_t> order = time_order(c);
    std::vector<double> x(order.size());
    std::vector<double> y(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      x[i] = (static_cast<double>(c.start_ns[order[i]]) - t0_ns) * 1e-9;
      y[i] = c.seconds[order[i]];
    }
    json s = envelope_json(envelope(x, y, max_points), /*x_is_time=*/true);
    s["key"] = c.key;
    s["device"] = device;
    series.push_back(std::move(s));
  }
  out["stats"] = std::move(stats);
  out["rank_stats"] = std::move(rank_stats);
  out["histograms"] = std::move(histograms);
  out["series"] = std::move(series);
  out["stragglers"] =
      straggler_key != nullptr ? stragglers_json(*straggler_key, max_points) : json(nullptr);
  out["hardware"] = hardware_json(run, max_points);
  out["metrics"] = metrics_json(run, max_points);
  return out;
}

json run_row_json(const RunData& run, std::size_t trend_points) {
  json row = run_meta_json(run);
  json stats = json::array();
  for (const RegionColumns& c : run.regions) {
    json entry = stats_json(compute_time_stats(c.seconds));
    entry["key"] = c.key;
    entry["device"] = device_string(c.device);
    const std::vector<std::size_t> order = time_order(c);
    std::vector<double> x(order.size());
    std::vector<double> y(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      x[i] = static_cast<double>(i);
      y[i] = c.seconds[order[i]];
    }
    const Envelope e = envelope(x, y, trend_points);
    entry["trend"] = json{{"x", rounded(e.x, 9)}, {"median", rounded(e.median, 5)}};
    stats.push_back(std::move(entry));
  }
  row["stats"] = std::move(stats);
  return row;
}

}  // namespace trainscope::report::detail
