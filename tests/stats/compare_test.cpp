#include "trainscope/stats/compare.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace trainscope::stats {
namespace {

// A portable generator (the figures in docs/compare-statistics.md do not depend
// on the standard library's distributions): SplitMix64 and Box-Muller.
class Gen {
 public:
  explicit Gen(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2 * std::log(uniform()));
    const double t = 2 * M_PI * uniform();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  std::uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Step times whose logs are a stationary AR(1) with coefficient phi and marginal
// standard deviation sigma (lognormal noise, dependent steps), around `level`.
std::vector<double> Ar1Steps(Gen* gen, std::size_t n, double level, double phi = 0.8,
                             double sigma = 0.05) {
  const double innovation = sigma * std::sqrt(1 - phi * phi);
  double x = sigma * gen->normal();
  std::vector<double> steps(n);
  for (std::size_t t = 0; t < n; ++t) {
    steps[t] = level * std::exp(x);
    x = phi * x + innovation * gen->normal();
  }
  return steps;
}

CompareOptions SimulationOptions() {
  CompareOptions options;
  options.resamples = 500;  // keeps the suite fast; the figures barely move at 2000
  return options;
}

Comparison Compare(const std::vector<double>& a, const std::vector<double>& b,
                   const CompareOptions& options = {}) {
  absl::StatusOr<Comparison> c = compare_steps(a, b, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Comparison{};
}

void ExpectInconclusive(const Comparison& c) {
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_FALSE(c.reason.empty());
  EXPECT_FALSE(fails_if_slower(c, 0));
}

TEST(CompareVerdict, MarginAndSides) {
  EXPECT_EQ(decide(0.99, 1.01, 0.02), Verdict::kSame);
  EXPECT_EQ(decide(1 / 1.02, 1.02, 0.02), Verdict::kSame);
  EXPECT_EQ(decide(0.97, 1.01, 0.02), Verdict::kInconclusive);
  EXPECT_EQ(decide(1.01, 1.03, 0.02), Verdict::kSlower);
  EXPECT_EQ(decide(1.005, 1.015, 0.02), Verdict::kSame);  // significant but within the margin
  EXPECT_EQ(decide(0.90, 0.97, 0.02), Verdict::kFaster);
  EXPECT_EQ(decide(std::nan(""), 1.0, 0.02), Verdict::kInconclusive);
  EXPECT_EQ(decide(1.1, 1.0, 0.02), Verdict::kInconclusive);
  EXPECT_STREQ(verdict_name(Verdict::kSlower), "slower");
  EXPECT_STREQ(unit_name(CompareUnit::kRuns), "runs");
}

TEST(CompareVerdict, FailIfSlowerNeedsTheLowerBound) {
  Comparison c;
  EXPECT_FALSE(fails_if_slower(c, 5));  // no interval
  c.low = 1.04;
  c.high = 1.20;
  EXPECT_FALSE(fails_if_slower(c, 5));
  EXPECT_TRUE(fails_if_slower(c, 3));
  EXPECT_TRUE(fails_if_slower(c, 0));
  c.low = 0.99;
  EXPECT_FALSE(fails_if_slower(c, 0));
}

TEST(CompareVerdict, FailIfLowerIsTheInverseGateForAThroughput) {
  Comparison c;
  EXPECT_FALSE(fails_if_lower(c, 5));  // no interval
  c.low = 0.80;
  c.high = 0.95;  // below 1/1.03, not below 1/1.06
  EXPECT_TRUE(fails_if_lower(c, 3));
  EXPECT_FALSE(fails_if_lower(c, 6));
  EXPECT_TRUE(fails_if_lower(c, 0));
  c.high = 1.01;
  EXPECT_FALSE(fails_if_lower(c, 0));
}

TEST(CompareStudentT, QuantilesMatchTables) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.3027, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.0423, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.95, 10), 1.8125, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.95996, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764, 1e-4);
  EXPECT_NEAR(student_t_cdf(2.0, 3.5), 1 - student_t_cdf(-2.0, 3.5), 1e-12);
  for (double df : {1.3, 2.7, 4.0, 17.2}) {
    for (double p : {0.6, 0.9, 0.975, 0.999})
      EXPECT_NEAR(student_t_cdf(student_t_quantile(p, df), df), p, 1e-9) << df << " " << p;
  }
  EXPECT_TRUE(std::isnan(student_t_quantile(1.0, 3)));
  EXPECT_TRUE(std::isnan(student_t_cdf(1.0, 0)));
}

// A 30-step warm-up (30% slower steps) is found within a batch or two; a
// stationary series loses almost nothing.
TEST(CompareWarmup, Mser5FindsAnInjectedTransient) {
  std::vector<std::size_t> drops;
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    Gen gen(seed);
    std::vector<double> steps = Ar1Steps(&gen, 500, 0.1);
    for (std::size_t t = 0; t < 30; ++t) steps[t] *= 1.3;
    drops.push_back(mser5_warmup(steps));
    EXPECT_GE(drops.back(), 25u) << seed;  // never keeps the transient
    EXPECT_LE(drops.back(), 250u) << seed;
  }
  std::sort(drops.begin(), drops.end());
  // With phi = 0.8 the noise itself has slow excursions that MSER sometimes
  // trims along with the transient: measured median 30, 80th percentile 50,
  // max 145 (of 500 steps).
  EXPECT_EQ(drops[drops.size() / 2], 30u);
  EXPECT_LE(drops[drops.size() * 8 / 10], 50u);
}

TEST(CompareWarmup, Mser5DropsLittleFromAStationarySeries) {
  std::vector<std::size_t> drops;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    Gen gen(1000 + seed);
    drops.push_back(mser5_warmup(Ar1Steps(&gen, 500, 0.1)));
  }
  std::sort(drops.begin(), drops.end());
  // Measured: median 0, 90th percentile 25 steps (5%), never over half.
  EXPECT_LE(drops[50], 5u);
  EXPECT_LE(drops[90], 50u);
  EXPECT_LE(drops.back(), 250u);
}

TEST(CompareWarmup, ALoneStallDoesNotMoveTheTruncation) {
  Gen gen(7);
  std::vector<double> steps = Ar1Steps(&gen, 1000, 0.1);
  std::vector<double> stalled = steps;
  stalled[400] += 2.0;  // a checkpoint: 20 steps' worth of time
  EXPECT_LE(mser5_warmup(stalled), mser5_warmup(steps) + 10);
}

TEST(CompareWarmup, ShortAndConstantSeries) {
  EXPECT_EQ(mser5_warmup({}), 0u);
  EXPECT_EQ(mser5_warmup({1, 2, 3}), 0u);
  EXPECT_EQ(mser5_warmup(std::vector<double>(1000, 0.25)), 0u);
}

TEST(CompareBlockLength, FollowsTheDependence) {
  Gen gen(3);
  const std::size_t independent = optimal_block_length(Ar1Steps(&gen, 2000, 1, 0.0));
  const std::size_t dependent = optimal_block_length(Ar1Steps(&gen, 2000, 1, 0.8));
  EXPECT_LE(independent, 3u);
  EXPECT_GE(dependent, 15u);
  EXPECT_LE(dependent, 3 * 45u);  // the cap 3 sqrt(n)
  EXPECT_EQ(optimal_block_length(std::vector<double>(100, 1.0)), 1u);
  EXPECT_EQ(optimal_block_length({1, 2}), 1u);
}

// Coverage of the 95% interval of the ratio of medians over 200 simulated pairs
// of AR(1) runs (phi 0.8, 500 steps a side, B 5% slower). An i.i.d. bootstrap
// (block length 1) ignores that neighbouring steps repeat each other's noise:
// its interval is about sqrt((1 - phi) / (1 + phi)) = 1/3 as wide as it should
// be and covers far less (measured: see the figures in the expectations).
TEST(CompareSteps, BlockBootstrapCoversTheTrueRatio) {
  constexpr int kPairs = 200;
  constexpr double kRatio = 1.05;
  constexpr int kNaivePairs = 50;
  CompareOptions naive = SimulationOptions();
  naive.block_length = 1;
  int covered = 0, naive_covered = 0;
  for (int i = 0; i < kPairs; ++i) {
    Gen gen(10000 + i);
    const std::vector<double> a = Ar1Steps(&gen, 500, 0.1);
    const std::vector<double> b = Ar1Steps(&gen, 500, 0.1 * kRatio);
    const Comparison c = Compare(a, b, SimulationOptions());
    covered += c.low <= kRatio && kRatio <= c.high;
    if (i < kNaivePairs) {
      const Comparison n = Compare(a, b, naive);
      naive_covered += n.low <= kRatio && kRatio <= n.high;
    }
  }
  RecordProperty("coverage", covered);
  RecordProperty("naive_coverage", naive_covered);
  EXPECT_GE(covered, kPairs * 90 / 100) << covered;
  EXPECT_LE(covered, kPairs * 99 / 100) << covered;
  EXPECT_LE(naive_covered, kNaivePairs * 75 / 100) << naive_covered;
}

// A/A: B drawn like A. A verdict of slower or faster is a false alarm.
TEST(CompareSteps, FalseAlarmsOfIdenticalRuns) {
  constexpr int kPairs = 200;
  int alarms = 0, same = 0;
  for (int i = 0; i < kPairs; ++i) {
    Gen gen(20000 + i);
    const std::vector<double> a = Ar1Steps(&gen, 500, 0.1);
    const std::vector<double> b = Ar1Steps(&gen, 500, 0.1);
    const Comparison c = Compare(a, b, SimulationOptions());
    alarms += c.verdict == Verdict::kSlower || c.verdict == Verdict::kFaster;
    same += c.verdict == Verdict::kSame;
  }
  RecordProperty("false_alarms", alarms);
  RecordProperty("same", same);
  EXPECT_LE(alarms, kPairs * 5 / 100) << alarms << " (same: " << same << ")";
}

TEST(CompareSteps, PowerForATenPercentSlowdown) {
  constexpr int kPairs = 100;
  int slower = 0;
  for (int i = 0; i < kPairs; ++i) {
    Gen gen(30000 + i);
    const std::vector<double> a = Ar1Steps(&gen, 500, 0.1);
    const std::vector<double> b = Ar1Steps(&gen, 500, 0.11);
    const Comparison c = Compare(a, b, SimulationOptions());
    slower += c.verdict == Verdict::kSlower;
    if (i == 0) {
      EXPECT_NEAR(c.ratio, 1.1, 0.03);
      EXPECT_LT(c.p_value, 0.01);
      EXPECT_GE(c.block_a, 5u);
      EXPECT_TRUE(fails_if_slower(c, 3));
      EXPECT_FALSE(fails_if_slower(c, 30));
    }
  }
  RecordProperty("slower", slower);
  EXPECT_GE(slower, kPairs * 95 / 100) << slower;
}

TEST(CompareSteps, DropsWarmupAndIsDeterministic) {
  Gen gen(5);
  std::vector<double> a = Ar1Steps(&gen, 600, 0.1);
  for (std::size_t t = 0; t < 30; ++t) a[t] *= 3;
  const std::vector<double> b = Ar1Steps(&gen, 600, 0.1);
  const Comparison c = Compare(a, b);
  EXPECT_GE(c.warmup_a, 25u);
  EXPECT_LE(c.warmup_a, 45u);
  EXPECT_EQ(c.n_a, 600 - c.warmup_a);
  const Comparison again = Compare(a, b);
  EXPECT_EQ(c.low, again.low);
  EXPECT_EQ(c.high, again.high);
  EXPECT_EQ(c.p_value, again.p_value);
  CompareOptions other;
  other.seed = 99;
  EXPECT_NE(Compare(a, b, other).low, c.low);
}

TEST(CompareSteps, InconclusiveSaysHowManyMoreSteps) {
  Gen gen(11);
  const std::vector<double> a = Ar1Steps(&gen, 100, 0.1);
  const std::vector<double> b = Ar1Steps(&gen, 100, 0.1);
  const Comparison c = Compare(a, b);
  ASSERT_EQ(c.verdict, Verdict::kInconclusive) << c.reason;
  EXPECT_GT(c.more_a, 0u);
  EXPECT_GT(c.more_b, 0u);
  EXPECT_NE(c.reason.find("more steps"), std::string::npos) << c.reason;
}

TEST(CompareSteps, DegenerateInputsAreInconclusive) {
  Gen gen(12);
  const std::vector<double> normal = Ar1Steps(&gen, 500, 0.1);
  for (const auto& [a, b] : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{}, {}},
           {{}, normal},
           {normal, std::vector<double>(normal.begin(), normal.begin() + 20)},
           {std::vector<double>(500, 0.1), normal},
           {std::vector<double>(500, 0.1), std::vector<double>(500, 0.1)},
           {normal, std::vector<double>(500, 0.0)},
       }) {
    const Comparison c = Compare(a, b);
    ExpectInconclusive(c);
  }
  const Comparison short_b = Compare(normal, std::vector<double>(20, 0.1));
  EXPECT_GT(short_b.more_b, 0u);
  EXPECT_EQ(short_b.more_a, 0u);
  // Mostly-zero (too coarse) step times.
  std::vector<double> coarse(500, 0.0);
  coarse[3] = coarse[100] = 1e-3;
  ExpectInconclusive(Compare(coarse, coarse));
}

TEST(CompareSteps, BadInputsAreErrors) {
  const std::vector<double> ok(100, 0.1);
  EXPECT_FALSE(compare_steps({0.1, std::nan("")}, ok).ok());
  EXPECT_FALSE(compare_steps(ok, {0.1, -1}).ok());
  EXPECT_FALSE(compare_steps(ok, {std::numeric_limits<double>::infinity()}).ok());
  CompareOptions bad;
  bad.threshold = 0;
  EXPECT_FALSE(compare_steps(ok, ok, bad).ok());
  bad = {};
  bad.confidence = 1;
  EXPECT_FALSE(compare_steps(ok, ok, bad).ok());
  bad = {};
  bad.resamples = 10;
  EXPECT_FALSE(compare_steps(ok, ok, bad).ok());
  EXPECT_FALSE(compare_runs({ok, {0.1, -2}}, {ok, ok}).ok());
}

// Several runs a side: each run has its own level (run-to-run spread 0.5%, the
// effect that makes steps of different runs no substitute for more runs).
std::vector<std::vector<double>> Runs(Gen* gen, int count, double level) {
  std::vector<std::vector<double>> runs;
  for (int r = 0; r < count; ++r)
    runs.push_back(Ar1Steps(gen, 500, level * std::exp(0.005 * gen->normal())));
  return runs;
}

TEST(CompareRuns, ThreeRunsDetectAThreePercentSlowdown) {
  constexpr int kTrials = 200;
  int slower = 0, covered = 0;
  for (int i = 0; i < kTrials; ++i) {
    Gen gen(40000 + i);
    const auto a = Runs(&gen, 3, 0.1);
    const auto b = Runs(&gen, 3, 0.103);
    absl::StatusOr<Comparison> c = compare_runs(a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->unit, CompareUnit::kRuns);
    EXPECT_EQ(c->n_a, 3u);
    slower += c->verdict == Verdict::kSlower;
    covered += c->low <= 1.03 && 1.03 <= c->high;
  }
  RecordProperty("slower", slower);
  RecordProperty("covered", covered);
  EXPECT_GE(covered, kTrials * 92 / 100) << covered;
  EXPECT_GE(slower, kTrials * 50 / 100) << slower;
}

TEST(CompareRuns, FalseAlarmsOfIdenticalRuns) {
  constexpr int kTrials = 200;
  int alarms = 0;
  for (int i = 0; i < kTrials; ++i) {
    Gen gen(50000 + i);
    const auto a = Runs(&gen, 3, 0.1);
    const auto b = Runs(&gen, 3, 0.1);
    absl::StatusOr<Comparison> c = compare_runs(a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    alarms += c->verdict == Verdict::kSlower || c->verdict == Verdict::kFaster;
  }
  RecordProperty("false_alarms", alarms);
  EXPECT_LE(alarms, kTrials * 7 / 100) << alarms;
}

TEST(CompareRuns, DegenerateInputsAreInconclusive) {
  Gen gen(13);
  const auto three = Runs(&gen, 3, 0.1);
  absl::StatusOr<Comparison> c = compare_runs(three, {three[0]});
  ASSERT_TRUE(c.ok());
  ExpectInconclusive(*c);
  EXPECT_EQ(c->more_b, 1u);
  c = compare_runs({}, {});
  ASSERT_TRUE(c.ok());
  ExpectInconclusive(*c);
  c = compare_runs(three, {three[1], {}});
  ASSERT_TRUE(c.ok());
  ExpectInconclusive(*c);
  EXPECT_NE(c->reason.find("B's run 1"), std::string::npos) << c->reason;
  c = compare_runs({three[0], three[0]}, {three[0], three[0]});
  ASSERT_TRUE(c.ok());
  ExpectInconclusive(*c);
}

TEST(CompareRuns, InconclusiveSaysHowManyMoreRuns) {
  Gen gen(14);
  const auto a = Runs(&gen, 2, 0.1);
  const auto b = Runs(&gen, 2, 0.1);
  absl::StatusOr<Comparison> c = compare_runs(a, b);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->verdict, Verdict::kInconclusive) << c->reason;
  EXPECT_GE(c->more_a, 1u);
  EXPECT_NE(c->reason.find("more runs"), std::string::npos) << c->reason;
}

}  // namespace
}  // namespace trainscope::stats

namespace trainscope::stats {
namespace {

TEST(RunNoiseTest, WidensTheIntervalByItsTermInQuadratureAndTheP) {
  Gen gen(77);
  const std::vector<double> a = Ar1Steps(&gen, 2000, 0.010, 0.5, 0.02);
  const std::vector<double> b = Ar1Steps(&gen, 2000, 0.0101, 0.5, 0.02);
  CompareOptions options = SimulationOptions();
  options.threshold = 0.005;
  const Comparison bare = Compare(a, b, options);
  options.run_noise = 0.005;
  const Comparison noisy = Compare(a, b, options);
  EXPECT_DOUBLE_EQ(noisy.ratio, bare.ratio);
  const double z = student_t_quantile(0.975, 1e12);
  const double term = z * std::log1p(0.005) * std::sqrt(2.0);
  const double center = std::log(bare.ratio);
  EXPECT_NEAR(std::log(noisy.low), center - std::hypot(center - std::log(bare.low), term), 1e-12);
  EXPECT_NEAR(std::log(noisy.high), center + std::hypot(std::log(bare.high) - center, term), 1e-12);
  EXPECT_GT(noisy.p_value, bare.p_value);
  // About 1% apart (the sample: B/A 1.0096) with a 0.5% margin: the bare interval calls it slower;
  // with 0.5% per run it cannot, and no number of steps would.
  EXPECT_EQ(bare.verdict, Verdict::kSlower);
  EXPECT_EQ(noisy.verdict, Verdict::kInconclusive);
  EXPECT_THAT(noisy.reason, ::testing::HasSubstr("more steps cannot narrow it"));
  EXPECT_THAT(noisy.reason, ::testing::HasSubstr("runs a side would decide it"));
  EXPECT_FALSE(fails_if_slower(noisy, 0));
  // Bad values are errors.
  options.run_noise = -0.1;
  EXPECT_FALSE(compare_steps(a, b, options).ok());
  options.run_noise = 1;
  EXPECT_FALSE(compare_steps(a, b, options).ok());
}

TEST(RunNoiseTest, ALargeSlowdownIsStillSlowerAndEqualRunsStillTheSame) {
  Gen gen(78);
  CompareOptions options = SimulationOptions();
  options.run_noise = 0.005;
  const std::vector<double> a = Ar1Steps(&gen, 2000, 0.010, 0.5, 0.02);
  EXPECT_EQ(Compare(a, Ar1Steps(&gen, 2000, 0.011, 0.5, 0.02), options).verdict, Verdict::kSlower);
  EXPECT_EQ(Compare(a, Ar1Steps(&gen, 2000, 0.010, 0.5, 0.02), options).verdict, Verdict::kSame);
}

}  // namespace
}  // namespace trainscope::stats
