// timing::detail::SampleRing with a producer and a consumer thread that drains only when the
// ring wakes it (or the producer is done); CI runs this under TSan.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope::detail {
namespace {

// The consumer side of a pipeline in miniature: woken by the ring.
class Consumer final : public timing::detail::RingWaker {
 public:
  void wake() noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
      ++wakes_;
    }
    cv_.notify_one();
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
  }
  // Drains on every wake until finish(), then once more.
  void run(timing::detail::SampleRing* ring, std::vector<RegionSample>* out) {
    for (bool done = false; !done;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return woken_ || done_; });
        woken_ = false;
        done = done_;
      }
      ring->pop_all(out);
    }
  }
  int wakes() {
    std::lock_guard<std::mutex> lock(mu_);
    return wakes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool done_ = false;
  int wakes_ = 0;
};

RegionSample make_sample(std::int64_t sequence) {
  RegionSample s;
  s.key = 1;
  s.duration_ns = sequence;
  return s;
}

TEST(SampleRingThreadTest, WokenConsumerReceivesEverySampleInOrder) {
  constexpr std::int64_t kSamples = 300000;
  std::atomic<std::size_t> bytes{0};
  auto consumer = std::make_shared<Consumer>();
  {
    timing::detail::SampleRing::Options options;
    options.chunk_capacity = 256;
    options.max_pending_bytes = std::size_t{1} << 30;  // never reached: nothing may drop
    options.bytes_in_use = &bytes;
    options.waker = consumer;
    timing::detail::SampleRing ring(options);
    std::vector<RegionSample> out;
    std::thread drainer([&] { consumer->run(&ring, &out); });
    for (std::int64_t i = 0; i < kSamples; ++i) ASSERT_TRUE(ring.push(make_sample(i)));
    consumer->finish();
    drainer.join();

    EXPECT_EQ(ring.dropped(), 0u);
    ASSERT_EQ(out.size(), static_cast<std::size_t>(kSamples));
    for (std::int64_t i = 0; i < kSamples; ++i) ASSERT_EQ(out[i].duration_ns, i);
    EXPECT_GE(consumer->wakes(), 1);
  }
  EXPECT_EQ(bytes.load(), 0u);
}

TEST(SampleRingThreadTest, PastTheBudgetDeliveredPlusDroppedIsEverything) {
  constexpr std::int64_t kSamples = 300000;
  std::atomic<std::size_t> bytes{0};
  auto consumer = std::make_shared<Consumer>();
  {
    timing::detail::SampleRing::Options options;
    options.chunk_capacity = 64;
    options.max_pending_bytes = 0;  // two chunks: drops are likely
    options.bytes_in_use = &bytes;
    options.waker = consumer;
    timing::detail::SampleRing ring(options);
    std::vector<RegionSample> out;
    std::thread drainer([&] { consumer->run(&ring, &out); });
    std::int64_t pushed = 0;
    for (std::int64_t i = 0; i < kSamples; ++i) pushed += ring.push(make_sample(i)) ? 1 : 0;
    consumer->finish();
    drainer.join();

    EXPECT_EQ(static_cast<std::uint64_t>(pushed) + ring.dropped(),
              static_cast<std::uint64_t>(kSamples));
    ASSERT_EQ(out.size(), static_cast<std::size_t>(pushed));
    for (std::size_t i = 1; i < out.size(); ++i) {
      ASSERT_LT(out[i - 1].duration_ns, out[i].duration_ns);  // in order, gaps where dropped
    }
    EXPECT_LE(bytes.load(), 2 * ring.chunk_bytes());
  }
  EXPECT_EQ(bytes.load(), 0u);
}

// Rings of several producers share one budget counter.
TEST(SampleRingThreadTest, ProducersShareOneBudget) {
  constexpr int kProducers = 4;
  constexpr std::int64_t kSamples = 50000;
  std::atomic<std::size_t> bytes{0};
  std::vector<std::shared_ptr<Consumer>> consumers;
  std::vector<std::unique_ptr<timing::detail::SampleRing>> rings;
  for (int p = 0; p < kProducers; ++p) {
    consumers.push_back(std::make_shared<Consumer>());
    timing::detail::SampleRing::Options options;
    options.chunk_capacity = 128;
    options.max_pending_bytes = std::size_t{1} << 30;
    options.bytes_in_use = &bytes;
    options.waker = consumers.back();
    rings.push_back(std::make_unique<timing::detail::SampleRing>(options));
  }
  std::vector<std::vector<RegionSample>> outs(kProducers);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] { consumers[p]->run(rings[p].get(), &outs[p]); });
    threads.emplace_back([&, p] {
      for (std::int64_t i = 0; i < kSamples; ++i) ASSERT_TRUE(rings[p]->push(make_sample(i)));
      consumers[p]->finish();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < kProducers; ++p) {
    EXPECT_EQ(outs[p].size(), static_cast<std::size_t>(kSamples));
    EXPECT_EQ(rings[p]->dropped(), 0u);
  }
  rings.clear();
  EXPECT_EQ(bytes.load(), 0u);
}

}  // namespace
}  // namespace trainscope::detail
