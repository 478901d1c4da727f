// The sweep scheduler's threads: jobs on several slots at once, a live plan
// update while jobs run, and a stop (Ctrl-C) that leaves the sweep resumable.
// Run under TSan in CI (the "threads" label).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

using trainscope::testing::quiet_options;
using trainscope::testing::runs_by_job;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;
namespace fs = std::filesystem;

template <typename Predicate>
void wait_for(Predicate done) {
  for (int i = 0; i < 3000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(SchedulerThreadTest, TwentyJobsOnTwoSlotsRunOnceAndOverlap) {
  TempDir tmp;
  Plan plan;
  for (int i = 0; i < 20; ++i) plan.jobs.push_back(shell_job("j" + std::to_string(i), "sleep 0.2"));
  absl::StatusOr<SweepResult> result = run_sweep(plan, quiet_options(tmp.str(), 2));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 20);
  const auto runs = runs_by_job(tmp.str());
  ASSERT_EQ(runs.size(), 20u);
  for (const Job& job : plan.jobs) {
    ASSERT_EQ(runs.count(job.id), 1u) << job.id;
    EXPECT_EQ(runs.find(job.id)->second.status, RunStatus::kFinished);
  }
  // From the run store: at most 2 at once, and 2 at once at some point.
  std::vector<std::pair<std::int64_t, int>> events;  // (time, +1 start / -1 end), ends first
  for (const auto& [id, info] : runs) {
    events.emplace_back(info.start_time_ms, +1);
    events.emplace_back(info.end_time_ms, -1);
  }
  std::sort(events.begin(), events.end());
  int now = 0;
  int most = 0;
  for (const auto& event : events) most = std::max(most, now += event.second);
  EXPECT_EQ(most, 2);
}

TEST(SchedulerThreadTest, LiveUpdateAddsAndDropsQueuedJobsOnly) {
  TempDir tmp;
  const std::string go = tmp.file("go");
  Plan plan;
  plan.jobs.push_back(shell_job("first", "while [ ! -e " + go + " ]; do sleep 0.01; done"));
  plan.jobs.push_back(shell_job("kept", "exit 0"));
  plan.jobs.push_back(shell_job("dropped", "exit 0"));
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      Scheduler::Open(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  absl::StatusOr<SweepResult> result;
  std::thread runner([&] { result = (*scheduler)->run(); });
  wait_for([&] { return (*scheduler)->progress().running == 1; });

  Plan next;
  next.jobs.push_back(plan.jobs[1]);  // "first" is gone from the input, but it runs
  next.jobs.push_back(shell_job("new1", "exit 0"));
  next.jobs.push_back(shell_job("new2", "exit 0"));
  ASSERT_TRUE((*scheduler)->update(next).ok());
  EXPECT_EQ((*scheduler)->progress().queued, 3);
  trainscope::testing::write_file(go, "");
  runner.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 4);
  const auto runs = runs_by_job(tmp.str());
  EXPECT_EQ(runs.size(), 4u);
  for (const char* id : {"first", "kept", "new1", "new2"}) EXPECT_EQ(runs.count(id), 1u) << id;
  EXPECT_EQ(runs.count("dropped"), 0u);
}

TEST(SchedulerThreadTest, StopKillsRunningJobsAndTheSweepResumes) {
  TempDir tmp;
  const std::string quick = tmp.file("quick");
  Plan plan;
  for (int i = 0; i < 3; ++i) {
    plan.jobs.push_back(shell_job("j" + std::to_string(i),
                                  "if [ -e " + quick + " ]; then exit 0; fi; exec sleep 60"));
  }
  SweepOptions options = quiet_options(tmp.str(), 2);
  options.stop = std::make_shared<LaunchCancel>();
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Open(plan, options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  absl::StatusOr<SweepResult> result;
  std::thread runner([&] { result = (*scheduler)->run(); });
  wait_for([&] { return (*scheduler)->progress().running == 2; });
  options.stop->request(SIGINT);
  runner.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stopped);
  EXPECT_EQ(result->finished, 0);
  EXPECT_EQ(result->unfinished, 3);
  int killed = 0;
  for (const JobRecord& job : result->jobs) killed += job.status == JobStatus::kKilled;
  EXPECT_EQ(killed, 2);
  for (const auto& [id, info] : runs_by_job(tmp.str())) EXPECT_EQ(info.status, RunStatus::kKilled);
  scheduler->reset();  // unlocks the sweep

  trainscope::testing::write_file(quick, "");
  absl::StatusOr<SweepResult> resumed = run_sweep(plan, quiet_options(tmp.str(), 2));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->finished, 3);
  EXPECT_EQ(runs_by_job(tmp.str()).size(), 5u);  // 2 killed runs kept, 3 finished
}

TEST(SchedulerThreadTest, SecondSchedulerOnTheSameSweepIsRefused) {
  TempDir tmp;
  Plan plan;
  plan.jobs.push_back(shell_job("a", "exit 0"));
  absl::StatusOr<std::unique_ptr<Scheduler>> first =
      Scheduler::Open(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<Scheduler>> second =
      Scheduler::Open(plan, quiet_options(tmp.str(), 1));
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr("another scheduler runs the sweep"));
}

}  // namespace
}  // namespace trainscope::sweep
