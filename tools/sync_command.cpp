// `trainscope sync <run-dir>`: uploads what a run directory holds and the
// server has not accepted yet (after an outage, or a run made offline).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace sync_cmd {

constexpr char kSyncDescription[] =
    "Uploads the run's params, tags, metrics and region times to an MLflow tracking\n"
    "server, then its summaries and status once it has ended. Resumes where the last\n"
    "upload (live or `sync`) stopped, so nothing is sent twice; progress is kept in\n"
    "<run-dir>/mlflow-sync.json.\n";

constexpr char kSyncFooter[] =
    "Credentials as MLflow's client: MLFLOW_TRACKING_USERNAME/PASSWORD or\n"
    "MLFLOW_TRACKING_TOKEN; MLFLOW_TRACKING_INSECURE_TLS=true skips TLS verification.\n"
    "Exit status: 0 uploaded, 1 the upload failed (run again later), 2 bad usage.\n";

struct SyncArgs {
  std::string run_dir;
  std::optional<std::string> tracking_uri;
  std::optional<std::string> experiment;
};

// nullopt with *exit_code set when there is nothing to sync (help shown, or
// bad usage).
std::optional<SyncArgs> parse(CommandLine* line, const std::vector<std::string>& args,
                              int* exit_code) {
  SyncArgs out;
  line->add_value("--tracking-uri", "URI", "default: MLFLOW_TRACKING_URI", &out.tracking_uri);
  line->add_value("--experiment", "NAME",
                  "for the first upload; default: MLFLOW_EXPERIMENT_NAME, else\n"
                  "the run's experiment",
                  &out.experiment);
  std::vector<std::string> run_dirs;
  line->add_positionals("run-dir", &run_dirs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line->parse(args)) {
    *exit_code = *done;
    return std::nullopt;
  }
  if (run_dirs.size() != 1) {
    *exit_code = line->usage_error(
        run_dirs.empty()
            ? std::string("missing <run-dir>")
            : fmt::format("one run directory at a time (got {} and {})", run_dirs[0], run_dirs[1]));
    return std::nullopt;
  }
  out.run_dir = run_dirs.front();
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

}  // namespace sync_cmd

int sync_command(const std::vector<std::string>& argv) {
  using namespace sync_cmd;  // NOLINT(build/namespaces): this file's own names
  CommandLine line({"sync", "trainscope sync <run-dir> [--tracking-uri URI] [--experiment NAME]",
                    kSyncDescription, kSyncFooter});
  int exit_code = kExitOk;
  const std::optional<SyncArgs> args = parse(&line, argv, &exit_code);
  if (!args) return exit_code;
  // The flag stands in for MLFLOW_TRACKING_URI; credentials still come from
  // the environment, as for MLflow's own client.
  if (args->tracking_uri) setenv("MLFLOW_TRACKING_URI", args->tracking_uri->c_str(), 1);
  absl::StatusOr<std::optional<MlflowConfig>> from_env = mlflow_config_from_environment();
  if (!from_env.ok()) return line.usage_error(std::string(from_env.status().message()));
  if (!from_env->has_value()) {
    return line.usage_error("no tracking server: pass --tracking-uri or set MLFLOW_TRACKING_URI");
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
