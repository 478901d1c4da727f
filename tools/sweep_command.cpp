// `trainscope sweep [INPUT] [--grid k=v1,v2]... [options] [-- program...]`:
// runs a sweep of trainings, each a trainscope run, on the machine's slots
// (trainscope::sweep, include/trainscope/sweep/).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/sweep/inputs.hpp"
#include "trainscope/sweep/scheduler.hpp"
#include "trainscope/sweep/slurm.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace sweep_cmd {

constexpr char kSweepDescription[] =
    "Runs every configuration of INPUT (radT's experiment CSV, a radT or W&B YAML\n"
    "sweep, Furcate's JSON config) or of --grid, each as a trainscope run, on all\n"
    "free slots: one per GPU (--per-gpu to collocate), or --slots CPU slots. The\n"
    "sweep directory holds the plan's state (sweep.json), results.csv and every\n"
    "job's run under runs/; the same command again (or --resume DIR) continues it:\n"
    "finished jobs never run again, jobs cut off by a crash run again, failed ones\n"
    "with --retry-failed. The default directory is named after INPUT's file name,\n"
    "or for --grid after its keys and a hash of the grid and the program; a\n"
    "directory that holds another sweep (another input, grid or program) is\n"
    "refused. Each configuration reaches the program as `--key value`\n"
    "arguments (and, for JSON configs, as a file named by TRAINSCOPE_SWEEP_CONFIG).\n"
    "\n"
    "examples:\n"
    "  trainscope sweep --grid batch_size=32,64,128 --grid lr=0.1,0.01 -- python train.py\n"
    "  trainscope sweep config.json --slots 2 -- python train.py\n"
    "  trainscope sweep experiment.csv\n"
    "  trainscope sweep --grid lr=0.1,0.01 --slurm --gpus-per-job 1 -- python train.py\n"
    "  trainscope sweep --resume trainscope-sweeps/grid-batch_size-lr-a328c9f1\n";

constexpr char kSweepFooter[] =
    "Ctrl-C/SIGTERM stop every job (their runs end KILLED) and leave the sweep\n"
    "resumable. Editing INPUT while the sweep runs queues new configurations and\n"
    "drops queued ones that are gone. Without --devices or --slots the jobs run\n"
    "on every GPU NVML lists (CUDA_VISIBLE_DEVICES applies), or on one CPU slot\n"
    "when there is none.\n"
    "\n"
    "--slurm submits the jobs as one Slurm job array (sbatch --array; array index =\n"
    "the job's index in the plan), each task one trainscope run in DIR/runs (DIR\n"
    "must be on a filesystem the nodes share), and follows it with squeue and\n"
    "scontrol; Ctrl-C scancels it. Resuming submits only what did not finish.\n"
    "\n"
    "Exit status: 0 when every job finished, 1 when one failed or the sweep\n"
    "stopped, 2 bad usage.\n";

struct SweepArgs {
  std::vector<std::string> words;  // [INPUT] and, after `--`, the program
  std::vector<std::string> grid;
  int repeat = 1;
  std::string dir;
  std::optional<std::string> resume;
  int slots = 0;
  std::vector<int> devices;
  int per_gpu = 1;
  double timeout_s = 0;
  int retries = 0;
  int max_failures = 0;
  bool retry_failed = false;
  bool dry_run = false;
  bool no_sample = false;
  bool slurm = false;
  sweep::SlurmOptions slurm_options;
  std::optional<std::string> slurm_task;  // internal: what each array task runs
};

void add_sweep_options(CommandLine* line, SweepArgs* a) {
  line->add_value("--grid", "KEY=V1,V2", "a parameter and its values (repeatable)",
                  [a](const std::string& v) {
                    if (v.find('=') == std::string::npos) {
                      bad_value("--grid needs KEY=V1,V2,..., got '" + v + "'");
                    }
                    a->grid.push_back(v);
                  });
  line->add_value("--repeat", "N", "run every configuration N times (default 1)",
                  [a](const std::string& v) { a->repeat = count("--repeat", v, 1); });
  line->add_value("--dir", "DIR", "the sweep directory (default ./trainscope-sweeps/<name>)",
                  &a->dir);
  line->add_value("--resume", "DIR", "continue the sweep in DIR (its stored plan)", &a->resume);
  line->add_value("--slots", "N",
                  "N CPU slots, no GPU; they stand in for GPUs 0..N-1, so radT's\n"
                  "Devices place jobs on them (--per-gpu: jobs per slot)",
                  [a](const std::string& v) { a->slots = count("--slots", v, 1); });
  line->add_value("--devices", "0,1", "only these GPUs (default: CUDA_VISIBLE_DEVICES)",
                  [a](const std::string& v) {
                    for (int device : index_list("--devices", v)) a->devices.push_back(device);
                  });
  line->add_value("--per-gpu", "N", "jobs sharing one GPU (default 1)",
                  [a](const std::string& v) { a->per_gpu = count("--per-gpu", v, 1); });
  line->add_value("--timeout", "SECONDS", "kill a job after this long (a failure)",
                  [a](const std::string& v) { a->timeout_s = seconds("--timeout", v); });
  line->add_value("--retries", "N", "run a failed job up to N more times",
                  [a](const std::string& v) { a->retries = count("--retries", v, 0); });
  line->add_value("--max-failures", "N", "start no job after N failures",
                  [a](const std::string& v) { a->max_failures = count("--max-failures", v, 1); });
  line->add_flag("--retry-failed", "on resume, run FAILED jobs again", &a->retry_failed);
  line->add_flag("--dry-run", "print the expanded plan and exit", &a->dry_run);
  line->add_flag("--no-sample", "do not sample the hardware of the jobs", &a->no_sample);
  line->group("Slurm");
  line->add_flag("--slurm", "submit the plan as one Slurm job array and follow it", &a->slurm);
  line->add_value("--partition", "P", "the partition of the array", &a->slurm_options.partition);
  line->add_value(
      "--gpus-per-job", "N", "GPUs of each task (--gres=gpu:N)",
      [a](const std::string& v) { a->slurm_options.gpus_per_job = count("--gpus-per-job", v, 0); });
  line->add_value(
      "--cpus-per-job", "N", "CPUs of each task (default 1)",
      [a](const std::string& v) { a->slurm_options.cpus_per_job = count("--cpus-per-job", v, 1); });
  line->add_value("--time", "T", "time limit of each task (Slurm's format, e.g. 2:00:00)",
                  &a->slurm_options.time);
  line->add_value("--array-parallel", "K", "at most K tasks at once (--array=...%K)",
                  [a](const std::string& v) {
                    a->slurm_options.array_parallel = count("--array-parallel", v, 1);
                  });
  line->add_value("--sbatch", "ARG", "one more sbatch argument (repeatable)",
                  [a](const std::string& v) { a->slurm_options.extra_args.push_back(v); });
  line->add_value("--slurm-task", "FILE",
                  "(internal) run this array task's job of a submission file", &a->slurm_task);
  line->add_positionals("input-and-program", &a->words, false);
}

// The program is every word after `--`; INPUT the positional before it, if any
// (CLI11 gives the positionals and the words after `--` in one list).
void split_words(const std::vector<std::string>& args, const SweepArgs& a, std::string* input,
                 std::vector<std::string>* program) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes != args.end()) program->assign(dashes + 1, args.end());
  if (a.words.size() > program->size()) *input = a.words.front();
}

void print_plan(const sweep::Plan& plan) {
  std::printf("sweep %s: %zu job(s)\n", plan.name.c_str(), plan.jobs.size());
  for (const sweep::Job& job : plan.jobs) {
    std::string params;
    for (const auto& [k, v] : job.params) params += fmt::format(" --{} {}", k, v);
    std::string command;
    for (const std::string& word : job.command) command += (command.empty() ? "" : " ") + word;
    std::printf("  %-28s %s%s\n", job.id.c_str(), command.c_str(), params.c_str());
  }
}

std::shared_ptr<LaunchCancel> g_stop;
extern "C" void on_stop(int signal_number) {
  if (g_stop) g_stop->request(signal_number);
}

void print_summary(const sweep::SweepResult& result, const std::string& dir) {
  std::fprintf(stderr, "trainscope sweep: %d finished, %d failed, %d not run; %s/results.csv\n",
               result.finished, result.failed, result.unfinished, dir.c_str());
}

int exit_code_of(const sweep::SweepResult& result) {
  return result.failed == 0 && result.unfinished == 0 && !result.stopped ? kExitOk : kExitFailed;
}

void print_error(const absl::Status& status) {
  std::fprintf(stderr, "trainscope sweep: %s\n", std::string(status.message()).c_str());
}

int fail(const absl::Status& status) {
  print_error(status);
  return kExitFailed;
}

// An array task (`sbatch` runs `trainscope sweep --slurm-task FILE`): the
// exit code of its job, as `trainscope run` would return it. A job whose
// command could not start still ran as a (FAILED) run: its spawn error is
// printed (into the task's Slurm output) and its exit code, 127 or 126, returned.
int slurm_task(const std::string& submit_file) {
  absl::StatusOr<LaunchResult> result = sweep::run_slurm_task(submit_file);
  if (!result.ok()) return fail(result.status());
  if (!result->spawn_error.ok()) print_error(result->spawn_error);
  std::fprintf(stderr, "trainscope sweep: task ended with exit code %d, run %s %s\n",
               result->exit_code, result->run_dir.c_str(),
               std::string(run_status_name(result->status)).c_str());
  return result->exit_code;
}

int run_on_slurm(const sweep::Plan& plan, sweep::SweepOptions options, sweep::SlurmOptions slurm) {
  const std::string dir = options.dir;
  absl::StatusOr<std::unique_ptr<sweep::SlurmSweep>> sweep =
      sweep::SlurmSweep::Open(plan, std::move(options), std::move(slurm));
  if (!sweep.ok()) return fail(sweep.status());
  absl::StatusOr<sweep::SweepResult> result = (*sweep)->run();
  if (!result.ok()) return fail(result.status());
  print_summary(*result, dir);
  return exit_code_of(*result);
}

}  // namespace sweep_cmd

int sweep_command(const std::vector<std::string>& args) {
  using namespace sweep_cmd;  // NOLINT(build/namespaces): this file's own names
  SweepArgs a;
  CommandLine line({"sweep",
                    "trainscope sweep [INPUT] [--grid K=V1,V2]... [options] [-- program...]",
                    kSweepDescription, kSweepFooter});
  add_sweep_options(&line, &a);
  if (std::optional<int> exit_code = line.parse(args)) return *exit_code;
  if (a.slurm_task) return slurm_task(*a.slurm_task);
  std::string input;
  std::vector<std::string> program;
  split_words(args, a, &input, &program);
  if (a.resume && a.dir.empty()) a.dir = *a.resume;
  if (a.slurm && (a.slots > 0 || !a.devices.empty() || a.per_gpu != 1 || a.timeout_s > 0)) {
    return line.usage_error(
        "--slots, --devices, --per-gpu and --timeout are for local sweeps: under --slurm, "
        "Slurm places the jobs (--gpus-per-job, --cpus-per-job, --time)");
  }

  // The plan: the input, the grid, or (--resume DIR alone) the one the sweep stored.
  absl::StatusOr<sweep::Plan> plan =
      !input.empty()    ? sweep::read_plan(input, program)
      : !a.grid.empty() ? sweep::grid_plan(a.grid, a.repeat, program)
      : a.resume        ? sweep::saved_plan(*a.resume)
                        : absl::StatusOr<sweep::Plan>(
                       absl::InvalidArgumentError("no INPUT and no --grid: nothing to sweep"));
  if (!plan.ok()) return line.usage_error(std::string(plan.status().message()));
  if (a.dry_run) {
    print_plan(*plan);
    return kExitOk;
  }
  if (a.dir.empty()) a.dir = "trainscope-sweeps/" + (plan->name.empty() ? "sweep" : plan->name);
  std::fprintf(stderr, "trainscope sweep: %zu job(s) in %s\n", plan->jobs.size(), a.dir.c_str());

  sweep::SweepOptions options;
  options.dir = a.dir;
  options.retries = a.retries;
  options.max_failures = a.max_failures;
  options.retry_failed = a.retry_failed;
  options.sample_hardware = !a.no_sample;
  options.progress = sweep::progress_printer(stderr, ::isatty(STDERR_FILENO) != 0);
  // The input is watched (live update) and radT's CSV gets its rows' Status and Run back.
  options.input = input;
  options.input_program = program;
  g_stop = std::make_shared<LaunchCancel>();
  options.stop = g_stop;
  ::signal(SIGINT, on_stop);
  ::signal(SIGTERM, on_stop);
  if (a.slurm) return run_on_slurm(*plan, std::move(options), a.slurm_options);

  std::string note;
  absl::StatusOr<std::vector<sweep::Slot>> slots =
      sweep::choose_slots({a.slots, a.devices, a.per_gpu}, &note);
  if (!slots.ok()) return line.usage_error(std::string(slots.status().message()));
  std::fprintf(stderr, "trainscope sweep: %s\n", note.c_str());
  options.slots = *std::move(slots);
  if (plan->max_parallel > 0 && static_cast<int>(options.slots.size()) > plan->max_parallel) {
    options.slots.resize(static_cast<std::size_t>(plan->max_parallel));
  }
  if (a.timeout_s > 0) options.timeout = absl::Seconds(a.timeout_s);

  absl::StatusOr<sweep::SweepResult> result = sweep::run_sweep(*plan, std::move(options));
  if (!result.ok()) return fail(result.status());
  print_summary(*result, a.dir);
  return exit_code_of(*result);
}

}  // namespace trainscope::cli
