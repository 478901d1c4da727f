// What a run is made of, shared by the run store, its reader and every
// exporter: status, metadata, scalar metric points, the process's rank, and
// the rows a run's record is read back as.
#ifndef TRAINSCOPE_EXPORT_RUN_RECORD_HPP_
#define TRAINSCOPE_EXPORT_RUN_RECORD_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/stats/summary.hpp"
#include "trainscope/timing/region_sink.hpp"

namespace trainscope {

// MLflow's run statuses. A reader reports a RUNNING run whose process is gone
// as crashed (RunReader::crashed()).
enum class RunStatus { kRunning, kFinished, kFailed, kKilled };
std::string_view run_status_name(RunStatus status) noexcept;  // "RUNNING", ...
absl::StatusOr<RunStatus> parse_run_status(std::string_view name);

// Which process of a distributed job this is, from the launcher's environment:
// RANK/LOCAL_RANK/WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS,
// OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_SIZE, in that
// order; rank 0 of 1 when none is set. An unparsable value is an error naming
// the variable.
struct RankInfo {
  std::uint32_t rank = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t world_size = 1;
};
absl::StatusOr<RankInfo> rank_from_environment();

// MetricPoint::rank of a reading that belongs to no rank: a host-wide hardware
// metric, or the process tree of a launcher that runs several ranks.
inline constexpr std::uint32_t kNoRank = 0xFFFFFFFFu;

// Every hardware reading's key starts so (MLflow's system metrics' prefix):
// the hardware sources write it (hardware/host/host_metrics.hpp names the
// readings), the MLflow exporter, the run filter, the sweep and the report
// tell readings from the user's metrics by it.
inline constexpr char kSystemMetricPrefix[] = "system/";

// A scalar the user logs (loss, accuracy), as MLflow's metric, or a hardware
// reading (kSystemMetricPrefix...).
struct MetricPoint {
  std::string key;
  double value = 0.0;
  std::int64_t step = 0;
  std::int64_t timestamp_ms = 0;  // Unix milliseconds
  std::uint32_t rank = 0;         // kNoRank: none (stored as an empty field)
};

struct RunInfo {
  std::string id;  // 32 lowercase hex digits, as MLflow's
  std::string name;
  std::string experiment;  // experiment name (MLflow's MLFLOW_EXPERIMENT_NAME)
  std::int64_t start_time_ms = 0;
  std::int64_t end_time_ms = 0;  // 0 while running
  RunStatus status = RunStatus::kRunning;
  std::map<std::string, std::string> params;  // write-once, as MLflow's
  std::map<std::string, std::string> tags;
};

// One region sample as stored (docs/run-format.md).
struct RegionRow {
  std::string key;
  Device device = Device::kCPU;
  std::uint32_t rank = 0;
  std::uint32_t thread = 0;
  std::int64_t start_unix_ns = 0;
  std::int64_t duration_ns = 0;
  std::int64_t step = 0;   // CPU BATCH regions this thread completed before this one ended
  std::int64_t epoch = 0;  // likewise for EPOCH
  // GPU rows: the device start, ns after the rank's reference event, and the
  // stream index (RegionSample's); kNoGpuStart / 0 where the row has none.
  std::int64_t gpu_start_ns = kNoGpuStart;
  std::uint32_t stream = 0;
  // A CPU step row: the thread's run-queue wait while it ran (RegionSample's);
  // kNoCpuWait where the row has none.
  std::int64_t cpu_wait_ns = kNoCpuWait;
};

// A region row as a reader scans it: the key is a view into the reader's
// buffer, valid only while the row is being visited (RunReader::scan_regions).
struct RegionView {
  std::string_view key;
  Device device = Device::kCPU;
  std::uint32_t rank = 0;
  std::uint32_t thread = 0;
  std::int64_t start_unix_ns = 0;
  std::int64_t duration_ns = 0;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::int64_t gpu_start_ns = kNoGpuStart;
  std::uint32_t stream = 0;
  std::int64_t cpu_wait_ns = kNoCpuWait;
};

// One rank's process, as its rank file records it.
struct RankState {
  RankInfo rank;
  RunStatus status = RunStatus::kRunning;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t start_time_ms = 0;
  std::int64_t end_time_ms = 0;
  std::int64_t heartbeat_ms = 0;       // last flush
  std::int64_t flush_interval_ms = 0;  // how often it renews heartbeat_ms
  bool crashed = false;                // RUNNING, but its process is gone or silent
  // The launcher (`trainscope run`) that started this rank's process tree, as
  // "<host>:<pid>" (TRAINSCOPE_LAUNCHER); empty when none did.
  std::string launcher;
  // Records the rank could not write (its disk was full): region rows (their
  // statistics are still in the summary) and metrics.
  std::uint64_t dropped_region_rows = 0;
  std::uint64_t dropped_metrics = 0;
};

// One `trainscope run` process of the job: it is not a rank; it records the
// command it ran and how that ended, and samples its host's hardware.
struct LauncherState {
  std::string host;
  std::int64_t pid = 0;
  RunStatus status = RunStatus::kRunning;
  std::vector<std::string> command;
  int exit_code = -1;   // -1 while running or when the command never ran
  int term_signal = 0;  // the signal that ended the command, 0 if it exited
  std::int64_t start_time_ms = 0;
  std::int64_t end_time_ms = 0;
  std::int64_t heartbeat_ms = 0;
  std::int64_t flush_interval_ms = 0;  // how often it renews heartbeat_ms
  // RUNNING, but its process is gone or silent (`kill -9` of `trainscope
  // run`, the OOM killer): its command may well go on, writing its output
  // into the log files, and its ranks tell how the run goes.
  bool lost = false;
  // Lost with no rank naming it to tell how its command went: counted as a
  // crash (the run FAILED), as a rank that vanished is.
  bool crashed = false;
  std::string id() const { return host + ":" + std::to_string(pid); }
};

// Rows read from a byte offset on, and where the next read starts.
template <typename Row>
struct Chunk {
  std::vector<Row> rows;
  std::uint64_t next_offset = 0;
  bool truncated = false;  // an incomplete last line was left for later
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_RUN_RECORD_HPP_
