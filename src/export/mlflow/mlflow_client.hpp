// Internal: the MLflow REST client behind MlflowExporter and `trainscope
// sync`. One libcurl easy handle (connection reuse), JSON bodies, errors as
// absl::Status naming the endpoint and MLflow's error_code, retries with
// exponential backoff and jitter on connection errors, 5xx and 429.
// No message ever contains the password, the token or URI user info.
#ifndef TRAINSCOPE_SRC_EXPORT_MLFLOW_MLFLOW_CLIENT_HPP_
#define TRAINSCOPE_SRC_EXPORT_MLFLOW_MLFLOW_CLIENT_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/export/mlflow/mlflow_config.hpp"
#include "trainscope/export/mlflow/mlflow_keys.hpp"
#include "trainscope/export/run_record.hpp"

namespace trainscope::mlflow {

struct Metric {
  std::string key;
  double value = 0.0;
  std::int64_t timestamp_ms = 0;
  std::int64_t step = 0;
};
struct KeyValue {
  std::string key;
  std::string value;
};
// One runs/log-batch request's worth of data.
struct Batch {
  std::vector<Metric> metrics;
  std::vector<KeyValue> params;
  std::vector<KeyValue> tags;
  bool empty() const { return metrics.empty() && params.empty() && tags.empty(); }
};

// runs/log-batch's limits (mlflow/utils/validation.py).
struct BatchLimits {
  std::size_t max_metrics = 1000;
  std::size_t max_params = 100;
  std::size_t max_tags = 100;
  std::size_t max_entities = 1000;  // metrics + params + tags
  std::size_t max_bytes = 1000000;  // the JSON request body
};

// The JSON body of runs/log-batch.
std::string log_batch_body(std::string_view run_id, const Batch& batch);
// Splits `all` into requests within `limits`, keeping order: metrics first
// (in order), then params, then tags. Fails only if one item alone is over
// the byte limit.
absl::StatusOr<std::vector<Batch>> split_batch(std::string_view run_id, const Batch& all,
                                               const BatchLimits& limits);

// As MLflow's client: Basic when username and password are both set, else a
// Bearer token if set, else none.
enum class AuthScheme { kNone, kBasic, kBearer };
AuthScheme auth_scheme(const MlflowConfig& config);

// Replaces every secret of `config` (password, token, URI user info) in `text`.
std::string redact(std::string text, const MlflowConfig& config);

// The status for an HTTP response that is not 2xx: "MLflow <endpoint>: HTTP
// <code> <error_code>: <message>", as the code of the error_code (or of the
// HTTP status when the body is not MLflow's error JSON).
absl::Status error_from_response(std::string_view endpoint, long http_status,
                                 std::string_view body);
// Worth retrying: connection errors, timeouts, 5xx, 429.
bool is_retryable(const absl::Status& status);

class Client {
 public:
  // Fails if the URI is not http(s) or libcurl cannot start.
  static absl::StatusOr<std::unique_ptr<Client>> Create(MlflowConfig config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Existing experiment by name, else a new one (a concurrent creator wins).
  absl::StatusOr<std::string> get_or_create_experiment(const std::string& name);
  absl::StatusOr<std::string> create_run(const std::string& experiment_id, const std::string& name,
                                         std::int64_t start_time_ms);
  // One request: `batch` must be within the limits (split_batch).
  absl::Status log_batch(const std::string& run_id, const Batch& batch);
  absl::Status update_run(const std::string& run_id, RunStatus status, std::int64_t end_time_ms);

  std::uint64_t requests() const { return requests_; }
  std::uint64_t retries() const { return retries_; }
  const MlflowConfig& config() const { return config_; }

 private:
  struct Response {
    long http_status = 0;
    std::string body;
  };
  explicit Client(MlflowConfig config, void* curl);
  // One endpoint call with retries; the parsed JSON body as text on 2xx.
  absl::StatusOr<std::string> call(const char* method, const std::string& endpoint,
                                   const std::string& query, const std::string& body);
  absl::StatusOr<Response> perform_once(const char* method, const std::string& url,
                                        const std::string& body);

  MlflowConfig config_;
  std::string base_url_;  // tracking URI without a trailing slash
  void* curl_ = nullptr;  // CURL*, kept opaque so curl.h stays out of this header
  std::uint64_t requests_ = 0;
  std::uint64_t retries_ = 0;
};

}  // namespace trainscope::mlflow

#endif  // TRAINSCOPE_SRC_EXPORT_MLFLOW_MLFLOW_CLIENT_HPP_
