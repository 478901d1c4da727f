// The sampling thread with fake sources at 10 ms: readings reach the
// pipeline's exporters with the step and non-decreasing timestamps, a failing
// source is dropped with one warning while the others go on, and stop() takes
// a final sample and is idempotent. No timing assertions: tick counts come
// from what the exporter received, checked against Sampler::ticks().
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/recording_exporter.hpp"
#include "support/warnings.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/sampler.hpp"

namespace trainscope {
namespace {

using ::testing::HasSubstr;

using testing::MetricCollector;

// Emits "<name>" with value = number of samples taken so far; fails the
// sample call number `fail_at` (1-based; 0: never) or open() if asked.
class FakeSource : public HardwareSource {
 public:
  FakeSource(std::string name, int fail_at = 0, bool fail_open = false)
      : name_(std::move(name)), fail_at_(fail_at), fail_open_(fail_open) {}
  std::string name() const override { return name_; }
  absl::Status open(const HardwareContext&) override {
    return fail_open_ ? absl::NotFoundError("no such device") : absl::OkStatus();
  }
  absl::Status sample(std::vector<HardwareReading>* out) override {
    ++calls_;
    if (calls_ == fail_at_) return absl::InternalError("read failed");
    out->push_back({"system/fake." + name_, static_cast<double>(calls_)});
    return absl::OkStatus();
  }

 private:
  std::string name_;
  int fail_at_;
  bool fail_open_;
  int calls_ = 0;
};

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override { pipeline_.add_exporter(collector_); }

  SamplerOptions options(std::atomic<std::int64_t>* step) {
    SamplerOptions o;
    o.interval = absl::Milliseconds(10);
    o.rank = 3;
    o.current_step = [step] { return step->load(); };
    return o;
  }
  std::vector<MetricPoint> points_named(const std::string& key) {
    pipeline_.flush();
    std::vector<MetricPoint> out;
    for (const MetricPoint& p : collector_->received()) {
      if (p.key == key) out.push_back(p);
    }
    return out;
  }

  trainscope::testing::CapturedWarnings warnings_;  // outlives the pipeline, which may warn
  ExportPipeline pipeline_;
  std::shared_ptr<MetricCollector> collector_ = std::make_shared<MetricCollector>();
};

TEST_F(SamplerTest, ReadingsCarryStepRankAndIncreasingTimestamps) {
  std::atomic<std::int64_t> step{7};
  std::vector<std::unique_ptr<HardwareSource>> sources;
  sources.push_back(std::make_unique<FakeSource>("a"));
  Sampler sampler(options(&step), std::move(sources), &pipeline_);
  sampler.start();
  while (sampler.ticks() < 3) std::this_thread::yield();
  step.store(8);
  sampler.stop();

  const std::vector<MetricPoint> points = points_named("system/fake.a");
  ASSERT_EQ(points.size(), sampler.ticks());
  ASSERT_GE(points.size(), 4u);  // three ticks, then stop()'s final one
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].value, static_cast<double>(i + 1));
    EXPECT_EQ(points[i].rank, 3u);
    EXPECT_GT(points[i].timestamp_ms, 1'600'000'000'000);  // Unix ms, not steady
    if (i > 0) EXPECT_GE(points[i].timestamp_ms, points[i - 1].timestamp_ms);
  }
  EXPECT_EQ(points.front().step, 7);
  EXPECT_EQ(points.back().step, 8);  // the final sample sees the step at stop()
  EXPECT_TRUE(warnings_.empty()) << warnings_.joined();
}

TEST_F(SamplerTest, FailingSourcesWarnOnceAndOthersContinue) {
  std::atomic<std::int64_t> step{0};
  std::vector<std::unique_ptr<HardwareSource>> sources;
  sources.push_back(std::make_unique<FakeSource>("good"));
  sources.push_back(std::make_unique<FakeSource>("flaky", /*fail_at=*/2));
  sources.push_back(std::make_unique<FakeSource>("absent", 0, /*fail_open=*/true));
  Sampler sampler(options(&step), std::move(sources), &pipeline_);
  sampler.start();
  while (sampler.ticks() < 5) std::this_thread::yield();
  sampler.stop();

  EXPECT_EQ(points_named("system/fake.good").size(), sampler.ticks());
  EXPECT_EQ(points_named("system/fake.flaky").size(), 1u);  // before its failure only
  EXPECT_TRUE(points_named("system/fake.absent").empty());
  const std::vector<std::string> warnings = warnings_.messages();
  ASSERT_EQ(warnings.size(), 2u);
  const std::string all = warnings[0] + "\n" + warnings[1];
  EXPECT_THAT(all, HasSubstr("flaky"));
  EXPECT_THAT(all, HasSubstr("read failed"));
  EXPECT_THAT(all, HasSubstr("absent"));
  EXPECT_THAT(all, HasSubstr("no such device"));
}

TEST_F(SamplerTest, StopTakesAFinalSampleAndIsIdempotent) {
  std::atomic<std::int64_t> step{0};
  std::vector<std::unique_ptr<HardwareSource>> sources;
  sources.push_back(std::make_unique<FakeSource>("a"));
  SamplerOptions o = options(&step);
  o.interval = absl::Hours(1);  // no scheduled tick: only the final one
  Sampler sampler(o, std::move(sources), &pipeline_);
  sampler.start();
  sampler.stop();
  EXPECT_EQ(sampler.ticks(), 1u);
  sampler.stop();
  EXPECT_EQ(sampler.ticks(), 1u);
  EXPECT_EQ(points_named("system/fake.a").size(), 1u);
}

TEST_F(SamplerTest, StopWithoutStartDoesNothing) {
  std::vector<std::unique_ptr<HardwareSource>> sources;
  sources.push_back(std::make_unique<FakeSource>("a"));
  Sampler sampler(SamplerOptions{}, std::move(sources), &pipeline_);
  sampler.stop();
  EXPECT_EQ(sampler.ticks(), 0u);
  EXPECT_TRUE(points_named("system/fake.a").empty());
}

}  // namespace
}  // namespace trainscope
