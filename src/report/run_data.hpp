// One run, read for a report page (internal): every region row, hardware
// reading and user metric of the run directory in compact columns (through
// RunReader, in chunks, with progress), and the JSON the page draws from.
#ifndef TRAINSCOPE_SRC_REPORT_RUN_DATA_HPP_
#define TRAINSCOPE_SRC_REPORT_RUN_DATA_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/downsample.hpp"
#include "trainscope/export/run_record.hpp"
#include "trainscope/stats/summary.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::report::detail {

using ProgressFn = std::function<void(const std::string& text, bool transient)>;

// The rows of one key on one device, all ranks, in the order read.
struct RegionColumns {
  std::string key;
  Device device = Device::kCPU;
  std::vector<double> seconds;
  std::vector<std::int64_t> start_ns;
  std::vector<std::int64_t> step;
  std::vector<std::uint32_t> rank;
};

// The readings of one metric key from one rank (kNoRank: host-wide) on one host.
struct MetricColumns {
  std::string key;
  std::string host;
  std::uint32_t rank = kNoRank;
  std::vector<std::int64_t> timestamp_ms;
  std::vector<double> step;
  std::vector<double> value;
};

struct RunData {
  std::string dir;
  RunInfo info;
  std::vector<RankState> ranks;
  std::vector<LauncherState> launchers;
  std::vector<std::string> hosts;
  std::uint32_t world_size = 0;
  bool crashed = false;
  std::int64_t last_heartbeat_ms = 0;   // newest rank or launcher heartbeat
  std::vector<RegionColumns> regions;   // by key, then device
  std::vector<MetricColumns> hardware;  // system/... readings
  std::vector<MetricColumns> metrics;   // the user's metrics
  std::uint64_t region_rows = 0;
  std::uint64_t hardware_rows = 0;
  std::uint64_t metric_rows = 0;
  std::vector<std::string> notes;  // what the page should say about the data (a missing file)
  // check_run's warnings (a regions file cut short, a damaged summary), also in notes:
  // the CLI prints them.
  std::vector<std::string> warnings;
  std::string environment;  // environment.json's text ("" when none or damaged)
  std::string stdout_tail;  // the end of the command's logs ("" when none)
  std::string stderr_tail;
  // Each launcher's own records, when two or more launchers wrote them (one
  // run, several hosts): the fields above are then the first launcher's.
  struct LauncherOutput {
    std::string launcher;  // "<host>:<pid>"
    std::string environment;
    std::string stdout_tail;
    std::string stderr_tail;
  };
  std::vector<LauncherOutput> outputs;
};

struct ReadOptions {
  bool hardware = true;  // read host-<host>.csv files (and system/ metrics of format 1)
  bool metrics = true;   // read metrics-<r>.csv files
};

// Reads the run directory `dir`. Errors name the directory or file and what
// is wrong (RunReader's).
absl::StatusOr<RunData> read_run_data(const std::string& dir, const ReadOptions& options,
                                      const ProgressFn& progress);

// "FINISHED", ..., "CRASHED" (RUNNING or FAILED with a rank or launcher
// gone), "RUNNING" for a run in progress.
std::string display_status(const RunData& run);
double duration_s(const RunData& run);

// An envelope for the page: x in seconds since the run's start (to the
// millisecond) when `x_is_time`, values to 5 significant digits.
nlohmann::json envelope_json(const Envelope& e, bool x_is_time);

// Every field of `stats` (NaN as null).
nlohmann::json stats_json(const TimeStats& stats);

// The run's metadata: id, name, status, params, ranks, launchers, command...
nlohmann::json run_meta_json(const RunData& run);

// Everything a run page draws: metadata, statistics per key and device (and
// per rank), histograms, region series, slowest ranks, hardware, metrics.
nlohmann::json run_page_json(const RunData& run, std::size_t max_points);

// One row of a study page: metadata, statistics per key and device, and a
// short trend (median per bucket) of each key for side-by-side comparison.
nlohmann::json run_row_json(const RunData& run, std::size_t trend_points);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_RUN_DATA_HPP_
