// `trainscope sync <run-dir>`: uploads what a run directory holds and the
// server has not accepted yet (after an outage, or a run made offline).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"

namespace trainscope::cli {
namespace {

constexpr char kSyncUsage[] =
    "usage: trainscope sync <run-dir> [--tracking-uri URI] [--experiment NAME]\n"
    "\n"
    "Uploads the run's params, tags, metrics and region times to an MLflow tracking\n"
    "server, then its summaries and status once it has ended. Resumes where the last\n"
    "upload (live or `sync`) stopped, so nothing is sent twice; progress is kept in\n"
    "<run-dir>/mlflow-sync.json.\n"
    "\n"
    "  --tracking-uri URI   default: MLFLOW_TRACKING_URI\n"
    "  --experiment NAME    for the first upload; default: MLFLOW_EXPERIMENT_NAME, else\n"
    "                       the run's experiment\n"
    "\n"
    "Credentials as MLflow's client: MLFLOW_TRACKING_USERNAME/PASSWORD or\n"
    "MLFLOW_TRACKING_TOKEN; MLFLOW_TRACKING_INSECURE_TLS=true skips TLS verification.\n"
    "Exit status: 0 uploaded, 1 the upload failed (run again later), 2 bad usage.\n";

struct SyncArgs {
  std::string run_dir;
  std::optional<std::string> tracking_uri;
  std::optional<std::string> experiment;
  bool help = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "trainscope sync: %s\n\n%s", message.c_str(), kSyncUsage);
  return kExitUsage;
}

// Accepts `--flag value` and `--flag=value`. Empty optional + error on misuse.
std::optional<SyncArgs> parse(const std::vector<std::string>& args, std::string* error) {
  SyncArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    std::optional<std::string>* target = nullptr;
    std::string flag = arg.substr(0, arg.find('='));
    if (flag == "--tracking-uri") target = &out.tracking_uri;
    if (flag == "--experiment") target = &out.experiment;
    if (target != nullptr) {
      if (flag.size() < arg.size()) {
        *target = arg.substr(flag.size() + 1);
      } else if (i + 1 < args.size()) {
        *target = args[++i];
      } else {
        *error = flag + " needs a value";
        return std::nullopt;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      *error = "unknown option " + arg;
      return std::nullopt;
    } else if (out.run_dir.empty()) {
      out.run_dir = arg;
    } else {
      *error = "one run directory at a time (got " + out.run_dir + " and " + arg + ")";
      return std::nullopt;
    }
  }
  if (out.run_dir.empty() && !out.help) {
    *error = "missing <run-dir>";
    return std::nullopt;
  }
  return out;
}

void print_done(const SyncArgs& args, const MlflowConfig& config, const SyncStats& stats) {
  std::printf("%s", fmt::format("synced {} to {} (experiment {}, run {}): {} metric values, {} "
                                "params, {} tags in {} requests\n",
                                args.run_dir, redact_uri(config.tracking_uri), stats.experiment_id,
                                stats.mlflow_run_id, stats.metrics_sent, stats.params_sent,
                                stats.tags_sent, stats.requests)
                        .c_str());
  if (!stats.status_sent) {
    std::printf(
        "the run has not ended: run `trainscope sync` again later for its summary and status\n");
  }
  if (stats.skipped_invalid > 0) {
    std::printf("%s", fmt::format("skipped {} rows whose keys MLflow rejects (see the warning "
                                  "above)\n",
                                  stats.skipped_invalid)
                          .c_str());
  }
}

}  // namespace

int sync_command(const std::vector<std::string>& argv) {
  std::string error;
  const std::optional<SyncArgs> args = parse(argv, &error);
  if (!args) return usage_error(error);
  if (args->help) {
    std::printf("%s", kSyncUsage);
    return kExitOk;
  }
  // The flag stands in for MLFLOW_TRACKING_URI; credentials still come from
  // the environment, as for MLflow's own client.
  if (args->tracking_uri) setenv("MLFLOW_TRACKING_URI", args->tracking_uri->c_str(), 1);
  absl::StatusOr<std::optional<MlflowConfig>> from_env = mlflow_config_from_environment();
  if (!from_env.ok()) return usage_error(std::string(from_env.status().message()));
  if (!from_env->has_value()) {
    return usage_error("no tracking server: pass --tracking-uri or set MLFLOW_TRACKING_URI");
  }
  MlflowConfig config = **from_env;
  if (args->experiment) config.experiment_name = *args->experiment;
  SyncStats stats;
  const absl::Status status = sync_run_dir(args->run_dir, config, &stats);
  if (!status.ok()) {
    std::fprintf(stderr, "trainscope sync: %s\n", std::string(status.message()).c_str());
    std::fprintf(stderr, "%s",
                 fmt::format("{} metric values were accepted before the error and are recorded; "
                             "run the same command again to continue\n",
                             stats.metrics_sent)
                     .c_str());
    return kExitFailed;
  }
  print_done(*args, config, stats);
  return kExitOk;
}

}  // namespace trainscope::cli
