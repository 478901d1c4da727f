#include "trainscope/launch/launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "common/files.hpp"
#include "common/fork_owner.hpp"
#include "common/no_gpu.hpp"
#include "common/shell_quote.hpp"
#include "fmt/format.h"
#include "launch/auto_bootstrap.hpp"
#include "launch/command_watch.hpp"
#include "launch/pip_freeze.hpp"
#include "launch/process.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/hardware/host/host_sources.hpp"
#include "trainscope/hardware/host/process_tree.hpp"
#include "trainscope/hardware/host/rapl.hpp"
#include "trainscope/hardware/sampler.hpp"
#include "trainscope/launch/run_tool.hpp"
#include "trainscope/run/environment_record.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";
constexpr auto kWaitPoll = std::chrono::milliseconds(20);
constexpr auto kJobPoll = std::chrono::milliseconds(100);  // the job's processes, after a stop
constexpr auto kSigkillWait = std::chrono::seconds(5);     // for SIGKILL to take them
// Marks every process of one launch (started with it, inherited by what they
// start): "<host>:<pid>:<n>", n counting this process's launches.
constexpr char kLaunchMarkEnv[] = "TRAINSCOPE_LAUNCH_ID";
constexpr int kFollowPollMs = 50;
constexpr int kExitNotFound = 127;
constexpr int kExitNotExecutable = 126;
constexpr std::size_t kMaxTagValue = 8000;

using launcher::detail::close_fd;
using launcher::detail::environment_copy;
using launcher::detail::environment_mutex;
using launcher::detail::spawn;
using launcher::detail::spawn_dying_with_parent;

void set_variable(std::vector<std::string>* env, const std::string& name,
                  const std::string& value) {
  const std::string prefix = name + "=";
  env->erase(std::remove_if(env->begin(), env->end(),
                            [&](const std::string& e) { return e.rfind(prefix, 0) == 0; }),
             env->end());
  env->push_back(prefix + value);
}

// ---- Signal forwarding ------------------------------------------------------
// Process-wide, since handlers are: every active launch has a slot the
// handler reads with lock-free atomics only (async-signal-safe).
// SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) are forwarded
// to the command's process group, which the terminal's own signals miss. A
// SIGHUP ignored when the first launch starts (nohup) stays ignored, here and
// in the command, which inherits it: the run goes on.

constexpr int kMaxForwardedLaunches = 256;

struct ForwardSlot {
  std::atomic<bool> used{false};
  std::atomic<pid_t> pgid{0};
  std::atomic<int> forwarded{0};
};

ForwardSlot g_slots[kMaxForwardedLaunches];
std::mutex g_forward_mu;
int g_forward_users = 0;
struct sigaction g_previous_int;
struct sigaction g_previous_term;
struct sigaction g_previous_hup;
bool g_hup_forwarded = false;  // false: SIGHUP was ignored (nohup), left so

extern "C" void forward_signal(int signal) {
  const int saved_errno = errno;
  for (ForwardSlot& slot : g_slots) {
    if (!slot.used.load()) continue;
    // Recorded first: a launch that publishes its child after this reads it
    // and forwards the signal itself.
    slot.forwarded.store(signal);
    const pid_t pgid = slot.pgid.load();
    if (pgid > 0) ::kill(-pgid, signal);
  }
  errno = saved_errno;
}

// One launch's registration; handlers are installed while any is alive.
class SignalForwarding {
 public:
  explicit SignalForwarding(bool enabled) {
    if (!enabled) return;
    std::lock_guard<std::mutex> lock(g_forward_mu);
    for (ForwardSlot& candidate : g_slots) {
      if (candidate.used.load()) continue;
      candidate.pgid.store(0);
      candidate.forwarded.store(0);
      candidate.used.store(true);
      slot_ = &candidate;
      break;
    }
    if (slot_ == nullptr) {
      warn(
          fmt::format("trainscope run: more than {} launches at once; SIGINT/SIGTERM/SIGHUP are "
                      "not forwarded to this one",
                      kMaxForwardedLaunches));
      return;
    }
    if (g_forward_users++ == 0) install();
  }

  ~SignalForwarding() {
    if (slot_ == nullptr) return;
    std::lock_guard<std::mutex> lock(g_forward_mu);
    slot_->pgid.store(0);
    slot_->used.store(false);
    if (--g_forward_users == 0) {
      ::sigaction(SIGINT, &g_previous_int, nullptr);
      ::sigaction(SIGTERM, &g_previous_term, nullptr);
      if (g_hup_forwarded) ::sigaction(SIGHUP, &g_previous_hup, nullptr);
    }
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  void set_child(pid_t pgid) {
    if (slot_ == nullptr) return;
    slot_->pgid.store(pgid);
    const int pending = slot_->forwarded.load();
    if (pending != 0) ::kill(-pgid, pending);
  }
  // Before the child is reaped, so the handler never signals a reused pid.
  void clear_child() {
    if (slot_ != nullptr) slot_->pgid.store(0);
  }
  int forwarded() const { return slot_ == nullptr ? 0 : slot_->forwarded.load(); }

 private:
  static void install() {
    struct sigaction action = {};
    action.sa_handler = forward_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, &g_previous_int);
    ::sigaction(SIGTERM, &action, &g_previous_term);
    ::sigaction(SIGHUP, nullptr, &g_previous_hup);
    g_hup_forwarded = g_previous_hup.sa_handler != SIG_IGN;
    if (g_hup_forwarded) ::sigaction(SIGHUP, &action, nullptr);
  }

  ForwardSlot* slot_ = nullptr;
};

// ---- Ending the job after a stop signal ---------------------------------------
// A stop signal (SIGINT/SIGTERM/SIGHUP forwarded, or the caller's cancel)
// ends every process of the job, not only the command's process group, which
// forward_signal() reaches: also the processes started in sessions of their
// own (torchrun's ranks), once reparented too, and what they started (their
// DataLoader workers), found by the launch's mark in their environment
// (find_job_processes). The launch waits for all of them; those still running
// kill_after after the signal are killed with SIGKILL, which is said on
// stderr and in the run.
class JobEnd {
 public:
  JobEnd(std::string mark, absl::Duration kill_after)
      : mark_(std::move(mark)), kill_after_(absl::ToChronoMilliseconds(kill_after)) {}

  // The command's process group (its pid), once it started.
  void set_group(pid_t pgid) { pgid_ = pgid; }
  int signal() const { return signal_; }
  int killed() const { return killed_; }

  // On each poll with the stop signal so far (0: none). The first one also
  // reaches the job's processes outside the group (the group has it already:
  // a second one would cut torchrun's own shutdown short).
  void stop(int signal) {
    if (signal == 0 || signal_ != 0) return;
    signal_ = signal;
    deadline_ = std::chrono::steady_clock::now() + kill_after_;
    for (pid_t pid : host::find_job_processes("/proc", mark_, pgid_)) {
      if (::getpgid(pid) != pgid_) ::kill(pid, signal);
    }
  }

  // After a stop, once the command exited: whether the rest of the job is
  // gone too. Past the deadline, kills what is left with SIGKILL first and
  // gives up kSigkillWait later (a process in uninterruptible sleep).
  bool done(bool command_exited) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_look_) return false;
    next_look_ = now + kJobPoll;
    std::vector<pid_t> left = host::find_job_processes("/proc", mark_, pgid_);
    if (left.empty() && command_exited) return true;
    if (now < deadline_) return false;
    if (killed_ == 0 && !left.empty()) {
      killed_ = static_cast<int>(left.size());
      ::kill(-pgid_, SIGKILL);  // the group (its leader unreaped: the id is still the group's)
      for (pid_t pid : left) ::kill(pid, SIGKILL);
      pids_ = left;
      return false;
    }
    return command_exited && now >= deadline_ + kSigkillWait;
  }

  // What the SIGKILL did: one line, said on stderr and in the run.
  std::string message() const {
    std::string pids;
    for (pid_t pid : pids_) pids += fmt::format("{}{}", pids.empty() ? "" : " ", pid);
    return fmt::format(
        "trainscope run: {} process{} of the command still ran {} s after signal {} ({}): killed "
        "with SIGKILL (pid{} {})",
        killed_, killed_ == 1 ? "" : "es",
        std::chrono::duration_cast<std::chrono::duration<double>>(kill_after_).count(), signal_,
        ::strsignal(signal_), killed_ == 1 ? "" : "s", pids);
  }

 private:
  std::string mark_;
  std::chrono::milliseconds kill_after_;
  pid_t pgid_ = 0;
  int signal_ = 0;
  int killed_ = 0;  // processes killed with SIGKILL
  std::vector<pid_t> pids_;
  std::chrono::steady_clock::time_point deadline_, next_look_;
};

// The stdout of a helper tool (git, pip, nvidia-smi), or nothing when it is
// missing, fails or runs past `timeout` (then it is killed).
std::optional<std::string> capture(std::vector<std::string> argv, std::chrono::seconds timeout) {
  absl::StatusOr<ToolOutput> done = run_tool(std::move(argv), absl::FromChrono(timeout));
  if (!done.ok() || done->exit_code != 0) return std::nullopt;
  return std::move(done->out);
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (::access(fmt::format("{}/{}", dir.empty() ? "." : dir, name).c_str(), X_OK) == 0)
      return true;
  }
  return false;
}

// ---- One record per launcher ------------------------------------------------
// Each launcher of a run writes its logs, environment and artifacts under its
// own names (launcher_variant_name: stdout-<host>-<pid>.log, ...); the first
// also links them to the plain names (stdout.log, environment.json, ...).

std::string launcher_id() { return fmt::format("{}:{}", detail::this_host(), ::getpid()); }

// This launch's kLaunchMarkEnv value: launcher_id() names the process, which
// may run several launches at once (a sweep).
std::string launch_mark() {
  static std::atomic<std::uint64_t> launches{0};
  return fmt::format("{}:{}", launcher_id(), launches.fetch_add(1));
}

std::string own_name(std::string_view name) {
  return launcher_variant_name(name, detail::this_host(), ::getpid());
}

// A hard link, so that both names are one file; a later launcher finds the
// name taken (EEXIST) and keeps its own only. A filesystem without hard links
// leaves the launcher's own name only.
// Whether this launcher's link is the one under the plain name.
bool link_if_first(const std::string& own, const std::string& plain) {
  return ::link(own.c_str(), plain.c_str()) == 0;
}

// ---- Output ----------------------------------------------------------------
// The command writes straight into its log files (O_APPEND): its output never
// passes through this process, so a launcher killed with -9 (the OOM killer,
// the wrong pid) leaves the training printing into the files, never dying of
// a broken pipe. With tee, a thread follows the files to this process's
// stdout/stderr as they grow: inotify wakes it at once, and it also looks
// every kFollowPollMs (inotify missing or out of watches).

struct FollowedLog {
  int read_fd;      // the log, opened to read from its start
  int terminal_fd;  // -1: no longer shown (a closed pipe)
};

// Copies what was appended since the last call; whether there was any.
bool copy_appended(FollowedLog* log, char* buffer, std::size_t size) {
  bool any = false;
  for (;;) {
    const ssize_t n = ::read(log->read_fd, buffer, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return any;
    any = true;
    if (log->terminal_fd >= 0 &&
        detail::write_all(log->terminal_fd,
                          std::string_view(buffer, static_cast<std::size_t>(n))) !=
            static_cast<std::size_t>(n)) {
      log->terminal_fd = -1;
    }
  }
}

// Follows both logs until the command has exited and they stay quiet for a
// poll (a daemon it left behind may write on forever).
void follow_output(FollowedLog logs[2], int notify_fd, const std::atomic<bool>* child_exited) {
  // A closed terminal pipe must not kill this process: write() gets EPIPE.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  char buffer[65536];
  for (;;) {
    // Read before copying: what the command wrote before it exited is copied below.
    const bool exited = child_exited->load();
    bool any = false;
    for (int i = 0; i < 2; ++i) any |= copy_appended(&logs[i], buffer, sizeof buffer);
    if (exited && !any) return;
    pollfd notify = {notify_fd, POLLIN, 0};
    if (::poll(&notify, notify_fd >= 0 ? 1 : 0, kFollowPollMs) > 0) {
      while (::read(notify_fd, buffer, sizeof buffer) > 0) {  // drain the events
      }
    }
  }
}

// The logs this launcher writes: its own (named by host and pid), the first
// launcher's also under the plain names (RunReader::log_tail, older tools).
class CommandLogs {
 public:
  absl::Status open(const std::string& run_dir, bool follow) {
    for (int i = 0; i < 2; ++i) {
      const RunLog log = i == 0 ? RunLog::kStdout : RunLog::kStderr;
      const std::string path = run_log_path(run_dir, log, detail::this_host(), ::getpid());
      write_fd_[i] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (write_fd_[i] < 0) return detail::file_error(errno, "create", path);
      if (link_if_first(path, run_log_path(run_dir, log)) && log == RunLog::kStdout) first_ = true;
      if (!follow) continue;
      read_fd_[i] = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (read_fd_[i] < 0) return detail::file_error(errno, "open", path);
      // From its end: what the command writes (a file left by an earlier
      // process of the same host and pid is not shown again).
      ::lseek(read_fd_[i], 0, SEEK_END);
      if (notify_fd_ >= 0) ::inotify_add_watch(notify_fd_, path.c_str(), IN_MODIFY);
    }
    return absl::OkStatus();
  }
  ~CommandLogs() {
    finish();
    for (int* fd : {&write_fd_[0], &write_fd_[1], &read_fd_[0], &read_fd_[1], &notify_fd_})
      close_fd(fd);
  }
  CommandLogs() = default;
  CommandLogs(const CommandLogs&) = delete;
  CommandLogs& operator=(const CommandLogs&) = delete;

  int out() const { return write_fd_[0]; }
  int err() const { return write_fd_[1]; }
  // The run's first launcher: its stdout log is stdout.log.
  bool first() const { return first_; }
  // Shows the logs on this process's stdout/stderr from now on (when opened to follow).
  void start_following() {
    if (read_fd_[0] < 0) return;
    logs_[0] = {read_fd_[0], STDOUT_FILENO};
    logs_[1] = {read_fd_[1], STDERR_FILENO};
    follower_ = std::thread(follow_output, logs_, notify_fd_, &child_exited_);
  }
  // The command exited: the follower copies what is left, then stops.
  void finish() {
    if (owner_.forked()) {
      detail::abandon(follower_);  // the parent's thread
      return;
    }
    child_exited_.store(true);
    if (follower_.joinable()) follower_.join();
  }

 private:
  int write_fd_[2] = {-1, -1};
  int read_fd_[2] = {-1, -1};
  int notify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  FollowedLog logs_[2] = {};
  std::atomic<bool> child_exited_{false};
  bool first_ = false;
  const detail::ForkOwner owner_;
  std::thread follower_;
};

// ---- Environment record -----------------------------------------------------

std::string first_field(const std::string& text, const std::string& label) {
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    if (name != label) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    return value;
  }
  return "";
}

void describe_host(EnvironmentRecord* env) {
  env->hostname = detail::this_host();
  utsname os;
  if (::uname(&os) == 0) {
    env->os = EnvironmentRecord::OperatingSystem{os.sysname, os.release, os.version, os.machine};
  }
  env->cpu_model = first_field(detail::read_whole_file("/proc/cpuinfo").value_or(""), "model name");
  env->cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  env->memory_mb =
      static_cast<long long>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / (1024 * 1024);
}

// Saves artifacts/<own name> (and the plain name when first); its path in the run.
std::string save_artifact(const std::string& run_dir, const std::string& name,
                          const std::string& text) {
  const std::string own = own_name(name);
  const absl::Status status = write_run_artifact(run_dir, own, text);
  if (!status.ok()) warn(fmt::format("trainscope run: {}", status.ToString()));
  link_if_first(fmt::format("{}/artifacts/{}", run_dir, own),
                fmt::format("{}/artifacts/{}", run_dir, name));
  return "artifacts/" + own;
}

// Slow tools (pip can take seconds) run here, in a thread beside the command.
void record_environment(const std::string& run_dir, const std::vector<std::string>& command) {
  using std::chrono::seconds;
  EnvironmentRecord env;
  describe_host(&env);
  env.launcher = launcher_id();
  env.command_line = command;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) != nullptr) env.cwd = cwd;
  if (std::optional<std::string> commit = capture({"git", "rev-parse", "HEAD"}, seconds(10))) {
    commit->erase(commit->find_last_not_of("\n") + 1);
    std::optional<std::string> changes = capture({"git", "status", "--porcelain"}, seconds(10));
    env.git = EnvironmentRecord::Git{*commit, !changes || !changes->empty()};
  }
  // The packages of the interpreter the command runs (python3 on PATH for a
  // command that runs none itself: a shell script may), cached per environment.
  std::string python = python_interpreter(command);
  const bool commands_own = !python.empty();
  if (!commands_own && on_path("python3")) python = "python3";
  if (!python.empty()) {
    env.python = EnvironmentRecord::Python{python, commands_own ? "the command" : "PATH (python3)"};
    if (std::optional<launcher::detail::PipFreeze> pip =
            launcher::detail::pip_freeze(python, seconds(30))) {
      env.pip_freeze = save_artifact(run_dir, "pip-freeze.txt", pip->text);
      env.python->pip_freeze_cached = pip->cached;
    }
  }
  if (std::optional<std::string> conda = capture({"conda", "list"}, seconds(30))) {
    env.conda_list = save_artifact(run_dir, "conda-list.txt", *conda);
  }
  if (std::optional<std::string> smi = capture({"nvidia-smi", "-q"}, seconds(30))) {
    env.nvidia_smi = save_artifact(run_dir, "nvidia-smi.txt", *smi);
    env.driver_version = first_field(*smi, "Driver Version");
    env.cuda_version = first_field(*smi, "CUDA Version");
  }
  const std::string own = run_environment_path(run_dir, detail::this_host(), ::getpid());
  const absl::Status status = detail::write_file_atomically(own, format_environment_record(env));
  if (!status.ok()) warn(fmt::format("trainscope run: {}", status.ToString()));
  link_if_first(own, run_environment_path(run_dir));
}

// ---- The run ----------------------------------------------------------------

void warn_if_error(const absl::Status& status, const std::string& what) {
  if (!status.ok())
    warn(fmt::format("trainscope run: {} not recorded: {}", what, status.ToString()));
}

void record_command(Run& run, const std::vector<std::string>& command) {
  const std::vector<std::string> args(command.begin() + 1, command.end());
  for (const auto& [key, value] : params_from_arguments(args)) {
    warn_if_error(run.log_param(key, value), fmt::format("param '{}'", key));
  }
  warn_if_error(
      run.set_tag("trainscope.command", detail::shell_command(command).substr(0, kMaxTagValue)),
      "tag trainscope.command");
}

std::string devices_list(const std::vector<int>& devices) {
  std::string out;
  for (int device : devices) out += fmt::format("{}{}", out.empty() ? "" : ",", device);
  return out;
}

std::vector<std::unique_ptr<HardwareSource>> default_sources() {
  std::vector<std::unique_ptr<HardwareSource>> sources = host_sources();
  for (std::unique_ptr<HardwareSource>& gpu : gpu_sources()) sources.push_back(std::move(gpu));
  return sources;
}

// The rank whose process tree this launcher runs: the one rank that names
// it as its launcher, else kNoRank (none yet, or several under torchrun).
// Asked every sampler tick; the run directory (every rank file, on a shared
// filesystem for a large job) is read only until the rank is known and then
// every 10 s, since ranks register once.
class RankUnderLauncher {
 public:
  RankUnderLauncher(std::string run_dir, std::string launcher)
      : run_dir_(std::move(run_dir)), launcher_(std::move(launcher)) {}

  std::uint32_t operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (rank_ != kNoRank && now < next_scan_) return rank_;
    next_scan_ = now + std::chrono::seconds(10);
    rank_ = scan();
    return rank_;
  }

 private:
  std::uint32_t scan() const {
    absl::StatusOr<RunReader> reader = RunReader::Open(run_dir_);
    if (!reader.ok()) return kNoRank;
    std::uint32_t found = kNoRank;
    for (const RankState& rank : reader->ranks()) {
      if (rank.launcher != launcher_) continue;
      if (found != kNoRank) return kNoRank;
      found = rank.rank.rank;
    }
    return found;
  }

  std::string run_dir_;
  std::string launcher_;
  std::uint32_t rank_ = kNoRank;
  std::chrono::steady_clock::time_point next_scan_{};
};

// The first launcher of a host samples everything; the others of the same
// host (srun -n 2 on one node) only their own process tree.
std::vector<std::unique_ptr<HardwareSource>> sources_for(const LaunchOptions& options,
                                                         const Run& run) {
  std::vector<std::unique_ptr<HardwareSource>> sources =
      options.make_sources ? options.make_sources() : default_sources();
  if (run.owns_host()) return sources;
  std::vector<std::unique_ptr<HardwareSource>> own;
  for (std::unique_ptr<HardwareSource>& source : sources) {
    if (source->name() == kHostProcSource) own.push_back(std::move(source));
  }
  return own;
}

std::unique_ptr<Sampler> start_sampler(const LaunchOptions& options, Run& run, pid_t child) {
  if (!options.sample_hardware) return nullptr;
  SamplerOptions sampler_options;
  sampler_options.interval = options.sample_interval;
  sampler_options.context.root_pid = child;
  sampler_options.context.gpu_devices = options.devices;
  sampler_options.process_rank = RankUnderLauncher(run.dir(), launcher_id());
  std::vector<std::unique_ptr<HardwareSource>> sources = sources_for(options, run);
  if (run.owns_host() && !options.make_sources) {
    // The CPU's energy (docs/ledger.md): recorded where RAPL is readable, else why, once.
    if (absl::StatusOr<host::RaplReader> rapl = host::RaplReader::Open(); rapl.ok()) {
      sources.push_back(host::make_rapl_source());
    } else {
      warn_if_error(run.set_tag(host::kEnergyNoteTag, std::string(rapl.status().message())),
                    "tag trainscope.energy.cpu");
    }
  }
  auto sampler =
      std::make_unique<Sampler>(std::move(sampler_options), std::move(sources), &run.pipeline());
  sampler->start();
  return sampler;
}

bool is_stop_signal(int signal) {
  return signal == SIGINT || signal == SIGTERM || signal == SIGKILL || signal == SIGHUP;
}

// Stopping signals (ours or anyone's) are KILLED; crashes and non-zero exits
// FAILED. A stop signal passed on (`stopped`) is how the job ended, whatever
// the command made of it (a shell script that exits 0 after its torchrun
// did, or the SIGKILL after kill_after): 128 + that signal.
LaunchResult outcome(int wait_status, int stopped) {
  LaunchResult result;
  if (stopped != 0) {
    result.term_signal = stopped;
    result.exit_code = 128 + stopped;
  } else if (WIFSIGNALED(wait_status)) {
    result.term_signal = WTERMSIG(wait_status);
    result.exit_code = 128 + result.term_signal;
  } else {
    result.exit_code = WEXITSTATUS(wait_status);
  }
  if (stopped != 0 || is_stop_signal(result.term_signal)) {
    result.status = RunStatus::kKilled;
  } else {
    result.status = result.exit_code == 0 ? RunStatus::kFinished : RunStatus::kFailed;
  }
  return result;
}

// Run::end unsetenv()s TRAINSCOPE_RUN_DIR (see environment_mutex()).
absl::Status end_locked(Run& run, RunStatus status) {
  std::lock_guard<std::mutex> lock(environment_mutex());
  return run.end(status);
}

// Metrics of a watch or of the end record (RunMetric): by the run's first
// launcher only; a value the run refuses is a warning line.
void log_run_metrics(Run& run, bool first_launcher, const std::vector<RunMetric>& metrics) {
  if (!first_launcher) return;
  for (const RunMetric& m : metrics) {
    if (!std::isfinite(m.value)) continue;
    warn_if_error(run.log_metric(m.key, m.value, m.step), fmt::format("metric '{}'", m.key));
  }
}

// The caller's end-of-run tags and metrics (LaunchOptions::end_record). The
// readings still queued reach the run directory first, so the hook reads the
// whole run.
void set_end_record(Run& run, const LaunchOptions& options, const LaunchResult& result,
                    bool first_launcher) {
  if (!options.end_record) return;
  run.pipeline().flush();
  EndRecord record;
  try {
    record = options.end_record(result);
  } catch (const std::exception& error) {
    warn(fmt::format("trainscope run: the end-of-run record of {} failed: {}", run.dir(),
                     error.what()));
    return;
  } catch (...) {
    warn(fmt::format("trainscope run: the end-of-run record of {} failed (an unknown exception)",
                     run.dir()));
    return;
  }
  for (const auto& [key, value] : record.tags) {
    warn_if_error(run.set_tag(key, value.substr(0, kMaxTagValue)), fmt::format("tag '{}'", key));
  }
  log_run_metrics(run, first_launcher, record.metrics);
}

absl::Status end_run(Run& run, const LaunchResult& result) {
  run.record_exit(result.exit_code, result.term_signal);
  warn_if_error(run.set_tag("trainscope.exit_code", std::to_string(result.exit_code)),
                "tag trainscope.exit_code");
  if (result.term_signal != 0) {
    warn_if_error(run.set_tag("trainscope.signal", std::to_string(result.term_signal)),
                  "tag trainscope.signal");
  }
  if (result.sigkilled != 0) {
    warn_if_error(run.set_tag("trainscope.sigkill", std::to_string(result.sigkilled)),
                  "tag trainscope.sigkill");
  }
  return end_locked(run, result.status);
}

absl::Status check_options(const LaunchOptions& options) {
  if (options.command.empty() || options.command[0].empty()) {
    return absl::InvalidArgumentError("no command to run");
  }
  for (int device : options.devices) {
    if (device < 0) return absl::InvalidArgumentError(fmt::format("invalid GPU index {}", device));
  }
  if (!options.devices.empty() && !options.devices_checked) {  // before anything runs
    std::unique_ptr<nvml::NvmlApi> driver = options.nvml ? nullptr : nvml::load_nvml();
    nvml::NvmlApi* api = options.nvml ? options.nvml : driver.get();
    if (absl::Status known = nvml::check_gpu_indices("--devices", options.devices, api);
        !known.ok()) {
      return known;
    }
  }
  if (!options.auto_instrument.empty()) {
    if (absl::StatusOr<std::string> mode = parse_auto_mode(options.auto_instrument); !mode.ok()) {
      return mode.status();
    }
  }
  for (const auto& [name, value] : options.environment) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("environment variable '{}': a name must be non-empty and hold no '=' or NUL, "
                      "a value no NUL",
                      name));
    }
  }
  const char* tool = options.profiler == Profiler::kNsys  ? "nsys"
                     : options.profiler == Profiler::kNcu ? "ncu"
                                                          : nullptr;
  if (tool != nullptr && !on_path(tool)) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is not installed (not found on PATH); install NVIDIA Nsight {} or drop --{}", tool,
        options.profiler == Profiler::kNsys ? "Systems" : "Compute", tool));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Run>> start_run(const LaunchOptions& launch) {
  RunOptions options = launch.run;
  options.handle_signals = false;
  options.attach_from_environment = false;
  options.role = RunRole::kLauncher;
  options.command = launch.command;
  if (launch.join_job_from_environment && options.dir.empty() && options.id.empty()) {
    if (std::optional<std::string> id = job_run_id()) options.id = *id;
  }
  const std::string wanted_name = options.name;
  std::lock_guard<std::mutex> lock(environment_mutex());
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(std::move(options));
  // A launcher that joins a run (a second task of the job, --run-dir) keeps
  // the name the first one gave it: a different --name is said, not dropped.
  if (run.ok() && !wanted_name.empty() && (*run)->info().name != wanted_name) {
    warn(fmt::format(
        "run {}: --name '{}' not applied: the run is already named '{}' (by the launcher that "
        "created it)",
        (*run)->dir(), wanted_name, (*run)->info().name));
  }
  return run;
}

std::vector<std::string> child_environment(const LaunchOptions& options,
                                           const std::string& run_dir) {
  std::vector<std::string> env = environment_copy();
  if (!options.devices.empty())
    set_variable(&env, kCudaVisibleDevices, devices_list(options.devices));
  // Said once by this launcher (or its parent): the command's CPU-only GPU
  // timers and its own runs stay quiet about it.
  if (detail::no_gpu_noted()) set_variable(&env, detail::kNoGpuNotedVariable, "1");
  for (const auto& [name, value] : options.environment) set_variable(&env, name, value);
  set_variable(&env, std::string(kRunDirEnv), run_dir);
  set_variable(&env, std::string(kLauncherEnv), launcher_id());
  return env;
}

// The command could not start: the run records why and ends FAILED.
LaunchResult spawn_failed(Run& run, const std::string& name, int error, int stderr_log) {
  LaunchResult result;
  result.run_dir = run.dir();
  result.status = RunStatus::kFailed;
  result.exit_code = error == ENOENT ? kExitNotFound : kExitNotExecutable;
  if (error == ENOENT) {
    result.spawn_error = absl::NotFoundError(fmt::format("command not found: '{}'", name));
  } else {
    result.spawn_error = absl::FailedPreconditionError(
        fmt::format("cannot run '{}': {}", name, std::strerror(error)));
  }
  const std::string line =
      fmt::format("trainscope run: {}\n", std::string(result.spawn_error.message()));
  detail::write_all(stderr_log, line);
  warn_if_error(end_run(run, result), "run end");
  return result;
}

}  // namespace

std::string ncu_range(const std::string& range) {
  // In an ncu NVTX filter '/' nests push/pop ranges; trainscope's are start/end
  // ranges whose names hold '/' (layer/3, eval/FORWARD): escaped, or ncu would
  // profile nothing (seen on an H100 with Nsight Compute 2025.3, issue 27).
  constexpr std::string_view kDomain = "trainscope@";
  if (range.compare(0, kDomain.size(), kDomain) != 0) return range;
  std::string out(kDomain);
  for (std::size_t i = kDomain.size(); i < range.size(); ++i) {
    if (range[i] == '\\' && i + 1 < range.size()) {  // already escaped: kept
      out += range[i];
      out += range[++i];
      continue;
    }
    if (range[i] == '/') out += '\\';
    out += range[i];
  }
  return out;
}

std::vector<std::string> profiled_command(Profiler profiler, const std::string& range,
                                          const std::string& output_base,
                                          const std::vector<std::string>& command) {
  std::vector<std::string> out;
  if (profiler == Profiler::kNsys) {
    out = {"nsys", "profile", "-o", output_base, "--force-overwrite", "true"};
    if (!range.empty()) {
      out.push_back("--capture-range=nvtx");
      out.push_back("--nvtx-capture=" + range);
    }
    out.push_back("--");
  } else if (profiler == Profiler::kNcu) {
    out = {"ncu", "-o", output_base};
    if (!range.empty()) out.insert(out.end(), {"--nvtx", "--nvtx-include", ncu_range(range)});
  }
  out.insert(out.end(), command.begin(), command.end());
  return out;
}

std::map<std::string, std::string> params_from_arguments(const std::vector<std::string>& args) {
  const auto is_value = [](const std::string& arg) {
    if (arg.empty() || arg[0] != '-') return true;
    char* end = nullptr;
    std::strtod(arg.c_str(), &end);
    return end != nullptr && *end == '\0';
  };
  std::map<std::string, std::string> params;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const std::size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      params[arg.substr(2, equals - 2)] = arg.substr(equals + 1);
    } else if (i + 1 < args.size() && is_value(args[i + 1])) {
      params[arg.substr(2)] = args[++i];
    } else {
      params[arg.substr(2)] = "true";
    }
  }
  return params;
}

// --auto: the bootstrap's directory, first on the command's PYTHONPATH (and
// removed when the launch returns); none when off or it could not be written.
class AutoBootstrap {
 public:
  explicit AutoBootstrap(LaunchOptions* options) {
    if (options->auto_instrument.empty()) return;
    if (!is_python_command(options->command)) {
      warn(
          fmt::format("trainscope run --auto: {} is not a Python program: nothing in it is "
                      "instrumented (the Python processes it starts are)",
                      options->command.empty() ? "" : options->command[0]));
    }
    absl::StatusOr<std::string> dir = launcher::detail::write_auto_bootstrap();
    if (!dir.ok()) {
      warn(fmt::format("trainscope run --auto: nothing is instrumented: {}",
                       dir.status().ToString()));
      return;
    }
    dir_ = *dir;
    std::string python_path = dir_;
    const auto given = options->environment.find("PYTHONPATH");
    const char* inherited = std::getenv("PYTHONPATH");
    const std::string rest = given != options->environment.end() ? given->second
                             : inherited != nullptr              ? inherited
                                                                 : "";
    if (!rest.empty()) python_path += ":" + rest;
    options->environment["PYTHONPATH"] = python_path;
    options->environment["TRAINSCOPE_AUTO"] = options->auto_instrument;
  }
  ~AutoBootstrap() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  AutoBootstrap(const AutoBootstrap&) = delete;
  AutoBootstrap& operator=(const AutoBootstrap&) = delete;
  bool on() const { return !dir_.empty(); }

 private:
  std::string dir_;
};

absl::StatusOr<LaunchResult> launch(LaunchOptions options) {
  if (absl::Status status = check_options(options); !status.ok()) return status;
  const AutoBootstrap auto_bootstrap(&options);
  // Registered before the run exists: a signal from now on stops the command
  // as soon as it starts, instead of killing us with the run left RUNNING.
  SignalForwarding forwarding(options.forward_signals);
  absl::StatusOr<std::unique_ptr<Run>> started = start_run(options);
  if (!started.ok()) return started.status();
  Run& run = **started;
  for (std::shared_ptr<Exporter>& exporter : options.exporters) run.add_exporter(exporter);
  record_command(run, options.command);
  if (options.run_started) {
    try {
      options.run_started(run.dir());
    } catch (const std::exception& error) {
      warn(fmt::format("trainscope run: the run's start hook failed: {}", error.what()));
    } catch (...) {
      warn("trainscope run: the run's start hook failed");
    }
  }
  if (auto_bootstrap.on()) {
    warn_if_error(run.set_tag("trainscope.auto", options.auto_instrument), "tag 'trainscope.auto'");
  }

  // No NVIDIA driver is a normal state: when sampling (GPU metrics would be
  // read), one line, here, before the command's output; its CPU-only timers
  // then stay quiet about it. Without sampling a timer says it itself, once.
  if (options.sample_hardware && !detail::no_gpu_noted() && !nvml::driver_library_present()) {
    detail::note_no_gpu("GPU metrics and GPU timing are off");
  }

  CommandLogs logs;
  if (absl::Status status = logs.open(run.dir(), options.tee); !status.ok()) {
    (void)end_locked(run, RunStatus::kFailed);
    return status;
  }
  const std::vector<std::string> argv = profiled_command(
      options.profiler, options.profile_range, run.dir() + "/artifacts/profile", options.command);
  const std::string mark = launch_mark();
  JobEnd job_end(fmt::format("{}={}", kLaunchMarkEnv, mark), options.kill_after);
  std::vector<std::string> env = child_environment(options, run.dir());
  set_variable(&env, kLaunchMarkEnv, mark);
  pid_t child = 0;
  const int spawn_error =
      options.die_with_parent
          ? spawn_dying_with_parent(argv, std::move(env), logs.out(), logs.err(), &child)
          : spawn(argv, std::move(env), logs.out(), logs.err(), true, &child);
  if (spawn_error != 0) return spawn_failed(run, argv[0], spawn_error, logs.err());
  forwarding.set_child(child);

  std::unique_ptr<Sampler> sampler = start_sampler(options, run, child);
  std::thread environment;
  if (options.record_environment)
    environment = std::thread(record_environment, run.dir(), options.command);
  logs.start_following();

  // LaunchOptions::watch (`--on-hang`): its messages here and in the command's stderr log.
  launcher::detail::CommandWatch watch(
      options.watch, options.watch_interval, run.dir(),
      [&logs, &options](const std::string& line) {
        // The log is followed to this terminal with tee.
        if (!options.tee) warn(line);
        detail::write_all(logs.err(), line + "\n");
      },
      [&run, &logs](const std::vector<RunMetric>& metrics) {
        log_run_metrics(run, logs.first(), metrics);
      });
  job_end.set_group(child);
  int cancelled = 0;
  bool exited = false;
  siginfo_t info = {};
  while (true) {
    if (options.cancel && cancelled == 0 && (cancelled = options.cancel->requested()) != 0) {
      ::kill(-child, cancelled);
    }
    if (cancelled == 0 && (cancelled = watch.requested()) != 0) ::kill(-child, cancelled);
    job_end.stop(cancelled != 0 ? cancelled : forwarding.forwarded());
    if (job_end.signal() != 0) watch.stop();  // no verdict on a job that ends
    // WNOWAIT: the child stays a zombie (its pid, the group's id, reserved)
    // until forwarding and the job's end are done with it.
    if (!exited) {
      info.si_pid = 0;
      exited =
          (::waitid(P_PID, child, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR) ||
          info.si_pid == child;
    }
    if (job_end.signal() == 0 ? exited : job_end.done(exited)) break;
    std::this_thread::sleep_for(kWaitPoll);
  }
  watch.stop();
  if (!watch.reason().empty()) {
    warn_if_error(run.set_tag("trainscope.end_reason", watch.reason()),
                  "tag trainscope.end_reason");
  }
  // Its last sample still finds the exited command's process (a zombie).
  if (sampler) sampler->stop();
  forwarding.clear_child();
  int wait_status = 0;
  while (::waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
  }
  logs.finish();
  if (environment.joinable()) environment.join();

  LaunchResult result = outcome(wait_status, job_end.signal());
  result.run_dir = run.dir();
  if ((result.sigkilled = job_end.killed()) > 0) {
    const std::string line = job_end.message();
    warn(line);
    detail::write_all(logs.err(), line + "\n");
  }
  set_end_record(run, options, result, logs.first());
  warn_if_error(end_run(run, result), "run end");
  // The status printed is the run directory's (ranks and launchers
  // combined, as every reader sees it), unless it still runs (another
  // launcher of the job goes on): then this launcher's own. The exit code
  // stays the command's.
  if (absl::StatusOr<RunReader> read = RunReader::Open(run.dir());
      read.ok() && read->info().status != RunStatus::kRunning) {
    result.status = read->info().status;
    // What the run lost (rows not written on a full disk, a file cut short),
    // said on this terminal: the command's own warnings went to its log
    // files, which a full disk may not have kept.
    if (absl::StatusOr<std::vector<RunProblem>> problems = check_run(*read); problems.ok()) {
      for (const RunProblem& p : *problems) warn(fmt::format("trainscope run: {}", p.message));
    }
  }
  return result;
}

}  // namespace trainscope
