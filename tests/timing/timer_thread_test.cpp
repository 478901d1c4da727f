// The threading contract: one timer per thread, no locks on start/end, any
// number of timers streaming into one ExportPipeline, keys interned from any
// thread, merge() to combine. Run under TSan in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

class CountingExporter final : public Exporter {
 public:
  std::string name() const override { return "counting"; }
  absl::Status write_samples(absl::Span<const RegionSample> samples) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RegionSample& s : samples) {
      ++per_key_[s.key];
      threads_.push_back(s.thread);
    }
    total_ += samples.size();
    return absl::OkStatus();
  }
  absl::Status write_summary(const Summary& summary) override {
    std::lock_guard<std::mutex> lock(mu_);
    summaries_ += 1;
    summary_entries_ += summary.entries.size();
    return absl::OkStatus();
  }
  std::size_t total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::size_t count_for(KeyId key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_key_.find(key);
    return it == per_key_.end() ? 0 : it->second;
  }
  std::size_t summaries() {
    std::lock_guard<std::mutex> lock(mu_);
    return summaries_;
  }

 private:
  std::mutex mu_;
  std::map<KeyId, std::size_t> per_key_;
  std::vector<std::uint32_t> threads_;
  std::size_t total_ = 0;
  std::size_t summaries_ = 0;
  std::size_t summary_entries_ = 0;
};

TEST(TimerThreadTest, PerThreadTimersStreamIntoOnePipelineAndMerge) {
  constexpr int kThreads = 4;
  constexpr int kRegions = 20000;
  auto exporter = std::make_shared<CountingExporter>();
  ExportPipeline::Options options;
  options.flush_interval = absl::Milliseconds(5);
  options.ring_capacity = 1 << 16;  // > kRegions: nothing may drop
  ExportPipeline pipeline(options);
  pipeline.add_exporter(exporter);

  std::vector<Timer> timers(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Timer& timer = timers[t];
      timer.attach(pipeline);
      // Every thread interns the same and its own names concurrently.
      const Key shared("thread_shared_key");
      const Key own("thread_key_" + std::to_string(t));
      for (int i = 0; i < kRegions; ++i) {
        timer.start(shared);
        timer.start(own);
        timer.end(own);
        timer.end(shared);
      }
      timer.export_summary(pipeline);
      timer.detach();
    });
  }
  for (auto& th : threads) th.join();
  pipeline.flush();

  EXPECT_EQ(pipeline.dropped_samples(), 0u);
  EXPECT_EQ(exporter->total(), static_cast<std::size_t>(2 * kThreads * kRegions));
  EXPECT_EQ(exporter->count_for(Key("thread_shared_key").id()),
            static_cast<std::size_t>(kThreads * kRegions));
  EXPECT_EQ(exporter->summaries(), static_cast<std::size_t>(kThreads));

  Timer merged;
  for (const Timer& t : timers) merged.merge(t);
  EXPECT_EQ(merged.get_time_stats("thread_shared_key").count,
            static_cast<std::uint64_t>(kThreads * kRegions));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(merged.get_time_stats("thread_key_" + std::to_string(t)).count,
              static_cast<std::uint64_t>(kRegions));
  }
}

TEST(TimerThreadTest, ConcurrentInterningGivesOneIdPerName) {
  constexpr int kThreads = 4;
  std::vector<std::vector<KeyId>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) ids[t].push_back(Key("interned_" + std::to_string(i)).id());
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[t], ids[0]);
  EXPECT_EQ(Key::FromId(ids[0][7]).name(), "interned_7");
}

TEST(TimerThreadTest, GpuTimersOnSeveralThreadsWithTheirOwnSources) {
  constexpr int kThreads = 3;
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> total{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto sim = std::make_shared<testing::SimulatedEventSource>();
      CPUGPUTimer timer(sim);
      for (int i = 0; i < 2000; ++i) {
        timer.start(TimeType::BATCH, true);
        sim->enqueue_work(nullptr, 100);
        timer.end(TimeType::BATCH, true);
        sim->advance(50);
      }
      total += timer.get_time_stats(TimeType::BATCH, true).count;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(total.load(), 3u * 2000u);
}

}  // namespace
}  // namespace trainscope
