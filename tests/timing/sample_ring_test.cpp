// timing::detail::SampleRing on one thread: growth by chunks, the byte budget, drops, the
// high-water wake. Each test counts its chunks in its own budget counter.
#include "trainscope/timing/detail/sample_ring.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace trainscope::detail {
namespace {

RegionSample make_sample(std::int64_t sequence) {
  RegionSample s;
  s.key = 1;
  s.duration_ns = sequence;
  return s;
}

class CountingWaker final : public timing::detail::RingWaker {
 public:
  void wake() noexcept override { ++wakes; }
  int wakes = 0;
};

class SampleRingTest : public ::testing::Test {
 protected:
  timing::detail::SampleRing::Options options(std::size_t chunk_capacity,
                                              std::size_t max_pending_bytes) {
    timing::detail::SampleRing::Options o;
    o.chunk_capacity = chunk_capacity;
    o.max_pending_bytes = max_pending_bytes;
    o.bytes_in_use = &bytes_;
    return o;
  }
  void expect_sequence(const std::vector<RegionSample>& out, std::int64_t first, std::size_t n) {
    ASSERT_EQ(out.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i].duration_ns, first + static_cast<std::int64_t>(i)) << "index " << i;
    }
  }

  std::atomic<std::size_t> bytes_{0};
};

TEST_F(SampleRingTest, GrowsByChunksAndKeepsOrderWithoutDrops) {
  timing::detail::SampleRing ring(options(4, std::size_t{1} << 30));
  constexpr int kSamples = 1000;
  for (int i = 0; i < kSamples; ++i) ASSERT_TRUE(ring.push(make_sample(i)));
  EXPECT_EQ(bytes_.load(), (kSamples / 4) * ring.chunk_bytes());
  std::vector<RegionSample> out;
  EXPECT_EQ(ring.pop_all(&out), static_cast<std::size_t>(kSamples));
  expect_sequence(out, 0, kSamples);
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.dropped(), 0u);
  // Drained chunks are freed; the one last written and one spare stay.
  EXPECT_EQ(bytes_.load(), 2 * ring.chunk_bytes());
}

TEST_F(SampleRingTest, PastTheBudgetPushesDropUntilTheConsumerFreesChunks) {
  std::size_t chunk_bytes;
  {
    timing::detail::SampleRing probe(options(4, 0));
    chunk_bytes = probe.chunk_bytes();
  }
  ASSERT_EQ(bytes_.load(), 0u);
  timing::detail::SampleRing ring(options(4, 3 * chunk_bytes));
  int pushed = 0;
  for (int i = 0; i < 20; ++i) pushed += ring.push(make_sample(i)) ? 1 : 0;
  EXPECT_EQ(pushed, 12);  // three chunks of four
  EXPECT_EQ(ring.dropped(), 8u);
  EXPECT_EQ(bytes_.load(), 3 * chunk_bytes);

  std::vector<RegionSample> out;
  EXPECT_EQ(ring.pop_all(&out), 12u);
  expect_sequence(out, 0, 12);
  // The producer reuses the parked spare, then grows again within the budget.
  out.clear();
  for (int i = 100; i < 108; ++i) EXPECT_TRUE(ring.push(make_sample(i)));
  EXPECT_FALSE(ring.push(make_sample(108)));
  EXPECT_EQ(ring.dropped(), 9u);
  EXPECT_EQ(ring.pop_all(&out), 8u);
  expect_sequence(out, 100, 8);
}

TEST_F(SampleRingTest, TwoChunksAreAllowedWhateverTheBudget) {
  timing::detail::SampleRing ring(options(4, 0));
  int pushed = 0;
  for (int i = 0; i < 10; ++i) pushed += ring.push(make_sample(i)) ? 1 : 0;
  EXPECT_EQ(pushed, 8);
  EXPECT_EQ(ring.dropped(), 2u);
  std::vector<RegionSample> out;
  EXPECT_EQ(ring.pop_all(&out), 8u);
  expect_sequence(out, 0, 8);
  // It never stalls: after each drain there is room for a chunk.
  for (int round = 0; round < 5; ++round) {
    out.clear();
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.push(make_sample(i)));
    EXPECT_EQ(ring.pop_all(&out), 4u);
    expect_sequence(out, 0, 4);
  }
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(bytes_.load(), 2 * ring.chunk_bytes());
}

TEST_F(SampleRingTest, ChunkCapacityRoundsUpToPowerOfTwoOfAtLeastTwo) {
  const auto first_chunk = [this](std::size_t requested) {
    timing::detail::SampleRing ring(options(requested, 0));
    return ring.chunk_capacity();
  };
  EXPECT_EQ(first_chunk(0), 2u);
  EXPECT_EQ(first_chunk(1), 2u);
  EXPECT_EQ(first_chunk(2), 2u);
  EXPECT_EQ(first_chunk(5), 8u);
  EXPECT_EQ(first_chunk(64), 64u);
}

TEST_F(SampleRingTest, PopAllCrossesChunksInOrder) {
  timing::detail::SampleRing ring(options(4, std::size_t{1} << 20));
  std::vector<RegionSample> out;
  std::int64_t next = 0;
  for (int round = 0; round < 7; ++round) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring.push(make_sample(next++)));
    EXPECT_EQ(ring.pop_all(&out), 3u);
    EXPECT_TRUE(ring.empty());
  }
  expect_sequence(out, 0, 21);
  EXPECT_EQ(ring.dropped(), 0u);
}

TEST_F(SampleRingTest, WakesOncePerDrainWhenTheBacklogPassesHalfAChunk) {
  auto waker = std::make_shared<CountingWaker>();
  timing::detail::SampleRing::Options o = options(8, std::size_t{1} << 20);
  o.waker = waker;
  timing::detail::SampleRing ring(o);  // checks every 2 pushes, wakes at a backlog of 4
  for (int i = 0; i < 4; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 0);
  ring.push(make_sample(4));  // the check before the fifth sees 4 waiting
  EXPECT_EQ(waker->wakes, 1);
  for (int i = 5; i < 100; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 1);  // not re-armed: the consumer has not drained

  std::vector<RegionSample> out;
  ring.pop_all(&out);  // re-arms
  for (int i = 0; i < 3; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 1);  // below the mark
  for (int i = 0; i < 6; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 2);
}

TEST_F(SampleRingTest, DroppingWakesOncePerDrainToo) {
  auto waker = std::make_shared<CountingWaker>();
  timing::detail::SampleRing::Options o = options(4, 0);
  o.waker = waker;
  timing::detail::SampleRing ring(o);
  for (int i = 0; i < 20; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 1);
  EXPECT_EQ(ring.dropped(), 12u);
  std::vector<RegionSample> out;
  ring.pop_all(&out);
  for (int i = 0; i < 20; ++i) ring.push(make_sample(i));
  EXPECT_EQ(waker->wakes, 2);
  EXPECT_EQ(ring.dropped(), 12u + 16u);
}

TEST_F(SampleRingTest, DestructionFreesEveryChunk) {
  {
    timing::detail::SampleRing ring(options(4, std::size_t{1} << 20));
    for (int i = 0; i < 50; ++i) ring.push(make_sample(i));
    std::vector<RegionSample> out;
    ring.pop_all(&out);
    for (int i = 0; i < 50; ++i) ring.push(make_sample(i));
    EXPECT_GT(bytes_.load(), 0u);
  }
  EXPECT_EQ(bytes_.load(), 0u);
}

TEST(SampleRingDefaultsTest, ChargesTheProcessBudgetAndGivesItBack) {
  const std::size_t before = timing::detail::process_ring_bytes().load();
  {
    timing::detail::SampleRing ring(16);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(ring.push(make_sample(i)));
    EXPECT_EQ(timing::detail::process_ring_bytes().load(), before + 7 * ring.chunk_bytes());
  }
  EXPECT_EQ(timing::detail::process_ring_bytes().load(), before);
}

}  // namespace
}  // namespace trainscope::detail
