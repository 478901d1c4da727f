// A run: metadata, params, tags, metrics, region samples and artifacts,
// recorded into a local run directory by a background thread (no server
// needed) and fanned out to any other exporters (MLflow, W&B, Perfetto).
//
// Layout and format: docs/run-format.md. Processes of one job (ranks, child
// processes) find the run through TRAINSCOPE_RUN_DIR and each write their
// own per-rank files, so they never clobber each other.
#ifndef TRAINSCOPE_RUN_RUN_HPP_
#define TRAINSCOPE_RUN_RUN_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/export/exporter.hpp"
#include "trainscope/export/holding_sink.hpp"
#include "trainscope/export/run_record.hpp"
#include "trainscope/run/run_dirs.hpp"

namespace trainscope {

class Timer;
class CPUGPUTimer;

// The environment variable through which child processes and ranks attach.
inline constexpr std::string_view kRunDirEnv = "TRAINSCOPE_RUN_DIR";
// "<host>:<pid>" of the launcher (`trainscope run`) that started a process
// tree: its ranks record it in their rank files.
inline constexpr std::string_view kLauncherEnv = "TRAINSCOPE_LAUNCHER";

// A rank is a process of the training (it times regions and logs metrics);
// a launcher (`trainscope run`, launch()) starts ranks, records the command
// and how it ended, and samples its host. A launcher is never a rank.
enum class RunRole { kRank, kLauncher };

struct RunOptions {
  // Parent directory of new runs; TRAINSCOPE_RUNS_ROOT overrides the default
  // (default_runs_root()).
  std::string root = std::string(kDefaultRunsRoot);
  std::string name;                    // default: the run id
  std::string experiment = "Default";  // MLFLOW_EXPERIMENT_NAME overrides the default
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> tags;
  // How often the background thread appends to the run directory: a
  // kill -9 loses at most this much.
  absl::Duration flush_interval = absl::Seconds(1);
  // SIGINT/SIGTERM end the run as KILLED (everything flushed), then the
  // signal's previous disposition runs. Off for hosts that own signals (Python).
  bool handle_signals = true;
  // Attach to TRAINSCOPE_RUN_DIR when set instead of creating a new run.
  bool attach_from_environment = true;
  // Also export to MLflow when MLFLOW_TRACKING_URI is set (see mlflow_exporter.hpp).
  bool mlflow_from_environment = true;
  RunRole role = RunRole::kRank;
  std::vector<std::string> command;  // a launcher's command, recorded in its launcher file
  // The run directory to create or join (e.g. on a shared filesystem for a
  // multi-node job); wins over TRAINSCOPE_RUN_DIR and `root`.
  std::string dir;
  // The id of a new run under `root` (32 lowercase hex digits, as MLflow's;
  // see job_run_id()); a run of that id already there is joined. Empty: random.
  std::string id;
};

// The run id that every launcher of one job derives from the environment the
// scheduler gives it, so that they join one run: SLURM_JOB_ID + SLURM_STEP_ID
// (srun), TORCHELASTIC_RUN_ID (torchrun), PMIX_NAMESPACE (Open MPI's mpirun).
// nullopt outside such a job. `source` (optional) names the variables used.
std::optional<std::string> job_run_id(std::string* source = nullptr);
// A run id (32 lowercase hex digits) that is a stable hash of `key`: every
// process that knows the key derives the same id (job_run_id(), the tasks of
// a `trainscope sweep --slurm` array).
std::string run_id_from_key(std::string_view key);

class Run {
 public:
  // Creates a run directory under options.root (or attaches to
  // TRAINSCOPE_RUN_DIR), writes this rank's metadata and starts the writer.
  // Errors name the directory and what is wrong (not writable, corrupt
  // run.json, ...).
  static absl::StatusOr<std::unique_ptr<Run>> Start(RunOptions options = {});
  // Ends the run as FINISHED if end() was not called.
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const std::string& dir() const noexcept;
  const RunInfo& info() const noexcept;
  const RankInfo& rank() const noexcept;  // a launcher's is rank 0 of 1 and means nothing
  RunRole role() const noexcept;
  // A launcher's command ended so: recorded in its launcher file at the next flush.
  void record_exit(int exit_code, int term_signal);
  // For a launcher: whether it is the first of its host (samples host-wide sources).
  bool owns_host() const noexcept;

  // Params are write-once: the same key with another value is an error.
  // Keys must be MLflow-valid (<= 250 chars of [/\w.\- :]); values <= 6000 chars.
  absl::Status log_param(std::string_view key, std::string_view value);
  absl::Status set_tag(std::string_view key, std::string_view value);
  // Non-finite values are an error (nothing recorded). Without a step, the
  // key's previous step + 1 (0 first).
  absl::Status log_metric(std::string_view key, double value,
                          std::optional<std::int64_t> step = {});
  // Copies a file into the run's artifacts/ directory.
  absl::Status log_artifact(std::string_view path);

  // Streams the timer's regions into the run from now on.
  void attach(Timer& timer);
  void attach(CPUGPUTimer& timer);
  // Takes what timers built before the run held there (their queued regions,
  // drained into the run's files as if attached from the start, and
  // summaries); returns how many regions did not fit in the sink's budget.
  // Attach those timers afterwards to stream their next regions.
  std::uint64_t adopt_held(HoldingSink& held);
  // Summaries of a timer, stored at end (also done by end() for attached timers).
  void add_summary(const Summary& summary);
  void add_exporter(std::shared_ptr<Exporter> exporter);
  ExportPipeline& pipeline() noexcept;

  // For a host that ends this run from handlers of its own for some of
  // SIGINT/SIGTERM/SIGHUP (trainscope/run.py, with handle_signals off): wraps
  // the handler functions now in place for `signals`, which stay called
  // first. If the run has not ended `grace` after such a signal, it ends
  // KILLED here and the signal's default action follows (the process ends):
  // Python runs its handlers on its main thread only, which may be blocked in
  // native code (a collective waiting on a peer that died) for as long as the
  // collective's timeout. Only in this process: a forked child gets the host's
  // handler alone, or with `child` kDefaultAction (a host handler that
  // trainscope installed over the default action: run.py's), dies of the
  // signal at once. Undone when the run ends. False (nothing changed) when
  // another Run of the process handles signals, none of `signals` has a
  // handler function in place, the run has ended or this is a forked child.
  enum class ForkedChild {
    kHostHandler,    // the child runs the host's handler
    kDefaultAction,  // the child dies of the signal (the action before the host's)
  };
  bool back_up_signal_handlers(const std::vector<int>& signals,
                               absl::Duration grace = absl::Seconds(3),
                               ForkedChild child = ForkedChild::kHostHandler);

  // Flushes everything, records the status and end time. Idempotent.
  absl::Status end(RunStatus status = RunStatus::kFinished);

 private:
  struct State;
  explicit Run(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_HPP_
