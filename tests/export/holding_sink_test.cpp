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

TEST(HoldingSinkTest, RegionsTimedBeforeThePipelineReachItInOrder) {
  HoldingSink held;
  TimerOptions options;
  options.nvtx = false;
  Timer timer(options);
  timer.attach(held);
  time_batches(timer, 1000);  // before any pipeline

  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline;
  pipeline.add_exporter(recorder);
  const HoldingSink::Held taken = held.take();
  ASSERT_EQ(taken.rings.size(), 1u);
  for (const auto& ring : taken.rings) pipeline.adopt_ring(ring);
  timer.attach(pipeline);    // releases the held ring: drained, then dropped
  time_batches(timer, 500);  // after
  pipeline.flush();

  const std::vector<RegionSample> samples = recorder->samples();
  ASSERT_EQ(samples.size(), 1500u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1500u);
  for (std::size_t i = 1; i < samples.size(); ++i) {
    EXPECT_LE(samples[i - 1].start_unix_ns, samples[i].start_unix_ns) << i;
  }
  EXPECT_EQ(pipeline.dropped_samples(), 0u);
  EXPECT_TRUE(held.take().rings.empty());  // handed over once
}

TEST(HoldingSinkTest, ATimerGoneBeforeTheTakeLeavesNothingToAdopt) {
  HoldingSink held;
  TimerOptions options;
  options.nvtx = false;
  {
    Timer gone(options);
    gone.attach(held);
    time_batches(gone, 100);
  }  // released: its regions belong to no run that starts later
  Timer kept(options);
  kept.attach(held);
  time_batches(kept, 7);
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline;
  pipeline.add_exporter(recorder);
  const HoldingSink::Held taken = held.take();
  ASSERT_EQ(taken.rings.size(), 1u);
  for (const auto& ring : taken.rings) pipeline.adopt_ring(ring);
  kept.detach();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), 7u);
}

TEST(HoldingSinkTest, PastTheBudgetRegionsAreCountedAsDropped) {
  // Chunks of 1024 samples; the budget allows the two a ring always has.
  HoldingSink held(/*max_held_bytes=*/1, /*chunk_capacity=*/1024);
  TimerOptions options;
  options.nvtx = false;
  Timer timer(options);
  timer.attach(held);
  time_batches(timer, 5000);
  const std::uint64_t dropped = held.dropped();
  EXPECT_GT(dropped, 0u);

  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline;
  pipeline.add_exporter(recorder);
  for (const auto& ring : held.take().rings) pipeline.adopt_ring(ring);
  timer.detach();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size() + dropped, 5000u);
  EXPECT_EQ(pipeline.dropped_samples(), dropped);
}

TEST(HoldingSinkTest, ATimerOnAnotherThreadKeepsPushingWhileItIsAdopted) {
  HoldingSink held;
  TimerOptions options;
  options.nvtx = false;
  Timer timer(options);
  timer.attach(held);
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline;
  pipeline.add_exporter(recorder);
  std::thread producer([&] { time_batches(timer, 20000); });
  for (const auto& ring : held.take().rings) pipeline.adopt_ring(ring);
  producer.join();
  timer.detach();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), 20000u);
}

}  // namespace
}  // namespace trainscope
