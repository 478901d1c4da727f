// read_sweep_state (trainscope/sweep/sweep_state.hpp), the public reader of
// a sweep directory: every job's id, status, params and run, the run found
// also when the sweep directory moved; errors naming sweep.json.
#include "trainscope/sweep/sweep_state.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using trainscope::testing::quiet_options;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;
using P = std::vector<std::pair<std::string, std::string>>;

// Three jobs: one finishes, one fails, one never starts (max_failures stops the sweep).
SweepResult run_three(const std::string& dir) {
  Plan plan;
  plan.name = "three";
  plan.jobs = {shell_job("ok", "true"), shell_job("bad", "exit 5"), shell_job("late", "true")};
  plan.jobs[0].params = {{"lr", "0.1"}, {"bs", "32"}};
  plan.jobs[1].params = {{"lr", "0.2"}, {"bs", "32"}};
  SweepOptions options = quiet_options(dir, 1);
  options.max_failures = 1;
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SweepResult{};
}

TEST(SweepStateTest, ReadsEveryJobsStatusParamsAndRun) {
  TempDir tmp;
  const SweepResult result = run_three(tmp.file("sw"));
  ASSERT_EQ(result.jobs.size(), 3u);
  EXPECT_TRUE(is_sweep_dir(tmp.file("sw")));
  absl::StatusOr<StoredSweep> state = read_sweep_state(tmp.file("sw"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->name, "three");
  ASSERT_EQ(state->jobs.size(), 3u);
  const StoredJob& ok = state->jobs[0];
  EXPECT_EQ(ok.id, "ok");
  EXPECT_EQ(ok.status, JobStatus::kFinished);
  EXPECT_EQ(ok.params, (P{{"lr", "0.1"}, {"bs", "32"}}));
  EXPECT_EQ(ok.attempts, 1);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.run_id, result.jobs[0].run_id);
  EXPECT_EQ(ok.run_dir, result.jobs[0].run_dir);
  EXPECT_TRUE(fs::is_regular_file(fs::path(ok.run_dir) / "run.json"));
  const StoredJob& bad = state->jobs[1];
  EXPECT_EQ(bad.status, JobStatus::kFailed);
  EXPECT_EQ(bad.exit_code, 5);
  EXPECT_EQ(bad.run_dir, result.jobs[1].run_dir);
  const StoredJob& late = state->jobs[2];
  EXPECT_EQ(late.id, "late");
  EXPECT_EQ(late.status, JobStatus::kQueued);
  EXPECT_EQ(late.run_id, "");
  EXPECT_EQ(late.run_dir, "");
}

// A sweep copied elsewhere (off a cluster): its runs are found under it.
TEST(SweepStateTest, FindsTheRunsOfAMovedSweepUnderIt) {
  TempDir tmp;
  const SweepResult result = run_three(tmp.file("sw"));
  ASSERT_EQ(result.jobs.size(), 3u);
  fs::rename(tmp.file("sw"), tmp.file("moved"));
  absl::StatusOr<StoredSweep> state = read_sweep_state(tmp.file("moved"));
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->jobs.size(), 3u);
  EXPECT_EQ(state->jobs[0].run_dir,
            (fs::path(tmp.file("moved")) / "runs" / result.jobs[0].run_id).string());
  EXPECT_TRUE(fs::is_regular_file(fs::path(state->jobs[0].run_dir) / "run.json"));
  // A run that is gone from both places: no run_dir, the job still listed.
  fs::remove_all(state->jobs[1].run_dir);
  state = read_sweep_state(tmp.file("moved"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->jobs[1].run_id, result.jobs[1].run_id);
  EXPECT_EQ(state->jobs[1].run_dir, "");
}

TEST(SweepStateTest, ErrorsNameTheStateFile) {
  TempDir tmp;
  fs::create_directories(tmp.file("empty"));
  EXPECT_FALSE(is_sweep_dir(tmp.file("empty")));
  absl::StatusOr<StoredSweep> state = read_sweep_state(tmp.file("empty"));
  EXPECT_TRUE(absl::IsNotFound(state.status())) << state.status();
  EXPECT_THAT(std::string(state.status().message()), HasSubstr(tmp.file("empty/sweep.json")));

  tmp.write("corrupt/sweep.json", "{\"version\": 1, \"jobs\": [");
  state = read_sweep_state(tmp.file("corrupt"));
  EXPECT_TRUE(absl::IsDataLoss(state.status())) << state.status();
  EXPECT_THAT(std::string(state.status().message()), HasSubstr(tmp.file("corrupt/sweep.json")));

  tmp.write("future/sweep.json", "{\"version\": 99, \"jobs\": []}");
  state = read_sweep_state(tmp.file("future"));
  EXPECT_TRUE(absl::IsFailedPrecondition(state.status())) << state.status();
  EXPECT_THAT(std::string(state.status().message()), HasSubstr(tmp.file("future/sweep.json")));
}

}  // namespace
}  // namespace trainscope::sweep
