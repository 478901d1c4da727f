// A sweep directory as the rooms above sweep read it (report's study pages):
// the sweep's name and every job's status, params and run, from the
// sweep.json the local scheduler and the Slurm sweep keep (scheduler.hpp).
// One reader of that file: the same parser the scheduler resumes with.
#ifndef TRAINSCOPE_SWEEP_SWEEP_STATE_HPP_
#define TRAINSCOPE_SWEEP_SWEEP_STATE_HPP_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {

struct StoredJob {
  std::string id;
  JobStatus status = JobStatus::kQueued;
  std::vector<std::pair<std::string, std::string>> params;  // in the input's order
  int attempts = 0;
  int exit_code = -1;  // of the last attempt; -1: none ended
  std::string run_id;  // of the last attempt; empty: never started
  // The last attempt's run directory where a run is: the recorded path when
  // it holds one (run.json), else <dir>/runs/<run_id> when that does (a
  // sweep copied off a cluster, or started from another working directory);
  // empty when neither does.
  std::string run_dir;
};

struct StoredSweep {
  std::string name;
  // The plan's jobs in its order, then those a later plan dropped after they started.
  std::vector<StoredJob> jobs;
};

// Whether `dir` holds a sweep (a sweep.json).
bool is_sweep_dir(const std::string& dir);

// Errors name <dir>/sweep.json: NotFound when there is none; DataLoss when it
// is corrupt, FailedPrecondition when another version of trainscope wrote it.
absl::StatusOr<StoredSweep> read_sweep_state(const std::string& dir);

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_SWEEP_STATE_HPP_
