#include "trainscope/run/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/files.hpp"
#include "common/fork_owner.hpp"
#include "common/stable_hash.hpp"
#include "fmt/format.h"
#include "run/dump_handler.hpp"
#include "run/rank_claim.hpp"
#include "run/run_store_exporter.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/export/mlflow/mlflow_keys.hpp"
#include "trainscope/run/sync.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

using mlflow::kMaxParamValueLength;
using mlflow::kMaxTagValueLength;
constexpr std::string_view kDefaultExperiment = "Default";
// The byte that tells the heartbeat thread to stop; signals send their number.
constexpr unsigned char kStopByte = 0;

std::string quote(std::string_view text) {
  return fmt::format("\"{}\"", absl::CHexEscape(std::string(text)));
}

absl::Status validate_map(std::string_view kind, const std::map<std::string, std::string>& map,
                          std::size_t max_length) {
  for (const auto& [key, value] : map) {
    absl::Status status = mlflow::validate_key(key, kind);
    if (status.ok()) status = mlflow::validate_value(kind, key, value, max_length);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// 128 random bits as 32 lowercase hex digits, as MLflow's run ids.
std::string random_run_id() {
  std::random_device random;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
}

std::string env_or(const char* variable, std::string_view fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? std::string(value) : std::string(fallback);
}

// Children may run in another working directory, so the directory they
// inherit through the environment must be absolute.
absl::StatusOr<std::string> make_directories(const std::string& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  if (!error) fs::create_directories(absolute, error);
  if (error) {
    return absl::ErrnoToStatus(error.value(),
                               fmt::format("cannot create run directory {}", quote(path)));
  }
  return absolute.lexically_normal().string();
}

// A new, empty directory <root>/<random id>.
absl::StatusOr<std::string> create_run_directory(const std::string& root, std::string* id) {
  absl::StatusOr<std::string> parent = make_directories(root);
  if (!parent.ok()) return parent.status();
  for (int attempt = 0; attempt < 8; ++attempt) {
    *id = random_run_id();
    std::string dir = fmt::format("{}/{}", *parent, *id);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) return detail::file_error(errno, "create run directory", dir);
  }
  return absl::InternalError(fmt::format("no unused run id under {}", quote(*parent)));
}

absl::StatusOr<RunInfo> read_run_info_file(const std::string& dir) {
  const std::string path = fmt::format("{}/{}", dir, run::detail::kRunFileName);
  absl::StatusOr<std::string> text = detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return run::detail::parse_run_file(*text, path);
}

// The one place a Run turns on MLflow export: when MLFLOW_TRACKING_URI is
// set, as MLflow's own client. A configuration MLflow export cannot use
// (e.g. a file: store) is warned about, not fatal: the run directory keeps
// everything, and `trainscope sync` can upload it later.
void maybe_add_mlflow_exporter(bool from_environment, const std::string& dir,
                               ExportPipeline* pipeline) {
  if (!from_environment) return;
  absl::StatusOr<std::optional<MlflowConfig>> config = mlflow_config_from_environment();
  if (!config.ok()) {
    warn(fmt::format("run {}: not exporting to MLflow: {}", dir,
                     std::string(config.status().message())));
    return;
  }
  if (!config->has_value()) return;
  pipeline->add_exporter(make_mlflow_exporter(dir, **std::move(config)));
}

// --- Signals ---------------------------------------------------------------
// The handler only writes the signal number to the heartbeat thread's pipe
// (write() is async-signal-safe); that thread ends the run and re-raises.

// SIGHUP: a closed terminal or ssh session (and `trainscope run` forwards it).
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<bool> g_signals_claimed{false};  // one Run per process handles signals
std::atomic<int> g_signal_fd{-1};
std::atomic<pid_t> g_signal_pid{0};      // a forked child does not end its parent's run
std::atomic<bool> g_signal_seen{false};  // a second signal does not wait for the flush
// Run::back_up_signal_handlers: the host's handler (g_previous) is called first.
std::atomic<bool> g_host_first{false};
// Run::ForkedChild::kDefaultAction: in a forked child the host's handler is not
// called. Python's notes the signal for its main thread, and a child that gets
// it before Python's after-fork work (a Pool worker terminate()d before it
// first ran) has the note wiped there (_PySignal_AfterFork): it lived on, the
// parent waited on it forever.
std::atomic<bool> g_child_default{false};
std::atomic<unsigned> g_installed{0};  // bit signal_slot(): our handler is in place
struct sigaction g_previous[3];

int signal_slot(int signal_number) {
  return signal_number == SIGINT ? 0 : signal_number == SIGTERM ? 1 : 2;
}

extern "C" void on_terminating_signal(int signal_number) {
  const int saved_errno = errno;
  const int fd = g_signal_fd.load();
  const bool in_child = ::getpid() != g_signal_pid.load();
  if (in_child && g_child_default.load()) {  // set only over a host's handler
    struct sigaction action = {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
    ::raise(signal_number);  // delivered as the handler returns
  } else if (g_host_first.load()) {
    // The host's handler (Python's only notes the signal for its main thread),
    // then, in the process of the run, the heartbeat thread's deadline.
    g_previous[signal_slot(signal_number)].sa_handler(signal_number);
    if (fd >= 0 && !in_child && !g_signal_seen.exchange(true)) {
      const auto byte = static_cast<unsigned char>(signal_number);
      (void)!::write(fd, &byte, 1);
    }
  } else if (fd >= 0 && !in_child && !g_signal_seen.exchange(true)) {
    const auto byte = static_cast<unsigned char>(signal_number);
    (void)!::write(fd, &byte, 1);
  } else {
    // Not ours to flush (forked child) or asked twice: what would have happened without us.
    ::sigaction(signal_number, &g_previous[signal_slot(signal_number)], nullptr);
    ::raise(signal_number);
  }
  errno = saved_errno;
}

// Returns whether this Run now owns the process's handling of `signals` (of
// kHandledSignals). host_first: only over a handler function of the host's
// (Run::back_up_signal_handlers), which our handler calls first.
bool install_signal_handlers(int write_fd, const std::vector<int>& signals, bool host_first,
                             bool child_default = false) {
  if (g_signals_claimed.exchange(true)) return false;
  g_signal_fd.store(write_fd);
  g_signal_pid.store(::getpid());
  g_signal_seen.store(false);
  g_host_first.store(host_first);
  g_child_default.store(host_first && child_default);
  unsigned installed = 0;
  for (int signal_number : signals) {
    struct sigaction& previous = g_previous[signal_slot(signal_number)];
    ::sigaction(signal_number, nullptr, &previous);
    const bool handler = !(previous.sa_flags & SA_SIGINFO);
    // An ignored signal (nohup) stays ignored.
    if (handler && previous.sa_handler == SIG_IGN) continue;
    if (host_first && (!handler || previous.sa_handler == SIG_DFL)) continue;
    struct sigaction action = {};
    action.sa_handler = on_terminating_signal;
    sigemptyset(&action.sa_mask);
    // Over a host's handler, the host's flags: Python's handler runs only once
    // the main thread is back in the interpreter, and installs itself without
    // SA_RESTART so that a blocking read returns EINTR and it gets there (a
    // fork-context Pool worker waiting for its next task and terminate()d).
    action.sa_flags = host_first ? (previous.sa_flags & (SA_RESTART | SA_ONSTACK)) : SA_RESTART;
    ::sigaction(signal_number, &action, nullptr);
    installed |= 1u << signal_slot(signal_number);
  }
  g_installed.store(installed);
  if (installed == 0 && host_first) {
    g_signals_claimed.store(false);
    return false;
  }
  return true;
}

void restore_signal_handlers() {
  for (int signal_number : kHandledSignals) {
    const int slot = signal_slot(signal_number);
    if (g_installed.load() & (1u << slot)) ::sigaction(signal_number, &g_previous[slot], nullptr);
  }
  g_installed.store(0);
  g_host_first.store(false);
  g_child_default.store(false);
  g_signal_fd.store(-1);
  g_signals_claimed.store(false);
}

}  // namespace

// Everything behind a Run, shared with its heartbeat thread.
struct Run::State {
  // The process whose threads flush this run; a forked child leaves it alone.
  const detail::ForkOwner owner;
  std::string dir;
  RankInfo rank;
  RunOptions options;
  bool set_environment = false;  // this Run published TRAINSCOPE_RUN_DIR
  bool owns_signals = false;
  bool owns_dump = false;  // the dump signal's handler (dump_handler.hpp)
  bool refused = false;    // another process records this rank (rank_claim.hpp)
  std::shared_ptr<run::detail::RunStoreExporter> store;
  std::unique_ptr<ExportPipeline> pipeline;

  std::mutex mu;  // guards info, last_step, ended, end_status
  RunInfo info;
  std::map<std::string, std::int64_t> last_step;
  bool ended = false;
  absl::Status end_status;

  int wake_read = -1;
  int wake_write = -1;
  std::thread heartbeat;
  // Run::back_up_signal_handlers' grace (ms); -1: the signal ends the run at once.
  std::atomic<std::int64_t> host_grace_ms{-1};

  ~State() {
    stop_heartbeat();
    pipeline.reset();  // drains into the store before it goes
    for (int fd : {wake_read, wake_write}) {
      if (fd >= 0) ::close(fd);
    }
  }

  // What every call of a forked child gets: the run is its parent's.
  absl::Status forked_error() const {
    return absl::FailedPreconditionError(fmt::format(
        "run {} is recorded by pid {}; this process (pid {}) is a forked child of it and "
        "records nothing into it: start a run in the child (Run::Start, which joins "
        "TRAINSCOPE_RUN_DIR) to record",
        dir, owner.pid(), ::getpid()));
  }

  absl::Status checked_running() const {
    if (!ended) return absl::OkStatus();
    return absl::FailedPreconditionError(fmt::format("run {} has ended", info.id));
  }

  // A param (write-once) or tag: validated, merged into run.json now, under
  // the run's lock, so that a conflict with any rank is reported here rather
  // than lost in the background; then streamed to the exporters.
  absl::Status record_key_value(const char* kind,
                                std::map<std::string, std::string> RunInfo::*field,
                                std::size_t max_value_length, std::string_view key,
                                std::string_view value);
  absl::Status finish(RunStatus status);
  void stop_heartbeat();
  void heartbeat_loop();
  bool host_ended_in(std::int64_t grace_ms);
  absl::Status start_heartbeat();
};

absl::Status Run::State::finish(RunStatus status) {
  if (status == RunStatus::kRunning) {
    return absl::InvalidArgumentError("end(RUNNING): a run ends FINISHED, FAILED or KILLED");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (ended) return end_status;
  ended = true;
  // Samples still in the rings reach the store before it summarizes them.
  pipeline->flush();
  Summary summary = store->stream_summary();
  if (!summary.entries.empty()) pipeline->submit_summary(std::move(summary));
  info.status = status;
  info.end_time_ms = detail::unix_now_ms();
  pipeline->submit_run_info(info);
  pipeline->flush();
  end_status = store->last_flush_status();
  if (owns_signals) {
    restore_signal_handlers();
    owns_signals = false;
  }
  if (owns_dump) {
    run::detail::remove_dump_handler();
    owns_dump = false;
  }
  // Later runs of this process must not attach to an ended one.
  const char* published = std::getenv(kRunDirEnv.data());
  if (set_environment && published != nullptr && dir == published) {
    ::unsetenv(kRunDirEnv.data());
  }
  return end_status;
}

void Run::State::stop_heartbeat() {
  if (!heartbeat.joinable() || heartbeat.get_id() == std::this_thread::get_id()) return;
  const unsigned char byte = kStopByte;
  (void)!::write(wake_write, &byte, 1);
  heartbeat.join();
}

// Flushes every interval (appending records and renewing the rank file's
// heartbeat) and ends the run when a signal arrives.
void Run::State::heartbeat_loop() {
  const absl::Duration interval = options.flush_interval;
  const int timeout_ms =
      interval == absl::InfiniteDuration()
          ? -1
          : static_cast<int>(std::clamp<std::int64_t>(absl::ToInt64Milliseconds(interval), 1,
                                                      std::numeric_limits<int>::max()));
  pollfd wake = {wake_read, POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&wake, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      pipeline->flush();
      continue;
    }
    unsigned char byte = kStopByte;
    if (ready < 0 || ::read(wake_read, &byte, 1) != 1 || byte == kStopByte) return;
    const std::int64_t grace_ms = host_grace_ms.load();
    if (grace_ms >= 0 && host_ended_in(grace_ms)) return;
    absl::Status status = finish(RunStatus::kKilled);
    if (!status.ok()) warn(fmt::format("run {}: {}", dir, std::string(status.message())));
    // The handlers are restored by now: the signal does what it did before,
    // or, when the host's handler could not run, what it does by default.
    if (grace_ms >= 0) ::signal(byte, SIG_DFL);
    ::raise(byte);
    return;
  }
}

// Whether the host's handler ended the run (Run::end stops this thread)
// within `grace_ms` of the signal.
bool Run::State::host_ended_in(std::int64_t grace_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  pollfd wake = {wake_read, POLLIN, 0};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&wake, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    unsigned char byte = 0;
    if (::read(wake_read, &byte, 1) != 1 || byte == kStopByte) return true;
  }
}

absl::Status Run::State::start_heartbeat() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return detail::file_error(errno, "create", "a pipe");
  wake_read = fds[0];
  wake_write = fds[1];
  // A signal handler must never block on a full pipe.
  ::fcntl(wake_write, F_SETFL, O_NONBLOCK);
  if (options.handle_signals) {
    owns_signals = install_signal_handlers(wake_write, {SIGINT, SIGTERM, SIGHUP}, false);
    if (options.role == RunRole::kRank)
      owns_dump = run::detail::install_dump_handler(dir, rank.rank);
  }
  heartbeat = std::thread([this] { heartbeat_loop(); });
  return absl::OkStatus();
}

namespace {

// Where a run lives: an explicit directory, TRAINSCOPE_RUN_DIR, a job's
// derived id under the root, or a new random id under the root.
absl::StatusOr<std::string> run_directory(const RunOptions& options, RunInfo* fresh,
                                          bool* from_environment) {
  *from_environment = false;
  if (!options.dir.empty()) return make_directories(options.dir);
  const char* env_dir = options.attach_from_environment ? std::getenv(kRunDirEnv.data()) : nullptr;
  if (env_dir != nullptr && *env_dir != '\0') {
    *from_environment = true;
    return make_directories(env_dir);
  }
  if (options.id.empty()) return create_run_directory(options.root, &fresh->id);
  if (options.id.size() != 32 ||
      options.id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("run id {} is not 32 lowercase hex digits", quote(options.id)));
  }
  fresh->id = options.id;
  return make_directories(fmt::format("{}/{}", options.root, options.id));
}

}  // namespace

std::optional<std::string> job_run_id(std::string* source) {
  struct Job {
    const char* first;
    const char* second;
  };
  constexpr Job kJobs[] = {{"SLURM_JOB_ID", "SLURM_STEP_ID"},
                           {"TORCHELASTIC_RUN_ID", nullptr},
                           {"PMIX_NAMESPACE", nullptr}};
  for (const Job& job : kJobs) {
    const char* first = std::getenv(job.first);
    const char* second = job.second != nullptr ? std::getenv(job.second) : "";
    if (first == nullptr || *first == '\0' || second == nullptr) continue;
    const std::string key = fmt::format("{}={};{}", job.first, first, second);
    if (source != nullptr) {
      *source = job.second != nullptr
                    ? fmt::format("{}={} {}={}", job.first, first, job.second, second)
                    : fmt::format("{}={}", job.first, first);
    }
    return run_id_from_key(key);
  }
  return std::nullopt;
}

std::string run_id_from_key(std::string_view key) {
  return fmt::format("{:016x}{:016x}", detail::stable_hash(key),
                     detail::stable_hash(key, 0x84222325cbf29ce4ULL));
}

absl::StatusOr<std::unique_ptr<Run>> Run::Start(RunOptions options) {
  absl::Status status = validate_map("param", options.params, kMaxParamValueLength);
  if (status.ok()) status = validate_map("tag", options.tags, kMaxTagValueLength);
  if (!status.ok()) return status;
  absl::StatusOr<RankInfo> rank =
      options.role == RunRole::kLauncher ? RankInfo{} : rank_from_environment();
  if (!rank.ok()) return rank.status();
  if (options.root == kDefaultRunsRoot) options.root = default_runs_root();
  if (options.experiment == kDefaultExperiment) {
    options.experiment = env_or("MLFLOW_EXPERIMENT_NAME", kDefaultExperiment);
  }

  auto state = std::make_unique<State>();
  state->rank = *rank;
  RunInfo fresh;
  fresh.start_time_ms = detail::unix_now_ms();
  fresh.experiment = options.experiment;
  bool from_environment = false;
  absl::StatusOr<std::string> dir = run_directory(options, &fresh, &from_environment);
  if (!dir.ok()) return dir.status();
  state->dir = *dir;
  state->set_environment = !from_environment;
  if (fresh.id.empty()) fresh.id = random_run_id();
  fresh.name = options.name.empty() ? fresh.id : options.name;

  // Whichever process links run.json first creates the run; the others
  // attach to what it wrote.
  bool created;
  status =
      detail::create_file_exclusively(fmt::format("{}/{}", state->dir, run::detail::kRunFileName),
                                      run::detail::format_run_file(fresh), &created);
  if (!status.ok()) return status;
  // One live process records a rank; a second claimant warns and records
  // nothing, not even its params (which could then never conflict).
  run::detail::RankClaim claim;
  if (options.role != RunRole::kLauncher) {
    absl::StatusOr<run::detail::RankClaim> claimed =
        run::detail::claim_rank(state->dir, state->rank.rank);
    if (!claimed.ok()) return claimed.status();
    claim = *std::move(claimed);
    state->refused = claim.kind == run::detail::RankClaimKind::kRefused;
    if (state->refused) warn(claim.message);
  }
  if (!state->refused) {
    RunInfo wanted;
    wanted.params = options.params;
    wanted.tags = options.tags;
    status = run::detail::merge_into_run_file(state->dir, wanted);
  }
  if (!status.ok()) return status;
  absl::StatusOr<RunInfo> info = read_run_info_file(state->dir);
  if (!info.ok()) return info.status();
  state->info = *std::move(info);

  const std::string artifacts = fmt::format("{}/{}", state->dir, run::detail::kArtifactsDirName);
  if (::mkdir(artifacts.c_str(), 0755) != 0 && errno != EEXIST) {
    return detail::file_error(errno, "create", artifacts);
  }
  run::detail::RunStoreExporter::Options store_options;
  store_options.claim = claim.kind;
  store_options.claimed_lock_fd = claim.release_lock();
  store_options.dir = state->dir;
  store_options.rank = state->rank;
  store_options.flush_interval = options.flush_interval;
  store_options.start_time_ms = fresh.start_time_ms;
  store_options.launcher = options.role == RunRole::kLauncher;
  store_options.command = options.command;
  if (!store_options.launcher) store_options.launched_by = env_or(kLauncherEnv.data(), "");
  absl::StatusOr<std::shared_ptr<run::detail::RunStoreExporter>> store =
      run::detail::RunStoreExporter::Create(std::move(store_options));
  if (!store.ok()) return store.status();
  state->store = *std::move(store);

  ExportPipeline::Options pipeline_options;
  pipeline_options.flush_interval = options.flush_interval;
  state->pipeline = std::make_unique<ExportPipeline>(pipeline_options);
  state->pipeline->add_exporter(state->store);
  maybe_add_mlflow_exporter(options.mlflow_from_environment && !state->refused, state->dir,
                            state->pipeline.get());
  state->pipeline->submit_run_info(state->info);
  state->options = std::move(options);
  status = state->start_heartbeat();
  if (!status.ok()) return status;
  if (state->set_environment) ::setenv(kRunDirEnv.data(), state->dir.c_str(), 1);
  return std::unique_ptr<Run>(new Run(std::move(state)));
}

Run::Run(std::unique_ptr<State> state) : state_(std::move(state)) {}

Run::~Run() {
  if (state_->owner.forked()) {
    // Its heartbeat and export threads, their locks and its files are the parent's.
    detail::abandon(state_);
    return;
  }
  // Unwinding from an exception means the training did not finish.
  const RunStatus status =
      std::uncaught_exceptions() > 0 ? RunStatus::kFailed : RunStatus::kFinished;
  bool ended_before;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ended_before = state_->ended;
  }
  absl::Status ended = end(status);
  // What an explicit end() returned was its caller's to report.
  if (!ended.ok() && !ended_before) {
    warn(fmt::format("run {}: {}", state_->dir, std::string(ended.message())));
  }
}

const std::string& Run::dir() const noexcept { return state_->dir; }
const RunInfo& Run::info() const noexcept { return state_->info; }
const RankInfo& Run::rank() const noexcept { return state_->rank; }
RunRole Run::role() const noexcept { return state_->options.role; }
void Run::record_exit(int exit_code, int term_signal) {
  if (state_->owner.forked()) return;
  state_->store->set_exit(exit_code, term_signal);
}
bool Run::owns_host() const noexcept { return state_->store->owns_host(); }
ExportPipeline& Run::pipeline() noexcept { return *state_->pipeline; }

absl::Status Run::State::record_key_value(const char* kind,
                                          std::map<std::string, std::string> RunInfo::*field,
                                          std::size_t max_value_length, std::string_view key,
                                          std::string_view value) {
  absl::Status status = mlflow::validate_key(key, kind);
  if (status.ok()) status = mlflow::validate_value(kind, key, value, max_value_length);
  if (!status.ok()) return status;
  if (owner.forked()) return forked_error();
  if (refused) return absl::OkStatus();  // recorded by the rank's owner, not here
  std::lock_guard<std::mutex> lock(mu);
  status = checked_running();
  if (!status.ok()) return status;
  RunInfo update;
  (update.*field).emplace(key, value);
  status = run::detail::merge_into_run_file(dir, update);
  // A full disk: run.json takes a little of the space this process set aside.
  if (absl::IsResourceExhausted(status) &&
      store->release_reserve(run::detail::format_run_file(info).size() + value.size())) {
    status = run::detail::merge_into_run_file(dir, update);
  }
  if (!status.ok()) return status;
  (info.*field)[std::string(key)] = value;
  pipeline->submit_run_info(info);
  return absl::OkStatus();
}

absl::Status Run::log_param(std::string_view key, std::string_view value) {
  return state_->record_key_value("param", &RunInfo::params, kMaxParamValueLength, key, value);
}

absl::Status Run::set_tag(std::string_view key, std::string_view value) {
  return state_->record_key_value("tag", &RunInfo::tags, kMaxTagValueLength, key, value);
}

absl::Status Run::log_metric(std::string_view key, double value, std::optional<std::int64_t> step) {
  absl::Status status = mlflow::validate_key(key, "metric");
  if (!status.ok()) return status;
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(fmt::format(
        "metric \"{}\" has the non-finite value {}; only finite values are recorded", key, value));
  }
  State& s = *state_;
  if (s.owner.forked()) return s.forked_error();
  std::lock_guard<std::mutex> lock(s.mu);
  status = s.checked_running();
  if (!status.ok()) return status;
  MetricPoint point;
  point.key = std::string(key);
  auto [last, first] = s.last_step.emplace(point.key, 0);
  point.step = step.has_value() ? *step : (first ? 0 : last->second + 1);
  last->second = point.step;
  point.value = value;
  point.timestamp_ms = detail::unix_now_ms();
  point.rank = s.rank.rank;
  s.pipeline->submit_metric(std::move(point));
  return absl::OkStatus();
}

absl::Status Run::log_artifact(std::string_view path) {
  if (state_->owner.forked()) return state_->forked_error();
  const fs::path source(path);
  std::error_code error;
  if (!fs::is_regular_file(source, error)) {
    return absl::NotFoundError(
        fmt::format("log_artifact({}): not a readable regular file", quote(path)));
  }
  const fs::path target =
      fs::path(state_->dir) / run::detail::kArtifactsDirName / source.filename();
  // Copied under a temporary name that readers skip, so none lists a partial artifact.
  absl::Status status = detail::copy_file_atomically(source.string(), target.string(),
                                                     run::detail::kArtifactTmpPrefix);
  if (!status.ok()) {
    return absl::Status(status.code(), fmt::format("log_artifact({}): {}", quote(path),
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

// A forked child's timers keep their statistics and stream nowhere.
void Run::attach(Timer& timer) {
  if (!state_->owner.forked()) timer.attach(pipeline());
}
void Run::attach(CPUGPUTimer& timer) {
  if (!state_->owner.forked()) timer.attach(pipeline());
}

std::uint64_t Run::adopt_held(HoldingSink& held) {
  if (state_->owner.forked()) return 0;  // held for a run of the child's own
  const std::uint64_t dropped = held.dropped();
  HoldingSink::Held taken = held.take();
  for (auto& ring : taken.rings) pipeline().adopt_ring(std::move(ring));
  for (Summary& summary : taken.summaries) pipeline().submit_summary(std::move(summary));
  return dropped;
}

void Run::add_summary(const Summary& summary) { pipeline().submit_summary(summary); }

void Run::add_exporter(std::shared_ptr<Exporter> exporter) {
  if (state_->owner.forked()) return;
  pipeline().add_exporter(std::move(exporter));
  // A late exporter still learns which run it is exporting.
  std::lock_guard<std::mutex> lock(state_->mu);
  pipeline().submit_run_info(state_->info);
}

bool Run::back_up_signal_handlers(const std::vector<int>& signals, absl::Duration grace,
                                  ForkedChild child) {
  for (int signal_number : signals) {
    if (signal_number != SIGINT && signal_number != SIGTERM && signal_number != SIGHUP) {
      return false;
    }
  }
  if (state_->owner.forked()) return false;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->ended || state_->owns_signals) return false;
  state_->host_grace_ms.store(std::max<std::int64_t>(absl::ToInt64Milliseconds(grace), 0));
  state_->owns_signals = install_signal_handlers(state_->wake_write, signals, true,
                                                 child == ForkedChild::kDefaultAction);
  if (!state_->owns_signals) state_->host_grace_ms.store(-1);
  return state_->owns_signals;
}

absl::Status Run::end(RunStatus status) {
  if (state_->owner.forked()) return state_->forked_error();
  absl::Status result = state_->finish(status);
  state_->stop_heartbeat();
  return result;
}

}  // namespace trainscope
