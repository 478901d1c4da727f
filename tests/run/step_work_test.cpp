// log_step_work / log_step_flops: the work of a step as the run's metrics and
// params under the names of trainscope/run/step_work.hpp; bad figures refused
// naming them, nothing recorded.
#include "trainscope/run/step_work.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_dir_test.hpp"

namespace trainscope::testing {
namespace {

using ::testing::HasSubstr;
class StepWorkTest : public RunDirTest {
 protected:
  static std::vector<MetricPoint> metrics_of(const std::string& dir) {
    RunReader reader = open_run(dir);
    absl::StatusOr<Chunk<MetricPoint>> chunk = reader.read_metrics(0);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    return chunk.ok() ? chunk->rows : std::vector<MetricPoint>{};
  }
};

TEST_F(StepWorkTest, SamplesAndTokensBecomeTheRunsMetricsAtTheirStep) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(log_step_work(*run, {32.0, 4000.0}, 0).ok());
  ASSERT_TRUE(log_step_work(*run, {16.0, std::nullopt}).ok());  // the next step: 1
  const std::string dir = run->dir();
  ASSERT_TRUE(run->end().ok());
  std::vector<MetricPoint> rows = metrics_of(dir);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, kStepSamplesMetric);
  EXPECT_EQ(rows[0].value, 32.0);
  EXPECT_EQ(rows[1].key, kStepTokensMetric);
  EXPECT_EQ(rows[1].value, 4000.0);
  EXPECT_EQ(rows[2].key, kStepSamplesMetric);
  EXPECT_EQ(rows[2].step, 1);
}

TEST_F(StepWorkTest, BadFiguresAreRefusedNamingThemAndRecordNothing) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  absl::Status none = log_step_work(*run, {});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.message()), HasSubstr("neither samples nor tokens"));
  absl::Status negative = log_step_work(*run, {8.0, -1.0});
  EXPECT_THAT(std::string(negative.message()), HasSubstr("tokens = -1"));
  absl::Status nan = log_step_work(*run, {std::nan(""), 1.0});
  EXPECT_THAT(std::string(nan.message()), HasSubstr("samples = nan"));
  absl::Status flops = log_step_flops(*run, std::numeric_limits<double>::infinity());
  EXPECT_THAT(std::string(flops.message()), HasSubstr("inf is not a FLOP count"));
  const std::string dir = run->dir();
  ASSERT_TRUE(run->end().ok());
  EXPECT_TRUE(metrics_of(dir).empty());
  EXPECT_EQ(open_run(dir).info().params.count(std::string(kStepFlopsParam)), 0u);
}

TEST_F(StepWorkTest, FlopsOfAStepAreParamsWithTheirSource) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(log_step_flops(*run, 1.25e12, kFlopsFromCounter).ok());
  const std::string dir = run->dir();
  ASSERT_TRUE(run->end().ok());
  RunReader reader = open_run(dir);
  EXPECT_EQ(reader.info().params.at(std::string(kStepFlopsParam)), "1.25e+12");
  EXPECT_EQ(reader.info().params.at(std::string(kStepFlopsSourceParam)), kFlopsFromCounter);
}

}  // namespace
}  // namespace trainscope::testing
