// `trainscope run [options] -- command...`: runs a command as a trainscope
// run (trainscope::launch, include/trainscope/launch.hpp).
#include <string.h>  // strsignal (POSIX)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/launch/launch.hpp"
#include "trainscope/export/wandb_exporter.hpp"

namespace trainscope::cli {
namespace {

constexpr char kRunUsage[] =
    "usage: trainscope run [options] -- <command> [args...]\n"
    "\n"
    "Runs <command> as a trainscope run: creates a run directory, records the\n"
    "environment, samples CPU/memory/disk/network/GPU while the command runs, and\n"
    "saves its output, exit code and final status. A trainscope timer or\n"
    "trainscope.start_run() inside the command joins the same run (through\n"
    "TRAINSCOPE_RUN_DIR), so its regions and metrics land next to the samples.\n"
    "\n"
    "examples:\n"
    "  trainscope run -- python train.py --lr 0.1 --epochs 3\n"
    "  trainscope run --name baseline --devices 0,1 -- torchrun --nproc-per-node 2 train.py\n"
    "  trainscope run --nsys=BATCH@trainscope -- python train.py\n"
    "  trainscope run --mlflow http://localhost:5000 --wandb -- ./train --batch-size 64\n"
    "\n"
    "options (before the `--`):\n"
    "  --name NAME          run name (default: the run id)\n"
    "  --experiment NAME    experiment (default: MLFLOW_EXPERIMENT_NAME, else Default)\n"
    "  --root DIR           parent of run directories (default: TRAINSCOPE_RUNS_ROOT,\n"
    "                       else ./trainscope-runs)\n"
    "  --interval SECONDS   hardware sampling interval (default 1)\n"
    "  --no-sample          do not sample the hardware\n"
    "  --devices 0,1        only these GPUs: sets CUDA_VISIBLE_DEVICES for the command\n"
    "                       and samples only them\n"
    "  --nsys[=RANGE]       run under Nsight Systems (report: artifacts/profile.nsys-rep);\n"
    "                       RANGE limits it to an NVTX range, NAME@DOMAIN (trainscope\n"
    "                       regions are in domain \"trainscope\")\n"
    "  --ncu[=RANGE]        run under Nsight Compute (report: artifacts/profile.ncu-rep)\n"
    "  --mlflow URI         also export to this MLflow tracking server (sets\n"
    "                       MLFLOW_TRACKING_URI for the command too)\n"
    "  --wandb              also write a W&B offline run (upload it with `wandb sync`)\n"
    "\n"
    "The run directory gets stdout.log and stderr.log (the output is still shown),\n"
    "environment.json (command line, git commit and dirty state, host, CPU, memory,\n"
    "driver and CUDA versions) and artifacts/ (pip freeze, conda list, nvidia-smi -q).\n"
    "`--key value` and `--key=value` arguments of the command become params.\n"
    "SIGINT/SIGTERM are passed on to the command; the run then ends KILLED.\n"
    "\n"
    "Exit status: the command's (128 + N when it died of signal N), 127 when it\n"
    "could not be started, 1 when the run could not be created, 2 bad usage.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "trainscope run: %s\n\n%s", message.c_str(), kRunUsage);
  return kExitUsage;
}

std::optional<std::vector<int>> parse_devices(const std::string& text) {
  std::vector<int> devices;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long device = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || device < 0) return std::nullopt;
    devices.push_back(static_cast<int>(device));
    start = comma + 1;
  }
  return devices;
}

struct RunArgs {
  LaunchOptions launch;
  std::optional<std::string> mlflow_uri;
  bool wandb = false;
  bool help = false;
};

// Applies one option that takes a value; false with *error set on misuse.
bool apply_valued(const std::string& flag, const std::string& value, RunArgs* out, std::string* error) {
  if (flag == "--name") {
    out->launch.run.name = value;
  } else if (flag == "--experiment") {
    out->launch.run.experiment = value;
  } else if (flag == "--root") {
    out->launch.run.root = value;
  } else if (flag == "--mlflow") {
    out->mlflow_uri = value;
  } else if (flag == "--interval") {
    char* end = nullptr;
    const double seconds = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(seconds > 0)) {
      *error = "--interval needs a positive number of seconds, got '" + value + "'";
      return false;
    }
    out->launch.sample_interval = absl::Seconds(seconds);
  } else if (flag == "--devices") {
    std::optional<std::vector<int>> devices = parse_devices(value);
    if (!devices) {
      *error = "--devices needs GPU indices like 0,1, got '" + value + "'";
      return false;
    }
    out->launch.devices = *devices;
  }
  return true;
}

// The profilers take their NVTX range only as --nsys=RANGE: a separate word
// could be the command.
bool apply_flag(const std::string& flag, const std::optional<std::string>& inline_value,
                RunArgs* out) {
  if (flag == "--nsys" || flag == "--ncu") {
    out->launch.profiler = flag == "--nsys" ? Profiler::kNsys : Profiler::kNcu;
    out->launch.profile_range = inline_value.value_or("");
  } else if (flag == "--no-sample" && !inline_value) {
    out->launch.sample_hardware = false;
  } else if (flag == "--wandb" && !inline_value) {
    out->wandb = true;
  } else if ((flag == "-h" || flag == "--help") && !inline_value) {
    out->help = true;
  } else {
    return false;
  }
  return true;
}

// Options end at `--` or at the first word that is not an option.
std::optional<RunArgs> parse(const std::vector<std::string>& args, std::string* error) {
  static const char* const kValued[] = {"--name",   "--experiment", "--root",
                                        "--mlflow", "--interval",   "--devices"};
  RunArgs out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    const std::size_t equals = arg.find('=');
    const std::string flag = arg.substr(0, equals);
    std::optional<std::string> inline_value;
    if (equals != std::string::npos) inline_value = arg.substr(equals + 1);
    const bool valued = std::find(std::begin(kValued), std::end(kValued), flag) != std::end(kValued);
    if (valued) {
      if (!inline_value && i + 1 >= args.size()) {
        *error = flag + " needs a value";
        return std::nullopt;
      }
      if (!apply_valued(flag, inline_value ? *inline_value : args[++i], &out, error)) return std::nullopt;
    } else if (!apply_flag(flag, inline_value, &out)) {
      *error = "unknown option " + arg;
      return std::nullopt;
    }
  }
  out.launch.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (out.launch.command.empty() && !out.help) {
    *error = "missing the command to run (after --)";
    return std::nullopt;
  }
  return out;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  std::string error;
  std::optional<RunArgs> parsed = parse(args, &error);
  if (!parsed) return usage_error(error);
  if (parsed->help) {
    std::fputs(kRunUsage, stdout);
    return kExitOk;
  }
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
  absl::StatusOr<LaunchResult> result = launch(std::move(parsed->launch));
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope run: %s\n", result.status().ToString().c_str());
    const bool usage = absl::IsInvalidArgument(result.status()) ||
                       absl::IsFailedPrecondition(result.status());
    return usage ? kExitUsage : kExitFailed;
  }
  if (!result->spawn_error.ok()) {
    std::fprintf(stderr, "trainscope run: %s\n", std::string(result->spawn_error.message()).c_str());
  }
  const std::string how = result->term_signal != 0
                              ? fmt::format("killed by signal {} ({})", result->term_signal,
                                            ::strsignal(result->term_signal))
                              : fmt::format("exit code {}", result->exit_code);
  std::fprintf(stderr, "trainscope run: %s, run %s %s\n", how.c_str(), result->run_dir.c_str(),
               std::string(run_status_name(result->status)).c_str());
  return result->exit_code;
}

}  // namespace trainscope::cli
