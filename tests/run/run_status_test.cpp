#include "trainscope/run/run_status.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainscope {
namespace {

using ::testing::HasSubstr;

TEST(RunStatusTest, OneOrderACrashCountsAsFailed) {
  EXPECT_LT(status_severity(RunStatus::kFinished), status_severity(RunStatus::kRunning));
  EXPECT_LT(status_severity(RunStatus::kRunning), status_severity(RunStatus::kKilled));
  EXPECT_LT(status_severity(RunStatus::kKilled), status_severity(RunStatus::kFailed));
  // tools/run_command.cpp ranked CRASHED above FAILED, RunReader equal: one order now.
  const ProcessStatus crashed{RunStatus::kRunning, true};
  EXPECT_EQ(run_status_of(crashed), RunStatus::kFailed);
  EXPECT_EQ(status_severity(crashed), status_severity(RunStatus::kFailed));
  EXPECT_EQ(worse_status(RunStatus::kKilled, run_status_of(crashed)), RunStatus::kFailed);
  EXPECT_EQ(worse_status(RunStatus::kFailed, RunStatus::kKilled), RunStatus::kFailed);
  EXPECT_EQ(worse_status(RunStatus::kFinished, RunStatus::kRunning), RunStatus::kRunning);
  EXPECT_FALSE(crashed.running());
  EXPECT_TRUE(ProcessStatus{}.running());
}

TEST(RunStatusTest, NamesRoundTrip) {
  for (const char* name : {"RUNNING", "FINISHED", "FAILED", "KILLED", "CRASHED"}) {
    absl::StatusOr<ProcessStatus> s = parse_process_status(name);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(process_status_name(*s), name);
  }
  EXPECT_EQ(*parse_process_status("CRASHED"), (ProcessStatus{RunStatus::kRunning, true}));
  EXPECT_EQ(process_status_name(ProcessStatus{RunStatus::kFailed, false}), "FAILED");
  absl::StatusOr<ProcessStatus> bad = parse_process_status("crashed");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"crashed\""));
}

}  // namespace
}  // namespace trainscope
