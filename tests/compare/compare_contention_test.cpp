// CPU contention in a comparison (docs/compare-statistics.md), on hand-made
// sides: a verdict the sides' different waiting for a CPU explains is
// `inconclusive (contention)` naming both shares; one that survives removing
// the waiting time stands, with a note; a difference within the interval
// changes nothing; runs without the readings keep today's verdict with a
// warning. The verdict survives the document; --fail-if-slower does not fail
// on it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "trainscope/compare/compare.hpp"

namespace trainscope::compare {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Side side(const std::string& label, double step_s, double contention, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0.0, 0.02);
  Side s;
  s.label = label;
  SideRun run;
  run.dir = "runs/" + label;
  run.id = label;
  run.status = RunStatus::kFinished;
  run.contention_share = contention;
  s.runs.push_back(run);
  Series batch{"BATCH", SeriesKind::kRegion, "CPU", {{}}};
  for (int i = 0; i < 400; ++i) batch.runs[0].push_back(step_s * noise(rng));
  s.series.push_back(batch);
  return s;
}

Comparison compared(double step_b, double contention_a, double contention_b) {
  // The sides are drawn with no run-to-run spread: a term of 0.5% lets `same` be reached.
  CompareOptions options;
  options.stats.run_noise = 0.005;
  absl::StatusOr<Comparison> c =
      compare_sides(side("a", 0.010, contention_a, 1), side("b", step_b, contention_b, 2), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Comparison{};
}

std::string all_warnings(const Pair& p) {
  std::string out;
  for (const std::string& w : p.warnings) out += w + "\n";
  return out;
}

TEST(CompareContention, ASlowdownTheWaitingExplainsIsInconclusive) {
  // B is 20% slower and waited for a CPU 1/6 of the time: without the wait, the same.
  const Comparison c = compared(0.012, 0.0, 1.0 / 6.0);
  ASSERT_EQ(c.pairs.size(), 1u);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kInconclusiveContention);
  EXPECT_EQ(verdict_name(p.overall), "inconclusive (contention)");
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("A's threads waited for a CPU 0.0%"));
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("B's 16.7%"));
  // Between none of the wait in the typical step (1.2) and all of it (1.0).
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("with the waiting time removed B/A lies between"));
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("which is inconclusive"));
  EXPECT_DOUBLE_EQ(p.contention_b, 1.0 / 6.0);
  EXPECT_THAT(format_comparison(c), HasSubstr("inconclusive (contention)"));
  // --fail-if-slower: a slowdown the contention explains fails no gate.
  EXPECT_TRUE(failing_rows(c, {}, 5).empty());
  // The document keeps the verdict and the shares.
  absl::StatusOr<Comparison> back = parse_comparison(compare_json(c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pairs[0].overall.stats.verdict, stats::Verdict::kInconclusiveContention);
  EXPECT_DOUBLE_EQ(back->pairs[0].contention_b, 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(back->b.runs[0].contention_share, 1.0 / 6.0);
}

TEST(CompareContention, AVerdictThatRemainsWithoutTheWaitingStands) {
  // Twice as slow, 5% waiting: slower either way.
  const Comparison c = compared(0.020, 0.0, 0.05);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kSlower);
  EXPECT_THAT(all_warnings(p), HasSubstr("the verdict holds either way"));
  EXPECT_FALSE(failing_rows(c, {}, 5).empty());
}

TEST(CompareContention, ADifferenceWithinTheIntervalChangesNothing) {
  const Comparison c = compared(0.010, 0.10, 0.1005);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kSame);
  EXPECT_THAT(all_warnings(p), Not(HasSubstr("waited for a CPU")));
  EXPECT_THAT(all_warnings(p), Not(HasSubstr("contention")));
}

TEST(CompareContention, WaitsInTheSlowestStepsCannotMakeTheTypicalStepFaster) {
  // A's median step 10 ms, B's the same but B waited for a CPU 30% of the run
  // (the waits in its slowest steps, as a 1-ms step beside a burner): the
  // range reaches from B/A = 1 (none of the wait in the typical step) to 0.7,
  // so no verdict is drawn from the scaled ratio alone.
  const Comparison c = compared(0.010, 0.0, 0.30);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kInconclusiveContention);
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("none of the wait in the typical step"));
}

// Several runs a side, each with its own share (the run as the unit): runs 0.5%
// apart from run to run around `step_s`.
Side runs(const std::string& label, double step_s, const std::vector<double>& shares,
          std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0.0, 0.02), run_noise(0.0, 0.005);
  Side s;
  s.label = label;
  Series batch{"BATCH", SeriesKind::kRegion, "CPU", {}};
  for (std::size_t r = 0; r < shares.size(); ++r) {
    SideRun run;
    run.dir = "runs/" + label + std::to_string(r);
    run.id = label + std::to_string(r);
    run.status = RunStatus::kFinished;
    run.contention_share = shares[r];
    s.runs.push_back(run);
    const double median = step_s * run_noise(rng);
    batch.runs.emplace_back();
    for (int i = 0; i < 200; ++i) batch.runs.back().push_back(median * noise(rng));
  }
  s.series.push_back(batch);
  return s;
}

TEST(CompareContention, SharesThatVaryFromRunToRunAsMuchAsTheyDifferChangeNothing) {
  // Both sides on one loaded machine, B 5% slower: each run's share (read once a
  // second) is as noisy as the sides differ; the verdict is the code's.
  absl::StatusOr<Comparison> c =
      compare_sides(runs("a", 0.010, {0.03, 0.15, 0.10, 0.16, 0.06}, 1),
                    runs("b", 0.0105, {0.14, 0.12, 0.06, 0.17, 0.18}, 2));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pairs[0].overall.stats.verdict, stats::Verdict::kSlower)
      << c->pairs[0].overall.stats.reason;
  // A burner on B's runs only: the shares differ beyond their spread, and a 40%
  // slowdown of which B waited 30% is the waiting's, not the code's.
  c = compare_sides(runs("a", 0.010, {0.0, 0.01, 0.0, 0.005, 0.0}, 3),
                    runs("b", 0.014, {0.30, 0.31, 0.29, 0.30, 0.32}, 4));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pairs[0].overall.stats.verdict, stats::Verdict::kInconclusiveContention)
      << c->pairs[0].overall.stats.reason;
}

// Runs that recorded each step's own wait (cpu_wait_ns, docs/steps.md): the step
// row is decided by the steps less their waits, not bounded by the shares.
Side with_step_waits(const std::string& label, double step_s, double wait_s, double contention,
                     std::uint64_t seed) {
  Side s = side(label, step_s, contention, seed);
  std::mt19937_64 rng(seed + 100);
  std::lognormal_distribution<double> noise(0.0, 0.02);
  Series less{kStepLessWait, SeriesKind::kMetric, "", {{}}};
  for (std::size_t i = 0; i < s.series[0].runs[0].size(); ++i)
    less.runs[0].push_back((step_s - wait_s) * noise(rng));
  s.series.push_back(less);
  s.runs[0].step_wait_share = wait_s / step_s;
  return s;
}

TEST(CompareContention, EachStepsOwnWaitDecidesTheStepRow) {
  CompareOptions options;
  options.stats.run_noise = 0.005;
  // B 20% slower, all of it its steps' own wait: inconclusive (contention), by the steps.
  absl::StatusOr<Comparison> c =
      compare_sides(with_step_waits("a", 0.010, 0.0, 0.0, 1),
                    with_step_waits("b", 0.012, 0.002, 1.0 / 6.0, 2), options);
  ASSERT_TRUE(c.ok()) << c.status();
  const Pair& p = c->pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kInconclusiveContention);
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("with each step's own wait for a CPU removed"));
  EXPECT_THAT(p.overall.stats.reason, HasSubstr("which is same"));
  EXPECT_NEAR(p.step_wait_b, 1.0 / 6.0, 1e-12);
  EXPECT_THAT(format_comparison(*c), HasSubstr("the step thread in its steps: A 0.0%, B 16.7%"));
  absl::StatusOr<Comparison> back = parse_comparison(compare_json(*c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_NEAR(back->pairs[0].step_wait_b, 1.0 / 6.0, 1e-12);
  EXPECT_NEAR(back->b.runs[0].step_wait_share, 1.0 / 6.0, 1e-12);
  // B 20% slower, its steps 20% slower with their waits removed too: the code's.
  c = compare_sides(with_step_waits("a", 0.010, 0.0, 0.0, 3),
                    with_step_waits("b", 0.012, 0.0001, 1.0 / 6.0, 4), options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pairs[0].overall.stats.verdict, stats::Verdict::kSlower);
  EXPECT_THAT(all_warnings(c->pairs[0]), HasSubstr("the verdict holds: with each step's own wait"));
  for (const Row& row : c->pairs[0].rows)  // the step's row says what the overall says
    if (row.name == "BATCH") EXPECT_EQ(row.stats.verdict, stats::Verdict::kSlower);
  // The shares' bound alone would have called the same sides inconclusive.
  c = compare_sides(side("a", 0.010, 0.0, 3), side("b", 0.012, 1.0 / 6.0, 4), options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pairs[0].overall.stats.verdict, stats::Verdict::kInconclusiveContention);
}

TEST(CompareContention, RunsWithoutTheReadingsKeepTheVerdictWithAWarning) {
  const Comparison c = compared(0.012, stats::kNaN, 1.0 / 6.0);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall.stats.verdict, stats::Verdict::kSlower);
  EXPECT_THAT(all_warnings(p), HasSubstr("no CPU contention readings for A "));
}

}  // namespace
}  // namespace trainscope::compare
