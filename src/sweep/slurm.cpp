#include "trainscope/sweep/slurm.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.hpp"
#include "common/shell_quote.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "sweep/input_watch.hpp"
#include "sweep/job_launch.hpp"
#include "sweep/slurm_parsers.hpp"
#include "sweep/state_file.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/launch/run_tool.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSlurmDirName[] = "slurm";
constexpr int kSubmitFileVersion = 1;
constexpr auto kSlurmStopCheck = std::chrono::milliseconds(100);
// squeue failing this many polls in a row ends the sweep (it stays resumable).
constexpr int kMaxQueueErrors = 30;
constexpr absl::Duration kSlurmToolTimeout = absl::Seconds(60);

// Slurm's job states, as squeue and scontrol print them.
bool pending_state(std::string_view state) {
  return state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD" ||
         state == "REQUEUE_FED" || state == "RESV_DEL_HOLD" || state == "SPECIAL_EXIT";
}
bool running_state(std::string_view state) {
  return state == "RUNNING" || state == "CONFIGURING" || state == "COMPLETING" ||
         state == "SIGNALING" || state == "STAGE_OUT" || state == "SUSPENDED" ||
         state == "STOPPED" || state == "RESIZING";
}
bool active_state(std::string_view state) { return pending_state(state) || running_state(state); }

bool tracked(const JobRecord& record) {
  return !record.slurm_job_id.empty() &&
         (record.status == JobStatus::kQueued || record.status == JobStatus::kRunning);
}

// Back to the queue of jobs to submit (the task never ran, or will run again).
void unsubmit(JobRecord* record, bool count_attempt) {
  record->status = JobStatus::kQueued;
  if (!count_attempt) record->attempts = std::max(0, record->attempts - 1);
  record->slurm_job_id.clear();
  record->slurm_index = -1;
}

absl::Status check_slurm_plan(const Plan& plan) {
  if (absl::Status jobs = detail::check_jobs(plan); !jobs.ok()) return jobs;
  std::map<int, int> group_sizes;
  for (const Job& job : plan.jobs) {
    if (!job.devices.empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: job '{}' pins GPUs, which Slurm assigns under --slurm (use --gpus-per-job)",
          job.source, job.id));
    }
    if (job.collocation != "-" && !job.collocation.empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: job '{}' has Collocation '{}', which needs one machine: run it without --slurm",
          job.source, job.id, job.collocation));
    }
    if (job.group >= 0 && ++group_sizes[job.group] > 1) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: job '{}' is collocated with another (same Experiment and Workload): such jobs "
          "start together on one machine, which a Slurm array cannot promise; run it without "
          "--slurm",
          job.source, job.id));
    }
  }
  return absl::OkStatus();
}

// ---- The real commands ---------------------------------------------------------

class SlurmCommands : public SlurmApi {
 public:
  absl::StatusOr<std::string> submit(const std::vector<std::string>& args) override {
    std::vector<std::string> argv = {"sbatch", "--parsable"};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<trainscope::ToolOutput> done = run(std::move(argv));
    if (!done.ok()) return done.status();
    // --parsable: "<id>" or "<id>;<cluster>".
    std::string id(absl::StripAsciiWhitespace(done->out));
    id = id.substr(0, id.find(';'));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InternalError(fmt::format("sbatch printed no job id: '{}'", done->out));
    }
    return id;
  }

  absl::StatusOr<std::map<int, std::string>> queue(const std::string& job_id) override {
    absl::StatusOr<trainscope::ToolOutput> done =
        run({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job_id,
             "--format=%F|%K|%T"},
            /*allow_invalid_job=*/true);
    if (!done.ok()) return done.status();
    return detail::parse_squeue_tasks(done->out, job_id);
  }

  absl::StatusOr<std::optional<SlurmTaskEnd>> task_end(const std::string& job_id,
                                                       int index) override {
    absl::StatusOr<trainscope::ToolOutput> done =
        run({"scontrol", "show", "job", fmt::format("{}_{}", job_id, index)},
            /*allow_invalid_job=*/true);
    if (!done.ok()) return done.status();
    return detail::parse_scontrol_job(done->out);
  }

  absl::Status cancel(const std::string& job_id) override {
    return run({"scancel", job_id}).status();
  }

 private:
  // A failing command is an error naming it and what it printed; "Invalid
  // job id" (a job Slurm forgot) is an empty answer when allowed.
  static absl::StatusOr<trainscope::ToolOutput> run(std::vector<std::string> argv,
                                                    bool allow_invalid_job = false) {
    const std::string name = argv[0];
    std::string line;
    for (const std::string& word : argv) line += (line.empty() ? "" : " ") + word;
    absl::StatusOr<trainscope::ToolOutput> done =
        trainscope::run_tool(std::move(argv), kSlurmToolTimeout, /*own_group=*/true);
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          fmt::format("{} (is Slurm's client installed and SLURM_CONF set?)",
                                      std::string(done.status().message())));
    }
    if (done->exit_code != 0) {
      if (allow_invalid_job && done->err.find("Invalid job id") != std::string::npos) {
        done->out.clear();
        return done;
      }
      return absl::UnavailableError(fmt::format(
          "`{}` failed (exit code {}): {}", line, done->exit_code,
          std::string(absl::StripAsciiWhitespace(done->err.empty() ? done->out : done->err))));
    }
    return done;
  }
};

}  // namespace

std::unique_ptr<SlurmApi> slurm_commands() { return std::make_unique<SlurmCommands>(); }

namespace detail {

std::map<int, std::string> parse_squeue_tasks(std::string_view text, std::string_view job_id) {
  std::map<int, std::string> tasks;
  const absl::string_view all(text.data(), text.size());
  const absl::string_view wanted(job_id.data(), job_id.size());
  for (absl::string_view line : absl::StrSplit(all, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, '|');
    if (fields.size() != 3) continue;
    int index = 0;
    if (absl::StripAsciiWhitespace(fields[0]) != wanted ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[1]), &index) || index < 0) {
      continue;  // another job, or an unexpanded index range ("[5-9%2]")
    }
    tasks[index] = std::string(absl::StripAsciiWhitespace(fields[2]));
  }
  return tasks;
}

std::optional<SlurmTaskEnd> parse_scontrol_job(std::string_view text) {
  SlurmTaskEnd end;
  bool have_state = false;
  const absl::string_view all(text.data(), text.size());
  for (absl::string_view word : absl::StrSplit(all, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    const std::size_t equals = word.find('=');
    if (equals == absl::string_view::npos) continue;
    const absl::string_view key = word.substr(0, equals);
    const absl::string_view value = word.substr(equals + 1);
    if (key == "JobState") {
      end.state = std::string(value);
      have_state = !value.empty();
    } else if (key == "ExitCode") {
      // "<exit status>:<signal>"
      std::vector<absl::string_view> parts = absl::StrSplit(value, ':');
      int code = 0;
      int signal = 0;
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &code)) end.exit_code = code;
      if (parts.size() > 1 && absl::SimpleAtoi(parts[1], &signal) && signal > 0) {
        end.exit_code = 128 + signal;
      }
    } else if (key == "Restarts") {
      int restarts = 0;
      if (absl::SimpleAtoi(value, &restarts)) end.restarts = restarts;
    }
  }
  if (!have_state) return std::nullopt;
  return end;
}

std::string slurm_array_spec(std::vector<int> indices, int parallel) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::string spec;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!spec.empty()) spec.push_back(',');
    spec += j == i ? fmt::format("{}", indices[i]) : fmt::format("{}-{}", indices[i], indices[j]);
    i = j + 1;
  }
  if (parallel > 0) spec += fmt::format("%{}", parallel);
  return spec;
}

std::string slurm_task_run_id(std::string_view array_job_id, int index, int restarts) {
  return run_id_from_key(
      fmt::format("trainscope-sweep-slurm:{}_{}:{}", array_job_id, index, restarts));
}

}  // namespace detail

// ---- SlurmSweep -------------------------------------------------------------------

struct SlurmSweep::State {
  SweepOptions options;
  SlurmOptions slurm;
  int lock_fd = -1;
  std::string runs_dir;
  std::string slurm_dir;
  detail::SweepState sweep;
  std::set<std::string> live;  // arrays whose tasks Slurm still lists
  int failures = 0;
  bool stopping = false;
  bool max_failures_reached = false;
  int queue_errors = 0;

  ~State() {
    if (lock_fd >= 0) ::close(lock_fd);
  }

  void report(std::string event) {
    if (absl::Status status = detail::save_sweep(options.dir, sweep); !status.ok()) {
      warn(fmt::format("sweep: cannot save its state: {}", std::string(status.message())));
    }
    if (options.progress) {
      const int width =
          slurm.array_parallel > 0
              ? slurm.array_parallel
              : std::max<int>(1, static_cast<int>(std::count_if(
                                     sweep.jobs.begin(), sweep.jobs.end(), [](const JobRecord& r) {
                                       return r.status == JobStatus::kRunning;
                                     })));
      options.progress(detail::progress_of(sweep, width, std::move(event)));
    }
  }

  std::string task_name(const JobRecord& record) const {
    return fmt::format("{}_{}", record.slurm_job_id, record.slurm_index);
  }

  // A failed attempt: counted, and queued again while retries are left.
  void failed(JobRecord* record, std::string error) {
    record->status = JobStatus::kFailed;
    record->error = std::move(error);
    ++failures;
    if (options.max_failures > 0 && failures >= options.max_failures) max_failures_reached = true;
    if (record->attempts <= options.retries && !max_failures_reached) unsubmit(record, true);
  }

  // The task of `record` is no longer active in Slurm (or Slurm forgot it):
  // how it ended, from its run, else from scontrol.
  void resolve(JobRecord* record, bool seen_running) {
    absl::StatusOr<std::optional<SlurmTaskEnd>> end =
        slurm.api->task_end(record->slurm_job_id, record->slurm_index);
    std::optional<SlurmTaskEnd> task = end.ok() ? *end : std::nullopt;
    const std::string name = task_name(*record);
    record->run_id = detail::slurm_task_run_id(record->slurm_job_id, record->slurm_index,
                                               task ? task->restarts : 0);
    record->run_dir = fmt::format("{}/{}", runs_dir, record->run_id);
    if (record->end_ms == 0) record->end_ms = trainscope::detail::unix_now_ms();
    absl::StatusOr<RunReader> reader = RunReader::Open(record->run_dir);
    const std::string output = fmt::format("{}/{}.out", slurm_dir, name);
    if (reader.ok()) {
      const auto& launchers = reader->launchers();
      if (!launchers.empty()) {
        record->exit_code = launchers.front().exit_code;
        if (launchers.front().start_time_ms > 0) record->start_ms = launchers.front().start_time_ms;
        if (launchers.front().end_time_ms > 0) record->end_ms = launchers.front().end_time_ms;
      }
      if (record->start_ms == 0) record->start_ms = reader->info().start_time_ms;
      detail::read_job_results(record->run_dir, record);
      const RunStatus status = reader->info().status;
      const bool timed_out = task && task->state == "TIMEOUT";
      record->timed_out = timed_out;
      if (status == RunStatus::kFinished) {
        record->status = JobStatus::kFinished;
        record->error.clear();
      } else if (timed_out) {
        failed(record, fmt::format("Slurm task {} ran past its time limit (TIMEOUT)", name));
      } else if (status == RunStatus::kKilled || stopping || (task && task->state == "CANCELLED")) {
        record->status = JobStatus::kKilled;  // runs again when the sweep resumes
        record->error = fmt::format("Slurm task {} was cancelled", name);
      } else if (status == RunStatus::kFailed) {
        failed(record, fmt::format("exit code {}", record->exit_code));
      } else {
        failed(record, fmt::format("Slurm task {} ended ({}) while its run was still RUNNING "
                                   "(see {})",
                                   name, task ? task->state : "state unknown", output));
      }
      return;
    }
    // No run: the task ended before its job started.
    if (!task) {
      if (seen_running) {
        failed(record, fmt::format("Slurm task {} ended without a run (see {})", name, output));
      } else {
        unsubmit(record, false);  // never seen to start, and Slurm forgot it: submit again
      }
      return;
    }
    if (task->state == "CANCELLED" || stopping) {
      unsubmit(record, false);  // cancelled before it started: never ran
      return;
    }
    record->exit_code = task->exit_code;
    failed(record, fmt::format("Slurm task {} ended {} (exit code {}) without a run (see {})", name,
                               task->state, task->exit_code, output));
  }

  // Follows one array: the state of each of its tracked jobs.
  absl::Status poll(const std::string& job_id) {
    absl::StatusOr<std::map<int, std::string>> tasks = slurm.api->queue(job_id);
    if (!tasks.ok()) {
      if (++queue_errors >= kMaxQueueErrors) return tasks.status();
      return absl::OkStatus();
    }
    queue_errors = 0;
    bool any_tracked = false;
    for (JobRecord& record : sweep.jobs) {
      if (!tracked(record) || record.slurm_job_id != job_id) continue;
      const auto it = tasks->find(record.slurm_index);
      const std::string state = it == tasks->end() ? std::string() : it->second;
      if (running_state(state)) {
        any_tracked = true;
        if (record.status != JobStatus::kRunning) {
          record.status = JobStatus::kRunning;
          record.start_ms = trainscope::detail::unix_now_ms();
          report(fmt::format("started {} (Slurm task {})", record.job.id, task_name(record)));
        }
      } else if (pending_state(state)) {
        any_tracked = true;
        if (record.status == JobStatus::kRunning) {
          record.status = JobStatus::kQueued;  // requeued by Slurm
          report(fmt::format("{} requeued by Slurm ({})", record.job.id, task_name(record)));
        }
      } else {
        const bool seen_running = record.status == JobStatus::kRunning;
        const std::string name = task_name(record);
        resolve(&record, seen_running);
        std::string what = fmt::format("{} {}", record.job.id, job_status_name(record.status));
        if (record.status == JobStatus::kQueued && !record.error.empty()) {
          what +=
              fmt::format(" ({}), retry {} of {}", record.error, record.attempts, options.retries);
        } else if (record.status == JobStatus::kFailed) {
          what += " (" + record.error + ")";
        }
        report(what + " (Slurm task " + name + ")");
      }
    }
    const bool active = std::any_of(tasks->begin(), tasks->end(),
                                    [](const auto& task) { return active_state(task.second); });
    if (!any_tracked && !active) live.erase(job_id);
    return absl::OkStatus();
  }

  int next_submission() const {
    for (int k = 1;; ++k) {
      std::error_code ignored;
      if (!fs::exists(fmt::format("{}/submit-{}.json", slurm_dir, k), ignored)) return k;
    }
  }

  // Submits every queued job that is in no array as one new array.
  absl::Status submit() {
    std::vector<int> indices;
    json jobs = json::object();
    for (std::size_t i = 0; i < sweep.jobs.size(); ++i) {
      const JobRecord& record = sweep.jobs[i];
      if (record.status != JobStatus::kQueued || !record.slurm_job_id.empty()) continue;
      indices.push_back(static_cast<int>(i));
      jobs[std::to_string(i)] = detail::job_to_json(record.job);
    }
    if (indices.empty()) return absl::OkStatus();
    const int k = next_submission();
    const std::string submit_file = fmt::format("{}/submit-{}.json", slurm_dir, k);
    const json file{{"version", kSubmitFileVersion},
                    {"sweep_dir", options.dir},
                    {"name", sweep.name},
                    {"sample_hardware", options.sample_hardware},
                    {"sample_interval_s", absl::ToDoubleSeconds(options.sample_interval)},
                    {"record_environment", options.record_environment},
                    {"jobs", jobs}};
    if (absl::Status status =
            trainscope::detail::write_file_atomically(submit_file, file.dump(1) + "\n", ".submit-");
        !status.ok()) {
      return status;
    }
    const std::string script_path = fmt::format("{}/submit-{}.sh", slurm_dir, k);
    const std::string script = fmt::format(
        "#!/bin/sh\n"
        "# trainscope sweep {}: array task N runs job N of the plan as a trainscope run\n"
        "exec {} sweep --slurm-task {}\n",
        sweep.name, ::trainscope::detail::shell_quote(slurm.trainscope),
        ::trainscope::detail::shell_quote(submit_file));
    if (absl::Status status =
            trainscope::detail::write_file_atomically(script_path, script, ".submit-");
        !status.ok()) {
      return status;
    }
    std::vector<std::string> args = {
        fmt::format("--job-name=trainscope-sweep-{}", sweep.name.empty() ? "sweep" : sweep.name),
        "--array=" + detail::slurm_array_spec(indices, slurm.array_parallel),
        fmt::format("--output={}/%A_%a.out", slurm_dir),
        fmt::format("--cpus-per-task={}", slurm.cpus_per_job), "--ntasks=1"};
    if (!slurm.partition.empty()) args.push_back("--partition=" + slurm.partition);
    if (slurm.gpus_per_job > 0) args.push_back(fmt::format("--gres=gpu:{}", slurm.gpus_per_job));
    if (!slurm.time.empty()) args.push_back("--time=" + slurm.time);
    args.insert(args.end(), slurm.extra_args.begin(), slurm.extra_args.end());
    args.push_back(script_path);
    absl::StatusOr<std::string> id = slurm.api->submit(args);
    if (!id.ok()) return id.status();
    for (int i : indices) {
      JobRecord& record = sweep.jobs[static_cast<std::size_t>(i)];
      record.slurm_job_id = *id;
      record.slurm_index = i;
      ++record.attempts;
      record.run_id = detail::slurm_task_run_id(*id, i, 0);
      record.run_dir = fmt::format("{}/{}", runs_dir, record.run_id);
      record.exit_code = -1;
      record.timed_out = false;
      record.error.clear();
      record.start_ms = 0;
      record.end_ms = 0;
      record.devices.clear();
    }
    live.insert(*id);
    report(fmt::format("submitted {} job(s) as Slurm job {} (array {})", indices.size(), *id,
                       detail::slurm_array_spec(indices, slurm.array_parallel)));
    return absl::OkStatus();
  }

  // On open: the arrays of earlier submissions that Slurm still lists are
  // followed; what ended while nobody watched is resolved now.
  absl::Status adopt() {
    std::set<std::string> arrays;
    for (const JobRecord& record : sweep.jobs) {
      if (tracked(record)) arrays.insert(record.slurm_job_id);
    }
    for (const std::string& id : arrays) {
      live.insert(id);
      if (absl::Status status = poll(id); !status.ok()) return status;
    }
    for (JobRecord& record : sweep.jobs) {
      if (record.status == JobStatus::kKilled) unsubmit(&record, true);
      if (record.status == JobStatus::kFailed && options.retry_failed) {
        unsubmit(&record, true);
        record.attempts = 0;
      }
    }
    return absl::OkStatus();
  }

  // Waits up to the poll interval, waking early when a stop is requested.
  void pause() {
    const auto until =
        std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(slurm.poll_interval);
    while (std::chrono::steady_clock::now() < until) {
      if (!stopping && options.stop && options.stop->requested() != 0) return;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          kSlurmStopCheck, until - std::chrono::steady_clock::now()));
    }
  }
};

SlurmSweep::SlurmSweep(std::unique_ptr<State> state) : state_(std::move(state)) {}
SlurmSweep::~SlurmSweep() = default;

absl::StatusOr<std::unique_ptr<SlurmSweep>> SlurmSweep::Open(Plan plan, SweepOptions options,
                                                             SlurmOptions slurm) {
  if (options.dir.empty()) return absl::InvalidArgumentError("no sweep directory given");
  if (options.retries < 0) {
    return absl::InvalidArgumentError(fmt::format("--retries {} is negative", options.retries));
  }
  if (slurm.cpus_per_job < 1) {
    return absl::InvalidArgumentError(
        fmt::format("--cpus-per-job {} is not at least 1", slurm.cpus_per_job));
  }
  if (absl::Status status = check_slurm_plan(plan); !status.ok()) return status;
  std::error_code error;
  // The tasks run elsewhere: every path they get is absolute.
  options.dir = fs::absolute(options.dir, error).lexically_normal().string();
  if (!options.dir.empty() && options.dir.back() == '/') options.dir.pop_back();
  if (slurm.trainscope.empty()) {
    slurm.trainscope = fs::read_symlink("/proc/self/exe", error).string();
    if (error) return trainscope::detail::file_error(error.value(), "read", "/proc/self/exe");
  }
  if (!slurm.api) slurm.api = slurm_commands();
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->slurm = std::move(slurm);
  const std::string& dir = state->options.dir;
  state->runs_dir = fmt::format("{}/{}", dir, detail::kRunsDirName);
  state->slurm_dir = fmt::format("{}/{}", dir, kSlurmDirName);
  for (const std::string& path : {state->runs_dir, state->slurm_dir}) {
    fs::create_directories(path, error);
    if (error) {
      return trainscope::detail::file_error(error.value(), "create the sweep directory", path);
    }
  }
  absl::StatusOr<int> lock = detail::lock_sweep_dir(dir);
  if (!lock.ok()) return lock.status();
  state->lock_fd = *lock;
  const std::string state_path = fmt::format("{}/{}", dir, detail::kStateFileName);
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(state_path);
  if (text.ok()) {
    absl::StatusOr<detail::SweepState> loaded = detail::state_from_json(*text, state_path);
    if (!loaded.ok()) return loaded.status();
    if (absl::Status same =
            detail::check_same_sweep(*loaded, plan, dir, state->options.retry_failed);
        !same.ok()) {
      return same;
    }
    state->sweep = *std::move(loaded);
    for (const JobRecord& record : state->sweep.jobs) {
      if (record.status == JobStatus::kRunning && record.slurm_job_id.empty()) {
        return absl::FailedPreconditionError(fmt::format(
            "job '{}' of the sweep in \"{}\" was started by a local scheduler: resume the sweep "
            "without --slurm",
            record.job.id, dir));
      }
    }
    if (absl::Status status = state->adopt(); !status.ok()) return status;
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  const detail::MergeCounts counts = detail::merge_plan(&state->sweep, std::move(plan));
  state->report(fmt::format("plan: {} new, {} dropped", counts.added, counts.dropped));
  return std::unique_ptr<SlurmSweep>(new SlurmSweep(std::move(state)));
}

absl::StatusOr<SweepResult> SlurmSweep::run() {
  State& s = *state_;
  absl::Status error;
  auto cancel_deadline = std::chrono::steady_clock::time_point::max();
  detail::RadtProgress rows(s.options.input);  // radT's CSV: rows written as jobs end
  while (true) {
    const bool stop = s.options.stop && s.options.stop->requested() != 0;
    if ((stop || s.max_failures_reached) && !s.stopping) {
      s.stopping = true;
      for (const std::string& id : s.live) {
        if (absl::Status status = s.slurm.api->cancel(id); !status.ok()) {
          warn(fmt::format("sweep: {}", std::string(status.message())));
        }
      }
      cancel_deadline =
          std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(s.slurm.cancel_grace);
      s.report(s.live.empty() ? std::string("stopping")
                              : fmt::format("stopping: scancel {}", *s.live.begin()));
    }
    if (!s.stopping) {
      if (error = s.submit(); !error.ok()) break;
    }
    const std::set<std::string> arrays = s.live;
    for (const std::string& id : arrays) {
      if (error = s.poll(id); !error.ok()) break;
    }
    if (!error.ok()) break;
    if (std::vector<RadtRowStatus> ended = rows.pending(s.sweep.jobs); !ended.empty()) {
      if (absl::Status written = write_radt_statuses(rows.path(), ended); !written.ok()) {
        warn(fmt::format("sweep: {}", std::string(written.message())));
      }
    }
    if (s.live.empty()) {
      const bool queued =
          std::any_of(s.sweep.jobs.begin(), s.sweep.jobs.end(),
                      [](const JobRecord& r) { return r.status == JobStatus::kQueued; });
      if (s.stopping || !queued) break;
      continue;  // failed jobs to submit again
    }
    if (std::chrono::steady_clock::now() > cancel_deadline) {
      warn(
          fmt::format("sweep: Slurm still lists tasks of job {} {} after scancel; resume the "
                      "sweep to follow them",
                      *s.live.begin(), absl::FormatDuration(s.slurm.cancel_grace)));
      break;
    }
    s.pause();
  }
  if (absl::Status status = detail::write_radt_progress(s.options.input, s.sweep.jobs);
      !status.ok()) {
    warn(fmt::format("sweep: {}", std::string(status.message())));
  }
  if (!error.ok()) {
    s.report(fmt::format("error: {}", std::string(error.message())));
    return error;
  }
  return detail::sweep_result(s.sweep.jobs, s.options.stop && s.options.stop->requested() != 0,
                              s.max_failures_reached);
}

// ---- In the array task ------------------------------------------------------------

absl::StatusOr<LaunchResult> run_slurm_task(const std::string& submit_file) {
  const char* index_text = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* array_job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task_job = std::getenv("SLURM_JOB_ID");
  const char* restarts_text = std::getenv("SLURM_RESTART_COUNT");
  int index = -1;
  if (index_text == nullptr || array_job == nullptr || !absl::SimpleAtoi(index_text, &index)) {
    return absl::FailedPreconditionError(
        "--slurm-task runs inside a task of the sweep's Slurm array (SLURM_ARRAY_TASK_ID and "
        "SLURM_ARRAY_JOB_ID are not set)");
  }
  int restarts = 0;
  if (restarts_text != nullptr) (void)absl::SimpleAtoi(restarts_text, &restarts);
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(submit_file);
  if (!text.ok()) return text.status();
  const json in = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_object() || in.value("version", 0) != kSubmitFileVersion) {
    return absl::DataLossError(
        fmt::format("{}: not a submission of this trainscope's sweep", submit_file));
  }
  Job job;
  detail::JobLaunchSettings settings;
  std::string sweep_dir;
  try {
    const auto it = in.at("jobs").find(std::to_string(index));
    if (it == in.at("jobs").end()) {
      return absl::NotFoundError(
          fmt::format("{}: no job of index {} (SLURM_ARRAY_TASK_ID)", submit_file, index));
    }
    job = detail::job_from_json(*it);
    sweep_dir = in.at("sweep_dir").get<std::string>();
    settings.sweep_name = in.value("name", std::string());
    settings.sample_hardware = in.value("sample_hardware", true);
    settings.sample_interval = absl::Seconds(in.value("sample_interval_s", 1.0));
    settings.record_environment = in.value("record_environment", true);
  } catch (const json::exception& error) {
    return absl::DataLossError(fmt::format("{}: {}", submit_file, error.what()));
  }
  settings.runs_dir = fmt::format("{}/{}", sweep_dir, detail::kRunsDirName);
  settings.tee = true;  // also in the task's Slurm output file
  absl::StatusOr<std::string> config_path = detail::write_job_config(sweep_dir, job);
  if (!config_path.ok()) return config_path.status();
  absl::StatusOr<LaunchOptions> options = detail::job_launch_options(
      job, detail::slurm_task_run_id(array_job, index, restarts), *config_path, settings,
      {{"slurm.job_id", array_job},
       {"slurm.array_index", std::to_string(index)},
       {"slurm.task_job_id", task_job == nullptr ? "" : task_job}});
  if (!options.ok()) return options.status();
  options->forward_signals = true;  // scancel's SIGTERM ends the job KILLED
  return launch(*std::move(options));
}

}  // namespace trainscope::sweep
