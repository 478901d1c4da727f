#include "trainscope/stats/detail/quantile_sketch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace trainscope::detail {
namespace {

using Ns = std::vector<std::int64_t>;

// Rounding in log/exp may put a value sitting exactly on a bucket edge one
// ulp past alpha.
constexpr double kSlack = 1 + 1e-9;

// Log-uniform integers in [lo, hi]: every bucket between them gets samples.
Ns LogUniformNs(std::size_t n, double lo, double hi, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> exponent(std::log(lo), std::log(hi));
  Ns ns(n);
  for (auto& v : ns) v = std::max<std::int64_t>(1, std::llround(std::exp(exponent(*rng))));
  return ns;
}

stats::detail::QuantileSketch SketchOf(const Ns& ns, double alpha) {
  stats::detail::QuantileSketch sketch(alpha);
  for (const auto v : ns) sketch.add(v);
  return sketch;
}

// Type 7 on fully sorted data, as the exact statistics compute it.
double NaiveQuantile(const Ns& sorted, double q) {
  const double h = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = static_cast<std::size_t>(std::ceil(h));
  const double a = static_cast<double>(sorted[lo]);
  return a + (h - static_cast<double>(lo)) * (static_cast<double>(sorted[hi]) - a);
}

TEST(QuantileSketchTest, RejectsAccuracyOutsideOpenUnitInterval) {
  for (const double alpha : {0.0, 1.0, -0.01, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THROW(stats::detail::QuantileSketch{alpha}, std::invalid_argument) << alpha;
  }
  EXPECT_THROW(stats::detail::QuantileSketch{1e-12},
               std::invalid_argument);  // int bucket indices would overflow
  EXPECT_NO_THROW(stats::detail::QuantileSketch{1e-6});
  EXPECT_NO_THROW(stats::detail::QuantileSketch{0.99});
  EXPECT_EQ(stats::detail::QuantileSketch{}.relative_accuracy(), 0.01);
}

TEST(QuantileSketchTest, EmptySketch) {
  const stats::detail::QuantileSketch sketch;
  EXPECT_EQ(sketch.count(), 0u);
  EXPECT_TRUE(std::isnan(sketch.quantile(0.5)));
  EXPECT_THROW(sketch.value_at_rank(0), std::out_of_range);
}

TEST(QuantileSketchTest, RejectsQuantileOutsideUnitInterval) {
  stats::detail::QuantileSketch sketch;
  sketch.add(5);
  EXPECT_THROW(sketch.quantile(-0.1), std::invalid_argument);
  EXPECT_THROW(sketch.quantile(1.1), std::invalid_argument);
  EXPECT_THROW(sketch.quantile(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_THROW(sketch.value_at_rank(1), std::out_of_range);
}

TEST(QuantileSketchTest, ZeroAndNegativeValuesComeBackAsZero) {
  stats::detail::QuantileSketch sketch;
  sketch.add(-5);
  sketch.add(0);
  sketch.add(std::numeric_limits<std::int64_t>::min());
  sketch.add(1000);
  EXPECT_EQ(sketch.count(), 4u);
  EXPECT_EQ(sketch.value_at_rank(0), 0.0);
  EXPECT_EQ(sketch.value_at_rank(1), 0.0);
  EXPECT_EQ(sketch.value_at_rank(2), 0.0);
  EXPECT_NEAR(sketch.value_at_rank(3), 1000.0, 1000.0 * 0.01 * kSlack);
  EXPECT_EQ(sketch.quantile(0.0), 0.0);
  EXPECT_NEAR(sketch.quantile(5.0 / 6.0), 500.0, 500.0 * 0.01 * kSlack);  // h = 2.5
}

TEST(QuantileSketchTest, ExtremeValuesStayWithinAccuracy) {
  stats::detail::QuantileSketch sketch;
  const std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  sketch.add(1);
  sketch.add(kMax);
  EXPECT_NEAR(sketch.value_at_rank(0), 1.0, 0.01 * kSlack);
  EXPECT_NEAR(sketch.value_at_rank(1), static_cast<double>(kMax),
              static_cast<double>(kMax) * 0.01 * kSlack);
}

// The contract: every value is within alpha of the true sample at its rank,
// and interpolated quantiles within alpha of the exact type-7 quantile.
void ExpectWithinAccuracy(const Ns& ns, double alpha) {
  const stats::detail::QuantileSketch sketch = SketchOf(ns, alpha);
  Ns sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sketch.count(), sorted.size());
  const std::size_t step = std::max<std::size_t>(1, sorted.size() / 5000);
  for (std::size_t rank = 0; rank < sorted.size(); rank += step) {
    const double truth = static_cast<double>(sorted[rank]);
    ASSERT_LE(std::abs(sketch.value_at_rank(rank) - truth), alpha * kSlack * truth) << rank;
  }
  for (int i = 0; i <= 1000; ++i) {
    const double q = i / 1000.0;
    const double truth = NaiveQuantile(sorted, q);
    ASSERT_LE(std::abs(sketch.quantile(q) - truth), alpha * kSlack * truth) << q;
  }
}

TEST(QuantileSketchTest, RelativeErrorWithinAlphaOnLogUniformData) {
  std::mt19937_64 rng(1);
  for (const double alpha : {0.001, 0.01, 0.05}) {
    SCOPED_TRACE(alpha);
    ExpectWithinAccuracy(LogUniformNs(100'000, 1, 1e11, &rng), alpha);
    ExpectWithinAccuracy(LogUniformNs(1'000'000, 1e3, 1e9, &rng), alpha);
  }
}

TEST(QuantileSketchTest, RelativeErrorWithinAlphaOnNarrowData) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> dist(1e6, 1e3);
  Ns ns(200'000);
  for (auto& v : ns) v = std::llround(dist(rng));
  ExpectWithinAccuracy(ns, 0.01);
  ExpectWithinAccuracy(Ns(1000, 42), 0.01);
}

TEST(QuantileSketchTest, WeightedAddEqualsRepeatedAdd) {
  stats::detail::QuantileSketch weighted;
  stats::detail::QuantileSketch repeated;
  for (const std::int64_t v : {3, 0, 1'000'000, 77}) {
    weighted.add(v, 5);
    for (int i = 0; i < 5; ++i) repeated.add(v);
  }
  weighted.add(123, 0);
  ASSERT_EQ(weighted.count(), repeated.count());
  for (std::uint64_t rank = 0; rank < repeated.count(); ++rank) {
    EXPECT_EQ(weighted.value_at_rank(rank), repeated.value_at_rank(rank)) << rank;
  }
}

void ExpectSameDistribution(const stats::detail::QuantileSketch& a,
                            const stats::detail::QuantileSketch& b) {
  ASSERT_EQ(a.count(), b.count());
  for (std::uint64_t rank = 0; rank < a.count(); ++rank) {
    ASSERT_EQ(a.value_at_rank(rank), b.value_at_rank(rank)) << rank;
  }
}

TEST(QuantileSketchTest, MergeEqualsAddingEverything) {
  std::mt19937_64 rng(3);
  const Ns low = LogUniformNs(20'000, 1, 1e4, &rng);
  const Ns high = LogUniformNs(20'000, 1e6, 1e12, &rng);
  const Ns mid = LogUniformNs(20'000, 1e3, 1e7, &rng);
  Ns all;
  for (const Ns* part : {&low, &high, &mid}) all.insert(all.end(), part->begin(), part->end());
  all.push_back(0);
  all.push_back(-3);

  stats::detail::QuantileSketch merged = SketchOf(high, 0.02);
  merged.merge(SketchOf(low, 0.02));  // grows to the left
  merged.merge(SketchOf(mid, 0.02));  // inside the range
  merged.merge(SketchOf({0, -3}, 0.02));
  merged.merge(stats::detail::QuantileSketch(0.02));  // empty
  ExpectSameDistribution(merged, SketchOf(all, 0.02));

  stats::detail::QuantileSketch into_empty(0.02);
  into_empty.merge(SketchOf(all, 0.02));
  ExpectSameDistribution(into_empty, SketchOf(all, 0.02));
}

TEST(QuantileSketchTest, MergeRejectsDifferentAccuracy) {
  stats::detail::QuantileSketch a(0.01);
  const stats::detail::QuantileSketch b(0.02);
  EXPECT_THROW(a.merge(b), std::invalid_argument);
}

// 1 ns .. 1e5 s is ~1600 buckets at 1%: the dense store stays a few KiB
// whatever order the values arrive in.
TEST(QuantileSketchTest, MemoryStaysSmallOverAWideRange) {
  std::mt19937_64 rng(4);
  Ns ascending;
  for (double v = 1; v <= 1e14; v *= 1.001) ascending.push_back(std::llround(v));
  Ns descending(ascending.rbegin(), ascending.rend());
  Ns shuffled = ascending;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (const Ns* order : {&ascending, &descending, &shuffled}) {
    const stats::detail::QuantileSketch sketch = SketchOf(*order, 0.01);
    EXPECT_LT(sketch.memory_bytes(), 32u * 1024);
    EXPECT_GE(sketch.memory_bytes(),
              sizeof(stats::detail::QuantileSketch) + 1600 * sizeof(std::uint64_t));
  }
  const stats::detail::QuantileSketch repeated =
      SketchOf(LogUniformNs(1'000'000, 1e5, 1e7, &rng), 0.01);
  EXPECT_LT(repeated.memory_bytes(), 4u * 1024);  // ~230 buckets, independent of n
}

TEST(QuantileSketchTest, ClearStartsOver) {
  stats::detail::QuantileSketch sketch = SketchOf({1, 1'000'000'000, 0}, 0.01);
  sketch.clear();
  EXPECT_EQ(sketch.count(), 0u);
  EXPECT_EQ(sketch.memory_bytes(), sizeof(stats::detail::QuantileSketch));
  EXPECT_TRUE(std::isnan(sketch.quantile(0.5)));
  sketch.add(500);
  EXPECT_EQ(sketch.count(), 1u);
  EXPECT_NEAR(sketch.value_at_rank(0), 500.0, 5.0 * kSlack);
}

}  // namespace
}  // namespace trainscope::detail
