// Export of a run to an MLflow tracking server over its REST API (libcurl),
// switched on the way MLflow's own client is: MLFLOW_TRACKING_URI (plus
// MLFLOW_EXPERIMENT_NAME / MLFLOW_EXPERIMENT_ID), or a config built in code.
//
// The local run directory is the source of truth: a syncer reads rows the
// run store appended (RunReader, from a persisted cursor), uploads them with
// runs/log-batch and advances the cursor in <run-dir>/mlflow-sync.json only
// after the server accepted them. The live exporter runs that syncer from the
// pipeline thread; `trainscope sync <run-dir>` runs it to completion later.
// Either way every row reaches the server once, across outages and restarts.
//
// What is sent: region rows as `{DEVICE}/{KEY}` (seconds; step = the row's
// step; ranks other than 0 as `rank{r}/{DEVICE}/{KEY}`), user metrics as
// logged, params and tags from run.json (+ mlflow.runName), at the end the
// mean of every summary entry as `{summary_prefix}/{DEVICE}/{KEY}` (Deep500's
// `train/CPU/EPOCH`), then the status and end time (a crashed run: FAILED).
// Credentials are never written to the cursor, logs or error messages.
#ifndef TRAINSCOPE_MLFLOW_EXPORTER_HPP_
#define TRAINSCOPE_MLFLOW_EXPORTER_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/exporter.hpp"

namespace trainscope {

struct MlflowConfig {
  std::string tracking_uri;     // http(s)://host[:port][/prefix]
  std::string experiment_name;  // empty: the run's experiment (run.json), else "Default"
  std::string experiment_id;    // wins over the name when set
  // Basic auth when both are set (as MLflow's client), else a Bearer token.
  std::string username;
  std::string password;
  std::string token;
  bool insecure_tls = false;  // skip TLS certificate verification
  std::string ca_bundle;      // PEM file to verify the server with (empty: system CAs)
  std::string summary_prefix = "train";
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{10000};
  // Attempts after the first on connection errors, 5xx and 429, with
  // exponential backoff and jitter from `retry_backoff` up to `max_backoff`.
  int max_retries = 4;
  std::chrono::milliseconds retry_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  // runs/log-batch accepts up to 1000; fewer for proxies with small body limits.
  int max_metrics_per_request = 1000;
};

// The config MLflow's own client would use, or nullopt when
// MLFLOW_TRACKING_URI is unset or empty. Reads MLFLOW_TRACKING_URI,
// MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID, MLFLOW_TRACKING_USERNAME,
// MLFLOW_TRACKING_PASSWORD, MLFLOW_TRACKING_TOKEN,
// MLFLOW_TRACKING_INSECURE_TLS and MLFLOW_TRACKING_SERVER_CERT_PATH. A URI
// that is not http(s) (file:, databricks, ...) or an unparsable boolean is
// an error naming the variable.
absl::StatusOr<std::optional<MlflowConfig>> mlflow_config_from_environment();

// `uri` with any user:password@ replaced by ***@ (for messages and files).
std::string redact_uri(const std::string& uri);

struct SyncStats {
  std::uint64_t requests = 0;       // HTTP requests sent, retries included
  std::uint64_t retries = 0;
  std::uint64_t metrics_sent = 0;   // metric values the server accepted
  std::uint64_t params_sent = 0;
  std::uint64_t tags_sent = 0;
  std::uint64_t skipped_invalid = 0;  // rows whose key MLflow would reject
  bool status_sent = false;         // the run's final status reached the server
  std::string mlflow_run_id;
  std::string experiment_id;
};

// Uploads everything in `run_dir` not yet accepted by the server and, if the
// run has ended, its summaries and status. Resumes from and advances
// <run-dir>/mlflow-sync.json. On error what was accepted stays recorded, so
// the next call continues from there. `stats` (optional) accumulates.
absl::Status sync_run_dir(const std::string& run_dir, const MlflowConfig& config,
                          SyncStats* stats = nullptr);

// Live export: syncs the run directory from the pipeline thread, at most
// every `min_interval` while the run is going (right away once it ends).
// After a failed attempt the next waits an exponentially growing backoff
// (up to a minute), so a stopped server costs one refused connection per
// backoff period and never data: the rows stay in the run directory. Add it
// after the run store's exporter. Requests are bounded by the config's
// timeouts and made without retries inside an attempt.
class MlflowExporter final : public Exporter {
 public:
  MlflowExporter(std::string run_dir, MlflowConfig config,
                 std::chrono::milliseconds min_interval = std::chrono::milliseconds(1000));
  ~MlflowExporter() override;

  std::string name() const override;
  absl::Status write_samples(absl::Span<const RegionSample> samples) override;
  absl::Status write_summary(const Summary& summary) override;
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override;
  absl::Status write_run_info(const RunInfo& info) override;
  absl::Status flush() override;

  // Totals so far (thread-safe).
  SyncStats stats() const;

 private:
  absl::Status maybe_sync(bool force);

  std::string run_dir_;
  MlflowConfig config_;
  std::chrono::milliseconds min_interval_;
  // Pipeline thread only:
  bool run_ended_ = false;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
  // Guarded by mu_ (stats() may be called from any thread):
  mutable std::mutex mu_;
  SyncStats stats_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_MLFLOW_EXPORTER_HPP_
