// Runs a command as a trainscope run (what `trainscope run -- cmd...` does):
// creates the run, records the environment once, samples the hardware while
// the command runs, has it write its stdout/stderr straight into the run
// directory (shown here as the files grow: the command outlives a launcher
// killed with -9, which readers then call lost), forwards
// SIGINT/SIGTERM/SIGHUP to it (SIGHUP stays ignored under nohup) and records
// how it ended. A trainscope timer inside the command attaches to the same run
// through TRAINSCOPE_RUN_DIR.
//
// The launcher is not a rank: it writes launcher-<host>-<pid>.json (command,
// exit code, status) and samples its host into host-<host>.csv; each process
// of the command that records (a timer, trainscope.log_metric) is a rank
// with its own files. Several launchers of one job (one per task or node)
// join one run (join_job_from_environment, or the same run.dir).
//
// A library function, so that a scheduler can launch many commands at once
// from several threads; each launch creates its own run unless it joins its
// job's (it never attaches to an inherited TRAINSCOPE_RUN_DIR).
#ifndef TRAINSCOPE_LAUNCH_LAUNCH_HPP_
#define TRAINSCOPE_LAUNCH_LAUNCH_HPP_

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/export/exporter.hpp"
#include "trainscope/export/run_record.hpp"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/hardware/hardware_source.hpp"
#include "trainscope/run/run.hpp"

namespace trainscope {

// Stops a launch from another thread (a scheduler's time limit, a test):
// the launch forwards the signal to the command's process group and the run
// ends KILLED.
class LaunchCancel {
 public:
  void request(int signal = SIGTERM) noexcept { signal_.store(signal); }
  int requested() const noexcept { return signal_.load(); }

 private:
  std::atomic<int> signal_{0};
};

enum class Profiler { kNone, kNsys, kNcu };

struct LaunchResult {
  // As a shell reports it: the exit status, 128 + signal when the command
  // died of a signal, 127 when it could not be started.
  // A stop signal passed on to the command (LaunchOptions::forward_signals,
  // `cancel`) counts as the one it died of, whatever it made of it.
  int exit_code = 0;
  int term_signal = 0;  // the signal that ended the command, 0 if it exited
  // Processes of the job still running kill_after after a stop signal, then
  // killed with SIGKILL (the run's tag trainscope.sigkill); 0 when none.
  int sigkilled = 0;
  RunStatus status = RunStatus::kFinished;
  std::string run_dir;
  // Why the command could not be started (OK otherwise); the run is FAILED.
  absl::Status spawn_error;
};

// A metric the launcher logs into its run, and so into every exporter of it
// (MLflow, W&B): `trainscope run`'s ledger (docs/ledger.md), live and at the end.
struct RunMetric {
  std::string key;
  double value = 0;
  std::int64_t step = 0;
};

// What a watch of the running command (LaunchOptions::watch) asks for.
struct WatchVerdict {
  // kStop: end the job as a stop signal does (SIGTERM to the whole job, SIGKILL
  // kill_after later): the run ends KILLED with the tag trainscope.end_reason.
  enum class Action : std::uint8_t { kContinue, kStop };
  Action action = Action::kContinue;
  std::string reason;   // kStop: trainscope.end_reason ("hang")
  std::string message;  // said on stderr and in the command's stderr log; empty: nothing
  // Logged into the run at once by the run's first launcher (the one whose
  // logs are stdout.log and stderr.log), so a job of several launchers
  // (`srun -n 2 trainscope run`) logs each figure once; non-finite values and
  // keys the run refuses are left out.
  std::vector<RunMetric> metrics;
};

// What the caller records as the run ends (LaunchOptions::end_record).
struct EndRecord {
  std::map<std::string, std::string> tags;
  // Logged like WatchVerdict::metrics (by the run's first launcher only).
  std::vector<RunMetric> metrics;
};

struct LaunchOptions {
  // argv of the command, passed as-is (no shell): quoting is kept. argv[0]
  // is looked up on PATH.
  std::vector<std::string> command;
  // handle_signals and attach_from_environment are forced off: the launch
  // forwards signals itself and always creates a new run.
  RunOptions run;
  // Physical GPU indices: sets CUDA_VISIBLE_DEVICES for the command and
  // limits GPU sampling to them. Empty: all, environment untouched. An index
  // of no GPU (or any, on a machine without one) is an error before anything
  // runs, checked against `nvml` (null: the driver's NVML), unless
  // `devices_checked` (a sweep's slots, chosen from the GPUs it found).
  std::vector<int> devices;
  nvml::NvmlApi* nvml = nullptr;
  bool devices_checked = false;
  // Variables set (or replaced) in the command's environment only, never in
  // this process's: NAME -> value. The run's recorded command stays the
  // user's argv (no `env NAME=value` prefix). Set after devices, before
  // TRAINSCOPE_RUN_DIR/TRAINSCOPE_LAUNCHER, which always win.
  std::map<std::string, std::string> environment;
  bool sample_hardware = true;
  absl::Duration sample_interval = absl::Seconds(1);
  // The sources to sample; default: host_sources() + gpu_sources().
  std::function<std::vector<std::unique_ptr<HardwareSource>>()> make_sources;
  // Writes environment.json and the artifacts pip-freeze.txt, conda-list.txt,
  // nvidia-smi.txt (each when the tool is installed), under this launcher's
  // own names (environment-<host>-<pid>.json, ...: run_files.hpp); the run's
  // first launcher links them to the plain names too.
  bool record_environment = true;
  // Also copy the command's output to this process's stdout/stderr. The
  // command always writes into stdout-<host>-<pid>.log and
  // stderr-<host>-<pid>.log (O_APPEND; the first launcher's are stdout.log and
  // stderr.log too), never into a pipe of this process; this follows them.
  bool tee = true;
  // Forward SIGINT/SIGTERM/SIGHUP received by this process to the command (an
  // ignored SIGHUP, nohup, stays ignored).
  bool forward_signals = true;
  // After a stop signal (forwarded, or `cancel`) the launch ends the whole
  // job: the signal also reaches the processes outside the command's process
  // group (torchrun's ranks, in sessions of their own, and what they started:
  // every process that kept the launch's TRAINSCOPE_LAUNCH_ID in its
  // environment, even reparented), and the launch returns once all of them
  // are gone. Those still running kill_after after the signal are killed with
  // SIGKILL, said on stderr, in the command's stderr log and as the run's tag
  // trainscope.sigkill (LaunchResult::sigkilled).
  absl::Duration kill_after = absl::Seconds(10);
  // Run the command under Nsight Systems / Compute; the report lands in the
  // run's artifacts/. profile_range limits it to an NVTX range.
  Profiler profiler = Profiler::kNone;
  std::string profile_range;
  // More exporters for the run (W&B, ...), added right after it starts.
  std::vector<std::shared_ptr<Exporter>> exporters;
  std::shared_ptr<LaunchCancel> cancel;
  // Join the run of the job this launcher is one task of (job_run_id():
  // `srun -n 2 trainscope run -- ...` starts two launchers of one run),
  // unless run.dir or run.id is set. A scheduler launching independent runs
  // from inside a job allocation turns it off.
  bool join_job_from_environment = true;
  // The command is killed (SIGKILL) when the thread that launched it dies, also
  // when this process is killed with -9 (Linux PR_SET_PDEATHSIG, set in the
  // command's process before exec): a scheduler's jobs never outlive it. It
  // reaches the command's own process, not the children it starts.
  bool die_with_parent = false;
  // Tags (and metrics) set on the run after the command exited and before the
  // run ends, so that run.json, the MLflow syncer and every exporter (W&B)
  // carry them with the run's end: called once with the outcome (run_dir,
  // exit code, the status the run is about to end with), and not when the
  // command could not be started. The launch room sits below the analyses, so
  // `trainscope run` sets its diagnosis tags and its ledger's final figures
  // here (trainscope.diagnosis, ledger/tokens_per_s, ...). A hook that throws,
  // or a tag the run refuses (an invalid key), costs a warning line, never
  // the run, its other tags or the exit code.
  std::function<EndRecord(const LaunchResult& result)> end_record;
  // Called once the run directory exists, before the command starts, with
  // its path (`trainscope run --prometheus` follows it from there). A hook
  // that throws costs a warning line, never the run.
  std::function<void(const std::string& run_dir)> run_started;
  // Zero-code instrumentation (`trainscope run --auto`, docs/auto.md): a mode
  // from parse_auto_mode() ("on", "layers", "layers=N"), or empty (off). Every
  // Python process the command starts loads trainscope's bootstrap (a
  // sitecustomize in a private directory put first on PYTHONPATH, removed when
  // the command ends; TRAINSCOPE_AUTO=mode), which instruments PyTorch when the
  // program imports it, and Hugging Face's and Lightning's trainers. The run
  // gets the tag trainscope.auto; a command that is no Python program costs a
  // warning line (the Python processes it starts are still instrumented).
  std::string auto_instrument;
  // Called with the run directory every watch_interval, on a thread of the
  // launch, while the command runs and no stop signal was sent (`trainscope
  // run --on-hang`: trainscope/diagnosis/hang.hpp). A watch that throws is
  // one warning line and is not called again.
  std::function<WatchVerdict(const std::string& run_dir)> watch;
  absl::Duration watch_interval = absl::Seconds(1);
};

// The value of `--auto[=MODE]`: "" or "on" -> "on"; "layers" (depth 2) or
// "layers=N" (N >= 1) -> itself. InvalidArgument naming the value otherwise.
absl::StatusOr<std::string> parse_auto_mode(const std::string& value);
// Whether `command` runs Python: argv[0] named python, python3, python3.11, ...,
// or a program on PATH (or a path) whose first line is a shebang naming
// python (torchrun, accelerate, a script with #!/usr/bin/env python3).
bool is_python_command(const std::vector<std::string>& command);
// The interpreter `command` runs, as exec finds it (the path of argv[0]'s
// python, or of its shebang's), or "" when it runs no Python.
std::string python_interpreter(const std::vector<std::string>& command);

// Blocks until the command and everything recording it are done. An error
// means no command ran: invalid options, a profiler that is not installed,
// a run directory that cannot be created.
absl::StatusOr<LaunchResult> launch(LaunchOptions options);

// An ncu --nvtx-include filter for `range`: in trainscope's domain
// ("trainscope@layer/3") each '/' of the range's name is escaped, since ncu
// reads '/' as push/pop nesting and trainscope's ranges are start/end ones.
// Other filters are passed as given.
std::string ncu_range(const std::string& range);

// The command as run under `profiler`, writing its report to `output_base`
// (nsys/ncu add the extension; ncu's range through ncu_range()).
std::vector<std::string> profiled_command(Profiler profiler, const std::string& range,
                                          const std::string& output_base,
                                          const std::vector<std::string>& command);

// Params named by the command's own arguments: `--key value`, `--key=value`
// (values exactly as given) and `--flag` ("true"). A following argument is a
// value unless it starts with '-' and is not a number.
std::map<std::string, std::string> params_from_arguments(const std::vector<std::string>& args);

}  // namespace trainscope

#endif  // TRAINSCOPE_LAUNCH_LAUNCH_HPP_
