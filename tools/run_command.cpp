// `trainscope run [options] -- command...`: runs a command as a trainscope
// run (trainscope::launch, include/trainscope/launch.hpp).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "trainscope/diagnosis/end_of_run.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/diagnosis/live_watch.hpp"
#include "trainscope/export/wandb_exporter.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/launch/outcome.hpp"
#include "trainscope/prometheus/endpoint.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace run_cmd {

constexpr char kRunDescription[] =
    "Runs <command> as a trainscope run: creates a run directory, records the\n"
    "environment, samples CPU/memory/disk/network/GPU while the command runs, and\n"
    "saves its output, exit code and final status. A trainscope timer or\n"
    "trainscope.start_run() inside the command joins the same run (through\n"
    "TRAINSCOPE_RUN_DIR), so its regions and metrics land next to the samples.\n"
    "\n"
    "examples:\n"
    "  trainscope run -- python train.py --lr 0.1 --epochs 3\n"
    "  trainscope run --auto -- python train.py    (PyTorch, HF, Lightning: no code change)\n"
    "  trainscope run --name baseline --devices 0,1 -- torchrun --nproc-per-node 2 train.py\n"
    "  trainscope run --nsys=BATCH@trainscope -- python train.py\n"
    "  trainscope run --mlflow http://localhost:5000 --wandb -- ./train --batch-size 64\n"
    "  srun -n 2 trainscope run -- python train.py    (one run, two ranks)\n";

constexpr char kRunFooter[] =
    "Output goes to stdout.log and stderr.log (shown too; the command outlives a killed\n"
    "launcher), environment.json (host, git...), artifacts/ (pip freeze, nvidia-smi);\n"
    "other launchers of the run: stdout-HOST-PID.log, environment-HOST-PID.json, ...\n"
    "`--key value` and `--key=value` arguments of the command become params.\n"
    "SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) are passed on\n"
    "to the command and waited for: the run ends KILLED. Under `nohup trainscope\n"
    "run ...` SIGHUP stays ignored by both, and the run goes on. The signal reaches\n"
    "every process of the command, also those in sessions of their own (torchrun's\n"
    "ranks) and what they started; those still running --kill-after seconds later\n"
    "are killed with SIGKILL (said here, in stderr.log and as the tag\n"
    "trainscope.sigkill), and this process exits 128 + N for signal N.\n"
    "This process is not a rank: it records the command and how it ended in\n"
    "launcher-<host>-<pid>.json and the host's hardware in host-<host>.csv; each\n"
    "process of the command that records (a timer, log_metric) is a rank. The tasks\n"
    "of one Slurm step (SLURM_JOB_ID, SLURM_STEP_ID), torchrun job\n"
    "(TORCHELASTIC_RUN_ID) or mpirun job (PMIX_NAMESPACE) join one run.\n"
    "\n"
    "At the end, a summary on stderr: status, duration, steps, each key's median\n"
    "with its 95% interval, the data-wait share, the diagnosis (`trainscope diagnose\n"
    "RUN` tells more) and the report command; the last line stays \"trainscope run:\n"
    "exit code N, run DIR STATUS\". --quiet drops the summary, not that line. The\n"
    "run (run.json, MLflow, W&B) gets the diagnosis as tags: trainscope.diagnosis\n"
    "(the headline), trainscope.diagnosis.labels (\"INPUT-BOUND,STRAGGLER\") and\n"
    "per label trainscope.diagnosis.<label> (its estimate and 95% interval). A\n"
    "diagnosis that fails is one warning line, never the exit status; a run whose\n"
    "region rows pass 1 GiB is not diagnosed at the end (about a second per 60 MB):\n"
    "`trainscope diagnose RUN` then.\n"
    "\n"
    "Exit status: the command's (128 + N when it died of signal N or signal N was\n"
    "passed on to it), 127 when it could not be started, 1 when the run could not\n"
    "be created, 2 bad usage.\n";

struct RunArgs {
  LaunchOptions launch;
  std::optional<std::string> mlflow_uri;
  std::optional<std::string> nsys_range;  // set: run under Nsight Systems
  std::optional<std::string> ncu_range;   // set: run under Nsight Compute
  std::optional<std::string> auto_mode;   // set: --auto[=MODE]
  bool no_sample = false;
  bool wandb = false;
  bool quiet = false;
  bool no_diagnosis = false;
  diagnosis::OnHang on_hang = diagnosis::OnHang::kNone;
  diagnosis::LiveWatchOptions live;  // also the end-of-run diagnosis's thresholds and ledger
  std::optional<prometheus::EndpointOptions> prometheus;  // set: --prometheus
  std::optional<std::string> prometheus_labels;
};

// The profilers take their NVTX range only as --nsys=RANGE: a separate word
// could be the command.
void add_profiler_options(CommandLine* line, RunArgs* out) {
  CLI::Option* nsys =
      line->add_flag_with_value("--nsys", "RANGE",
                                "run under Nsight Systems (report: artifacts/profile.nsys-rep);\n"
                                "RANGE limits it to an NVTX range, NAME@DOMAIN (trainscope\n"
                                "regions are in domain \"trainscope\")",
                                &out->nsys_range);
  CLI::Option* ncu = line->add_flag_with_value(
      "--ncu", "RANGE", "run under Nsight Compute (report: artifacts/profile.ncu-rep)",
      &out->ncu_range);
  nsys->excludes(ncu);
}

void add_run_options(CommandLine* line, RunArgs* out) {
  RunOptions& run = out->launch.run;
  line->group("options (before the `--`)");
  line->add_value("--name", "NAME", "run name (default: the run id)", &run.name);
  line->add_value("--experiment", "NAME",
                  "experiment (default: MLFLOW_EXPERIMENT_NAME, else Default)", &run.experiment);
  line->add_value("--root", "DIR",
                  "parent of run directories (default: TRAINSCOPE_RUNS_ROOT,\n"
                  "else ./trainscope-runs)",
                  &run.root);
  line->add_value("--run-dir", "DIR",
                  "create or join the run in DIR (e.g. on a shared filesystem,\n"
                  "one `trainscope run` per node of a job)",
                  &run.dir);
  line->add_value("--interval", "SECONDS", "hardware sampling interval (default 1)",
                  [out](const std::string& value) {
                    out->launch.sample_interval = absl::Seconds(seconds("--interval", value));
                  });
  line->add_flag("--no-sample", "do not sample the hardware", &out->no_sample);
  line->add_value("--kill-after", "SECONDS",
                  "after SIGINT/SIGTERM/SIGHUP, kill the processes of the command\n"
                  "still running this long after it with SIGKILL (default 10)",
                  [out](const std::string& value) {
                    out->launch.kill_after = absl::Seconds(seconds("--kill-after", value));
                  });
  line->add_flag_with_value("--auto", "layers[=N]|memory",
                            "instrument the Python processes without code: PyTorch's loader,\n"
                            "forward, backward, optimizer and collectives, Hugging Face and\n"
                            "Lightning trainers; layers[=N]: module regions to depth N (2);\n"
                            "memory: CUDA allocation history for the OOM snapshot",
                            &out->auto_mode)
      ->each([out](const std::string& value) {
        absl::StatusOr<std::string> mode = parse_auto_mode(value);
        if (!mode.ok()) bad_value(std::string(mode.status().message()));
        out->launch.auto_instrument = *mode;
      });
  line->add_value(
      "--devices", "0,1",
      "only these GPUs: sets CUDA_VISIBLE_DEVICES for the command\n"
      "and samples only them",
      [out](const std::string& value) { out->launch.devices = index_list("--devices", value); });
  add_profiler_options(line, out);
  line->add_value("--mlflow", "URI",
                  "also export to this MLflow tracking server (sets\n"
                  "MLFLOW_TRACKING_URI for the command too)",
                  &out->mlflow_uri);
  line->add_flag("--wandb", "also write a W&B offline run (upload it with `wandb sync`)",
                 &out->wandb);
  line->add_flag("--quiet",
                 "no summary at the end (the diagnosis tags and the last line,\n"
                 "exit code and run, stay)",
                 &out->quiet);
  line->add_value("--on-hang", "none|dump|kill",
                  "when a rank's step has not ended for max(hang_factor x its p99\n"
                  "step, hang_min_s) (10, 60 s) while it runs: say so and leave it\n"
                  "(none, the default), also ask the ranks for their stacks (dump:\n"
                  "dump-<rank>.txt/.json in the run), or ask, then end the job (kill:\n"
                  "KILLED, tag trainscope.end_reason=hang)",
                  [out](const std::string& value) {
                    absl::StatusOr<diagnosis::OnHang> on_hang = diagnosis::parse_on_hang(value);
                    if (!on_hang.ok()) bad_value(std::string(on_hang.status().message()));
                    out->on_hang = *on_hang;
                  });
  add_threshold_option(line, &out->live.thresholds,
                       "a threshold of the hang watch and of the end-of-run diagnosis\n"
                       "(repeatable): hang_factor, hang_min_s");
  add_ledger_options(line, &out->live.ledger);
  line->add_value("--capture-steps", "N",
                  "--auto: after a step slower than 5x the rolling p99, or once STRAGGLER,\n"
                  "MEMORY-CREEP or THROUGHPUT-DRIFT appears, a torch.profiler capture\n"
                  "of the next N steps into captures/ (default 3; 0: none)",
                  [out](const std::string& value) {
                    const auto steps = count("--capture-steps", value, 0);
                    out->launch.environment["TRAINSCOPE_CAPTURE_STEPS"] = std::to_string(steps);
                    if (steps == 0) out->live.capture_on_labels = false;
                  });
  line->add_value("--capture-max", "N",
                  "--auto: at most N such captures per rank (default 3; 100 MB in all)",
                  [out](const std::string& value) {
                    const auto most = count("--capture-max", value, 0);
                    out->launch.environment["TRAINSCOPE_CAPTURE_MAX"] = std::to_string(most);
                    if (most == 0) out->live.capture_on_labels = false;
                  });
  line->add_value("--prometheus", "[ADDR:]PORT",
                  "serve the run's live metrics for Prometheus at\n"
                  "http://ADDR:PORT/metrics (ADDR default 127.0.0.1;\n"
                  "docs/prometheus.md)",
                  [out](const std::string& value) {
                    prometheus::EndpointOptions options;
                    options.this_host_only = true;  // the ranks this launcher started
                    const absl::Status status = prometheus::parse_listen_address(value, &options);
                    if (!status.ok()) bad_value("--prometheus " + std::string(status.message()));
                    out->prometheus = std::move(options);
                  });
  line->add_value("--prometheus-labels", "PARAMS",
                  "the run's params that become labels of every metric\n"
                  "(e.g. lr,batch_size; never all, to bound cardinality)",
                  &out->prometheus_labels);
  line->add_flag("--no-diagnosis",
                 "no diagnosis at the end: no summary, no trainscope.diagnosis tags\n"
                 "(`trainscope diagnose RUN` gives it later)",
                 &out->no_diagnosis);
}

// The options, then the command: nullopt with *exit_code set when there is
// nothing to run (help shown, or bad usage).
std::optional<RunArgs> parse(const std::vector<std::string>& args, int* exit_code) {
  CommandLine line(
      {"run", "trainscope run [options] -- <command> [args...]", kRunDescription, kRunFooter});
  RunArgs out;
  add_run_options(&line, &out);
  line.add_positionals("command", &out.launch.command, /*options_end_at_first=*/true);
  if (std::optional<int> done = line.parse(args)) {
    *exit_code = *done;
    return std::nullopt;
  }
  if (out.launch.command.empty()) {
    *exit_code = line.usage_error("missing the command to run (after --)");
    return std::nullopt;
  }
  if (out.prometheus_labels) {
    if (!out.prometheus) {
      *exit_code = line.usage_error("--prometheus-labels needs --prometheus");
      return std::nullopt;
    }
    absl::StatusOr<std::vector<prometheus::ParamLabel>> labels =
        prometheus::parse_param_labels(*out.prometheus_labels);
    if (!labels.ok()) {
      *exit_code = line.usage_error(std::string(labels.status().message()));
      return std::nullopt;
    }
    out.prometheus->labels = *std::move(labels);
  }
  out.launch.sample_hardware = !out.no_sample;
  if (out.auto_mode && out.launch.auto_instrument.empty()) out.launch.auto_instrument = "on";
  if (out.nsys_range || out.ncu_range) {
    out.launch.profiler = out.nsys_range ? Profiler::kNsys : Profiler::kNcu;
    out.launch.profile_range = out.nsys_range ? *out.nsys_range : *out.ncu_range;
  }
  return out;
}

}  // namespace run_cmd

int run_command(const std::vector<std::string>& args) {
  using namespace run_cmd;  // NOLINT(build/namespaces): this file's own names
  int exit_code = kExitOk;
  std::optional<RunArgs> parsed = parse(args, &exit_code);
  if (!parsed) return exit_code;
  // Run's MLflow exporter and the command's own MLflow client both read it.
  if (parsed->mlflow_uri) ::setenv("MLFLOW_TRACKING_URI", parsed->mlflow_uri->c_str(), 1);
  if (parsed->wandb) {
    absl::StatusOr<std::shared_ptr<WandbExporter>> wandb = WandbExporter::Create();
    if (!wandb.ok()) {
      std::fprintf(stderr, "trainscope run: %s\n", wandb.status().ToString().c_str());
      return kExitFailed;
    }
    parsed->launch.exporters.push_back(*std::move(wandb));
  }
  parsed->live.ledger_metrics = !parsed->no_diagnosis;
  parsed->launch.watch = diagnosis::launcher_watch(parsed->on_hang, parsed->live);
  parsed->launch.watch_interval = absl::Seconds(2);
  // The endpoint binds before the command starts: a port in use stops here.
  std::shared_ptr<prometheus::Endpoint> endpoint;
  if (parsed->prometheus) {
    std::string line;
    absl::StatusOr<std::shared_ptr<prometheus::Endpoint>> started =
        prometheus::serve_launch(*parsed->prometheus, &parsed->launch, &line);
    if (!started.ok()) {
      std::fprintf(stderr, "trainscope run: %s\n", std::string(started.status().message()).c_str());
      return kExitFailed;
    }
    endpoint = *std::move(started);
    std::fprintf(stderr, "trainscope run: %s\n", line.c_str());
  }

  auto end = std::make_shared<diagnosis::EndOfRun>();
  if (!parsed->no_diagnosis)
    parsed->launch.end_record =
        diagnosis::end_of_run_hook(end, parsed->live.thresholds, parsed->live.ledger);
  absl::StatusOr<LaunchResult> result = launch(std::move(parsed->launch));
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope run: %s\n", result.status().ToString().c_str());
    const bool usage =
        absl::IsInvalidArgument(result.status()) || absl::IsFailedPrecondition(result.status());
    return usage ? kExitUsage : kExitFailed;
  }
  std::fputs(diagnosis::end_of_run_text(*end, result->run_dir, parsed->quiet).c_str(), stderr);
  std::fputs(launch_outcome(*result, "trainscope run: ").c_str(), stderr);
  return result->exit_code;
}

}  // namespace trainscope::cli
