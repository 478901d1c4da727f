// How one job of a sweep becomes one launch() (internal): its argv (the
// command, then `--key value` per param), its run (id, name, params, tags)
// and what radT's Listeners ask to record. The local scheduler and each
// Slurm array task (slurm.cpp) build their launches here.
#ifndef TRAINSCOPE_SRC_SWEEP_JOB_LAUNCH_HPP_
#define TRAINSCOPE_SRC_SWEEP_JOB_LAUNCH_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/hardware/hardware_source.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep::detail {

// The environment variable naming a job's config file (Furcate's JSON configs).
inline constexpr char kConfigEnv[] = "TRAINSCOPE_SWEEP_CONFIG";

// radT's Listeners as trainscope records them: the hardware sources to
// sample (HardwareSource::name(): kNvmlSource, kDcgmSource, kHostCpuSource, ...) and the
// profiler to run the job under.
//   smi -> nvml; dcgmi -> nvml, dcgm; top -> host.cpu, host.memory, host.proc;
//   iostat -> host.disk; free -> host.memory; ps -> host.cpu, host.proc;
//   nsys, nsysraw -> Profiler::kNsys; ncu, ncuraw -> Profiler::kNcu;
//   macmon (macOS only) -> nothing, with a warning.
// No listener: every source, no profiler. Errors: nsys with ncu, an unknown
// listener (naming `source`).
struct ListenerPlan {
  bool all_sources = true;
  std::set<std::string> sources;
  Profiler profiler = Profiler::kNone;
};
absl::StatusOr<ListenerPlan> plan_listeners(const std::vector<std::string>& listeners,
                                            const std::string& source);

// What every launch of a sweep shares.
struct JobLaunchSettings {
  std::string sweep_name;
  std::string runs_dir;  // the run goes to <runs_dir>/<run_id>
  bool sample_hardware = true;
  absl::Duration sample_interval = absl::Seconds(1);
  // Overrides the sources (tests); else host_sources() + gpu_sources(),
  // narrowed to the job's listeners.
  std::function<std::vector<std::unique_ptr<HardwareSource>>()> make_sources;
  bool record_environment = true;
  bool tee = false;
};

// The launch of `job` as run `run_id`: argv = the job's command, then
// `--key value` per param (also the command its run records: nothing else);
// environment = kConfigEnv=<config_path> when config_path is not empty, and
// `extra_env` (MPS's directories, a MIG instance's CUDA_VISIBLE_DEVICES),
// which reach the job only (LaunchOptions::environment); run params = the
// job's params, tags trainscope.sweep / trainscope.sweep.job plus
// `extra_tags`, profiler and sources from its listeners. The caller sets
// devices, cancel, signals.
absl::StatusOr<LaunchOptions> job_launch_options(
    const Job& job, const std::string& run_id, const std::string& config_path,
    const JobLaunchSettings& settings, const std::map<std::string, std::string>& extra_tags = {},
    const std::map<std::string, std::string>& extra_env = {});

// Writes the job's config_json to <sweep_dir>/configs/<id>.json (atomically)
// and returns that path; "" when the job has no config.
absl::StatusOr<std::string> write_job_config(const std::string& sweep_dir, const Job& job);

// Whether the job's program can start: argv[0] found on PATH (or, with a
// '/', an executable file), and a script a Python interpreter is to run
// (`python train.py`, radT's File) exists. The error names the job's source
// (file and line or key) and the missing file.
absl::Status check_command(const Job& job);

// What every scheduler checks of every job before anything runs: an id, unique
// in the plan, a command that can start (check_command) and known listeners.
absl::Status check_jobs(const Plan& plan);

// The measured step rate of one rank: its BATCH regions counted over the
// wall time from the first one's start to the last one's end (the time
// between steps counts). Pure: add() the rows in any order.
class StepSpan {
 public:
  void add(std::int64_t start_ns, std::int64_t duration_ns);
  std::int64_t steps() const { return steps_; }
  // Steps per second; NaN without a step or a span of zero.
  double rate() const;

 private:
  std::int64_t steps_ = 0;
  std::int64_t first_start_ns_ = 0;
  std::int64_t last_end_ns_ = 0;
};

// What results.csv shows of a job's run, into `record` (those of an earlier
// attempt replaced; fields it cannot measure NaN / empty): batch_mean_s and epoch_mean_s (the means
// of the BATCH and EPOCH regions, CPU, of the first rank whose summary has them), steps_per_s
// (StepSpan over the CPU BATCH rows of the lowest rank that has any) and metrics
// (JobRecord::metrics). Reads through RunReader; a damaged file is a warning naming it. Called
// outside the scheduler's lock: it reads every region row of that rank.
void read_job_results(const std::string& run_dir, JobRecord* record);

// What a scheduler returns when it is done: the jobs, counted by status.
SweepResult sweep_result(const std::vector<JobRecord>& jobs, bool stopped,
                         bool max_failures_reached);

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_JOB_LAUNCH_HPP_
