// What a run is made of, shared by the run store, its reader and every
// exporter: status, metadata, scalar metric points, the process's rank.
#ifndef TRAINSCOPE_RUN_RECORD_HPP_
#define TRAINSCOPE_RUN_RECORD_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

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

// A scalar the user logs (loss, accuracy), as MLflow's metric.
struct MetricPoint {
  std::string key;
  double value = 0.0;
  std::int64_t step = 0;
  std::int64_t timestamp_ms = 0;  // Unix milliseconds
  std::uint32_t rank = 0;
};

struct RunInfo {
  std::string id;          // 32 lowercase hex digits, as MLflow's
  std::string name;
  std::string experiment;  // experiment name (MLflow's MLFLOW_EXPERIMENT_NAME)
  std::int64_t start_time_ms = 0;
  std::int64_t end_time_ms = 0;  // 0 while running
  RunStatus status = RunStatus::kRunning;
  std::map<std::string, std::string> params;  // write-once, as MLflow's
  std::map<std::string, std::string> tags;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RECORD_HPP_
