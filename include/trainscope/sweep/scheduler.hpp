// The local scheduler of `trainscope sweep`: runs a Plan's jobs on this
// machine's slots, each job one launch() (a trainscope run under
// <dir>/runs/), and keeps the sweep resumable.
//
// <dir>/sweep.json holds the plan and every job's status, attempts and run,
// replaced atomically after every change, so a scheduler killed at any moment
// (even with -9) loses no finished job and duplicates none: a resumed sweep
// never reruns FINISHED jobs, reruns the jobs that were RUNNING when it died
// (their runs are crashed in the run store) and those stopped (KILLED), and
// FAILED jobs only with retry_failed. Jobs die with their scheduler
// (LaunchOptions::die_with_parent). <dir>/results.csv has one row per ended
// job (state_file.hpp: results_csv lists its columns). <dir>/sweep.lock keeps
// a second scheduler out of the same sweep, and a plan that is another sweep
// than the one the directory holds (another input, grid or command) is
// refused before anything runs.
#ifndef TRAINSCOPE_SWEEP_SCHEDULER_HPP_
#define TRAINSCOPE_SWEEP_SCHEDULER_HPP_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/hardware/hardware_source.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/sweep/gpu_tools.hpp"
#include "trainscope/sweep/plan.hpp"

namespace trainscope::sweep {

// Where one job runs: its GPUs (CUDA_VISIBLE_DEVICES), none for a CPU slot.
// A stand-in is a CPU slot that plays GPU devices[0] (the --slots test
// mode): jobs that pin devices (radT's Devices) are placed by it (device d on
// a slot of stand-in d; a device past the last is an error before anything
// runs), but the job gets no CUDA_VISIBLE_DEVICES and no collocation (MPS,
// MIG) is set up. On GPU slots and stand-ins alike, the jobs of one group
// (radT's workload) that pin the same device share one slot of it, as radT
// runs them together on that GPU; jobs pinning nothing take a slot each.
struct Slot {
  std::vector<int> devices;
  bool stand_in = false;
};

// Slot discovery. `n` CPU slots (n >= 1).
absl::StatusOr<std::vector<Slot>> cpu_slots(int n);
// The --slots test mode: `n` CPU slots standing in for GPUs 0..n-1,
// `per_slot` jobs each (as --per-gpu).
absl::StatusOr<std::vector<Slot>> stand_in_slots(int n, int per_slot = 1);
// `per_gpu` slots on each of `devices` (physical indices, e.g. from NVML),
// restricted to those CUDA_VISIBLE_DEVICES lists when `restrict_to_visible`
// and it is set to indices (UUIDs keep the list as it is).
absl::StatusOr<std::vector<Slot>> gpu_slots(const std::vector<int>& devices, int per_gpu,
                                            bool restrict_to_visible = true);

// What `trainscope sweep` asks for: --slots N CPU slots, or GPU slots on
// --devices (physical indices), per_gpu jobs each.
struct SlotRequest {
  int cpu_slots = 0;         // > 0: this many stand-in CPU slots (stand_in_slots), no GPU
  std::vector<int> devices;  // empty: every GPU NVML lists (CUDA_VISIBLE_DEVICES applies)
  int per_gpu = 1;
};
// The slots of a request, GPUs discovered through NVML: each --devices index
// must exist (else an error naming it and the GPUs there are); with no GPU
// (no driver, none visible) and no --devices, one CPU slot, and `note` says
// so and why. `note` (optional) also gets what was found ("2 GPUs: 0, 1").
absl::StatusOr<std::vector<Slot>> choose_slots(const SlotRequest& request,
                                               std::string* note = nullptr);

// QUEUED: waits (also again after a failed attempt with retries left);
// KILLED: stopped by the caller (runs again when the sweep resumes).
enum class JobStatus { kQueued, kRunning, kFinished, kFailed, kKilled };
std::string_view job_status_name(JobStatus status) noexcept;  // "QUEUED", ...
absl::StatusOr<JobStatus> parse_job_status(std::string_view name);

struct JobRecord {
  Job job;
  JobStatus status = JobStatus::kQueued;
  int attempts = 0;  // launches started, the running one included
  std::string run_id;
  std::string run_dir;  // <dir>/runs/<run_id>, of the last attempt
  int exit_code = -1;
  bool timed_out = false;     // the last attempt ran past SweepOptions::timeout
  std::int64_t start_ms = 0;  // Unix ms, of the last attempt
  std::int64_t end_ms = 0;
  std::vector<int> devices;  // CUDA_VISIBLE_DEVICES of the last attempt
  std::string error;         // why the last attempt failed
  // Means of the job's BATCH and EPOCH regions (seconds; NaN: not timed).
  double batch_mean_s = stats::kNaN;
  double epoch_mean_s = stats::kNaN;
  // The measured step rate: the BATCH regions (CPU) of the lowest rank that
  // timed any, counted, over the wall time from the first one's start to the
  // last one's end, so that the time between steps (data loading, logging,
  // evaluation) counts; NaN: no BATCH region in the run's rows.
  double steps_per_s = stats::kNaN;
  // The last value of each metric the job logged (log_metric; not the
  // hardware's system/... readings): per rank the last row of its metrics
  // file with that key, then the mean over the ranks that logged the key (one
  // rank logging it: its value).
  std::map<std::string, double> metrics;
  // Under --slurm (slurm.hpp): the array job the last attempt was submitted
  // in and the job's index in it (empty / -1: not submitted to Slurm).
  std::string slurm_job_id;
  int slurm_index = -1;
};

struct Progress {
  int total = 0;
  int done = 0;  // FINISHED
  int running = 0;
  int failed = 0;  // FAILED (for good)
  int queued = 0;  // QUEUED or KILLED
  // From the mean time of the finished jobs; InfiniteDuration() before any finished.
  absl::Duration eta = absl::InfiniteDuration();
  std::string event;  // what just happened ("started lr=0.1", "finished ...")
};
// "12/40 done, 2 running, 1 failed, 25 queued, ETA 3m20s"
std::string format_progress(const Progress& progress);
// A progress callback printing to `out`: one line rewritten in place when
// `terminal` (a live line), else a plain line per event.
std::function<void(const Progress&)> progress_printer(std::FILE* out, bool terminal);

struct SweepOptions {
  std::string dir;                                    // the sweep directory (created)
  std::vector<Slot> slots;                            // empty: one CPU slot
  absl::Duration timeout = absl::InfiniteDuration();  // per attempt; then SIGKILL, a failure
  int retries = 0;                                    // more attempts for a failed job
  int max_failures = 0;       // failed attempts after which no job starts; 0: no limit
  bool retry_failed = false;  // on resume, run FAILED jobs again
  // Called after every change, from the scheduler's threads, one call at a
  // time (it must not call back into the Scheduler).
  std::function<void(const Progress&)> progress;
  // Stop (Ctrl-C / SIGTERM: request() is async-signal-safe): running jobs get
  // the signal and end KILLED, no job starts, run() returns; the sweep resumes later.
  std::shared_ptr<LaunchCancel> stop;
  bool sample_hardware = true;
  absl::Duration sample_interval = absl::Seconds(1);
  std::function<std::vector<std::unique_ptr<HardwareSource>>()> make_sources;
  bool record_environment = true;
  bool tee = false;  // copy the jobs' output to this process's stdout/stderr
  // radT's Collocation (MPS, MIG profiles) on GPU slots goes through these
  // tools (gpu_tools.hpp); default: system_gpu_tools(). Not used on CPU slots.
  std::shared_ptr<GpuTools> gpu_tools;
  // The file the plan was read from (read_plan(input, input_program),
  // inputs.hpp); empty: none (a grid, a resume from sweep.json). While run()
  // runs, the local scheduler reads it again whenever its modification time
  // changes (looked at five times a second) and merges the new plan in as
  // update() does; an input that no longer reads keeps the plan, with a
  // warning naming the file. radT's CSV (.csv) gets the Status and Run of
  // each job's row written back as the job ends (FINISHED, FAILED, KILLED;
  // one atomic rewrite, which the watch does not read as an edit), and of
  // every row that started when run() returns, also with an error (the
  // Slurm sweep writes them back too; it does not watch the input).
  std::string input;
  std::vector<std::string> input_program;
};

struct SweepResult {
  // The plan's jobs in its order, then those a later plan dropped after they started.
  std::vector<JobRecord> jobs;
  int finished = 0;
  int failed = 0;
  int unfinished = 0;    // queued or killed: run them by resuming
  bool stopped = false;  // SweepOptions::stop was requested
  bool max_failures_reached = false;
};

class Scheduler {
 public:
  // Creates or resumes the sweep in options.dir (its sweep.json), locks it
  // and merges `plan` in as update() does. Errors: a sweep locked by another
  // scheduler, a corrupt sweep.json, another sweep in the directory (another
  // input file, grid or command: the message names both commands), a group
  // larger than the slots, a job whose run is still running.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Open(Plan plan, SweepOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // A new plan (the input re-read): its new jobs are queued, queued jobs it
  // no longer has are dropped; running and ended jobs are kept as they are.
  // Thread-safe, also while run() runs.
  absl::Status update(Plan plan);
  // Runs until no job is left to start and none runs, or until stopped.
  absl::StatusOr<SweepResult> run();
  Progress progress() const;

 private:
  struct State;
  explicit Scheduler(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The plan stored in a sweep directory's sweep.json, every job in its order
// (queued ones included): `trainscope sweep --resume DIR` without the input.
absl::StatusOr<Plan> saved_plan(const std::string& dir);

// Open(plan, options) and run().
absl::StatusOr<SweepResult> run_sweep(const Plan& plan, SweepOptions options);

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_SCHEDULER_HPP_
