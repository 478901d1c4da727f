// How a launch ended, in words (trainscope/launch/outcome.hpp): the last line
// of `trainscope run`.
#include "trainscope/launch/outcome.hpp"

#include <signal.h>
#include <string.h>  // strsignal (POSIX)

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace trainscope {
namespace {

TEST(LaunchOutcome, ExitCodeOrSignalThenTheRunAndItsStatus) {
  LaunchResult result;
  result.run_dir = "runs/a";
  EXPECT_EQ(launch_outcome(result, "trainscope run: "),
            "trainscope run: exit code 0, run runs/a FINISHED\n");
  result.exit_code = 128 + SIGKILL;
  result.term_signal = SIGKILL;
  result.status = RunStatus::kKilled;
  EXPECT_EQ(
      launch_outcome(result, "> "),
      "> killed by signal 9 (" + std::string(::strsignal(SIGKILL)) + "), run runs/a KILLED\n");
  // A command that could not be started: why, then the outcome.
  result = LaunchResult{};
  result.run_dir = "runs/b";
  result.exit_code = 127;
  result.status = RunStatus::kFailed;
  result.spawn_error = absl::NotFoundError("nosuchcommand: not found on PATH");
  EXPECT_EQ(launch_outcome(result, "trainscope run: "),
            "trainscope run: nosuchcommand: not found on PATH\n"
            "trainscope run: exit code 127, run runs/b FAILED\n");
}

}  // namespace
}  // namespace trainscope
