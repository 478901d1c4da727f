// trainscope::run_tool (trainscope/launch/run_tool.hpp), the one way
// trainscope runs a short-lived helper tool: what it printed, how it exited,
// a tool that is missing or does not end.
#include "trainscope/launch/run_tool.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace trainscope {
namespace {

TEST(RunToolTest, CapturesStdoutStderrAndTheExitCode) {
  absl::StatusOr<ToolOutput> done = run_tool(
      {"sh", "-c", "printf 'out 1\\nout 2\\n'; printf 'err' >&2; exit 3"}, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->out, "out 1\nout 2\n");
  EXPECT_EQ(done->err, "err");
  EXPECT_EQ(done->exit_code, 3);
}

TEST(RunToolTest, PassesArgumentsAsTheyAreWithoutAShell) {
  absl::StatusOr<ToolOutput> done =
      run_tool({"printf", "%s|%s", "a b", "'$HOME'"}, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->out, "a b|'$HOME'");
  EXPECT_EQ(done->exit_code, 0);
}

TEST(RunToolTest, ToolsSeeThisProcesssEnvironment) {
  ASSERT_EQ(::setenv("TRAINSCOPE_RUN_TOOL_TEST", "seen", 1), 0);
  absl::StatusOr<ToolOutput> done =
      run_tool({"sh", "-c", "printf %s \"$TRAINSCOPE_RUN_TOOL_TEST\""}, absl::Seconds(60));
  ::unsetenv("TRAINSCOPE_RUN_TOOL_TEST");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->out, "seen");
}

TEST(RunToolTest, ADeathBySignalIs128PlusTheSignal) {
  absl::StatusOr<ToolOutput> done =
      run_tool({"sh", "-c", "kill -TERM $$"}, absl::Seconds(60), /*own_group=*/true);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->exit_code, 128 + 15);
}

TEST(RunToolTest, AMissingToolIsNotFoundNamingIt) {
  absl::StatusOr<ToolOutput> done =
      run_tool({"trainscope-no-such-tool-here", "--version"}, absl::Seconds(60));
  ASSERT_FALSE(done.ok());
  EXPECT_TRUE(absl::IsNotFound(done.status())) << done.status();
  EXPECT_NE(done.status().message().find("trainscope-no-such-tool-here"), std::string::npos)
      << done.status();
}

TEST(RunToolTest, NoArgvIsAnError) {
  EXPECT_TRUE(absl::IsInvalidArgument(run_tool({}, absl::Seconds(1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(run_tool({""}, absl::Seconds(1)).status()));
}

// A tool that never ends is killed at the deadline (sleep would take 10 minutes).
TEST(RunToolTest, AToolPastItsTimeoutIsKilledAndDeadlineExceeded) {
  absl::StatusOr<ToolOutput> done = run_tool({"sleep", "600"}, absl::Milliseconds(200));
  ASSERT_FALSE(done.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(done.status())) << done.status();
  EXPECT_NE(done.status().message().find("sleep"), std::string::npos) << done.status();
}

}  // namespace
}  // namespace trainscope
