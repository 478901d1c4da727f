// A process forked while it records: the child has none of its parent's threads
// (the export pipeline's, the run's heartbeat, the sampler's), so it must never
// wait for them, take their locks or destroy what they wait on; and the parent's
// run must not notice the child. Forked from a thread that records, as a data
// loader or a multiprocessing pool does from a training loop (runs under TSan).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "support/run_dir_test.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/sampler.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

using trainscope::testing::RunPtr;
using RunForkTest = trainscope::testing::RunDirTest;

// What the child found wrong (0: nothing), as its exit status.
enum ChildFailure : int {
  kOk = 0,
  kMetricAccepted = 10,  // log_metric wrote into the parent's run
  kEndAccepted = 11,     // end() ended the parent's run
  kWrongMessage = 12,    // the refusal did not say why
  kTimerLostCount = 13,  // the child's timer statistics lost its regions
};

// Waits for the child at most `limit` (a hang, not a speed: a healthy child
// exits in milliseconds); kills it and returns -1 if it does not exit.
int wait_or_kill(pid_t child, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

// The child: records on, is refused by the parent's run, and lets go of the
// run, a pipeline and a sampler of its parent's, each with a thread the child
// does not have. Only async-signal-unsafe calls the library makes safe after
// fork (glibc's malloc is); never returns.
[[noreturn]] void child_of_a_recording_thread(RunPtr* run, Timer* timer,
                                              std::unique_ptr<ExportPipeline>* pipeline,
                                              std::unique_ptr<Sampler>* sampler) {
  int failure = kOk;
  const std::uint64_t before = timer->get_time_stats(Key("CHILD")).count;
  for (int i = 0; i < 20000; ++i) {  // past a ring's high-water mark: a wake
    timer->start(Key("CHILD"));
    timer->end(Key("CHILD"));
  }
  if (timer->get_time_stats(Key("CHILD")).count != before + 20000) failure = kTimerLostCount;
  const absl::Status metric = (*run)->log_metric("child", 1.0);
  if (metric.ok()) failure = kMetricAccepted;
  if (!absl::StrContains(metric.message(), "forked child")) failure = kWrongMessage;
  if ((*run)->end().ok()) failure = kEndAccepted;
  (*pipeline)->flush();  // returns: nothing here to wait for
  sampler->reset();
  pipeline->reset();
  run->reset();
  timer->detach();
  ::_exit(failure);
}

TEST_F(RunForkTest, AChildForkedWhileRecordingNeverWaitsForItsParentsThreads) {
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  Timer timer;
  run->attach(timer);
  // A pipeline of its own with its thread waiting, and a sampler waiting for its next tick.
  auto pipeline = std::make_unique<ExportPipeline>();
  SamplerOptions sampling;
  sampling.interval = absl::Milliseconds(20);
  auto sampler = std::make_unique<Sampler>(sampling, std::vector<std::unique_ptr<HardwareSource>>{},
                                           &run->pipeline());
  sampler->start();

  std::atomic<pid_t> child{0};
  std::thread recorder([&] {
    for (int i = 0; i < 2000; ++i) {
      timer.start(TimeType::BATCH);
      if (i == 1000) {
        const pid_t pid = ::fork();
        if (pid == 0) child_of_a_recording_thread(&run, &timer, &pipeline, &sampler);
        child.store(pid);
      }
      timer.end(TimeType::BATCH);
    }
  });
  recorder.join();
  ASSERT_GT(child.load(), 0) << "fork failed";
  const int status = wait_or_kill(child.load(), std::chrono::seconds(60));
  ASSERT_NE(status, -1) << "the forked child hung (killed after 60 s)";
  EXPECT_EQ(status, kOk) << "see ChildFailure";

  // The parent's run goes on and ends as if nothing had forked.
  ASSERT_TRUE(run->log_metric("after_fork", 2.0).ok());
  sampler.reset();
  const std::string dir = run->dir();
  ASSERT_TRUE(run->end().ok());
  run.reset();
  RunReader reader = open_run(dir);
  EXPECT_EQ(reader.info().status, RunStatus::kFinished);
  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  int batches = 0;
  for (const RegionRow& row : regions->rows) {
    EXPECT_NE(row.key, "CHILD") << "a row of the child in the parent's run";
    batches += row.key == "BATCH";
  }
  EXPECT_EQ(batches, 2000);
}

TEST_F(RunForkTest, APipelineAndASamplerOfTheParentLetGoInTheChild) {
  // No run: the objects alone, each with its thread parked on a condition variable.
  auto pipeline = std::make_unique<ExportPipeline>();
  SamplerOptions sampling;
  sampling.interval = absl::Seconds(60);
  auto sampler = std::make_unique<Sampler>(sampling, std::vector<std::unique_ptr<HardwareSource>>{},
                                           pipeline.get());
  sampler->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // both threads waiting
  const pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    pipeline->flush();
    sampler.reset();
    pipeline.reset();
    ::_exit(0);
  }
  const int status = wait_or_kill(pid, std::chrono::seconds(60));
  ASSERT_NE(status, -1) << "the forked child hung (killed after 60 s)";
  EXPECT_EQ(status, 0);
  pipeline->flush();  // the parent's go on
}

}  // namespace
}  // namespace trainscope
