// Run accepts exactly the keys the MLflow syncer can upload: both use the one
// rule in trainscope/export/mlflow/mlflow_keys.hpp, so nothing a user logs is later
// skipped by `trainscope sync`.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_dir_test.hpp"
#include "trainscope/export/mlflow/mlflow_keys.hpp"

namespace trainscope::testing {
namespace {

using ::testing::HasSubstr;

class RunKeysTest : public RunDirTest {};

const std::vector<std::string>& sample_keys() {
  static const std::vector<std::string> keys = {"loss",
                                                "train/CPU/EPOCH",
                                                "a b:c-d.e_f",
                                                "lr",
                                                std::string(250, 'k'),
                                                std::string(251, 'k'),
                                                "",
                                                "a//b",
                                                "/abs",
                                                "trailing/",
                                                "./x",
                                                "a/../b",
                                                "..",
                                                "semi;colon",
                                                "tab\there",
                                                "caf\xc3\xa9"};
  return keys;
}

TEST_F(RunKeysTest, RunAcceptsExactlyWhatTheSyncerAccepts) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  for (const std::string& key : sample_keys()) {
    const bool mlflow_ok = mlflow::validate_key(key).ok();
    const absl::Status metric = run->log_metric(key, 1.0);
    const absl::Status param = run->log_param(key, "v");
    const absl::Status tag = run->set_tag(key, "v");
    EXPECT_EQ(metric.ok(), mlflow_ok) << '"' << key << "\": " << metric;
    EXPECT_EQ(param.ok(), mlflow_ok) << '"' << key << "\": " << param;
    EXPECT_EQ(tag.ok(), mlflow_ok) << '"' << key << "\": " << tag;
    if (!mlflow_ok) {
      EXPECT_EQ(metric.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(metric.message()), HasSubstr("metric key"));
      EXPECT_THAT(std::string(param.message()), HasSubstr("param key"));
    }
  }
  EXPECT_TRUE(run->end().ok());
}

TEST_F(RunKeysTest, ValuesOverMlflowLimitsAreRefusedNamingTheKey) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  const absl::Status param =
      run->log_param("p", std::string(mlflow::kMaxParamValueLength + 1, 'x'));
  EXPECT_EQ(param.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(param.message()), HasSubstr("\"p\""));
  EXPECT_TRUE(run->log_param("q", std::string(mlflow::kMaxParamValueLength, 'x')).ok());
  EXPECT_FALSE(run->set_tag("t", std::string(mlflow::kMaxTagValueLength + 1, 'x')).ok());
  EXPECT_TRUE(run->end().ok());
}

}  // namespace
}  // namespace trainscope::testing
