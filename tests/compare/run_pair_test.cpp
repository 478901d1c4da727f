// compare --run's library call without launching anything: the order A B B A
// A B B A, and bad requests named (the end-to-end runs are in
// tests/python/test_compare_run.py).
#include "trainscope/compare/run_pair.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "trainscope/stats/compare.hpp"

namespace trainscope::compare {
namespace {

using ::testing::HasSubstr;

TEST(LookLevels, StrictInterimLooksAndALastOneNearTheTestsLevel) {
  const LookLevels five = look_levels(0.95, 7);  // --repeat 5
  EXPECT_DOUBLE_EQ(five.interim_confidence, 0.999);
  EXPECT_NEAR(five.final_confidence, 0.956, 1e-12);
  // The union bound: the looks' alphas sum to the test's.
  for (const auto& [confidence, looks] : {std::pair{0.95, 7}, {0.99, 7}, {0.9, 3}, {0.95, 17}}) {
    const LookLevels l = look_levels(confidence, looks);
    EXPECT_NEAR((looks - 1) * (1 - l.interim_confidence) + (1 - l.final_confidence), 1 - confidence,
                1e-12);
    EXPECT_GT(l.interim_confidence, l.final_confidence);
  }
  // A small alpha: the interim looks at most half of it together.
  EXPECT_NEAR(1 - look_levels(0.99, 7).interim_confidence, 0.01 / 12, 1e-15);
  EXPECT_DOUBLE_EQ(look_levels(0.95, 1).final_confidence, 0.95);
}

// The sequential test of compare --run on simulated runs (a run: 60 steps
// around its own median, the medians varying by `run_sd` from run to run), the
// looks as run_and_compare makes them: the share of A/A pairs called slower or
// faster stays within alpha, and a 5% slowdown is found more often than with
// every look at 1 - alpha / looks (Bonferroni, before).
double sequential_rate(double slowdown, double run_sd, bool bonferroni, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> run_noise(0, run_sd), step_noise(0, 0.01);
  const auto run = [&](double factor) {
    const double median = 0.01 * factor * std::exp(run_noise(rng));
    std::vector<double> steps(60);
    for (double& s : steps) s = median * std::exp(step_noise(rng));
    return steps;
  };
  constexpr int kTrials = 400;
  constexpr std::size_t kRepeat = 5, kLooks = 2 * kRepeat - 3;
  const LookLevels levels = look_levels(0.95, kLooks);
  int called = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<std::vector<double>> a, b;
    for (std::size_t i = 0; i < 2 * kRepeat; ++i) {
      (run_pair_side(i) == 'A' ? a : b)
          .push_back(run_pair_side(i) == 'A' ? run(1) : run(1 + slowdown));
      if (a.size() < 2 || b.size() < 2) continue;
      stats::CompareOptions options;
      options.detect_warmup = false;
      options.confidence = bonferroni             ? 1 - 0.05 / kLooks
                           : i + 1 == 2 * kRepeat ? levels.final_confidence
                                                  : levels.interim_confidence;
      absl::StatusOr<stats::Comparison> c = stats::compare_runs(a, b, options);
      if (!c.ok()) ADD_FAILURE() << c.status();
      if (!c.ok()) return 1;
      const stats::Verdict v = c->verdict;
      if (v == stats::Verdict::kSlower || v == stats::Verdict::kFaster) {
        called += slowdown == 0 || v == stats::Verdict::kSlower;
        break;
      }
      if (v == stats::Verdict::kSame) break;
    }
  }
  return static_cast<double>(called) / kTrials;
}

TEST(LookLevels, TheSequentialTestHoldsItsFalseVerdictRateAndFindsMoreThanBonferroni) {
  const double false_rate = sequential_rate(0, 0.03, false, 1);
  // At most 5% in theory (the union bound); 400 trials draw it within about +-2%.
  EXPECT_LE(false_rate, 0.07) << "A/A called slower or faster";
  const double power = sequential_rate(0.05, 0.02, false, 2);
  const double before = sequential_rate(0.05, 0.02, true, 2);
  EXPECT_GT(power, before + 0.1) << "power " << power << ", Bonferroni " << before;
  std::printf("A/A false verdicts %.3f; 5%% slower called slower %.3f (Bonferroni: %.3f)\n",
              false_rate, power, before);
}

TEST(RunPair, AlternatesABBA) {
  std::string order;
  for (std::size_t i = 0; i < 10; ++i) order += run_pair_side(i);
  EXPECT_EQ(order, "ABBAABBAAB");
}

TEST(RunPair, BadRequestsAreNamedBeforeAnythingRuns) {
  trainscope::testing::TempDir tmp;
  RunPairRequest request;
  request.command_a = "true";
  request.command_b = "true";
  request.dir = tmp.file("runs");
  request.repeat = 1;
  absl::StatusOr<RunPairResult> r = run_and_compare(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--repeat 1"));
  request.repeat = 2;
  request.command_b = "";
  EXPECT_THAT(run_and_compare(request).status().message(), HasSubstr("two commands"));
  request.command_b = "true";
  tmp.subdir("runs/a-1");  // an earlier comparison's runs: never joined
  r = run_and_compare(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr("already holds the runs"));
}

}  // namespace
}  // namespace trainscope::compare
