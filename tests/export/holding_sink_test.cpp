// HoldingSink: regions timed before any pipeline exists reach the one that
// adopts them, in order, and past the budget they are counted, never lost
// silently. Also with the timer pushing from its own thread (TSan).
#include "trainscope/export/holding_sink.hpp"

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "support/recording_exporter.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

using testing::RecordingExporter;

void time_batches(Timer& timer, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(timer.try_start(TimeType::BATCH).ok());
    ASSERT_TRUE(timer.try_end(TimeType::BATCH).ok());
  }
}

// Timers without NVTX, a pipeline that records what it delivers, and
// adopt(): what `held` holds goes into that pipeline, as a run's start does.
class HoldingSinkTest : public ::testing::Test {
 protected:
  HoldingSinkTest() { pipeline_.add_exporter(recorder_); }

  static TimerOptions quiet() {
    TimerOptions options;
    options.nvtx = false;
    return options;
  }
  // The rings taken from `held` (how many), adopted by the pipeline.
  std::size_t adopt(HoldingSink& held) {
    const HoldingSink::Held taken = held.take();
    for (const auto& ring : taken.rings) pipeline_.adopt_ring(ring);
    return taken.rings.size();
  }
  std::size_t delivered() {
    pipeline_.flush();
    return recorder_->samples().size();
  }

  std::shared_ptr<RecordingExporter> recorder_ = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline_;
};

TEST_F(HoldingSinkTest, RegionsTimedBeforeThePipelineReachItInOrder) {
  HoldingSink held;
  Timer timer(quiet());
  timer.attach(held);
  time_batches(timer, 1000);  // before any pipeline
  ASSERT_EQ(adopt(held), 1u);
  timer.attach(pipeline_);   // releases the held ring: drained, then dropped
  time_batches(timer, 500);  // after

  ASSERT_EQ(delivered(), 1500u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1500u);
  const std::vector<RegionSample> samples = recorder_->samples();
  for (std::size_t i = 1; i < samples.size(); ++i) {
    EXPECT_LE(samples[i - 1].start_unix_ns, samples[i].start_unix_ns) << i;
  }
  EXPECT_EQ(pipeline_.dropped_samples(), 0u);
  EXPECT_TRUE(held.take().rings.empty());  // handed over once
}

TEST_F(HoldingSinkTest, ATimerGoneBeforeTheTakeLeavesNothingToAdopt) {
  HoldingSink held;
  {
    Timer gone(quiet());
    gone.attach(held);
    time_batches(gone, 100);
  }  // released: its regions belong to no run that starts later
  Timer kept(quiet());
  kept.attach(held);
  time_batches(kept, 7);
  ASSERT_EQ(adopt(held), 1u);
  kept.detach();
  EXPECT_EQ(delivered(), 7u);
}

TEST_F(HoldingSinkTest, PastTheBudgetRegionsAreCountedAsDropped) {
  // Chunks of 1024 samples; the budget allows the two a ring always has.
  HoldingSink held(/*max_held_bytes=*/1, /*chunk_capacity=*/1024);
  Timer timer(quiet());
  timer.attach(held);
  time_batches(timer, 5000);
  const std::uint64_t dropped = held.dropped();
  EXPECT_GT(dropped, 0u);
  adopt(held);
  timer.detach();
  EXPECT_EQ(delivered() + dropped, 5000u);
  EXPECT_EQ(pipeline_.dropped_samples(), dropped);
}

TEST_F(HoldingSinkTest, ATimerOnAnotherThreadKeepsPushingWhileItIsAdopted) {
  HoldingSink held;
  Timer timer(quiet());
  timer.attach(held);
  std::thread producer([&] { time_batches(timer, 20000); });
  adopt(held);
  producer.join();
  timer.detach();
  EXPECT_EQ(delivered(), 20000u);
}

}  // namespace
}  // namespace trainscope
