#include "trainscope/sweep/scheduler.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/files.hpp"
#include "common/progress_line.hpp"
#include "fmt/format.h"
#include "sweep/collocation.hpp"
#include "sweep/input_watch.hpp"
#include "sweep/job_launch.hpp"
#include "sweep/state_file.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;

// How often run() looks at SweepOptions::stop (a flag a signal handler sets).
// A job's exit wakes it at once.
constexpr auto kStopCheck = std::chrono::milliseconds(100);
constexpr int kNoJob = -1;

// A fresh run id under `runs_dir`. Straight from the kernel's entropy on every
// call: a generator's state would be copied into a forked scheduler, and the
// resumed one would hand out the ids the killed one used.
std::string new_run_id(const std::string& runs_dir) {
  std::random_device entropy;
  while (true) {
    std::string id;
    for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", entropy());
    std::error_code ignored;
    if (!fs::exists(fmt::format("{}/{}", runs_dir, id), ignored)) return id;
  }
}

bool ended(JobStatus status) {
  return status == JobStatus::kFinished || status == JobStatus::kFailed;
}

bool on_devices(const std::vector<Slot>& slots) {
  return !slots.empty() && !slots[0].devices.empty();
}

// The slots a group takes at once: on GPU slots (and stand-ins) one per device
// its jobs pin, shared by the jobs that pin it (radT runs a workload's jobs on
// one GPU together), and one per job that pins none; on CPU slots one per job.
struct GroupNeed {
  int jobs = 0;
  int unpinned = 0;
  std::set<int> devices;
  int slots() const { return unpinned + static_cast<int>(devices.size()); }
};

// A group needs its slots (GroupNeed) at once, and a job with pinned devices
// GPU slots of those devices.
absl::Status check_plan(const Plan& plan, const std::vector<Slot>& slots) {
  if (absl::Status jobs = detail::check_jobs(plan); !jobs.ok()) return jobs;
  const bool on_gpus = on_devices(slots);
  std::map<int, GroupNeed> groups;
  for (const Job& job : plan.jobs) {
    if (job.group >= 0) {
      GroupNeed& need = groups[job.group];
      ++need.jobs;
      if (on_gpus && !job.devices.empty()) {
        need.devices.insert(job.devices.begin(), job.devices.end());
      } else {
        ++need.unpinned;
      }
    }
    for (int device : job.devices) {
      const bool found = std::any_of(slots.begin(), slots.end(), [&](const Slot& slot) {
        return std::find(slot.devices.begin(), slot.devices.end(), device) != slot.devices.end();
      });
      if (on_gpus && !found) {
        return absl::InvalidArgumentError(
            slots[0].stand_in
                ? fmt::format("{}: job '{}' pins device {}, which does not exist: under --slots "
                              "{} the CPU slots stand in for devices 0-{}",
                              job.source, job.id, device, slots.back().devices[0] + 1,
                              slots.back().devices[0])
                : fmt::format("{}: job '{}' pins GPU {}, which is not one of the sweep's "
                              "devices",
                              job.source, job.id, device));
      }
    }
  }
  for (const auto& [group, need] : groups) {
    if (need.slots() > static_cast<int>(slots.size())) {
      return absl::InvalidArgumentError(fmt::format(
          "group {} has {} jobs, which start together, but the sweep has {} slot(s){}", group,
          need.jobs, slots.size(),
          on_gpus ? "" : " (more CPU slots: --slots N, where radT's Devices place them)"));
    }
    if (plan.max_parallel > 0 && need.jobs > plan.max_parallel) {
      return absl::InvalidArgumentError(
          fmt::format("group {} has {} jobs, which start together, but the sweep runs at most {} "
                      "at once",
                      group, need.jobs, plan.max_parallel));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view job_status_name(JobStatus status) noexcept {
  switch (status) {
    case JobStatus::kQueued:
      return "QUEUED";
    case JobStatus::kRunning:
      return "RUNNING";
    case JobStatus::kFinished:
      return "FINISHED";
    case JobStatus::kFailed:
      return "FAILED";
    case JobStatus::kKilled:
      return "KILLED";
  }
  return "QUEUED";
}

absl::StatusOr<JobStatus> parse_job_status(std::string_view name) {
  for (JobStatus status : {JobStatus::kQueued, JobStatus::kRunning, JobStatus::kFinished,
                           JobStatus::kFailed, JobStatus::kKilled}) {
    if (job_status_name(status) == name) return status;
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown job status '{}' (expected QUEUED, RUNNING, FINISHED, FAILED or KILLED)", name));
}

absl::StatusOr<std::vector<Slot>> cpu_slots(int n) {
  if (n < 1) return absl::InvalidArgumentError(fmt::format("--slots {} is not at least 1", n));
  return std::vector<Slot>(static_cast<std::size_t>(n));
}

absl::StatusOr<std::vector<Slot>> stand_in_slots(int n, int per_slot) {
  if (n < 1) return absl::InvalidArgumentError(fmt::format("--slots {} is not at least 1", n));
  if (per_slot < 1) {
    return absl::InvalidArgumentError(fmt::format("--per-gpu {} is not at least 1", per_slot));
  }
  std::vector<Slot> slots;
  for (int device = 0; device < n; ++device) {
    for (int i = 0; i < per_slot; ++i) slots.push_back(Slot{{device}, true});
  }
  return slots;
}

absl::StatusOr<std::vector<Slot>> gpu_slots(const std::vector<int>& devices, int per_gpu,
                                            bool restrict_to_visible) {
  if (per_gpu < 1) {
    return absl::InvalidArgumentError(fmt::format("--per-gpu {} is not at least 1", per_gpu));
  }
  std::vector<int> chosen = devices;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (restrict_to_visible && visible != nullptr) {
    std::vector<int> listed;
    std::stringstream items(visible);
    std::string item;
    bool indices = true;
    while (std::getline(items, item, ',')) {
      char* end = nullptr;
      const long index = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || index < 0) {
        indices = false;
        break;
      }
      listed.push_back(static_cast<int>(index));
    }
    if (indices) {
      chosen.clear();
      for (int device : devices) {
        if (std::find(listed.begin(), listed.end(), device) != listed.end())
          chosen.push_back(device);
      }
    }
  }
  if (chosen.empty()) {
    return absl::NotFoundError(
        visible != nullptr && restrict_to_visible
            ? fmt::format("none of the GPUs is in CUDA_VISIBLE_DEVICES=\"{}\"", visible)
            : std::string("no GPU to run jobs on (use CPU slots: --slots N)"));
  }
  std::vector<Slot> slots;
  for (int device : chosen) {
    if (device < 0) return absl::InvalidArgumentError(fmt::format("invalid GPU index {}", device));
    for (int i = 0; i < per_gpu; ++i) slots.push_back(Slot{{device}});
  }
  return slots;
}

std::string format_progress(const Progress& p) {
  std::string line = fmt::format("{}/{} done, {} running, {} failed, {} queued", p.done, p.total,
                                 p.running, p.failed, p.queued);
  if (p.eta != absl::InfiniteDuration()) {
    line += ", ETA " + absl::FormatDuration(absl::Trunc(p.eta, absl::Seconds(1)));
  }
  return line;
}

std::function<void(const Progress&)> progress_printer(std::FILE* out, bool terminal) {
  auto line = std::make_shared<trainscope::detail::ProgressLine>(out, terminal, "sweep");
  return [line](const Progress& p) {
    const std::string text = format_progress(p);
    if (!line->terminal()) {
      line->print(p.event.empty() ? text : p.event + ": " + text);
    } else if (p.running == 0 && p.queued == 0) {
      line->print(text);
    } else {
      line->show(text);
    }
  };
}

// ---- Scheduler ---------------------------------------------------------------

struct Scheduler::State {
  SweepOptions options;
  int lock_fd = -1;
  std::string state_path;
  std::string runs_dir;

  mutable std::mutex mutex;
  std::condition_variable changed;
  detail::SweepState sweep;    // jobs: plan order, then dropped-but-started ones
  std::vector<int> slot_load;  // per slot: how many jobs run in it (a group's share one)
  struct Running {
    std::thread thread;
    std::shared_ptr<LaunchCancel> cancel;
    std::chrono::steady_clock::time_point deadline;
    std::vector<int> slots;
    std::string id;
  };
  std::unique_ptr<detail::Collocation> collocation;  // on GPU slots
  std::map<std::string, Running> running;            // by job id
  std::vector<std::thread> done_threads;             // to join
  int failures = 0;
  bool stopping = false;
  bool max_failures_reached = false;
  std::string event;

  ~State() {
    std::unique_lock<std::mutex> lock(mutex);
    for (auto& [id, job] : running) job.cancel->request(SIGKILL);
    changed.wait(lock, [this] { return running.empty(); });
    std::vector<std::thread> threads = std::move(done_threads);
    lock.unlock();
    for (std::thread& thread : threads) thread.join();
    if (lock_fd >= 0) ::close(lock_fd);
  }

  int index_of(const std::string& id) const {
    for (std::size_t i = 0; i < sweep.jobs.size(); ++i) {
      if (sweep.jobs[i].job.id == id) return static_cast<int>(i);
    }
    return kNoJob;
  }

  // Called with the mutex held after every change.
  absl::Status save() { return detail::save_sweep(options.dir, sweep); }

  void save_or_warn() {
    if (absl::Status status = save(); !status.ok()) {
      warn(fmt::format("sweep: cannot save its state: {}", std::string(status.message())));
    }
  }

  Progress progress_locked() const {
    return detail::progress_of(sweep, static_cast<int>(slot_load.size()), event);
  }

  void report(std::string what) {
    event = std::move(what);
    save_or_warn();
    if (options.progress) options.progress(progress_locked());
  }

  // Merges a new plan: new jobs queued, dropped ones gone unless they started.
  // `quiet`: no progress line when it adds and drops nothing (an input read
  // again after an edit that changed no job).
  absl::Status merge(Plan plan, bool quiet = false) {
    if (absl::Status status = check_plan(plan, options.slots); !status.ok()) return status;
    const detail::MergeCounts counts = detail::merge_plan(&sweep, std::move(plan));
    if (quiet && counts.added == 0 && counts.dropped == 0) {
      save_or_warn();
    } else {
      report(fmt::format("plan: {} new, {} dropped", counts.added, counts.dropped));
    }
    changed.notify_all();
    return absl::OkStatus();
  }

  // A job RUNNING in the state of a scheduler that died: what its run says.
  absl::Status recover(JobRecord& record) {
    absl::StatusOr<RunReader> reader = RunReader::Open(record.run_dir);
    if (!reader.ok()) {
      // Never started (no run.json yet): run it again; an empty directory goes.
      std::error_code ignored;
      if (!is_run_directory(record.run_dir)) fs::remove_all(record.run_dir, ignored);
      record.status = JobStatus::kQueued;
      record.attempts = std::max(0, record.attempts - 1);
      return absl::OkStatus();
    }
    const auto& launchers = reader->launchers();
    const bool launcher_crashed = std::any_of(launchers.begin(), launchers.end(),
                                              [](const LauncherState& s) { return s.lost; });
    if (launchers.empty() || launcher_crashed) {
      record.status = JobStatus::kQueued;  // the scheduler died with it: not the job's failure
      record.attempts = std::max(0, record.attempts - 1);
      record.error = "crashed with the scheduler";
      return absl::OkStatus();
    }
    const LauncherState& launcher = launchers.front();
    if (launcher.status == RunStatus::kRunning) {
      return absl::FailedPreconditionError(
          fmt::format("job '{}' still runs in {} (launcher {}): is another scheduler running "
                      "this sweep?",
                      record.job.id, record.run_dir, launcher.id()));
    }
    // It ended before the scheduler could record it.
    record.exit_code = launcher.exit_code;
    record.end_ms = launcher.end_time_ms;
    detail::read_job_results(record.run_dir, &record);
    record.status = reader->info().status == RunStatus::kFinished ? JobStatus::kFinished
                    : reader->info().status == RunStatus::kKilled ? JobStatus::kKilled
                                                                  : JobStatus::kFailed;
    if (record.status == JobStatus::kFailed) {
      ++failures;
      if (record.attempts <= options.retries) record.status = JobStatus::kQueued;
    }
    return absl::OkStatus();
  }

  absl::Status resume(const Plan& plan) {
    absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(state_path);
    if (!text.ok()) {
      if (absl::IsNotFound(text.status())) return absl::OkStatus();  // a new sweep
      return text.status();
    }
    absl::StatusOr<detail::SweepState> loaded = detail::state_from_json(*text, state_path);
    if (!loaded.ok()) return loaded.status();
    if (absl::Status same =
            detail::check_same_sweep(*loaded, plan, options.dir, options.retry_failed);
        !same.ok()) {
      return same;
    }
    sweep = std::move(*loaded);
    for (JobRecord& record : sweep.jobs) {
      if (!record.slurm_job_id.empty() && !ended(record.status) &&
          record.status != JobStatus::kKilled) {
        return absl::FailedPreconditionError(fmt::format(
            "job '{}' of the sweep in \"{}\" was submitted to Slurm (job {}): resume the "
            "sweep with --slurm",
            record.job.id, options.dir, record.slurm_job_id));
      }
      if (record.status == JobStatus::kRunning) {
        if (absl::Status status = recover(record); !status.ok()) return status;
      }
      if (record.status == JobStatus::kKilled) record.status = JobStatus::kQueued;
      if (record.status == JobStatus::kFailed && options.retry_failed) {
        record.status = JobStatus::kQueued;
        record.attempts = 0;
      }
    }
    return absl::OkStatus();
  }

  // ---- Dispatch (mutex held) ----

  int running_count() const { return static_cast<int>(running.size()); }

  // How many more jobs may start (max_parallel); the slots limit them too (place).
  int job_budget() const {
    if (sweep.max_parallel <= 0) return std::numeric_limits<int>::max();
    return sweep.max_parallel - running_count();
  }

  int free_slots() const {
    return static_cast<int>(std::count(slot_load.begin(), slot_load.end(), 0));
  }

  // Slots for `job`: one free slot, or on GPU slots (and stand-ins) one per
  // pinned device, where `shared` (device -> slot) gives the slot a job of
  // the same group already has on that device (they share it), else a free
  // one, recorded in `shared`. `taken`: slots this dispatch gave already.
  std::optional<std::vector<int>> place(const Job& job, const std::set<int>& taken,
                                        std::map<int, int>* shared = nullptr) const {
    const auto is_free = [&](std::size_t i) {
      return slot_load[i] == 0 && taken.count(static_cast<int>(i)) == 0;
    };
    if (job.devices.empty() || !on_devices(options.slots)) {
      for (std::size_t i = 0; i < slot_load.size(); ++i) {
        if (is_free(i)) return std::vector<int>{static_cast<int>(i)};
      }
      return std::nullopt;
    }
    std::vector<int> chosen;
    std::map<int, int> added;
    for (int device : job.devices) {
      if (shared != nullptr) {
        if (const auto it = shared->find(device); it != shared->end()) {
          chosen.push_back(it->second);
          continue;
        }
      }
      bool found = false;
      for (std::size_t i = 0; i < slot_load.size() && !found; ++i) {
        const std::vector<int>& on = options.slots[i].devices;
        if (is_free(i) && std::find(on.begin(), on.end(), device) != on.end() &&
            std::find(chosen.begin(), chosen.end(), static_cast<int>(i)) == chosen.end()) {
          chosen.push_back(static_cast<int>(i));
          added[device] = static_cast<int>(i);
          found = true;
        }
      }
      if (!found) return std::nullopt;
    }
    if (shared != nullptr) shared->insert(added.begin(), added.end());
    return chosen;
  }

  void start(std::size_t index, std::vector<int> slots,
             const std::map<std::string, std::string>& env = {}) {
    JobRecord& record = sweep.jobs[index];
    record.status = JobStatus::kRunning;
    ++record.attempts;
    record.run_id = new_run_id(runs_dir);
    record.run_dir = fmt::format("{}/{}", runs_dir, record.run_id);
    record.exit_code = -1;
    record.timed_out = false;
    record.error.clear();
    record.start_ms = trainscope::detail::unix_now_ms();
    record.end_ms = 0;
    record.devices = record.job.devices;
    if (record.devices.empty()) {
      for (int slot : slots) {
        const std::vector<int>& on = options.slots[static_cast<std::size_t>(slot)].devices;
        record.devices.insert(record.devices.end(), on.begin(), on.end());
      }
    }
    for (int slot : slots) ++slot_load[static_cast<std::size_t>(slot)];

    absl::StatusOr<std::string> config_path = detail::write_job_config(options.dir, record.job);
    if (!config_path.ok()) {
      warn(fmt::format("sweep: job {}: {}", record.job.id,
                       std::string(config_path.status().message())));
    }
    detail::JobLaunchSettings settings;
    settings.sweep_name = sweep.name;
    settings.runs_dir = runs_dir;
    settings.sample_hardware = options.sample_hardware;
    settings.sample_interval = options.sample_interval;
    settings.make_sources = options.make_sources;
    settings.record_environment = options.record_environment;
    settings.tee = options.tee;
    // check_plan accepted the job's listeners, so this cannot fail.
    LaunchOptions launch_options = *detail::job_launch_options(
        record.job, record.run_id, config_path.ok() ? *config_path : std::string(), settings, {},
        env);
    if (!options.slots[0].stand_in) {
      launch_options.devices = record.devices;
      launch_options.devices_checked = true;  // the slots' GPUs
    }
    launch_options.forward_signals = false;  // the scheduler stops its jobs itself
    launch_options.die_with_parent = true;
    auto cancel = std::make_shared<LaunchCancel>();
    launch_options.cancel = cancel;

    Running job;
    job.cancel = cancel;
    job.slots = slots;
    job.id = record.job.id;
    job.deadline =
        options.timeout == absl::InfiniteDuration()
            ? std::chrono::steady_clock::time_point::max()
            : std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(options.timeout);
    report(fmt::format("started {}", record.job.id));  // saved before the command starts
    const std::string id = record.job.id;
    job.thread = std::thread([this, id, launch_options = std::move(launch_options)]() mutable {
      absl::StatusOr<LaunchResult> result = launch(std::move(launch_options));
      JobRecord measured;  // read before the lock: it reads the run's rows
      if (result.ok()) detail::read_job_results(result->run_dir, &measured);
      std::lock_guard<std::mutex> lock(mutex);
      finish(id, result, measured);
    });
    running.emplace(id, std::move(job));
  }

  // A launch returned (the launching thread, mutex held).
  // `measured`: read_job_results of its run.
  void finish(const std::string& id, const absl::StatusOr<LaunchResult>& result,
              const JobRecord& measured) {
    auto it = running.find(id);
    const int index = index_of(id);
    for (int slot : it->second.slots) --slot_load[static_cast<std::size_t>(slot)];
    const bool timed_out = it->second.cancel->requested() == SIGKILL && !stopping;
    done_threads.push_back(std::move(it->second.thread));
    running.erase(it);
    if (index == kNoJob) return;  // cannot happen: running jobs are never dropped
    JobRecord& record = sweep.jobs[static_cast<std::size_t>(index)];
    record.end_ms = trainscope::detail::unix_now_ms();
    record.timed_out = timed_out;
    record.batch_mean_s = measured.batch_mean_s;
    record.epoch_mean_s = measured.epoch_mean_s;
    record.steps_per_s = measured.steps_per_s;
    record.metrics = measured.metrics;
    if (!result.ok()) {
      record.error = std::string(result.status().message());
      record.status = JobStatus::kFailed;
    } else {
      record.exit_code = result->exit_code;
      record.run_dir = result->run_dir;
      if (!result->spawn_error.ok()) record.error = std::string(result->spawn_error.message());
      record.status = result->status == RunStatus::kFinished             ? JobStatus::kFinished
                      : result->status == RunStatus::kKilled && stopping ? JobStatus::kKilled
                                                                         : JobStatus::kFailed;
      if (timed_out) {
        record.error = fmt::format("timed out after {}", absl::FormatDuration(options.timeout));
      } else if (record.status == JobStatus::kFailed && record.error.empty()) {
        record.error = fmt::format("exit code {}", record.exit_code);
      }
    }
    std::string what = fmt::format("{} {}", record.job.id, job_status_name(record.status));
    if (record.status == JobStatus::kFailed) {
      ++failures;
      what += " (" + record.error + ")";
      if (options.max_failures > 0 && failures >= options.max_failures) max_failures_reached = true;
      if (record.attempts <= options.retries && !max_failures_reached) {
        record.status = JobStatus::kQueued;
        what += fmt::format(", retry {} of {}", record.attempts, options.retries);
      }
    }
    uncollocate(record);
    report(std::move(what));
    changed.notify_all();
  }

  // radT's Collocation for a group about to start on GPU slots: each member's
  // environment (none on CPU slots).
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> collocate(
      int group, const std::vector<std::size_t>& members,
      const std::vector<std::vector<int>>& places) {
    if (!collocation) return std::vector<std::map<std::string, std::string>>(members.size());
    std::vector<const Job*> jobs;
    std::vector<std::vector<int>> devices;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const Job& job = sweep.jobs[members[k]].job;
      jobs.push_back(&job);
      std::vector<int> on = job.devices;
      if (on.empty()) {
        for (int slot : places[k]) {
          const std::vector<int>& of = options.slots[static_cast<std::size_t>(slot)].devices;
          on.insert(on.end(), of.begin(), of.end());
        }
      }
      devices.push_back(on);
    }
    return collocation->begin(group, jobs, devices);
  }

  // A group whose Collocation could not be set up: its queued jobs fail with why.
  void fail_group(const std::vector<std::size_t>& members, const absl::Status& why) {
    for (std::size_t i : members) {
      JobRecord& record = sweep.jobs[i];
      record.status = JobStatus::kFailed;
      record.error = std::string(why.message());
      ++failures;
    }
    if (options.max_failures > 0 && failures >= options.max_failures) max_failures_reached = true;
    report(fmt::format("workload of {} not started: {}", sweep.jobs[members[0]].job.id,
                       std::string(why.message())));
    changed.notify_all();
  }

  // A job of a collocated group ended (or waits for a retry): its instance is
  // free; when none of the group runs or waits, the group's setup goes.
  void uncollocate(const JobRecord& ended_record) {
    const int group = ended_record.job.group;
    if (!collocation || group < 0 || !collocation->active(group)) return;
    collocation->release(group, ended_record.job);
    for (const JobRecord& record : sweep.jobs) {
      if (record.job.group == group &&
          (record.status == JobStatus::kRunning || record.status == JobStatus::kQueued)) {
        return;
      }
    }
    if (absl::Status status = collocation->end(group); !status.ok()) {
      warn(fmt::format("sweep: cleaning up after {}'s workload: {}", ended_record.job.id,
                       std::string(status.message())));
    }
  }

  // The slots of `group`'s running jobs by the device each pins (device -> slot).
  std::map<int, int> group_devices(int group) const {
    std::map<int, int> devices;
    for (const auto& [id, job] : running) {
      const int index = index_of(id);
      if (index == kNoJob) continue;
      const Job& running_job = sweep.jobs[static_cast<std::size_t>(index)].job;
      if (running_job.group != group || running_job.devices.size() != job.slots.size()) continue;
      for (std::size_t k = 0; k < job.slots.size(); ++k) {
        devices.emplace(running_job.devices[k], job.slots[k]);
      }
    }
    return devices;
  }

  // Starts the queued jobs that fit in the free slots.
  void dispatch() {
    if (stopping || max_failures_reached) return;
    int budget = job_budget();
    if (budget <= 0) return;
    // The lowest group with a job not ended goes first; the next waits for it.
    std::optional<int> group;
    for (const JobRecord& record : sweep.jobs) {
      if (record.job.group >= 0 && !ended(record.status) && (!group || record.job.group < *group)) {
        group = record.job.group;
      }
    }
    bool group_waits = false;
    if (group) {
      std::vector<std::size_t> members;
      for (std::size_t i = 0; i < sweep.jobs.size(); ++i) {
        const JobRecord& record = sweep.jobs[i];
        if (record.job.group == *group && record.status == JobStatus::kQueued) members.push_back(i);
      }
      if (!members.empty()) {
        std::set<int> taken;
        std::map<int, int> shared = group_devices(*group);
        std::vector<std::vector<int>> places;
        for (std::size_t i : members) {
          std::optional<std::vector<int>> slots = place(sweep.jobs[i].job, taken, &shared);
          if (!slots) break;
          taken.insert(slots->begin(), slots->end());
          places.push_back(*slots);
        }
        if (places.size() == members.size() && static_cast<int>(members.size()) <= budget) {
          absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
              collocate(*group, members, places);
          if (!env.ok()) {
            fail_group(members, env.status());
            return;
          }
          for (std::size_t k = 0; k < members.size(); ++k) start(members[k], places[k], (*env)[k]);
          budget -= static_cast<int>(members.size());
        } else {
          group_waits = true;  // free jobs leave it the slots it waits for
        }
      }
    }
    if (group_waits) return;
    for (std::size_t i = 0; i < sweep.jobs.size() && budget > 0 && free_slots() > 0; ++i) {
      const JobRecord& record = sweep.jobs[i];
      if (record.job.group >= 0 || record.status != JobStatus::kQueued) continue;
      std::optional<std::vector<int>> slots = place(record.job, {});
      if (!slots) continue;
      start(i, *slots);
      --budget;
    }
  }

  bool has_queued() const {
    return std::any_of(sweep.jobs.begin(), sweep.jobs.end(),
                       [](const JobRecord& r) { return r.status == JobStatus::kQueued; });
  }
};

Scheduler::Scheduler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Open(Plan plan, SweepOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("no sweep directory given");
  if (options.retries < 0) {
    return absl::InvalidArgumentError(fmt::format("--retries {} is negative", options.retries));
  }
  if (options.slots.empty()) options.slots.resize(1);
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  const std::string& dir = state->options.dir;
  state->state_path = fmt::format("{}/{}", dir, detail::kStateFileName);
  state->runs_dir = fmt::format("{}/{}", dir, detail::kRunsDirName);
  std::error_code error;
  fs::create_directories(state->runs_dir, error);
  if (error) {
    return trainscope::detail::file_error(error.value(), "create the sweep directory",
                                          state->runs_dir);
  }
  absl::StatusOr<int> lock = detail::lock_sweep_dir(dir);
  if (!lock.ok()) return lock.status();
  state->lock_fd = *lock;
  state->slot_load.assign(state->options.slots.size(), 0);
  const bool on_gpus =
      !state->options.slots[0].devices.empty() && !state->options.slots[0].stand_in;
  if (on_gpus) {
    state->collocation = std::make_unique<detail::Collocation>(
        dir, state->options.gpu_tools ? state->options.gpu_tools : system_gpu_tools());
  } else {
    std::set<int> said;  // once per workload
    for (const Job& job : plan.jobs) {
      if (job.collocation != "-" && !job.collocation.empty() &&
          (job.group < 0 || said.insert(job.group).second)) {
        warn(fmt::format(
            "sweep: {}: Collocation '{}' is not set up on CPU slots (--slots); the jobs of its "
            "workload start together and share the slot of the device they pin",
            job.source, job.collocation));
      }
    }
  }
  std::lock_guard<std::mutex> guard(state->mutex);
  if (absl::Status status = state->resume(plan); !status.ok()) return status;
  if (absl::Status status = state->merge(std::move(plan)); !status.ok()) return status;
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(state)));
}

absl::Status Scheduler::update(Plan plan) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->merge(std::move(plan));
}

Progress Scheduler::progress() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->progress_locked();
}

absl::StatusOr<SweepResult> Scheduler::run() {
  State& s = *state_;
  std::optional<detail::InputWatch> watch;
  if (!s.options.input.empty()) watch.emplace(s.options.input, s.options.input_program);
  detail::RadtProgress rows(s.options.input);
  auto next_look = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(s.mutex);
  absl::Status error;
  while (true) {
    // Live update: the input read again (outside the lock) when it changed.
    if (watch && std::chrono::steady_clock::now() >= next_look) {
      next_look =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(detail::kInputCheckMs);
      lock.unlock();
      std::optional<absl::StatusOr<Plan>> changed = watch->poll();
      lock.lock();
      if (changed) {
        const absl::Status status =
            changed->ok() ? s.merge(**std::move(changed), /*quiet=*/true) : changed->status();
        if (!status.ok()) {
          warn(fmt::format("sweep: {} changed, keeping the old plan: {}", watch->path(),
                           std::string(status.message())));
        }
      }
    }
    // radT's CSV: the rows of the jobs that ended, as they end (outside the
    // lock), after the edits read above; the watch does not take the write
    // back for an edit.
    if (std::vector<RadtRowStatus> ended = rows.pending(s.sweep.jobs); !ended.empty()) {
      lock.unlock();
      const absl::Status written = write_radt_statuses(rows.path(), ended);
      if (watch) watch->accept_current();
      lock.lock();
      if (!written.ok()) warn(fmt::format("sweep: {}", std::string(written.message())));
    }
    const int stop_signal = s.options.stop ? s.options.stop->requested() : 0;
    if (stop_signal != 0 && !s.stopping) {
      s.stopping = true;
      for (auto& [id, job] : s.running) job.cancel->request(stop_signal);
      s.report("stopping");
    }
    const auto now = std::chrono::steady_clock::now();
    auto wake = now + kStopCheck;
    for (auto& [id, job] : s.running) {
      if (job.deadline <= now) {
        if (job.cancel->requested() == 0) job.cancel->request(SIGKILL);
      } else {
        wake = std::min(wake, job.deadline);
      }
    }
    for (std::thread& thread : s.done_threads) thread.join();
    s.done_threads.clear();
    s.dispatch();
    if (s.running.empty()) {
      if (!s.has_queued() || s.stopping || s.max_failures_reached) break;
      for (const JobRecord& record : s.sweep.jobs) {
        if (record.status == JobStatus::kQueued) {
          error = absl::FailedPreconditionError(
              fmt::format("job '{}' cannot start: no free slot has its devices ({})", record.job.id,
                          record.job.source));
          break;
        }
      }
      break;
    }
    if (watch) wake = std::min(wake, next_look);
    s.changed.wait_until(lock, wake);
  }
  if (s.collocation) {
    if (absl::Status status = s.collocation->end_all(); !status.ok()) {
      warn(fmt::format("sweep: cleaning up MPS/MIG: {}", std::string(status.message())));
    }
  }
  if (absl::Status status = detail::write_radt_progress(s.options.input, s.sweep.jobs);
      !status.ok()) {
    warn(fmt::format("sweep: {}", std::string(status.message())));
  }
  if (!error.ok()) return error;
  return detail::sweep_result(s.sweep.jobs, s.stopping, s.max_failures_reached);
}

absl::StatusOr<Plan> saved_plan(const std::string& dir) {
  const std::string path = fmt::format("{}/{}", dir, detail::kStateFileName);
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(fmt::format("\"{}\" holds no sweep (no {})", dir, path));
    }
    return text.status();
  }
  absl::StatusOr<detail::SweepState> state = detail::state_from_json(*text, path);
  if (!state.ok()) return state.status();
  return detail::plan_of(*state);
}

absl::StatusOr<SweepResult> run_sweep(const Plan& plan, SweepOptions options) {
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Open(plan, std::move(options));
  if (!scheduler.ok()) return scheduler.status();
  return (*scheduler)->run();
}

}  // namespace trainscope::sweep
