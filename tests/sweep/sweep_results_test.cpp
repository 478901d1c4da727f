// What a sweep records of its jobs and which sweep a directory holds: the
// measured step rate (StepSpan), the last logged metrics and the region
// means read from run directories written by hand (read_job_results),
// results.csv's columns, sweep.json's round trip of them, and
// check_same_sweep (another input, grid or command refused).
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "sweep/job_launch.hpp"
#include "sweep/state_file.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::HasSubstr;
using trainscope::testing::RankJson;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;
using trainscope::testing::write_file;

constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kT0 = 1761000000000 * kMs;  // a Unix time in ns

TEST(SweepResults, StepRateCountsTheTimeBetweenSteps) {
  detail::StepSpan span;
  EXPECT_TRUE(std::isnan(span.rate()));
  // Four 10 ms steps, 40 ms apart (30 ms between them): 4 steps over 130 ms,
  // not the 100/s of back-to-back 10 ms steps. Rows in any order.
  for (int i : {2, 0, 3, 1}) span.add(1000 * kMs + i * 40 * kMs, 10 * kMs);
  EXPECT_EQ(span.steps(), 4);
  EXPECT_DOUBLE_EQ(span.rate(), 4 / 0.130);
  detail::StepSpan instant;
  instant.add(5, 0);
  EXPECT_TRUE(std::isnan(instant.rate())) << "a span of zero has no rate";
}

std::string region(const std::string& key, const std::string& device, int rank, std::int64_t start,
                   std::int64_t duration) {
  return key + "," + device + "," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
         std::to_string(duration) + ",0,0\n";
}

std::string metric(const std::string& key, double value, int rank) {
  return key + "," + std::to_string(value) + ",0,1," + std::to_string(rank) + "\n";
}

TEST(SweepResults, ReadsTheRateOfTheLowestTimingRankAndTheMeanOfEachRanksLastMetric) {
  TempDir tmp;
  RankJson rank0;
  rank0.status = "FINISHED";
  RankJson rank1 = rank0;
  rank1.rank = 1;
  const auto dir = trainscope::testing::write_run_dir(tmp.path() / "run", {}, {rank0, rank1});
  // Rank 0 times no BATCH; rank 1 three 10 ms steps 50 ms apart (GPU rows
  // and other keys do not count).
  write_file(dir / "regions-0.csv", region("IO", "CPU", 0, kT0, kMs), true);
  std::string rows;
  for (int i = 0; i < 3; ++i) rows += region("BATCH", "CPU", 1, kT0 + i * 50 * kMs, 10 * kMs);
  rows += region("BATCH", "GPU", 1, kT0 + 900 * kMs, 10 * kMs);
  rows += region("IO", "CPU", 1, kT0 + 950 * kMs, kMs);
  write_file(dir / "regions-1.csv", rows, true);
  write_file(dir / "metrics-0.csv",
             metric("loss", 4, 0) + metric("loss", 2, 0) + metric("system/cpu.util_pct", 50, 0) +
                 metric("acc", 0.5, 0),
             true);
  write_file(dir / "metrics-1.csv", metric("loss", 3, 1) + metric("loss", 1, 1), true);

  JobRecord record;
  record.metrics["stale"] = 7;  // an earlier attempt's: replaced
  detail::read_job_results(dir.string(), &record);
  EXPECT_DOUBLE_EQ(record.steps_per_s, 3 / 0.110);
  ASSERT_EQ(record.metrics.size(), 2u);
  EXPECT_DOUBLE_EQ(record.metrics.at("loss"), 1.5);  // (2 + 1) / 2: each rank's last value
  EXPECT_DOUBLE_EQ(record.metrics.at("acc"), 0.5);   // one rank logged it: its value

  JobRecord none;
  detail::read_job_results((tmp.path() / "nowhere").string(), &none);
  EXPECT_TRUE(std::isnan(none.steps_per_s));
  EXPECT_TRUE(none.metrics.empty());
}

TEST(SweepResults, ResultsCsvHasTheRateAndAColumnPerLoggedMetric) {
  std::vector<JobRecord> jobs(3);
  jobs[0].job = shell_job("a", "true");
  jobs[0].job.params = {{"lr", "0.1"}};
  jobs[0].status = JobStatus::kFinished;
  jobs[0].run_id = "r0";
  jobs[0].batch_mean_s = 0.01;
  jobs[0].steps_per_s = 34.5;
  jobs[0].metrics = {{"loss", 0.25}, {"train/acc", 0.9}};
  jobs[1] = jobs[0];
  jobs[1].job.id = "b";
  jobs[1].metrics = {{"loss", 0.5}};
  jobs[1].steps_per_s = std::nan("");
  jobs[2].job = shell_job("c", "true");  // queued: no row
  const std::vector<std::string> lines = trainscope::testing::lines_of(detail::results_csv(jobs));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "job,lr,status,exit_code,attempts,duration_s,run_id,run_dir,batch_mean_s,epoch_mean_s,"
            "throughput_batches_per_s,metric.loss,metric.train/acc");
  EXPECT_THAT(lines[1], ::testing::EndsWith(",0.01,,34.5,0.25,0.9"));
  EXPECT_THAT(lines[2], ::testing::EndsWith(",0.01,,,0.5,"));

  detail::SweepState state;
  state.jobs = jobs;
  absl::StatusOr<detail::SweepState> back =
      detail::state_from_json(detail::state_to_json(state), "sweep.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->jobs[0].steps_per_s, 34.5);
  EXPECT_EQ(back->jobs[0].metrics, jobs[0].metrics);
  EXPECT_TRUE(std::isnan(back->jobs[1].steps_per_s));
}

detail::SweepState stored(const std::string& name, const std::vector<std::string>& command,
                          JobStatus status) {
  detail::SweepState state;
  state.name = name;
  JobRecord record;
  record.job = shell_job("lr=1", "");
  record.job.command = command;
  record.status = status;
  record.attempts = status == JobStatus::kQueued ? 0 : 1;
  state.jobs.push_back(record);
  return state;
}

Plan asked(const std::string& name, const std::vector<std::string>& command) {
  Plan plan;
  plan.name = name;
  plan.jobs.push_back(shell_job("lr=1", ""));
  plan.jobs[0].command = command;
  return plan;
}

TEST(SweepResults, AnotherSweepInTheDirectoryIsRefusedNamingBothCommands) {
  const std::vector<std::string> train = {"python", "train.py"};
  const std::vector<std::string> other = {"python", "other script.py"};
  // The same sweep, an empty stored one, an empty plan (a radT CSV whose rows all ran).
  EXPECT_TRUE(detail::check_same_sweep(stored("cfg", train, JobStatus::kFinished),
                                       asked("cfg", train), "sw")
                  .ok());
  EXPECT_TRUE(detail::check_same_sweep({}, asked("cfg", other), "sw").ok());
  EXPECT_TRUE(
      detail::check_same_sweep(stored("cfg", train, JobStatus::kFinished), Plan{}, "sw").ok());
  // A job that never started takes the new command, and so does a FAILED one
  // run again (--retry-failed), but not a KILLED one (it resumes as it was).
  EXPECT_TRUE(
      detail::check_same_sweep(stored("cfg", train, JobStatus::kQueued), asked("cfg", other), "sw")
          .ok());
  EXPECT_TRUE(detail::check_same_sweep(stored("cfg", train, JobStatus::kFailed),
                                       asked("cfg", other), "sw", /*retry_failed=*/true)
                  .ok());
  EXPECT_FALSE(
      detail::check_same_sweep(stored("cfg", train, JobStatus::kFailed), asked("cfg", other), "sw")
          .ok());
  EXPECT_FALSE(detail::check_same_sweep(stored("cfg", train, JobStatus::kKilled),
                                        asked("cfg", other), "sw", true)
                   .ok());

  const absl::Status command = detail::check_same_sweep(stored("cfg", train, JobStatus::kFinished),
                                                        asked("cfg", other), "sw");
  EXPECT_TRUE(absl::IsFailedPrecondition(command)) << command;
  EXPECT_THAT(std::string(command.message()), HasSubstr("`python train.py`"));
  EXPECT_THAT(std::string(command.message()), HasSubstr("`python 'other script.py'`"));
  EXPECT_THAT(std::string(command.message()), HasSubstr("job 'lr=1' FINISHED"));
  EXPECT_THAT(std::string(command.message()), HasSubstr("another --dir"));
  EXPECT_THAT(std::string(command.message()), HasSubstr("`--resume sw` alone"));

  const absl::Status grid =
      detail::check_same_sweep(stored("grid-lr-00000001", train, JobStatus::kFailed),
                               asked("grid-lr-00000002", train), "sw");
  EXPECT_TRUE(absl::IsFailedPrecondition(grid)) << grid;
  EXPECT_THAT(std::string(grid.message()),
              HasSubstr("holds sweep 'grid-lr-00000001' whose jobs run `python train.py`, but "
                        "sweep 'grid-lr-00000002' asks for `python train.py`"));
}

}  // namespace
}  // namespace trainscope::sweep
