#include "trainscope/stats/time_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "trainscope/stats/detail/moments.hpp"
#include "trainscope/stats/detail/quantile_sketch.hpp"
#include "trainscope/stats/detail/sample_series.hpp"

namespace trainscope {
namespace {

using stats::detail::Moments;
using stats::detail::QuantileSketch;
using Ns = std::vector<std::int64_t>;

constexpr double kQuantiles[] = {0.05, 0.25, 0.5, 0.75, 0.95, 0.99};

double TimeStats::*QuantileField(double q) {
  if (q == 0.05) return &TimeStats::p5;
  if (q == 0.25) return &TimeStats::p25;
  if (q == 0.5) return &TimeStats::median;
  if (q == 0.75) return &TimeStats::p75;
  if (q == 0.95) return &TimeStats::p95;
  return &TimeStats::p99;
}

Moments MomentsOf(const Ns& ns) {
  Moments m;
  for (const std::int64_t v : ns) m.add(v);
  return m;
}

TimeStats StatsOf(Ns ns) { return stats::detail::stats_from_samples(MomentsOf(ns), &ns); }

// NumPy's default percentile ("type 7") on fully sorted data.
double NaiveType7(const std::vector<double>& sorted, double q) {
  const double h = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = static_cast<std::size_t>(std::ceil(h));
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

std::vector<double> SortedSeconds(const Ns& ns) {
  std::vector<double> s;
  for (const std::int64_t v : ns) s.push_back(static_cast<double>(v) / 1e9);
  std::sort(s.begin(), s.end());
  return s;
}

// Exact binomial: the largest k with P(Bin(n, 1/2) <= k-1) <= 0.025, in
// integers (40 * sum C(n, i) <= 2^n), or 0 if none. Valid for n <= 120.
std::uint64_t ExactMedianCiRank(int n) {
  using U128 = unsigned __int128;
  const U128 two_to_n = U128{1} << n;
  U128 binom = 1;  // C(n, j)
  U128 cdf = 1;    // sum_{i <= j} C(n, i)
  std::uint64_t k = 0;
  for (int j = 0; 40 * cdf <= two_to_n; ++j) {
    k = j + 1;
    binom = binom * (n - j) / (j + 1);
    cdf += binom;
  }
  return k;
}

// The same k in log space for 120 < n <= 1000, and the normal approximation
// above: an independent route to what the library computes.
std::uint64_t ReferenceMedianCiRank(std::uint64_t n) {
  if (n <= 120) return ExactMedianCiRank(static_cast<int>(n));
  if (n > 1000)
    return static_cast<std::uint64_t>(std::floor(n / 2.0 - 1.96 * std::sqrt(double(n)) / 2.0));
  long double cdf = 0.0L;
  std::uint64_t k = 0;
  for (std::uint64_t j = 0;; ++j) {
    cdf += std::exp(std::lgamma(n + 1.0L) - std::lgamma(j + 1.0L) - std::lgamma(n - j + 1.0L) -
                    n * std::log(2.0L));
    if (cdf > 0.025L) return k;
    k = j + 1;
  }
}

void ExpectRelNear(double expected, double actual, double rel, const char* what) {
  EXPECT_NEAR(actual, expected, rel * std::max(std::abs(expected), 1e-300)) << what;
}

void ExpectEmpty(const TimeStats& s) {
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.total, 0.0);
  EXPECT_EQ(s.warmup_excluded, 0u);
  for (const double v : {s.min, s.mean, s.max, s.stdev, s.cv, s.median_ci_low, s.median_ci_high}) {
    EXPECT_TRUE(std::isnan(v));
  }
  for (const double q : kQuantiles) EXPECT_TRUE(std::isnan(s.*QuantileField(q))) << q;
}

TEST(TimeStatsTest, EmptyIsCountZeroAndNaNEverywhereElse) {
  Ns none;
  ExpectEmpty(stats::detail::stats_from_samples(Moments{}, &none));
  ExpectEmpty(compute_time_stats({}));
  const TimeStats sketched = stats::detail::stats_from_sketch(Moments{}, QuantileSketch{});
  ExpectEmpty(sketched);
  EXPECT_TRUE(sketched.approximate);
  EXPECT_TRUE(std::isnan(Moments{}.mean_ns()));
  EXPECT_TRUE(std::isnan(Moments{}.stdev_ns()));
}

TEST(TimeStatsTest, OneSampleHasZeroStdevAndNoCi) {
  const TimeStats s = StatsOf({1'500'000});
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.total, 0.0015);
  EXPECT_DOUBLE_EQ(s.min, 0.0015);
  EXPECT_DOUBLE_EQ(s.max, 0.0015);
  EXPECT_DOUBLE_EQ(s.mean, 0.0015);
  EXPECT_EQ(s.stdev, 0.0);
  EXPECT_EQ(s.cv, 0.0);
  for (const double q : kQuantiles) EXPECT_DOUBLE_EQ(s.*QuantileField(q), 0.0015) << q;
  EXPECT_TRUE(std::isnan(s.median_ci_low));
  EXPECT_TRUE(std::isnan(s.median_ci_high));
  EXPECT_FALSE(s.approximate);

  const TimeStats d = compute_time_stats({0.25});
  EXPECT_EQ(d.stdev, 0.0);
  EXPECT_EQ(d.median, 0.25);
  EXPECT_TRUE(std::isnan(d.median_ci_low));
}

// The example line in time_stats.hpp: two samples, median = mean of the two.
TEST(TimeStatsTest, Deep500TwoSampleExample) {
  const TimeStats s = compute_time_stats({0.00730, 0.01058});
  EXPECT_DOUBLE_EQ(s.median, (0.00730 + 0.01058) / 2);
  EXPECT_DOUBLE_EQ(s.mean, s.median);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(2 * 0.00164 * 0.00164));
  EXPECT_EQ(s.to_string(),
            "min: 0.00730 mean: 0.00894 median: 0.00894 max: 0.01058 stdev: 0.00232");

  const TimeStats ns = StatsOf({10'580'000, 7'300'000});
  EXPECT_DOUBLE_EQ(ns.median, 0.00894);
  EXPECT_EQ(ns.to_string(), s.to_string());
}

TEST(TimeStatsTest, OddAndEvenMedians) {
  EXPECT_DOUBLE_EQ(StatsOf({3, 1, 2}).median, 2e-9);
  EXPECT_DOUBLE_EQ(StatsOf({4, 1, 3, 2}).median, 2.5e-9);
  EXPECT_DOUBLE_EQ(StatsOf({7, 7, 1, 100, 7}).median, 7e-9);
  EXPECT_DOUBLE_EQ(compute_time_stats({0.4, 0.1, 0.3, 0.2}).median, 0.25);
  EXPECT_DOUBLE_EQ(compute_time_stats({0.5, -0.1, 0.2}).median, 0.2);
}

TEST(TimeStatsTest, ToStringIsDeep500Text) {
  TimeStats s;
  s.min = 0.001;
  s.mean = 0.0123456;
  s.median = 0.012344999;
  s.max = 1.5;
  s.stdev = 0.000125;  // binary value is just above, so it rounds up (as in Python)
  EXPECT_EQ(s.to_string(),
            "min: 0.00100 mean: 0.01235 median: 0.01234 max: 1.50000 stdev: 0.00013");
  EXPECT_EQ(TimeStats{}.to_string(), "min: nan mean: nan median: nan max: nan stdev: nan");
}

// Compares every order statistic with a full sort, on data that exercises
// the selection's levels: spread, duplicates, outliers, negatives.
void ExpectMatchesNaiveReference(const Ns& ns) {
  const std::vector<double> sorted = SortedSeconds(ns);
  const TimeStats s = StatsOf(ns);
  ASSERT_EQ(s.count, ns.size());
  EXPECT_EQ(s.min, sorted.front());
  EXPECT_EQ(s.max, sorted.back());
  for (const double q : kQuantiles) {
    ExpectRelNear(NaiveType7(sorted, q), s.*QuantileField(q), 1e-14, "quantile");
  }
  const std::size_t n = ns.size();
  if (n >= 6) {
    const std::size_t k = ReferenceMedianCiRank(n);
    EXPECT_EQ(s.median_ci_low, sorted[k - 1]);
    EXPECT_EQ(s.median_ci_high, sorted[n - k]);
  }
}

Ns LogNormalNs(std::size_t n, double sigma, std::mt19937_64* rng) {
  std::lognormal_distribution<double> dist(std::log(1e6), sigma);  // median 1 ms
  Ns ns(n);
  for (auto& v : ns) v = std::llround(dist(*rng));
  return ns;
}

Ns UniformNs(std::size_t n, std::int64_t lo, std::int64_t hi, std::mt19937_64* rng) {
  std::uniform_int_distribution<std::int64_t> dist(lo, hi);
  Ns ns(n);
  for (auto& v : ns) v = dist(*rng);
  return ns;
}

// A few huge stalls among ordinary steps: keys span ~2^50 ns, most of them
// within a factor of two.
Ns WithOutliers(Ns ns, std::mt19937_64* rng) {
  for (std::size_t i = 0; i < ns.size(); i += 997)
    ns[i] = std::int64_t{1'000'000'000'000'000} + (*rng)() % 1000;
  std::shuffle(ns.begin(), ns.end(), *rng);
  return ns;
}

std::vector<std::size_t> TestSizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t n = 1; n <= 40; ++n) sizes.push_back(n);
  for (std::size_t n : {100, 511, 512, 513, 1000, 1001, 4096, 65537}) sizes.push_back(n);
  return sizes;
}

TEST(TimeStatsTest, OrderStatisticsMatchFullSortOnRandomData) {
  std::mt19937_64 rng(42);
  for (const std::size_t n : TestSizes()) {
    SCOPED_TRACE(n);
    ExpectMatchesNaiveReference(LogNormalNs(n, 0.5, &rng));
    ExpectMatchesNaiveReference(LogNormalNs(n, 3.0, &rng));
    ExpectMatchesNaiveReference(UniformNs(n, 0, 20, &rng));  // heavy ties
    ExpectMatchesNaiveReference(UniformNs(n, -1'000'000'000, 1'000'000'000, &rng));
    ExpectMatchesNaiveReference(WithOutliers(LogNormalNs(n, 0.3, &rng), &rng));
    ExpectMatchesNaiveReference(Ns(n, 123'456'789));
  }
}

TEST(TimeStatsTest, OrderStatisticsMatchFullSortOnAMillionSamples) {
  std::mt19937_64 rng(7);
  ExpectMatchesNaiveReference(LogNormalNs(1'000'000, 0.25, &rng));
  ExpectMatchesNaiveReference(WithOutliers(LogNormalNs(1'000'000, 0.5, &rng), &rng));
}

// Keys span the full 64 bits (past what a double holds exactly) and the
// interpolation must not overflow int64 differences.
TEST(TimeStatsTest, OrderStatisticsSurviveTheWholeInt64Range) {
  std::mt19937_64 rng(3);
  Ns ns = LogNormalNs(5000, 1.0, &rng);
  ns[17] = -4'000'000'000'000'000'000;
  ns[42] = 4'000'000'000'000'000'000;
  ExpectMatchesNaiveReference(ns);
  ExpectMatchesNaiveReference(
      {-4'000'000'000'000'000'000, 4'000'000'000'000'000'000, 0, 1, -1, 7, 9});
}

// With samples 1..n ns (shuffled) the CI bounds read back as their ranks.
std::pair<std::uint64_t, std::uint64_t> CiRanks(std::size_t n, std::mt19937_64* rng) {
  Ns ns(n);
  for (std::size_t i = 0; i < n; ++i) ns[i] = static_cast<std::int64_t>(i + 1);
  std::shuffle(ns.begin(), ns.end(), *rng);
  const TimeStats s = StatsOf(ns);
  return {static_cast<std::uint64_t>(std::llround(s.median_ci_low * 1e9)),
          static_cast<std::uint64_t>(std::llround(s.median_ci_high * 1e9))};
}

TEST(TimeStatsTest, MedianCiIsNaNBelowSixSamples) {
  for (std::size_t n = 1; n < 6; ++n) {
    std::mt19937_64 rng(n);
    const TimeStats s = StatsOf(LogNormalNs(n, 0.5, &rng));
    EXPECT_TRUE(std::isnan(s.median_ci_low)) << n;
    EXPECT_TRUE(std::isnan(s.median_ci_high)) << n;
  }
}

TEST(TimeStatsTest, MedianCiRanksMatchExactBinomial) {
  std::mt19937_64 rng(11);
  EXPECT_EQ(ExactMedianCiRank(6), 1u);  // P(X <= 0) = 1/64 <= 2.5% < P(X <= 1) = 7/64
  EXPECT_EQ(ExactMedianCiRank(5), 0u);
  for (std::size_t n = 6; n <= 120; ++n) {
    const std::uint64_t k = ExactMedianCiRank(static_cast<int>(n));
    ASSERT_GE(k, 1u);
    EXPECT_EQ(CiRanks(n, &rng), std::make_pair(k, n - k + 1)) << n;
  }
}

TEST(TimeStatsTest, MedianCiRanksMatchLogSpaceBinomialUpTo1000) {
  std::mt19937_64 rng(12);
  for (std::size_t n = 121; n <= 1000; ++n) {
    const std::uint64_t k = ReferenceMedianCiRank(n);
    EXPECT_EQ(CiRanks(n, &rng), std::make_pair(k, n - k + 1)) << n;
  }
}

TEST(TimeStatsTest, MedianCiUsesNormalApproximationAbove1000) {
  std::mt19937_64 rng(13);
  for (const std::size_t n : {1001, 1002, 5000, 123457}) {
    const auto k =
        static_cast<std::uint64_t>(std::floor(n / 2.0 - 1.96 * std::sqrt(double(n)) / 2.0));
    EXPECT_EQ(CiRanks(n, &rng), std::make_pair(k, n - k + 1)) << n;
  }
  // The switch from exact to approximate moves the rank by at most one.
  const auto k_1001 = static_cast<std::int64_t>(CiRanks(1001, &rng).first);
  const auto k_1000 = static_cast<std::int64_t>(CiRanks(1000, &rng).first);
  EXPECT_LE(std::abs(k_1001 - k_1000), 1);
}

// Monte Carlo: the interval should contain the true median ~95% of the time
// (at least 95% on the exact branch, which is conservative by construction).
double CiCoverage(std::size_t n, int trials, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, 1'999'999);  // true median 999999.5
  int covered = 0;
  for (int t = 0; t < trials; ++t) {
    Ns ns(n);
    for (auto& v : ns) v = dist(rng);
    const TimeStats s = StatsOf(ns);
    covered += s.median_ci_low <= 999999.5e-9 && 999999.5e-9 <= s.median_ci_high;
  }
  return static_cast<double>(covered) / trials;
}

TEST(TimeStatsTest, MedianCiCoverageIsAbout95Percent) {
  const double exact_branch = CiCoverage(25, 4000, 1);  // true coverage 95.67%
  EXPECT_GT(exact_branch, 0.94);
  EXPECT_LT(exact_branch, 0.975);
  const double normal_branch = CiCoverage(2001, 1000, 2);
  EXPECT_GT(normal_branch, 0.92);
  EXPECT_LT(normal_branch, 0.98);
}

// A double sum of squares would be 1e30 with 16 significant digits here,
// i.e. a variance of +-1e14 instead of ~1.
TEST(TimeStatsTest, MeanAndStdevAreExactForHugeCountsAndValues) {
  constexpr std::int64_t kBase = 1'000'000'000'000;  // 1000 s in ns
  constexpr std::uint64_t kN = 1'000'000;
  Moments m;
  for (std::uint64_t i = 0; i < kN; ++i) m.add(i % 2 == 0 ? kBase + 1 : kBase - 1);
  EXPECT_EQ(m.mean_ns(), 1e12);
  EXPECT_DOUBLE_EQ(m.stdev_ns(), std::sqrt(static_cast<double>(kN) / (kN - 1)));

  m.add(kBase + 2);  // mean 1e12 + 2/(n+1): not representable near 1e12, rounds to it
  const long double mean = 1e12L + 2.0L / (kN + 1);
  EXPECT_EQ(m.mean_ns(), static_cast<double>(mean));
  const long double m2 = kN * 1.0L + 4.0L - 4.0L / (kN + 1);  // sum of (x - mean)^2
  EXPECT_DOUBLE_EQ(m.stdev_ns(), static_cast<double>(std::sqrt(m2 / kN)));

  Ns ns(kN, kBase);
  ns[0] = kBase + 1;
  ns[1] = kBase - 1;
  const TimeStats s = StatsOf(ns);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(2.0 / (kN - 1)) / 1e9);
  EXPECT_EQ(s.mean, 1000.0);
  EXPECT_EQ(s.total, 1e9);
}

// n * sum_sq overflows 128 bits here (10 * 1.6e38), yet the result is exact.
TEST(TimeStatsTest, StdevIsExactWhereTheNaiveNumeratorOverflows128Bits) {
  constexpr std::int64_t kBase = 4'000'000'000'000'000'000;
  Moments m;
  for (std::int64_t i = 0; i < 10; ++i) m.add(kBase + i);
  EXPECT_DOUBLE_EQ(m.stdev_ns(), std::sqrt(110.0 / 12.0));  // stdev of 0..9
  EXPECT_EQ(m.mean_ns(), 4e18);

  Moments negative;
  for (std::int64_t i = 0; i < 10; ++i) negative.add(-kBase - i);
  EXPECT_DOUBLE_EQ(negative.stdev_ns(), std::sqrt(110.0 / 12.0));
  EXPECT_EQ(negative.mean_ns(), -4e18);
}

TEST(TimeStatsTest, MomentsMatchTwoPassReferenceOnRandomData) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 2 + rng() % 300;
    const Ns ns = trial % 2 == 0 ? LogNormalNs(n, 2.0, &rng) : UniformNs(n, -50, 50, &rng);
    long double sum = 0;
    for (const auto v : ns) sum += v;
    const long double mean = sum / n;
    long double m2 = 0;
    for (const auto v : ns) m2 += (v - mean) * (v - mean);
    const Moments m = MomentsOf(ns);
    ExpectRelNear(static_cast<double>(mean), m.mean_ns(), 1e-15, "mean");
    ExpectRelNear(static_cast<double>(std::sqrt(m2 / (n - 1))), m.stdev_ns(), 1e-14, "stdev");
  }
}

TEST(TimeStatsTest, SampleStatsTakeMomentsInSeconds) {
  const TimeStats s = StatsOf({2'000'000, 4'000'000, 9'000'000});
  EXPECT_DOUBLE_EQ(s.total, 0.015);
  EXPECT_DOUBLE_EQ(s.min, 0.002);
  EXPECT_DOUBLE_EQ(s.max, 0.009);
  EXPECT_DOUBLE_EQ(s.mean, 0.005);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt((9.0 + 1.0 + 16.0) / 2.0) * 1e-3);
  EXPECT_DOUBLE_EQ(s.cv, s.stdev / s.mean);
  EXPECT_FALSE(s.approximate);
  EXPECT_EQ(s.warmup_excluded, 0u);
}

// A straightforward reference: full sort, plain long double sums.
void ExpectSecondsMatchReference(const std::vector<double>& seconds) {
  const std::size_t n = seconds.size();
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  long double sum = 0;
  for (const double v : seconds) sum += v;
  const long double mean = sum / n;
  long double m2 = 0;
  for (const double v : seconds) m2 += (v - mean) * (v - mean);

  const TimeStats s = compute_time_stats(seconds);
  EXPECT_EQ(s.count, n);
  EXPECT_EQ(s.min, sorted.front());
  EXPECT_EQ(s.max, sorted.back());
  ExpectRelNear(static_cast<double>(sum), s.total, 1e-12, "total");
  ExpectRelNear(static_cast<double>(mean), s.mean, 1e-12, "mean");
  ExpectRelNear(static_cast<double>(std::sqrt(m2 / (n - 1))), s.stdev, 1e-12, "stdev");
  for (const double q : kQuantiles)
    ExpectRelNear(NaiveType7(sorted, q), s.*QuantileField(q), 1e-12, "quantile");
  if (n >= 6) {
    const std::size_t k = ReferenceMedianCiRank(n);
    EXPECT_EQ(s.median_ci_low, sorted[k - 1]);
    EXPECT_EQ(s.median_ci_high, sorted[n - k]);
  }
}

TEST(TimeStatsTest, ComputeTimeStatsMatchesStraightforwardReference) {
  std::mt19937_64 rng(9);
  std::lognormal_distribution<double> dist(std::log(0.01), 1.0);
  for (const std::size_t n : {2, 3, 7, 64, 999, 1000, 1001, 30000, 200000}) {
    SCOPED_TRACE(n);
    std::vector<double> seconds(n);
    for (auto& v : seconds) v = dist(rng);
    ExpectSecondsMatchReference(seconds);
    // A coarse clock (many ties) around zero, negatives included.
    for (auto& v : seconds) v = std::round(v * 1e3) / 1e3 - 0.01;
    ExpectSecondsMatchReference(seconds);
  }
}

TEST(TimeStatsTest, ComputeTimeStatsHandlesNegativesAndZeros) {
  const TimeStats s = compute_time_stats({0.0, -0.0, -2.0, 3.0, 1.0, -1.0, 0.5});
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_EQ(s.median, 0.0);
  EXPECT_DOUBLE_EQ(s.p25, -0.5);
  EXPECT_DOUBLE_EQ(s.p75, 0.75);
  EXPECT_EQ(s.median_ci_low, -2.0);
  EXPECT_EQ(s.median_ci_high, 3.0);
}

TEST(TimeStatsTest, SketchStatsAreApproximateQuantilesAndExactMoments) {
  std::mt19937_64 rng(21);
  Ns ns = LogNormalNs(200'000, 1.0, &rng);
  const Moments m = MomentsOf(ns);
  QuantileSketch sketch(0.01);
  for (const auto v : ns) sketch.add(v);

  const TimeStats approx = stats::detail::stats_from_sketch(m, sketch);
  const TimeStats exact = StatsOf(ns);
  EXPECT_TRUE(approx.approximate);
  EXPECT_EQ(approx.count, exact.count);
  EXPECT_EQ(approx.total, exact.total);
  EXPECT_EQ(approx.min, exact.min);
  EXPECT_EQ(approx.max, exact.max);
  EXPECT_EQ(approx.mean, exact.mean);
  EXPECT_EQ(approx.stdev, exact.stdev);
  EXPECT_EQ(approx.cv, exact.cv);
  for (const double q : kQuantiles) {
    ExpectRelNear(exact.*QuantileField(q), approx.*QuantileField(q), 0.01 * (1 + 1e-9), "quantile");
  }
  ExpectRelNear(exact.median_ci_low, approx.median_ci_low, 0.01 * (1 + 1e-9), "ci low");
  ExpectRelNear(exact.median_ci_high, approx.median_ci_high, 0.01 * (1 + 1e-9), "ci high");
}

// Bucket representatives can overshoot the extremes by up to alpha; the
// statistics clamp them to the exact min and max.
TEST(TimeStatsTest, SketchQuantilesStayWithinExactExtremes) {
  const Ns ns(100, 1'000'003);
  QuantileSketch sketch(0.05);
  for (const auto v : ns) sketch.add(v);
  const TimeStats s = stats::detail::stats_from_sketch(MomentsOf(ns), sketch);
  for (const double q : kQuantiles) EXPECT_DOUBLE_EQ(s.*QuantileField(q), 1'000'003e-9) << q;
  EXPECT_DOUBLE_EQ(s.median_ci_low, 1'000'003e-9);
  EXPECT_DOUBLE_EQ(s.median_ci_high, 1'000'003e-9);
}

}  // namespace
}  // namespace trainscope
