// CPUGPUTimer's GPU bookkeeping, driven by the simulated event source: the
// same code path as CUDA events, with a virtual GPU clock.
#include "trainscope/timing/cpu_gpu_timer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "support/warnings.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"

namespace trainscope {
namespace {

using ::testing::HasSubstr;
using testing::SimulatedEventSource;

class CPUGPUTimerTest : public ::testing::Test {
 protected:
  void SetUp() override { sim_ = std::make_shared<SimulatedEventSource>(); }

  CPUGPUTimerOptions no_harvest() {
    CPUGPUTimerOptions o;
    o.harvest_per_end = 0;
    return o;
  }

  std::shared_ptr<SimulatedEventSource> sim_;
  trainscope::testing::CapturedWarnings warnings_;
};

TEST_F(CPUGPUTimerTest, GpuTimeIsTheWorkEnqueuedInsideTheRegion) {
  CPUGPUTimer timer(sim_);
  StreamHandle stream = nullptr;
  timer.start(TimeType::FORWARD, true);
  sim_->enqueue_work(stream, 5'000'000);  // 5 ms kernel
  timer.end(TimeType::FORWARD, true);
  sim_->advance(10'000'000);
  const std::vector<double> gpu = timer.get_time(TimeType::FORWARD, true);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_DOUBLE_EQ(gpu[0], 0.005);
  EXPECT_EQ(timer.get_time(TimeType::FORWARD, false).size(), 1u);
}

TEST_F(CPUGPUTimerTest, CancelOfAGpuRegionRecordsNothingAndReusesItsEvent) {
  CPUGPUTimer timer(sim_);
  StreamHandle stream = nullptr;
  timer.start(TimeType::IO, true);
  sim_->enqueue_work(stream, 1'000'000);
  timer.cancel(TimeType::IO);
  sim_->advance(10'000'000);
  EXPECT_TRUE(timer.get_time(TimeType::IO, true).empty());
  EXPECT_TRUE(timer.get_time(TimeType::IO, false).empty());
  const std::size_t created = sim_->events_created();
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::IO, true);
    timer.end(TimeType::IO, true);
    sim_->advance(1'000'000);
    timer.complete_all();
  }
  EXPECT_EQ(timer.get_time(TimeType::IO, true).size(), 3u);
  // The cancelled region's start event went back to the pool: one new event
  // (the end of the first pair), not two; and two start events stay out of
  // the pool for device starts: the first harvested one, the source's
  // reference, and the last harvested one, the timer's anchor.
  EXPECT_EQ(sim_->events_created(), created + 1 + 2);
  EXPECT_FALSE(timer.try_cancel(TimeType::IO).ok());
}

TEST_F(CPUGPUTimerTest, EndNeverBlocksAndHarvestsFinishedPairsInFifoOrder) {
  CPUGPUTimer timer(sim_);
  constexpr int kBatches = 10000;
  for (int i = 0; i < kBatches; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 1000 + i);  // distinct durations reveal order
    timer.end(TimeType::BATCH, true);
    sim_->advance(500);  // the GPU falls behind: work piles up
  }
  EXPECT_EQ(sim_->blocking_waits(), 0u);
  EXPECT_EQ(timer.blocking_waits(), 0u);
  EXPECT_GT(timer.outstanding(), 0u);
  timer.complete_all();
  EXPECT_EQ(timer.outstanding(), 0u);
  EXPECT_GE(timer.blocking_waits(), 1u);
  const std::vector<double> gpu = timer.get_time(TimeType::BATCH, true);
  ASSERT_EQ(gpu.size(), static_cast<std::size_t>(kBatches));
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_NEAR(gpu[i], (1000 + i) * 1e-9, 1e-15) << "batch " << i;
  }
}

TEST_F(CPUGPUTimerTest, HarvestingAsTheLoopGoesKeepsThePoolSmall) {
  CPUGPUTimer timer(sim_);
  for (int i = 0; i < 5000; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 100);
    timer.end(TimeType::BATCH, true);
    sim_->advance(1000);  // GPU keeps up
  }
  EXPECT_EQ(sim_->blocking_waits(), 0u);
  const std::size_t per_end = timer.options().harvest_per_end;
  EXPECT_LE(timer.outstanding(), per_end + 1);
  // Events are recycled: a handful, not 10,000.
  EXPECT_LE(timer.events_created(), 2 * (per_end + 2));
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 5000u);
}

// What harvesting costs the training thread, in GPU calls per region: a run of
// finished pairs on one stream is read with one query (of its newest end event)
// and one elapsed-time read per pair. Pair by pair, with a query of the pair
// just recorded (pending) at each end, it was 3 calls a region: on an H100 the
// gpu=true pair cost 1.42x two bare cudaEventRecord calls (issue 27, goal 1.2x).
TEST_F(CPUGPUTimerTest, HarvestingReadsARunOfFinishedPairsWithOneQuery) {
  CPUGPUTimer timer(sim_);
  constexpr int kRegions = 4000;
  for (int i = 0; i < kRegions; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 100);
    timer.end(TimeType::BATCH, true);
    sim_->advance(1000);  // GPU keeps up
  }
  const double queries = static_cast<double>(sim_->queries()) / kRegions;
  const double reads = static_cast<double>(sim_->elapsed_reads()) / kRegions;
  const double per_end = static_cast<double>(timer.options().harvest_per_end);
  EXPECT_LE(queries, 1.0 / per_end + 0.01) << "queries per region";
  EXPECT_LE(reads, 1.0) << "elapsed-time reads per region";
  EXPECT_EQ(timer.blocking_waits(), 0u);
  // A GPU that lags: pairs still running are left for later, the oldest first.
  sim_->enqueue_work(nullptr, 1'000'000);
  for (int i = 0; i < 8; ++i) {
    timer.start(TimeType::BATCH, true);
    timer.end(TimeType::BATCH, true);
  }
  EXPECT_GE(timer.outstanding(), 8u);
  sim_->advance(2'000'000);
  timer.complete_all();
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count,
            static_cast<std::uint64_t>(kRegions + 8));
}

TEST_F(CPUGPUTimerTest, PoolGrowsOnDemandWithNoLimitOnOutstandingRegions) {
  CPUGPUTimer timer(sim_, no_harvest());
  constexpr int kOpen = 1000;  // Deep500 stops at 100
  for (int i = 0; i < kOpen; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 10);
    timer.end(TimeType::BATCH, true);
  }
  EXPECT_EQ(timer.outstanding(), static_cast<std::size_t>(kOpen));
  EXPECT_EQ(timer.events_created(), 2u * kOpen);
  sim_->advance(1'000'000);
  EXPECT_EQ(timer.harvest(), static_cast<std::size_t>(kOpen));
  EXPECT_EQ(timer.blocking_waits(), 0u);
  // The next regions reuse the pool.
  timer.start(TimeType::BATCH, true);
  timer.end(TimeType::BATCH, true);
  EXPECT_EQ(timer.events_created(), 2u * kOpen);
}

TEST_F(CPUGPUTimerTest, HarvestStopsAtTheFirstUnfinishedPair) {
  CPUGPUTimer timer(sim_, no_harvest());
  timer.start(TimeType::FORWARD, true);
  sim_->enqueue_work(nullptr, 100);
  timer.end(TimeType::FORWARD, true);
  timer.start(TimeType::BACKWARD, true);
  sim_->enqueue_work(nullptr, 1'000'000);
  timer.end(TimeType::BACKWARD, true);
  sim_->advance(200);
  EXPECT_EQ(timer.harvest(), 1u);
  EXPECT_EQ(timer.outstanding(), 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BACKWARD, true).count, 1u);  // reads wait
  EXPECT_EQ(timer.outstanding(), 0u);
}

TEST_F(CPUGPUTimerTest, CompletionDelayDefersHarvestWithoutLosingData) {
  sim_->set_completion_delay(50'000);
  CPUGPUTimer timer(sim_);
  for (int i = 0; i < 100; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 1000);
    timer.end(TimeType::BATCH, true);
    sim_->advance(100);
  }
  EXPECT_EQ(sim_->blocking_waits(), 0u);
  const TimeStats stats = timer.get_time_stats(TimeType::BATCH, true);
  EXPECT_EQ(stats.count, 100u);
  EXPECT_DOUBLE_EQ(stats.median, 1000e-9);
}

TEST_F(CPUGPUTimerTest, GpuFlagMismatchIsAnErrorAndLeavesTheRegionOpen) {
  CPUGPUTimer timer(sim_);
  timer.start(TimeType::BATCH, true);
  const absl::Status status = timer.try_end(TimeType::BATCH, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("BATCH"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("gpu=True"));
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 0u);
  timer.end(TimeType::BATCH, true);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 1u);

  timer.start(TimeType::IO, false);
  EXPECT_EQ(timer.try_end(TimeType::IO, true).code(), absl::StatusCode::kInvalidArgument);
  timer.end(TimeType::IO, false);
  EXPECT_EQ(timer.get_time_stats(TimeType::IO, true).count, 0u);
}

TEST_F(CPUGPUTimerTest, FailedEventCreationAtStartChangesNothing) {
  CPUGPUTimer timer(sim_);
  sim_->fail_next_creates(1);
  const absl::Status status = timer.try_start(TimeType::FORWARD, true);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("FORWARD"));
  // Not open on either side: a plain start works, and end without start fails.
  EXPECT_EQ(timer.try_end(TimeType::FORWARD, true).code(), absl::StatusCode::kFailedPrecondition);
  timer.start(TimeType::FORWARD, true);
  timer.end(TimeType::FORWARD, true);
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD, true).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD, false).count, 1u);
}

TEST_F(CPUGPUTimerTest, FailedRecordAtEndKeepsTheRegionOpenOnBothSides) {
  CPUGPUTimer timer(sim_);
  timer.start(TimeType::BACKWARD, true);
  sim_->fail_next_records(1);
  EXPECT_FALSE(timer.try_end(TimeType::BACKWARD, true).ok());
  EXPECT_EQ(timer.get_time_stats(TimeType::BACKWARD, false).count, 0u);
  EXPECT_EQ(timer.outstanding(), 0u);
  EXPECT_EQ(timer.try_start(TimeType::BACKWARD, true).code(),
            absl::StatusCode::kFailedPrecondition);
  timer.end(TimeType::BACKWARD, true);  // retry succeeds
  EXPECT_EQ(timer.get_time_stats(TimeType::BACKWARD, false).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BACKWARD, true).count, 1u);
}

TEST_F(CPUGPUTimerTest, FailedRecordAtStartReturnsTheEventToThePool) {
  CPUGPUTimer timer(sim_);
  sim_->fail_next_records(1);
  EXPECT_FALSE(timer.try_start(TimeType::BATCH, true).ok());
  timer.start(TimeType::BATCH, true);
  timer.end(TimeType::BATCH, true);
  EXPECT_EQ(timer.events_created(), 2u);  // the failed one was reused
}

TEST_F(CPUGPUTimerTest, AGpuErrorWhileHarvestingDropsOnlyThatRegionAndWarns) {
  CPUGPUTimer timer(sim_, no_harvest());
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::BATCH, true);
    sim_->enqueue_work(nullptr, 100);
    timer.end(TimeType::BATCH, true);
  }
  sim_->advance(10'000);
  // The query of the run's newest pair fails (harvest goes on pair by pair),
  // then the oldest pair's query fails.
  sim_->fail_next_queries(2);
  EXPECT_EQ(timer.harvest(), 3u);
  EXPECT_EQ(timer.gpu_errors(), 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 2u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 3u);
  ASSERT_EQ(warnings_.count(), 1u);
  EXPECT_THAT(warnings_.messages().back(), HasSubstr("BATCH"));
  // Poisoned events are destroyed, not pooled.
  EXPECT_EQ(sim_->events_alive(), timer.events_created() - 2);
}

TEST_F(CPUGPUTimerTest, CompleteAllReportsLostGpuRegionsAsDataLoss) {
  CPUGPUTimer timer(sim_, no_harvest());
  timer.start(TimeType::BATCH, true);
  timer.end(TimeType::BATCH, true);
  sim_->fail_next_queries(100);
  const absl::Status status = timer.try_complete_all();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("BATCH"));
  EXPECT_EQ(timer.outstanding(), 0u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 1u);
  sim_->fail_next_queries(0);
  timer.start(TimeType::BATCH, true);  // still usable
  timer.end(TimeType::BATCH, true);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 1u);
}

TEST_F(CPUGPUTimerTest, MisuseErrorsMatchTimer) {
  CPUGPUTimer timer(sim_);
  EXPECT_EQ(timer.try_start(TimeType::ALL, true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(timer.try_end(TimeType::ALL, true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(timer.try_end(TimeType::COMM).message()),
              HasSubstr("Unbalanced end for timing region type COMM"));
  timer.start(TimeType::COMM, true);
  EXPECT_THAT(std::string(timer.try_start(TimeType::COMM, true).message()),
              HasSubstr("Detected nesting for timing region type COMM"));
  EXPECT_EQ(sim_->events_alive(), timer.events_created());
}

TEST_F(CPUGPUTimerTest, WithoutAGpuRegionsAreTimedOnTheCpuWithOneWarning) {
  sim_->set_available(false);
  CPUGPUTimer timer(sim_);
  EXPECT_FALSE(timer.gpu_available());
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::BATCH, true);
    timer.end(TimeType::BATCH, true);
  }
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 3u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 0u);
  EXPECT_EQ(sim_->events_created(), 0u);
  EXPECT_EQ(timer.try_end(TimeType::BATCH, true).code(), absl::StatusCode::kFailedPrecondition);
  // The flag rule still holds without a GPU.
  timer.start(TimeType::IO, true);
  EXPECT_EQ(timer.try_end(TimeType::IO, false).code(), absl::StatusCode::kInvalidArgument);
  timer.end(TimeType::IO, true);
  const std::string text = timer.format_all_time_stats();
  EXPECT_EQ(text.rfind("CPU\nBATCH\n", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("---\nGPU\n---\n"));
}

TEST_F(CPUGPUTimerTest, RequireGpuTurnsTheFallbackIntoAnError) {
  sim_->set_available(false);
  CPUGPUTimerOptions options;
  options.require_gpu = true;
  try {
    CPUGPUTimer timer(sim_, options);
    FAIL() << "expected TimerError";
  } catch (const TimerError& e) {
    EXPECT_THAT(e.what(), HasSubstr("require_gpu"));
    EXPECT_THAT(e.what(), HasSubstr("simulated GPU marked unavailable"));
  }
}

TEST_F(CPUGPUTimerTest, RegionsRecordOnTheStreamTheCallerGives) {
  int a = 0;
  int b = 0;
  StreamHandle stream_a = &a;
  StreamHandle stream_b = &b;
  CPUGPUTimerOptions options;
  options.stream = stream_a;
  CPUGPUTimer timer(sim_, options);
  sim_->enqueue_work(stream_b, 9'000'000);  // busy stream that our regions must not wait for
  timer.start(TimeType::FORWARD, true);
  sim_->enqueue_work(stream_a, 2'000);
  timer.end(TimeType::FORWARD, true);
  timer.start(TimeType::BACKWARD, true, stream_b);
  sim_->enqueue_work(stream_b, 3'000);
  timer.end(TimeType::BACKWARD, true, stream_b);
  sim_->advance(20'000'000);
  EXPECT_DOUBLE_EQ(timer.get_time(TimeType::FORWARD, true)[0], 2e-6);
  EXPECT_DOUBLE_EQ(timer.get_time(TimeType::BACKWARD, true)[0], 3e-6);
}

TEST_F(CPUGPUTimerTest, EventsAreKeptPerDevice) {
  CPUGPUTimer timer(sim_);
  timer.start(TimeType::FORWARD, true);
  timer.end(TimeType::FORWARD, true);
  sim_->advance(1000);
  timer.harvest();
  sim_->set_device(1);
  // Device 1 must not get device 0's pooled events (recording them would fail).
  timer.start(TimeType::FORWARD, true);
  timer.end(TimeType::FORWARD, true);
  EXPECT_EQ(timer.events_created(), 4u);
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD, true).count, 2u);
}

TEST_F(CPUGPUTimerTest, Deep500LayoutHasCpuThenGpuSections) {
  CPUGPUTimer timer(sim_);
  timer.start(TimeType::EPOCH);
  timer.start(TimeType::BATCH, true);
  sim_->enqueue_work(nullptr, 1'000'000);
  timer.end(TimeType::BATCH, true);
  timer.end(TimeType::EPOCH);
  const std::string text = timer.format_all_time_stats();
  EXPECT_EQ(text.rfind("CPU\nBATCH\nmin: ", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("EPOCH\nmin: "));
  EXPECT_THAT(text, HasSubstr("---\nGPU\nBATCH\nmin: 0.00100 mean: 0.00100 median: 0.00100 max: "
                              "0.00100 stdev: 0.00000\n---\n"));
}

TEST_F(CPUGPUTimerTest, DestructionReleasesEveryEventWithoutWaiting) {
  {
    CPUGPUTimer timer(sim_, no_harvest());
    for (int i = 0; i < 10; ++i) {
      timer.start(TimeType::BATCH, true);
      sim_->enqueue_work(nullptr, 1'000'000);
      timer.end(TimeType::BATCH, true);
    }
    timer.start(TimeType::EPOCH, true);  // left open
  }
  EXPECT_EQ(sim_->events_alive(), 0u);
  EXPECT_EQ(sim_->blocking_waits(), 0u);
}

TEST_F(CPUGPUTimerTest, MergeCompletesTheOtherTimerFirst) {
  CPUGPUTimer a(sim_);
  CPUGPUTimer b(sim_, no_harvest());
  b.start(TimeType::BATCH, true);
  sim_->enqueue_work(nullptr, 4'000);
  b.end(TimeType::BATCH, true);
  a.merge(b);
  EXPECT_EQ(a.get_time_stats(TimeType::BATCH, true).count, 1u);
  EXPECT_DOUBLE_EQ(a.get_time_stats(TimeType::BATCH, true).median, 4e-6);
}

TEST_F(CPUGPUTimerTest, ScopeTimesGpuRegions) {
  CPUGPUTimer timer(sim_);
  {
    auto region = timer.scope(TimeType::FORWARD, true);
    sim_->enqueue_work(nullptr, 7'000);
  }
  EXPECT_DOUBLE_EQ(timer.get_time(TimeType::FORWARD, true).at(0), 7e-6);
}

TEST_F(CPUGPUTimerTest, ResetReturnsOpenEventsAndClearsEverything) {
  CPUGPUTimer timer(sim_);
  timer.start(TimeType::BATCH, true);
  timer.end(TimeType::BATCH, true);
  timer.start(TimeType::EPOCH, true);
  timer.reset();
  EXPECT_TRUE(timer.keys(false).empty());
  EXPECT_TRUE(timer.keys(true).empty());
  EXPECT_TRUE(timer.try_start(TimeType::EPOCH, true).ok());
}

}  // namespace
}  // namespace trainscope

namespace trainscope {
namespace {

TEST(CPUGPUTimerSourceTest, ANullSourceMeansTheDefaultOne) {
  CPUGPUTimer timer(nullptr);
  EXPECT_EQ(timer.gpu_available(), default_gpu_event_source()->available());
  EXPECT_EQ(timer.gpu_description(), default_gpu_event_source()->describe());
}

}  // namespace
}  // namespace trainscope
