// How trainscope reaches an MLflow tracking server: the same variables as
// MLflow's own client, or a config built in code.
#ifndef TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_CONFIG_HPP_
#define TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_CONFIG_HPP_

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

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

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_CONFIG_HPP_
