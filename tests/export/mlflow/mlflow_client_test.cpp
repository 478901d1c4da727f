// The MLflow client without a network: request splitting at runs/log-batch's
// limits, key rules, error mapping, credential redaction, the environment.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "export/mlflow/mlflow_client.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/closed_port.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"

namespace trainscope::mlflow {
namespace {

using ::trainscope::testing::closed_port;

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRunId[] = "0123456789abcdef0123456789abcdef";

Batch metrics(std::size_t n, std::size_t key_length = 8) {
  Batch batch;
  for (std::size_t i = 0; i < n; ++i) {
    batch.metrics.push_back({std::string(key_length, 'k'), 0.25 * static_cast<double>(i),
                             1760000000000 + static_cast<std::int64_t>(i),
                             static_cast<std::int64_t>(i)});
  }
  return batch;
}

TEST(SplitBatch, SplitsAtThousandMetricsKeepingOrder) {
  auto batches = split_batch(kRunId, metrics(2500), BatchLimits{});
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 3u);
  EXPECT_EQ((*batches)[0].metrics.size(), 1000u);
  EXPECT_EQ((*batches)[1].metrics.size(), 1000u);
  EXPECT_EQ((*batches)[2].metrics.size(), 500u);
  EXPECT_EQ((*batches)[1].metrics.front().step, 1000);
  EXPECT_EQ((*batches)[2].metrics.back().step, 2499);
}

TEST(SplitBatch, SplitsAtHundredParamsAndHundredTags) {
  Batch all;
  for (int i = 0; i < 250; ++i) all.params.push_back({"p" + std::to_string(i), "v"});
  for (int i = 0; i < 150; ++i) all.tags.push_back({"t" + std::to_string(i), "v"});
  auto batches = split_batch(kRunId, all, BatchLimits{});
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::size_t params = 0;
  std::size_t tags = 0;
  for (const Batch& batch : *batches) {
    EXPECT_LE(batch.params.size(), 100u);
    EXPECT_LE(batch.tags.size(), 100u);
    params += batch.params.size();
    tags += batch.tags.size();
  }
  EXPECT_EQ(params, 250u);
  EXPECT_EQ(tags, 150u);
  EXPECT_EQ((*batches)[2].params.back().key, "p249");
}

TEST(SplitBatch, EveryRequestBodyStaysUnderOneMegabyte) {
  // 1000 metrics with 250-character keys are ~300 kB: the count limit binds.
  // Params of 6000 characters: 100 of them are ~600 kB; with tags of 8000
  // characters the byte limit binds before the count limits.
  Batch all = metrics(1000, 250);
  for (int i = 0; i < 100; ++i) {
    all.params.push_back({"p" + std::to_string(i), std::string(6000, 'x')});
    all.tags.push_back({"t" + std::to_string(i), std::string(8000, 'y')});
  }
  auto batches = split_batch(kRunId, all, BatchLimits{});
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::size_t items = 0;
  for (const Batch& batch : *batches) {
    const std::size_t bytes = log_batch_body(kRunId, batch).size();
    EXPECT_LE(bytes, 1000000u);
    EXPECT_LE(batch.metrics.size() + batch.params.size() + batch.tags.size(), 1000u);
    items += batch.metrics.size() + batch.params.size() + batch.tags.size();
  }
  EXPECT_EQ(items, 1200u);
  EXPECT_GE(batches->size(), 3u);
}

TEST(SplitBatch, SmallByteLimitSplitsByBytes) {
  BatchLimits limits;
  limits.max_bytes = 2000;
  auto batches = split_batch(kRunId, metrics(100), limits);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_GT(batches->size(), 3u);
  for (const Batch& batch : *batches) EXPECT_LE(log_batch_body(kRunId, batch).size(), 2000u);
}

TEST(SplitBatch, OneItemOverTheByteLimitIsAnError) {
  BatchLimits limits;
  limits.max_bytes = 200;
  Batch all;
  all.params.push_back({"huge", std::string(500, 'x')});
  auto batches = split_batch(kRunId, all, limits);
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(batches.status().message()), HasSubstr("huge"));
}

TEST(LogBatchBody, NonFiniteValuesAreMlflowStrings) {
  Batch batch;
  batch.metrics.push_back({"a", std::nan(""), 1, 0});
  batch.metrics.push_back({"b", -INFINITY, 1, 0});
  const std::string body = log_batch_body(kRunId, batch);
  EXPECT_THAT(body, HasSubstr("\"value\":\"NaN\""));
  EXPECT_THAT(body, HasSubstr("\"value\":\"-Infinity\""));
}

TEST(ValidateKey, AcceptsMlflowKeys) {
  for (const char* key : {"CPU/BATCH", "train/CPU/EPOCH", "loss", "a-b_c.d e:f", "rank1/GPU/x"}) {
    EXPECT_TRUE(validate_key(key).ok()) << key;
  }
  EXPECT_TRUE(validate_key(std::string(250, 'k')).ok());
}

TEST(ValidateKey, RejectsWhatTheServerRejects) {
  for (const char* key :
       {"", "bad key!", "a//b", "/abs", "trailing/", "a/../b", "..x", "./a", "a,b", "tab\tkey"}) {
    EXPECT_EQ(validate_key(key).code(), absl::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_FALSE(validate_key(std::string(251, 'k')).ok());
}

TEST(ErrorFromResponse, NamesEndpointAndErrorCode) {
  const absl::Status status =
      error_from_response("POST runs/log-batch", 400,
                          R"({"error_code": "INVALID_PARAMETER_VALUE",)"
                          R"( "message": "Changing param values is not allowed"})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "MLflow POST runs/log-batch: HTTP 400 INVALID_PARAMETER_VALUE: Changing param values "
            "is not allowed");
  EXPECT_FALSE(is_retryable(status));
}

TEST(ErrorFromResponse, MapsCodesAndRetryability) {
  EXPECT_TRUE(absl::IsNotFound(error_from_response(
      "GET experiments/get-by-name", 404, R"({"error_code": "RESOURCE_DOES_NOT_EXIST"})")));
  EXPECT_TRUE(absl::IsAlreadyExists(error_from_response(
      "POST experiments/create", 400, R"({"error_code": "RESOURCE_ALREADY_EXISTS"})")));
  EXPECT_TRUE(absl::IsUnauthenticated(error_from_response("GET x", 401, "")));
  EXPECT_TRUE(absl::IsPermissionDenied(error_from_response("GET x", 403, "forbidden")));
  EXPECT_TRUE(is_retryable(error_from_response("GET x", 503, "<html>busy</html>")));
  EXPECT_TRUE(is_retryable(error_from_response("GET x", 429, "")));
  EXPECT_FALSE(is_retryable(error_from_response("GET x", 400, "")));
  // Not MLflow's JSON: a bounded excerpt of the body.
  const absl::Status proxy = error_from_response("GET x", 502, std::string(1000, 'z'));
  EXPECT_LT(proxy.message().size(), 300u);
}

TEST(Redact, RemovesPasswordTokenAndUriUserInfo) {
  MlflowConfig config;
  config.tracking_uri = "https://alice:pa55word@mlflow.example.com:5000/prefix";
  config.password = "s3cret";
  config.token = "tok-123";
  EXPECT_EQ(redact_uri(config.tracking_uri), "https://***@mlflow.example.com:5000/prefix");
  EXPECT_EQ(redact_uri("http://host:5000/a@b"), "http://host:5000/a@b");
  EXPECT_EQ(redact_uri("http://host"), "http://host");
  const std::string text =
      redact("cannot reach " + config.tracking_uri + " with s3cret or Bearer tok-123", config);
  EXPECT_THAT(text, Not(HasSubstr("pa55word")));
  EXPECT_THAT(text, Not(HasSubstr("alice")));
  EXPECT_THAT(text, Not(HasSubstr("s3cret")));
  EXPECT_THAT(text, Not(HasSubstr("tok-123")));
  EXPECT_THAT(text, HasSubstr("https://***@mlflow.example.com:5000/prefix"));
}

TEST(Client, RefusesNonHttpUris) {
  MlflowConfig config;
  config.tracking_uri = "file:///tmp/mlruns";
  EXPECT_EQ(Client::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

// Sets MLflow's variables for one test and restores the environment after.
class EnvironmentTest : public ::testing::Test {
 protected:
  static constexpr const char* kVariables[] = {
      "MLFLOW_TRACKING_URI",          "MLFLOW_EXPERIMENT_NAME",          "MLFLOW_EXPERIMENT_ID",
      "MLFLOW_TRACKING_USERNAME",     "MLFLOW_TRACKING_PASSWORD",        "MLFLOW_TRACKING_TOKEN",
      "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH"};
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = std::getenv(name)) saved_.emplace_back(name, value);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(EnvironmentTest, OffWithoutTrackingUri) {
  auto config = mlflow_config_from_environment();
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->has_value());
}

TEST_F(EnvironmentTest, ReadsMlflowVariables) {
  setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000", 1);
  setenv("MLFLOW_EXPERIMENT_NAME", "exp", 1);
  setenv("MLFLOW_TRACKING_TOKEN", "tok", 1);
  setenv("MLFLOW_TRACKING_INSECURE_TLS", "TRUE", 1);
  auto config = mlflow_config_from_environment();
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_value());
  EXPECT_EQ((*config)->tracking_uri, "http://127.0.0.1:5000");
  EXPECT_EQ((*config)->experiment_name, "exp");
  EXPECT_EQ((*config)->token, "tok");
  EXPECT_TRUE((*config)->insecure_tls);
  EXPECT_EQ((*config)->summary_prefix, "train");
}

TEST_F(EnvironmentTest, BasicNeedsBothUsernameAndPasswordElseBearer) {
  // As MLflow's client: Basic when both are set, else the token.
  setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com", 1);
  setenv("MLFLOW_TRACKING_USERNAME", "alice", 1);
  setenv("MLFLOW_TRACKING_PASSWORD", "pw", 1);
  setenv("MLFLOW_TRACKING_TOKEN", "tok", 1);
  auto both = mlflow_config_from_environment();
  ASSERT_TRUE(both.ok() && both->has_value());
  EXPECT_EQ(auth_scheme(**both), AuthScheme::kBasic);
  unsetenv("MLFLOW_TRACKING_PASSWORD");
  auto token = mlflow_config_from_environment();
  ASSERT_TRUE(token.ok() && token->has_value());
  EXPECT_EQ(auth_scheme(**token), AuthScheme::kBearer);
  unsetenv("MLFLOW_TRACKING_TOKEN");
  auto none = mlflow_config_from_environment();
  ASSERT_TRUE(none.ok() && none->has_value());
  EXPECT_EQ(auth_scheme(**none), AuthScheme::kNone);
}

TEST_F(EnvironmentTest, BadValuesNameTheVariableWithoutCredentials) {
  setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000", 1);
  setenv("MLFLOW_TRACKING_INSECURE_TLS", "maybe", 1);
  auto bad_bool = mlflow_config_from_environment();
  EXPECT_EQ(bad_bool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_bool.status().message()), HasSubstr("MLFLOW_TRACKING_INSECURE_TLS"));
  unsetenv("MLFLOW_TRACKING_INSECURE_TLS");
  setenv("MLFLOW_TRACKING_URI", "databricks://bob:secret@profile", 1);
  auto bad_uri = mlflow_config_from_environment();
  EXPECT_EQ(bad_uri.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_uri.status().message()), HasSubstr("MLFLOW_TRACKING_URI"));
  EXPECT_THAT(std::string(bad_uri.status().message()), Not(HasSubstr("secret")));
}

// The run directories: a running run in the documented format with one metric.
class MlflowRunDirTest : public trainscope::testing::RunDirTest {
 protected:
  std::string write_running_run(const std::string& name) const {
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    trainscope::testing::RunJson run;
    run.name = "t";
    run.experiment = "Default";
    run.start_time_ms = now_ms;
    trainscope::testing::RankJson rank;
    rank.pid = ::getpid();
    rank.start_time_ms = now_ms;
    rank.heartbeat_ms = now_ms;
    rank.flush_interval_ms = 3600000;
    const std::filesystem::path dir = write_run_dir(name, run, {rank});
    trainscope::testing::write_file(dir / "metrics-0.csv",
                                    "loss,0.5,0," + std::to_string(now_ms) + ",0\n",
                                    /*append=*/true);
    return dir.string();
  }
};
using MlflowExporterTest = MlflowRunDirTest;
using SyncRunDir = MlflowRunDirTest;

TEST_F(MlflowExporterTest, StoppedServerCostsOneRefusedConnectionPerBackoff) {
  const std::string dir = write_running_run("stopped");
  MlflowConfig config;
  config.tracking_uri = "http://alice:pw-123@127.0.0.1:" + std::to_string(closed_port());
  MlflowExporter exporter(dir, open_run_source, config, std::chrono::milliseconds(0));
  const auto start = std::chrono::steady_clock::now();
  const absl::Status first = exporter.flush();
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(first.message()), HasSubstr("experiments/get-by-name"));
  EXPECT_THAT(std::string(first.message()), HasSubstr("http://***@127.0.0.1"));
  EXPECT_THAT(std::string(first.message()), Not(HasSubstr("pw-123")));
  // During the backoff the pipeline thread does not wait on the network.
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(exporter.write_metrics({}).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_EQ(exporter.stats().requests, 1u);  // no retries inside an attempt either
  EXPECT_FALSE(std::filesystem::exists(dir + "/mlflow-sync.json"));
}

TEST_F(SyncRunDir, CursorFromAnotherServerIsRefused) {
  const std::string dir = write_running_run("other_server");
  trainscope::testing::write_file(
      dir + "/mlflow-sync.json",
      R"({"version":1,"tracking_uri":"http://other:5000","experiment_id":"1","run_id":"r",)"
      R"("params":{},"tags":{},"files":{},"summary_sent":false,"status":""})");
  MlflowConfig config;
  config.tracking_uri = "http://127.0.0.1:" + std::to_string(closed_port());
  const absl::Status status = sync_run_dir(dir, config);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("http://other:5000"));
}

}  // namespace
}  // namespace trainscope::mlflow
