// `trainscope sweep --slurm`: the whole plan as one Slurm job array.
//
// SlurmSweep submits the jobs that are not FINISHED (FAILED ones only with
// retry_failed) as one `sbatch --array` job whose array indices are the
// jobs' indices in the plan (`--array=0-5%K`, or `2,4-5` on a resume). Each
// array task runs `trainscope sweep --slurm-task <sweep-dir>/slurm/submit-N.json`
// (run_slurm_task): the job of its index, as a trainscope run (launch()) in
// <sweep-dir>/runs/ on the shared filesystem, tagged with Slurm's job id and
// array index. The submitting process follows the array with squeue (states
// of every task), the runs' own status in the run store (how a job ended)
// and scontrol (why a task that left no run ended) -- no sacct, which needs
// Slurm's accounting daemon. sweep.json is the same as a local sweep's and
// is written after every change; Ctrl-C/SIGTERM (SweepOptions::stop) scancel
// the array (its runs end KILLED) and leave the sweep resumable. A resumed
// sweep first follows the tasks of its arrays that Slurm still lists (a
// submitter killed with -9 races nothing), then submits what is left.
//
// Every Slurm command goes through SlurmApi, so the follow and resubmit
// logic runs against a fake in the unit tests.
#ifndef TRAINSCOPE_SWEEP_SLURM_HPP_
#define TRAINSCOPE_SWEEP_SLURM_HPP_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/launch/launch.hpp"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {

// How an array task that left the queue ended, as scontrol tells it.
struct SlurmTaskEnd {
  std::string state;  // COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...
  int exit_code = 0;  // of the batch script; 128 + N for signal N
  int restarts = 0;   // requeues (the task's run id depends on it)
};

// The Slurm commands a sweep uses.
class SlurmApi {
 public:
  virtual ~SlurmApi() = default;
  // sbatch --parsable <args>: the new job's id.
  virtual absl::StatusOr<std::string> submit(const std::vector<std::string>& args) = 0;
  // squeue: the state of every array task of `job_id` that Slurm still
  // knows, by index (PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, ...);
  // none once the job is gone.
  virtual absl::StatusOr<std::map<int, std::string>> queue(const std::string& job_id) = 0;
  // scontrol show job <job_id>_<index>; nullopt once Slurm forgot the task.
  virtual absl::StatusOr<std::optional<SlurmTaskEnd>> task_end(const std::string& job_id,
                                                               int index) = 0;
  // scancel <job_id>: every task of the array.
  virtual absl::Status cancel(const std::string& job_id) = 0;
};

// The real commands (sbatch, squeue, scontrol, scancel on PATH; SLURM_CONF
// and the rest of the environment as this process has them).
std::unique_ptr<SlurmApi> slurm_commands();

struct SlurmOptions {
  std::string partition;                // --partition; empty: the cluster's default
  int gpus_per_job = 0;                 // --gres=gpu:N
  int cpus_per_job = 1;                 // --cpus-per-task
  std::string time;                     // --time (Slurm's formats); empty: the partition's limit
  int array_parallel = 0;               // %K: at most K tasks at once; 0: as Slurm allows
  std::vector<std::string> extra_args;  // more sbatch arguments, before the script
  // The trainscope executable the tasks run (it must be reachable from the
  // nodes); empty: this process's executable.
  std::string trainscope;
  absl::Duration poll_interval = absl::Seconds(1);
  // After scancel, how long to wait for the tasks to leave the queue.
  absl::Duration cancel_grace = absl::Seconds(60);
  std::shared_ptr<SlurmApi> api;  // default: slurm_commands()
};

class SlurmSweep {
 public:
  // Opens (or resumes) the sweep in options.dir, as Scheduler::Open does
  // (lock, sweep.json, plan merge), and looks up the arrays of earlier
  // submissions that Slurm still lists. Used from `options`: dir,
  // retries, max_failures, retry_failed, progress, stop, sample_hardware,
  // sample_interval, record_environment, input (radT's CSV written back). A plan that needs one
  // machine (collocated radT rows, pinned devices, MPS or MIG) is an error.
  static absl::StatusOr<std::unique_ptr<SlurmSweep>> Open(Plan plan, SweepOptions options,
                                                          SlurmOptions slurm);
  ~SlurmSweep();
  SlurmSweep(const SlurmSweep&) = delete;
  SlurmSweep& operator=(const SlurmSweep&) = delete;

  // Submits and follows until every job ended or the sweep stopped (then
  // the array is cancelled and followed until its tasks are gone).
  absl::StatusOr<SweepResult> run();

 private:
  struct State;
  explicit SlurmSweep(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// In an array task: runs the job whose plan index is SLURM_ARRAY_TASK_ID,
// as stored in `submit_file` (written by SlurmSweep), and returns how it
// ended. Its run is <sweep-dir>/runs/<run id of (array job, index, restarts)>, tagged
// slurm.job_id (SLURM_ARRAY_JOB_ID), slurm.array_index and slurm.task_job_id
// (SLURM_JOB_ID). SIGTERM (scancel) reaches the job; its run ends KILLED.
absl::StatusOr<LaunchResult> run_slurm_task(const std::string& submit_file);

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_SLURM_HPP_
