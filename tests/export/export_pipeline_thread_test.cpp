// ExportPipeline with several producer threads; CI runs this under TSan.
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/recording_exporter.hpp"
#include "support/warnings.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::RecordingExporter;

class FailingExporter : public Exporter {
 public:
  std::string name() const override { return "failing"; }
  absl::Status write_samples(absl::Span<const RegionSample>) override {
    return absl::UnavailableError("disk on fire");
  }
  absl::Status write_summary(const Summary&) override {
    return absl::UnavailableError("disk on fire");
  }
  absl::Status flush() override { return absl::UnavailableError("disk on fire"); }
};

class ThrowingExporter : public Exporter {
 public:
  std::string name() const override { return "throwing"; }
  absl::Status write_samples(absl::Span<const RegionSample>) override {
    throw std::runtime_error("boom");
  }
  absl::Status write_summary(const Summary&) override { throw 42; }
};

// Holds the pipeline thread in write_samples() until open().
class GatedExporter : public Exporter {
 public:
  std::string name() const override { return "gated"; }
  absl::Status write_samples(absl::Span<const RegionSample>) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
    return absl::OkStatus();
  }
  void wait_until_entered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool open_ = false;
};

class ExportPipelineTest : public ::testing::Test {
 protected:
  std::vector<std::string> warnings() const { return warnings_.messages(); }

  // Only flush(), destruction and (past half a chunk) a queue's wake drive
  // delivery, so the tests are deterministic.
  static ExportPipeline::Options manual_options(std::size_t ring_capacity = 1024) {
    ExportPipeline::Options options;
    options.flush_interval = absl::InfiniteDuration();
    options.ring_capacity = ring_capacity;
    return options;
  }

 private:
  trainscope::testing::CapturedWarnings warnings_;
};

RegionSample make_sample(std::uint32_t thread, std::int64_t sequence) {
  RegionSample s;
  s.key = 1;
  s.thread = thread;
  s.start_unix_ns = detail::now_ns();
  s.duration_ns = sequence;
  return s;
}

Summary make_summary(const std::string& key) {
  Summary summary;
  summary.entries.push_back({key, Device::kCPU, TimeStats{}});
  return summary;
}

TEST_F(ExportPipelineTest, EverySampleFromFourProducersArrivesInPerThreadOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline::Options options;
  options.flush_interval = absl::Milliseconds(1);
  options.ring_capacity = 1024;  // queues grow: the exact count is checked
  ExportPipeline pipeline(options);
  pipeline.add_exporter(recorder);

  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&pipeline, t] {
      std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_TRUE(ring->push(make_sample(static_cast<std::uint32_t>(t), i)));
        if (i % 5000 == 0) pipeline.flush();  // flushes racing with the drain
      }
      ring->release();
    });
  }
  for (std::thread& p : producers) p.join();
  pipeline.flush();

  const std::vector<RegionSample> samples = recorder->samples();
  ASSERT_EQ(samples.size(), static_cast<std::size_t>(kThreads * kPerThread));
  std::vector<std::int64_t> next(kThreads, 0);
  const std::int64_t unix_now = detail::unix_now_ns();
  for (const RegionSample& s : samples) {
    ASSERT_LT(s.thread, static_cast<std::uint32_t>(kThreads));
    ASSERT_EQ(s.duration_ns, next[s.thread]) << "thread " << s.thread;
    ++next[s.thread];
    // Converted from steady-clock to Unix time (generous bound: same hour).
    ASSERT_LT(std::llabs(unix_now - s.start_unix_ns), std::int64_t{3600} * 1000000000);
  }
  EXPECT_EQ(pipeline.dropped_samples(), 0u);
  EXPECT_EQ(pipeline.export_errors(), 0u);
}

TEST_F(ExportPipelineTest, FlushDeliversEverythingBeforeItThenFlushesExporters) {
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline(manual_options());
  pipeline.add_exporter(recorder);
  std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
  for (int i = 0; i < 3; ++i) ring->push(make_sample(0, i));
  pipeline.submit_summary(make_summary("EPOCH"));
  EXPECT_TRUE(recorder->samples().empty());  // the interval never elapses

  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), 3u);
  ASSERT_EQ(recorder->summaries().size(), 1u);
  EXPECT_EQ(recorder->summaries()[0].entries[0].key, "EPOCH");
  // Samples, then the summary that describes them, then the exporter's flush.
  EXPECT_THAT(recorder->events(), ElementsAre("samples", "summary", "flush"));

  pipeline.flush();  // nothing new: only the exporter flush
  EXPECT_THAT(recorder->events(), ElementsAre("samples", "summary", "flush", "flush"));
}

TEST_F(ExportPipelineTest, ConcurrentFlushesAllReturn) {
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline(manual_options());
  pipeline.add_exporter(recorder);
  std::vector<std::thread> flushers;
  for (int t = 0; t < 4; ++t) {
    flushers.emplace_back([&pipeline, t] {
      for (int i = 0; i < 50; ++i) {
        pipeline.submit_summary(make_summary("K" + std::to_string(t)));
        pipeline.flush();
      }
    });
  }
  for (std::thread& f : flushers) f.join();
  EXPECT_EQ(recorder->summaries().size(), 200u);
  EXPECT_GE(recorder->flushes(), 1);
}

TEST_F(ExportPipelineTest, SummariesAreDeliveredWithoutFlush) {
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline::Options options;
  options.flush_interval = absl::Milliseconds(1);
  ExportPipeline pipeline(options);
  pipeline.add_exporter(recorder);
  pipeline.submit_summary(make_summary("A"));
  pipeline.submit_summary(make_summary("B"));
  // The periodic drain delivers them; wait for it without a time limit.
  while (recorder->summaries().size() < 2) std::this_thread::yield();
  const std::vector<Summary> summaries = recorder->summaries();
  EXPECT_EQ(summaries[0].entries[0].key, "A");
  EXPECT_EQ(summaries[1].entries[0].key, "B");
}

TEST_F(ExportPipelineTest, FailingExportersAreCountedAndDoNotStopOthers) {
  auto failing = std::make_shared<FailingExporter>();
  auto throwing = std::make_shared<ThrowingExporter>();
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline(manual_options());
  pipeline.add_exporter(failing);
  pipeline.add_exporter(throwing);
  pipeline.add_exporter(recorder);
  std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();

  for (int round = 0; round < 3; ++round) {
    ring->push(make_sample(0, round));
    pipeline.submit_summary(make_summary("EPOCH"));
    pipeline.flush();
  }
  EXPECT_EQ(recorder->samples().size(), 3u);
  EXPECT_EQ(recorder->summaries().size(), 3u);
  EXPECT_EQ(recorder->flushes(), 3);
  // Per round: failing x3 (samples, summary, flush) + throwing x2 (its flush is fine).
  EXPECT_EQ(pipeline.export_errors(), 15u);

  // Reported once per exporter, naming it and the failure.
  const std::vector<std::string> reported = warnings();
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_THAT(reported[0], HasSubstr("failing"));
  EXPECT_THAT(reported[0], HasSubstr("disk on fire"));
  EXPECT_THAT(reported[1], HasSubstr("throwing"));
  EXPECT_THAT(reported[1], HasSubstr("boom"));
}

TEST_F(ExportPipelineTest, PastTheMemoryBoundDropsAreCountedAndWarned) {
  // The thread takes a first batch, then waits in the exporter while the
  // producer runs into the bound: every queue may hold two chunks, no more.
  auto gate = std::make_shared<GatedExporter>();
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline::Options options = manual_options(/*ring_capacity=*/4);
  options.max_pending_bytes = 0;
  ExportPipeline pipeline(options);
  pipeline.add_exporter(gate);
  pipeline.add_exporter(recorder);
  std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
  constexpr int kPushes = 100;
  int pushed = 0;
  for (int i = 0; i < kPushes; ++i) pushed += ring->push(make_sample(0, i)) ? 1 : 0;
  gate->wait_until_entered();  // the high-water wake reached the thread
  EXPECT_GT(pipeline.dropped_samples(), 0u);
  EXPECT_EQ(pushed + pipeline.dropped_samples(), static_cast<std::uint64_t>(kPushes));
  gate->open();

  // The producer goes away; the drained ring is removed but its drops still count.
  ring->release();
  ring.reset();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), static_cast<std::size_t>(pushed));
  EXPECT_EQ(pushed + pipeline.dropped_samples(), static_cast<std::uint64_t>(kPushes));
  const std::vector<std::string> reported = warnings();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_THAT(reported[0], HasSubstr("max_pending_bytes"));
}

TEST_F(ExportPipelineTest, AQueuePastItsHighWaterMarkWakesTheThread) {
  // Neither the interval (infinite) nor a flush() delivers here: only the wake.
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline(manual_options(/*ring_capacity=*/64));
  pipeline.add_exporter(recorder);
  std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(ring->push(make_sample(0, i)));
  while (recorder->samples().size() < 32) std::this_thread::yield();
  ring->release();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), 1000u);
  EXPECT_EQ(pipeline.dropped_samples(), 0u);
}

TEST_F(ExportPipelineTest, ABurstOfManyChunksLosesNothing) {
  auto gate = std::make_shared<GatedExporter>();
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline pipeline(manual_options(/*ring_capacity=*/256));
  pipeline.add_exporter(gate);  // holds the thread: the queue must grow to take the burst
  pipeline.add_exporter(recorder);
  std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
  constexpr int kBurst = 200000;
  for (int i = 0; i < kBurst; ++i) ASSERT_TRUE(ring->push(make_sample(0, i)));
  gate->open();
  pipeline.flush();
  const std::vector<RegionSample> samples = recorder->samples();
  ASSERT_EQ(samples.size(), static_cast<std::size_t>(kBurst));
  for (int i = 0; i < kBurst; ++i) ASSERT_EQ(samples[i].duration_ns, i);
  EXPECT_EQ(pipeline.dropped_samples(), 0u);
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ExportPipelineTest, AProducerThatOutlivesThePipelineWakesNothing) {
  std::shared_ptr<timing::detail::SampleRing> ring;
  {
    ExportPipeline::Options options = manual_options(/*ring_capacity=*/8);
    options.max_pending_bytes = 0;
    ExportPipeline pipeline(options);
    ring = pipeline.open_ring();
  }
  int pushed = 0;
  for (int i = 0; i < 100; ++i) pushed += ring->push(make_sample(0, i)) ? 1 : 0;
  EXPECT_EQ(pushed, 16);  // two chunks, nobody drains
  EXPECT_EQ(ring->dropped(), 84u);
}

TEST_F(ExportPipelineTest, RingsOpenedFromManyThreadsAndReleased) {
  auto recorder = std::make_shared<RecordingExporter>();
  ExportPipeline::Options options;
  options.flush_interval = absl::Milliseconds(1);
  options.ring_capacity = 64;
  ExportPipeline pipeline(options);
  pipeline.add_exporter(recorder);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pipeline, t] {
      for (int r = 0; r < 50; ++r) {
        std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
        for (int i = 0; i < 10; ++i) ring->push(make_sample(static_cast<std::uint32_t>(t), i));
        ring->release();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  pipeline.flush();
  EXPECT_EQ(recorder->samples().size(), 4u * 50u * 10u);
  EXPECT_EQ(pipeline.dropped_samples(), 0u);
}

TEST_F(ExportPipelineTest, DestructorDeliversEverythingAndFlushes) {
  auto recorder = std::make_shared<RecordingExporter>();
  {
    ExportPipeline pipeline(manual_options());
    pipeline.add_exporter(recorder);
    std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
    std::thread producer([&ring] {
      for (int i = 0; i < 100; ++i) ring->push(make_sample(0, i));
    });
    producer.join();
    pipeline.submit_summary(make_summary("EPOCH"));
  }
  EXPECT_EQ(recorder->samples().size(), 100u);
  EXPECT_EQ(recorder->summaries().size(), 1u);
  EXPECT_THAT(recorder->events(), ElementsAre("samples", "summary", "flush"));
}

}  // namespace
}  // namespace trainscope
