#include "export/mlflow/mlflow_client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace trainscope::mlflow {
namespace {

using nlohmann::json;

constexpr std::string_view kApiPrefix = "/api/2.0/mlflow/";

std::string to_std(absl::string_view text) { return std::string(text.data(), text.size()); }

json metric_json(const Metric& metric) {
  json out = {{"key", metric.key}, {"timestamp", metric.timestamp_ms}, {"step", metric.step}};
  // JSON has no NaN/Infinity; MLflow's proto parser takes them as strings.
  if (std::isnan(metric.value)) {
    out["value"] = "NaN";
  } else if (std::isinf(metric.value)) {
    out["value"] = metric.value > 0 ? "Infinity" : "-Infinity";
  } else {
    out["value"] = metric.value;
  }
  return out;
}

json key_value_json(const KeyValue& kv) { return {{"key", kv.key}, {"value", kv.value}}; }

// Invalid UTF-8 (a key read from a damaged file) becomes U+FFFD instead of throwing.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The string at `pointer` ("/run/info/run_id") of a 2xx response body; a
// missing or mistyped field is an error, never an exception.
absl::StatusOr<std::string> string_field(std::string_view what, const std::string& body,
                                         const char* pointer) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json::json_pointer at(pointer);
  if (parsed.is_object() && parsed.contains(at) && parsed.at(at).is_string()) {
    return parsed.at(at).get<std::string>();
  }
  return absl::InternalError(
      fmt::format("MLflow {}: no {} in the response: {}", what, pointer, body.substr(0, 200)));
}

// MLflow's error codes (databricks.proto ErrorCode) as absl codes.
absl::StatusCode code_for_error(std::string_view error_code, long http_status) {
  if (error_code == "RESOURCE_DOES_NOT_EXIST" || error_code == "ENDPOINT_NOT_FOUND") {
    return absl::StatusCode::kNotFound;
  }
  if (error_code == "RESOURCE_ALREADY_EXISTS") return absl::StatusCode::kAlreadyExists;
  if (error_code == "INVALID_PARAMETER_VALUE" || error_code == "BAD_REQUEST" ||
      error_code == "MALFORMED_REQUEST" || error_code == "INVALID_STATE") {
    return absl::StatusCode::kInvalidArgument;
  }
  if (error_code == "PERMISSION_DENIED") return absl::StatusCode::kPermissionDenied;
  if (error_code == "UNAUTHENTICATED") return absl::StatusCode::kUnauthenticated;
  if (error_code == "REQUEST_LIMIT_EXCEEDED") return absl::StatusCode::kResourceExhausted;
  if (error_code == "TEMPORARILY_UNAVAILABLE") return absl::StatusCode::kUnavailable;
  if (http_status == 401) return absl::StatusCode::kUnauthenticated;
  if (http_status == 403) return absl::StatusCode::kPermissionDenied;
  if (http_status == 404) return absl::StatusCode::kNotFound;
  if (http_status == 429) return absl::StatusCode::kResourceExhausted;
  if (http_status >= 500) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kInvalidArgument;
}

// curl errors worth another try: the server may come back.
bool is_connection_error(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return false;
  }
}

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

void global_curl_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::chrono::milliseconds jittered_backoff(const MlflowConfig& config, int attempt) {
  // Uniform in [c/2, c] for c = min(cap, base * 2^attempt): clients that
  // failed together do not retry together, and none retries at once.
  const double cap = static_cast<double>(config.max_backoff.count());
  const double ceiling =
      std::min(cap, static_cast<double>(config.retry_backoff.count()) * std::ldexp(1.0, attempt));
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(ceiling / 2, ceiling);
  return std::chrono::milliseconds(static_cast<std::int64_t>(uniform(rng)));
}

// Fills requests in order, starting a new one when the next item would pass
// a count limit or the byte limit.
class BatchSplitter {
 public:
  BatchSplitter(std::string_view run_id, const BatchLimits& limits)
      : limits_(limits), base_bytes_(log_batch_body(run_id, Batch{}).size()), bytes_(base_bytes_) {}

  template <typename Item>
  absl::Status add(const Item& item, const json& item_json, std::vector<Item> Batch::*kind,
                   std::size_t kind_limit) {
    const std::size_t item_bytes = dump(item_json).size() + 1;  // +1: the comma
    if (base_bytes_ + item_bytes > limits_.max_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("MLflow item '{}' alone is {} bytes, over the {}-byte request limit",
                      item.key.substr(0, 40), item_bytes, limits_.max_bytes));
    }
    const std::size_t entities =
        current_.metrics.size() + current_.params.size() + current_.tags.size();
    if ((current_.*kind).size() >= kind_limit || entities >= limits_.max_entities ||
        bytes_ + item_bytes > limits_.max_bytes) {
      batches_.push_back(std::move(current_));
      current_ = Batch{};
      bytes_ = base_bytes_;
    }
    (current_.*kind).push_back(item);
    bytes_ += item_bytes;
    return absl::OkStatus();
  }

  std::vector<Batch> finish() {
    if (!current_.empty()) batches_.push_back(std::move(current_));
    return std::move(batches_);
  }

 private:
  const BatchLimits& limits_;
  const std::size_t base_bytes_;
  std::size_t bytes_;
  Batch current_;
  std::vector<Batch> batches_;
};

}  // namespace

std::string log_batch_body(std::string_view run_id, const Batch& batch) {
  json body = {{"run_id", run_id},
               {"metrics", json::array()},
               {"params", json::array()},
               {"tags", json::array()}};
  for (const Metric& metric : batch.metrics) body["metrics"].push_back(metric_json(metric));
  for (const KeyValue& param : batch.params) body["params"].push_back(key_value_json(param));
  for (const KeyValue& tag : batch.tags) body["tags"].push_back(key_value_json(tag));
  return dump(body);
}

absl::StatusOr<std::vector<Batch>> split_batch(std::string_view run_id, const Batch& all,
                                               const BatchLimits& limits) {
  BatchSplitter splitter(run_id, limits);
  for (const Metric& metric : all.metrics) {
    absl::Status added =
        splitter.add(metric, metric_json(metric), &Batch::metrics, limits.max_metrics);
    if (!added.ok()) return added;
  }
  for (const KeyValue& param : all.params) {
    absl::Status added =
        splitter.add(param, key_value_json(param), &Batch::params, limits.max_params);
    if (!added.ok()) return added;
  }
  for (const KeyValue& tag : all.tags) {
    absl::Status added = splitter.add(tag, key_value_json(tag), &Batch::tags, limits.max_tags);
    if (!added.ok()) return added;
  }
  return splitter.finish();
}

AuthScheme auth_scheme(const MlflowConfig& config) {
  if (!config.username.empty() && !config.password.empty()) return AuthScheme::kBasic;
  return config.token.empty() ? AuthScheme::kNone : AuthScheme::kBearer;
}

std::string redact(std::string text, const MlflowConfig& config) {
  auto replace_all = [&text](const std::string& secret) {
    if (secret.empty()) return;
    for (std::size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + 3)) {
      text.replace(at, secret.size(), "***");
    }
  };
  // The raw URI first, so its redacted form (not the bare host) replaces it.
  const std::string redacted_uri = redact_uri(config.tracking_uri);
  if (redacted_uri != config.tracking_uri) {
    for (std::size_t at = text.find(config.tracking_uri); at != std::string::npos;
         at = text.find(config.tracking_uri, at + redacted_uri.size())) {
      text.replace(at, config.tracking_uri.size(), redacted_uri);
    }
  }
  replace_all(config.password);
  replace_all(config.token);
  return text;
}

absl::Status error_from_response(std::string_view endpoint, long http_status,
                                 std::string_view body) {
  std::string error_code;
  std::string message;
  const json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    if (auto it = parsed.find("error_code"); it != parsed.end() && it->is_string()) {
      error_code = it->get<std::string>();
    }
    if (auto it = parsed.find("message"); it != parsed.end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  if (error_code.empty()) {
    // Not MLflow's error JSON (a proxy's page, say): a bounded excerpt.
    message = std::string(body.substr(0, 200));
  }
  std::string text = fmt::format("MLflow {}: HTTP {}", endpoint, http_status);
  if (!error_code.empty()) text += " " + error_code;
  if (!message.empty()) text += ": " + message;
  return absl::Status(code_for_error(error_code, http_status), text);
}

bool is_retryable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsResourceExhausted(status) ||
         absl::IsDeadlineExceeded(status);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(MlflowConfig config) {
  if (!absl::StartsWith(config.tracking_uri, "http://") &&
      !absl::StartsWith(config.tracking_uri, "https://")) {
    return absl::InvalidArgumentError(fmt::format(
        "MLflow tracking URI '{}' is not http:// or https:// (only tracking servers are supported)",
        redact_uri(config.tracking_uri)));
  }
  global_curl_init();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("libcurl: curl_easy_init failed");
  return std::unique_ptr<Client>(new Client(std::move(config), curl));
}

Client::Client(MlflowConfig config, void* curl) : config_(std::move(config)), curl_(curl) {
  base_url_ = config_.tracking_uri;
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

Client::~Client() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

absl::StatusOr<Client::Response> Client::perform_once(const char* method, const std::string& url,
                                                      const std::string& body) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // keeps the connection cache, clears the previous request's options
  Response response;
  char error_buffer[CURL_ERROR_SIZE] = "";
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json");
  const AuthScheme auth = auth_scheme(config_);
  if (auth == AuthScheme::kBearer) {
    const std::string bearer = "Authorization: Bearer " + config_.token;
    headers = curl_slist_append(headers, bearer.c_str());  // copies the string
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (std::string_view(method) == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  if (auth == AuthScheme::kBasic) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, config_.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, config_.password.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a host process's threads
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, config_.insecure_tls ? 0L : 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, config_.insecure_tls ? 0L : 2L);
  if (!config_.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_bundle.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  ++requests_;
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    const std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
    const std::string message =
        redact(fmt::format("cannot reach MLflow at {}: {}", config_.tracking_uri, detail), config_);
    if (is_connection_error(code)) return absl::UnavailableError(message);
    return absl::FailedPreconditionError(message);  // TLS, bad URL: retrying will not help
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.http_status);
  return response;
}

absl::StatusOr<std::string> Client::call(const char* method, const std::string& endpoint,
                                         const std::string& query, const std::string& body) {
  const std::string url = base_url_ + std::string(kApiPrefix) + endpoint + query;
  const std::string what = fmt::format("{} {}", method, endpoint);
  absl::Status last;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Response> response = perform_once(method, url, body);
    if (response.ok() && response->http_status / 100 == 2) return std::move(response->body);
    last =
        response.ok()
            ? error_from_response(what, response->http_status, response->body)
            : absl::Status(response.status().code(),
                           fmt::format("MLflow {}: {}", what, to_std(response.status().message())));
    if (!is_retryable(last) || attempt >= config_.max_retries) break;
    ++retries_;
    std::this_thread::sleep_for(jittered_backoff(config_, attempt));
  }
  return absl::Status(last.code(), redact(to_std(last.message()), config_));
}

absl::StatusOr<std::string> Client::get_or_create_experiment(const std::string& name) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    CURL* curl = static_cast<CURL*>(curl_);
    char* escaped = curl_easy_escape(curl, name.c_str(), static_cast<int>(name.size()));
    const std::string query = std::string("?experiment_name=") + (escaped ? escaped : "");
    curl_free(escaped);
    absl::StatusOr<std::string> found = call("GET", "experiments/get-by-name", query, "");
    if (found.ok()) {
      return string_field("GET experiments/get-by-name", *found, "/experiment/experiment_id");
    }
    if (!absl::IsNotFound(found.status())) return found.status();
    absl::StatusOr<std::string> created =
        call("POST", "experiments/create", "", dump(json{{"name", name}}));
    if (created.ok()) return string_field("POST experiments/create", *created, "/experiment_id");
    // Someone else created it between our two calls: look it up again.
    if (!absl::IsAlreadyExists(created.status())) return created.status();
  }
  return absl::AbortedError(
      fmt::format("MLflow experiment '{}' keeps appearing and vanishing", name));
}

absl::StatusOr<std::string> Client::create_run(const std::string& experiment_id,
                                               const std::string& name,
                                               std::int64_t start_time_ms) {
  const json body = {{"experiment_id", experiment_id},
                     {"run_name", name},
                     {"start_time", start_time_ms},
                     {"tags", json::array({{{"key", "mlflow.runName"}, {"value", name}}})}};
  absl::StatusOr<std::string> response = call("POST", "runs/create", "", dump(body));
  if (!response.ok()) return response.status();
  return string_field("POST runs/create", *response, "/run/info/run_id");
}

absl::Status Client::log_batch(const std::string& run_id, const Batch& batch) {
  return call("POST", "runs/log-batch", "", log_batch_body(run_id, batch)).status();
}

absl::Status Client::update_run(const std::string& run_id, RunStatus status,
                                std::int64_t end_time_ms) {
  json body = {{"run_id", run_id}, {"status", std::string(run_status_name(status))}};
  if (end_time_ms > 0) body["end_time"] = end_time_ms;
  return call("POST", "runs/update", "", dump(body)).status();
}

}  // namespace trainscope::mlflow
