// The end of `trainscope run` (trainscope/diagnosis/end_of_run.hpp): the
// ended run's status, its diagnosis and tags, the summary or the one line
// that says why there is none.
#include "trainscope/diagnosis/end_of_run.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/damaged_run.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::HasSubstr;

RankNow rank_with(RunStatus recorded, bool crashed = false) {
  RankNow rank;
  rank.status.recorded = recorded;
  rank.status.crashed = crashed;
  return rank;
}

TEST(EndOfRun, FinalStatusIsTheWorstOfTheCommandAndTheRanks) {
  Diagnosis d;
  d.ranks = {rank_with(RunStatus::kFinished), rank_with(RunStatus::kFinished)};
  LaunchResult result;
  result.status = RunStatus::kFinished;
  EXPECT_EQ(final_status(d, result), RunStatus::kFinished);
  result.status = RunStatus::kKilled;  // the command stopped by a signal
  EXPECT_EQ(final_status(d, result), RunStatus::kKilled);
  // A crashed rank counts as FAILED, above KILLED (run_status.hpp's one order).
  d.ranks[1] = rank_with(RunStatus::kRunning, /*crashed=*/true);
  EXPECT_EQ(final_status(d, result), RunStatus::kFailed);
  // Another launcher's rank still running keeps the run RUNNING.
  d.ranks[1] = rank_with(RunStatus::kRunning);
  result.status = RunStatus::kFinished;
  EXPECT_EQ(final_status(d, result), RunStatus::kRunning);
}

TEST(EndOfRun, TheHookDiagnosesTheRunAndReturnsItsTags) {
  testing::TempDir tmp;
  const auto dir = testing::write_finished_run(tmp.file("run"));
  LaunchResult result;
  result.run_dir = dir.string();
  result.status = RunStatus::kKilled;
  auto end = std::make_shared<EndOfRun>();
  const std::map<std::string, std::string> tags = end_of_run_hook(end)(result).tags;
  ASSERT_TRUE(end->diagnosis.has_value()) << end->error;
  EXPECT_EQ(end->diagnosis->status, RunStatus::kKilled);  // the command's, worse than the ranks'
  EXPECT_EQ(tags, diagnosis_tags(*end->diagnosis));
  EXPECT_FALSE(tags.empty());
  const std::string text = end_of_run_text(*end, result.run_dir, /*quiet=*/false);
  EXPECT_EQ(text, format_run_summary(*end->diagnosis) +
                      (format_run_summary(*end->diagnosis).back() == '\n' ? "" : "\n"));
  EXPECT_EQ(end_of_run_text(*end, result.run_dir, /*quiet=*/true), "");
}

TEST(EndOfRun, NoDiagnosisIsOneWarningNamingTheRunAndWhy) {
  testing::TempDir tmp;
  const auto dir = testing::write_finished_run(tmp.file("run"));
  LaunchResult result;
  result.run_dir = dir.string();
  // Past the cap on region rows: nothing read, `trainscope diagnose` named.
  EndOfRun capped = diagnose_ended_run(result, /*max_region_bytes=*/100);
  EXPECT_FALSE(capped.diagnosis.has_value());
  EXPECT_THAT(capped.error, HasSubstr("past the 100 bytes the end of a run reads"));
  EXPECT_THAT(capped.error, HasSubstr("`trainscope diagnose " + dir.string() + "`"));
  EXPECT_EQ(
      end_of_run_text(capped, result.run_dir, /*quiet=*/true),
      "trainscope run: warning: no diagnosis of " + dir.string() + ": " + capped.error + "\n");
  // An unreadable run: its reader's error.
  result.run_dir = tmp.file("gone");
  EndOfRun gone = diagnose_ended_run(result);
  EXPECT_FALSE(gone.diagnosis.has_value());
  EXPECT_THAT(gone.error, HasSubstr("gone"));
  // No diagnosis and no error (--no-diagnosis): nothing.
  EXPECT_EQ(end_of_run_text(EndOfRun{}, result.run_dir, false), "");
}

}  // namespace
}  // namespace trainscope::diagnosis
