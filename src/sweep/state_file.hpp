// The sweep's files (internal): sweep.json (the plan and every job's state,
// read back on resume) and results.csv (one row per ended job).
#ifndef TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_
#define TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep::detail {

inline constexpr char kStateFileName[] = "sweep.json";
inline constexpr char kResultsFileName[] = "results.csv";
inline constexpr char kRunsDirName[] = "runs";
// results.csv's column of a logged metric: "metric.loss".
inline constexpr char kMetricColumnPrefix[] = "metric.";

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

// A job as sweep.json stores it; job_from_json throws nlohmann::json::exception
// on a malformed entry.
nlohmann::json job_to_json(const Job& job);
Job job_from_json(const nlohmann::json& in);

// The plan of a stored sweep: every job of `state` in its order, so that
// merging it back (merge_plan) keeps the queued jobs (`trainscope sweep
// --resume DIR` without the input).
Plan plan_of(const SweepState& state);

// Merges a new plan into `state` (live update, resume): its new jobs are
// queued, jobs that never started take its definition, queued jobs that never
// started and are not in it are dropped; started and ended jobs are kept.
struct MergeCounts {
  int added = 0;
  int dropped = 0;
};
MergeCounts merge_plan(SweepState* state, Plan plan);

// Whether `plan` may continue the sweep stored in `dir` (`stored`, as read
// from its sweep.json): FailedPrecondition, before anything runs, when the
// stored sweep is another one (another name: another input file or grid), or
// when a job recorded under one command has another in `plan` (jobs match by
// id, which comes from the params, so a changed program would find them
// done), unless the job runs afresh with the new one: never started, or
// FAILED with `retry_failed`. The message names both commands and the ways
// out (another --dir; --resume DIR alone continues the recorded sweep). A
// stored sweep without jobs takes any plan.
absl::Status check_same_sweep(const SweepState& stored, const Plan& plan, const std::string& dir,
                              bool retry_failed = false);

// Counts of `state`'s jobs; the ETA spreads the queued and running jobs over
// `width` parallel slots at the mean time of the finished ones.
Progress progress_of(const SweepState& state, int width, std::string event);

// Locks `dir`'s sweep.lock (created) so that one scheduler at a time runs
// the sweep: its descriptor (close it to unlock), FailedPrecondition when
// another process holds it.
absl::StatusOr<int> lock_sweep_dir(const std::string& dir);

// Writes sweep.json and results.csv of `state` into `dir`, each atomically.
absl::Status save_sweep(const std::string& dir, const SweepState& state);

// The rows of results.csv for the jobs that ended (FINISHED, FAILED, KILLED):
// job, its params (the union of all jobs' keys, in first-seen order), status,
// exit_code, attempts, duration_s, run_id, run_dir (relative to the sweep
// directory), batch_mean_s, epoch_mean_s, throughput_batches_per_s (the
// measured rate, JobRecord::steps_per_s), then metric.<key> per metric any job
// logged (sorted by key; JobRecord::metrics). Empty fields: not measured.
std::string results_csv(const std::vector<JobRecord>& jobs);

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_STATE_FILE_HPP_
