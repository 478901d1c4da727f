// The sweep's files (internal): sweep.json (the plan and every job's state,
// read back on resume) and results.csv (one row per ended job).
#ifndef TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_
#define TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep::detail {

inline constexpr char kStateFileName[] = "sweep.json";
inline constexpr char kResultsFileName[] = "results.csv";
inline constexpr char kRunsDirName[] = "runs";

struct SweepState {
  std::string name;
  int max_parallel = 0;
  bool allow_cpu = true;
  // The plan's jobs in its order, then jobs a later plan dropped after they started.
  std::vector<JobRecord> jobs;
};

std::string state_to_json(const SweepState& state);
// Errors name `path` and what is wrong in it.
absl::StatusOr<SweepState> state_from_json(const std::string& text, const std::string& path);

// The rows of results.csv for the jobs that ended (FINISHED, FAILED, KILLED):
// job, its params (the union of all jobs' keys, in first-seen order), status,
// exit_code, attempts, duration_s, run_id, run_dir (relative to the sweep
// directory), batch_mean_s, epoch_mean_s, throughput_batches_per_s.
std::string results_csv(const std::vector<JobRecord>& jobs);

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_
