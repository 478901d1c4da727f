// The measured GPU busy time (issue 39): a CPUGPUTimer on a simulated GPU
// records each region's device start and stream in the run's region rows, and
// the steps room takes the union of a step's device intervals. No GPU needed:
// the simulated source's streams are queues of work on a virtual clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/run_dir_test.hpp"
#include "support/run_files.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/steps.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"

namespace trainscope {
namespace {

using GpuUnionTest = trainscope::testing::RunDirTest;
constexpr std::int64_t kMs = 1'000'000;

StreamHandle stream(std::uintptr_t n) { return reinterpret_cast<StreamHandle>(n); }

testing::RankJson finished() {
  testing::RankJson r;
  r.status = "FINISHED";
  r.end_time_ms = 2;
  r.heartbeat_ms = 2;
  return r;
}

steps::RunSteps read_steps_of(const std::string& dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  absl::StatusOr<steps::RunSteps> s = steps::read_steps(*reader);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : steps::RunSteps{};
}

// One GPU region on `on`: `work_ns` of device work enqueued inside it.
void gpu_region(CPUGPUTimer& timer, testing::SimulatedEventSource& gpu, Key key,
                std::int64_t work_ns, StreamHandle on) {
  timer.start(key, true, on);
  gpu.enqueue_work(on, work_ns);
  timer.end(key, true, on);
}

// Each step on the device (ms from the step's first region):
//   FORWARD [0, 3) with LOSS [2, 3) nested inside it      one stream: 3 ms once
//   the host away 5 ms (the device idle), BACKWARD [8, 10)  a gap: 2 ms more
//   OPTIMIZER [10, 12) on stream 1, H2D [10, 12) on 2      two streams at once: 2 ms
// The event spans sum to 3 + 1 + 2 + 2 + 2 = 10 ms; the device is busy 7 ms.
TEST_F(GpuUnionTest, TheStepsDeviceUnionCountsOverlapsOnceAndGapsNot) {
  constexpr int kSteps = 6;
  auto gpu = std::make_shared<testing::SimulatedEventSource>();
  std::string run_dir;
  {
    testing::RunPtr run = start(options());
    ASSERT_NE(run, nullptr);
    CPUGPUTimer timer(gpu);
    run->attach(timer);
    for (int i = 0; i < kSteps; ++i) {
      timer.start(TimeType::BATCH);
      timer.start(TimeType::FORWARD, true, nullptr);
      gpu->enqueue_work(nullptr, 2 * kMs);
      gpu_region(timer, *gpu, Key("LOSS"), 1 * kMs, nullptr);
      timer.end(TimeType::FORWARD, true, nullptr);
      gpu->advance(8 * kMs);  // the host is away: the stream runs dry from 3 to 8 ms
      gpu_region(timer, *gpu, TimeType::BACKWARD, 2 * kMs, nullptr);
      gpu->advance(2 * kMs);
      timer.start(Key("OPTIMIZER"), true, stream(1));
      timer.start(Key("H2D"), true, stream(2));
      gpu->enqueue_work(stream(1), 2 * kMs);
      gpu->enqueue_work(stream(2), 2 * kMs);
      timer.end(Key("H2D"), true, stream(2));
      timer.end(Key("OPTIMIZER"), true, stream(1));
      gpu->advance(10 * kMs);  // all done before the next step, 20 ms after this one
      timer.harvest();
      timer.end(TimeType::BATCH);
    }
    timer.complete_all();
    EXPECT_EQ(timer.blocking_waits(), 0u);  // device starts take no synchronization
    ASSERT_TRUE(run->end().ok());
    run_dir = run->dir();
  }
  // The rows: each GPU row's device start, on the device clock, and its stream.
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<Chunk<RegionRow>> rows = reader->read_regions(0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<const RegionRow*> forward, loss, optimizer, h2d;
  for (const RegionRow& r : rows->rows) {
    if (r.device == Device::kCPU) {
      EXPECT_EQ(r.gpu_start_ns, kNoGpuStart) << r.key;
      continue;
    }
    EXPECT_NE(r.gpu_start_ns, kNoGpuStart) << r.key;
    if (r.key == "FORWARD") forward.push_back(&r);
    if (r.key == "LOSS") loss.push_back(&r);
    if (r.key == "OPTIMIZER") optimizer.push_back(&r);
    if (r.key == "H2D") h2d.push_back(&r);
  }
  ASSERT_EQ(forward.size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(loss.size(), forward.size());
  ASSERT_EQ(optimizer.size(), forward.size());
  ASSERT_EQ(h2d.size(), forward.size());
  for (std::size_t i = 0; i < forward.size(); ++i) {
    EXPECT_EQ(loss[i]->gpu_start_ns - forward[i]->gpu_start_ns, 2 * kMs);
    EXPECT_EQ(optimizer[i]->gpu_start_ns - forward[i]->gpu_start_ns, 10 * kMs);
    EXPECT_EQ(h2d[i]->gpu_start_ns, optimizer[i]->gpu_start_ns);
    EXPECT_EQ(forward[i]->stream, 0u);  // the default stream
    EXPECT_NE(optimizer[i]->stream, 0u);
    EXPECT_NE(h2d[i]->stream, 0u);
    EXPECT_NE(optimizer[i]->stream, h2d[i]->stream);
    if (i > 0) {  // 20 ms of device clock a step
      EXPECT_EQ(forward[i]->gpu_start_ns - forward[i - 1]->gpu_start_ns, 20 * kMs);
    }
  }
  // The steps: 7 ms busy of the 10 ms the spans sum to, in every step.
  const steps::RunSteps s = read_steps_of(run_dir);
  ASSERT_EQ(s.ranks.size(), 1u);
  const steps::RankSteps& r = s.ranks[0];
  ASSERT_EQ(r.history.size(), static_cast<std::size_t>(kSteps));
  for (const steps::Step& step : r.history) {
    EXPECT_TRUE(step.gpu_union_known()) << "step " << step.step;
    EXPECT_EQ(step.gpu_rows_placed, 5u) << "step " << step.step;
    EXPECT_NEAR(step.gpu_busy_s, 0.010, 1e-9) << "step " << step.step;
    EXPECT_NEAR(step.gpu_union_s, 0.007, 1e-9) << "step " << step.step;
  }
}

// A run recorded before device starts (the 8-column header): it reads as
// before: every row, no device start, the spans as the busy time and the
// union unknown.
TEST_F(GpuUnionTest, AnOldRunWithoutTheColumnsReadsAsBefore) {
  const auto dir = write_run_dir("old", {}, {finished()});
  std::string rows;
  const std::int64_t t0 = 1'700'000'000'000'000'000;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t t = t0 + i * 20 * kMs;
    rows += "BATCH,CPU,0,0," + std::to_string(t) + "," + std::to_string(19 * kMs) + ",0,0\n";
    rows += "FORWARD,GPU,0,0," + std::to_string(t + kMs) + "," + std::to_string(4 * kMs) + ",0,0\n";
    rows += "LOSS,GPU,0,0," + std::to_string(t + 2 * kMs) + "," + std::to_string(kMs) + ",0,0\n";
  }
  testing::write_file(dir / "regions-0.csv", rows, /*append=*/true);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<Chunk<RegionRow>> read = reader->read_regions(0);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->rows.size(), 9u);
  for (const RegionRow& r : read->rows) {
    EXPECT_EQ(r.gpu_start_ns, kNoGpuStart);
    EXPECT_EQ(r.stream, 0u);
  }
  const steps::RunSteps s = read_steps_of(dir.string());
  ASSERT_EQ(s.ranks.size(), 1u);
  ASSERT_EQ(s.ranks[0].history.size(), 3u);
  for (const steps::Step& step : s.ranks[0].history) {
    EXPECT_NEAR(step.gpu_busy_s, 0.005, 1e-12);  // the spans, as before
    EXPECT_FALSE(step.gpu_union_known());
    EXPECT_EQ(step.gpu_rows_unplaced, 2u);
    EXPECT_EQ(step.gpu_union_s, 0.0);
  }
}

// Rows of 10 fields beside rows of 8 (a run continued by a newer trainscope):
// both read; a bad device start is an error naming file, line and column.
TEST_F(GpuUnionTest, NewRowsAfterOldOnesReadAndBadOnesAreNamed) {
  const auto dir = write_run_dir("mixed", {}, {finished()});
  testing::write_file(dir / "regions-0.csv",
                      "FORWARD,GPU,0,0,100,5,0,0\nFORWARD,GPU,0,0,200,5,0,0,-42,3\n"
                      "BATCH,CPU,0,0,300,5,0,0,,\n",
                      /*append=*/true);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<Chunk<RegionRow>> read = reader->read_regions(0);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->rows.size(), 3u);
  EXPECT_EQ(read->rows[0].gpu_start_ns, kNoGpuStart);
  EXPECT_EQ(read->rows[1].gpu_start_ns, -42);  // before the reference: negative
  EXPECT_EQ(read->rows[1].stream, 3u);
  EXPECT_EQ(read->rows[2].gpu_start_ns, kNoGpuStart);
  testing::write_file(dir / "regions-0.csv", "FORWARD,GPU,0,0,400,5,0,0,4x2,0\n",
                      /*append=*/true);
  read = reader->read_regions(0);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("regions-0.csv:5: gpu_start_ns is \"4x2\""),
            std::string::npos)
      << read.status();
}

}  // namespace
// compare's per-step row (RankSteps::gpu_busy_shares): the union over the period where every
// GPU-timed step knows it, else the spans, at most 1; nothing for a rank without GPU rows.
TEST(GpuBusyShares, TheUnionWhereEveryStepKnowsItElseTheSpans) {
  steps::RankSteps rank;
  for (int i = 0; i < 3; ++i) {
    steps::Step s;
    s.step = i;
    s.period_s = 0.02;
    s.gpu_busy_s = 0.008;
    s.gpu_union_s = 0.005;
    s.gpu_rows_placed = 4;
    rank.history.push_back(s);
  }
  using ::testing::DoubleNear;
  using ::testing::Pointwise;
  EXPECT_THAT(rank.gpu_busy_shares(), Pointwise(DoubleNear(1e-12), {0.25, 0.25, 0.25}));
  rank.history[1].gpu_rows_unplaced = 1;  // one row without its device start
  EXPECT_THAT(rank.gpu_busy_shares(), Pointwise(DoubleNear(1e-12), {0.4, 0.4, 0.4}));
  rank.history[2].gpu_busy_s = 0.05;  // spans overlapping past the period
  EXPECT_EQ(rank.gpu_busy_shares().back(), 1.0);
  steps::RankSteps cpu_only;
  cpu_only.history.resize(2);
  cpu_only.history[0].period_s = cpu_only.history[1].period_s = 0.01;
  EXPECT_TRUE(cpu_only.gpu_busy_shares().empty());
}

}  // namespace trainscope
