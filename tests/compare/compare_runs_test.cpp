// trainscope compare on run directories written in the documented format:
// sides from runs, globs, folders, sweeps, filters and saved comparisons; rows,
// overall verdicts, tails, warnings, the document and bad input.
#include "trainscope/compare/compare.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::compare {
namespace {

using ::testing::HasSubstr;
using ::trainscope::testing::kMetricsHeader;
using ::trainscope::testing::RankJson;
using ::trainscope::testing::RunJson;
using ::trainscope::testing::TempDir;
using ::trainscope::testing::write_file;
using ::trainscope::testing::write_run_dir;
namespace fs = std::filesystem;

// A run of `steps` BATCH regions around `step_ms` (lognormal noise of 5%,
// seeded), each starting with an IO wait of `wait_share` of it and holding a
// FORWARD of half of it; `slow_rank` (when >= 0 and ranks > 1) is `rank_factor`
// slower. stall_s > 0 makes the middle step last that long.
struct RunSpec {
  int steps = 400;
  double step_ms = 10;
  double wait_share = 0.1;
  std::uint64_t seed = 1;
  int ranks = 1;
  int slow_rank = -1;
  double rank_factor = 1.0;
  double stall_s = 0;
  std::map<std::string, std::string> params;
  std::vector<std::string> extra_keys;  // one row per step each
  double other_cpu_pct = -1;            // host samples: the host busy this much beside the job
  std::int64_t host_start_ms = 1000;    // the first host sample (the steps start at 1e6 ms)
  double before_steps_pct = -1;         // one more sample before the steps, this busy
  std::string pip_freeze;               // environment.json + artifacts/pip-freeze.txt
  // A second FORWARD row per step (the loss module's), lasting this share of
  // the step; and the model's FORWARD (half the step) slower by model_factor.
  double loss_forward_share = 0;
  double model_factor = 1;
  double tokens = 0;  // > 0: the ledger's work/tokens metric, this many each step
  // Per rank: its step thread's cpu wait in each step, this share of the step.
  std::vector<double> step_wait_share;
};

fs::path make_run(const fs::path& dir, const RunSpec& spec) {
  RunJson run;
  run.params = spec.params;
  std::vector<RankJson> ranks;
  for (int r = 0; r < spec.ranks; ++r) {
    RankJson rank;
    rank.rank = static_cast<std::uint32_t>(r);
    rank.world_size = static_cast<std::uint32_t>(spec.ranks);
    rank.status = "FINISHED";
    rank.end_time_ms = 2;
    ranks.push_back(rank);
  }
  write_run_dir(dir, run, ranks);
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (int r = 0; r < spec.ranks; ++r) {
    std::string rows;
    std::int64_t t = 1'000'000'000'000;
    for (int i = 0; i < spec.steps; ++i) {
      double ms = spec.step_ms * std::exp(noise(rng));
      if (r == spec.slow_rank) ms *= spec.rank_factor;
      auto ns = static_cast<std::int64_t>(ms * 1e6);
      if (spec.stall_s > 0 && i == spec.steps / 2)
        ns = static_cast<std::int64_t>(spec.stall_s * 1e9);
      const auto wait = static_cast<std::int64_t>(static_cast<double>(ns) * spec.wait_share);
      const std::string rank = std::to_string(r);
      rows += "IO,CPU," + rank + ",0," + std::to_string(t) + "," + std::to_string(wait) + "," +
              std::to_string(i) + ",0\n";
      const auto model_ns =
          static_cast<std::int64_t>(static_cast<double>(ns / 2) * spec.model_factor);
      rows += "FORWARD,CPU," + rank + ",0," + std::to_string(t + wait) + "," +
              std::to_string(model_ns) + "," + std::to_string(i) + ",0\n";
      if (spec.loss_forward_share > 0) {
        rows += "FORWARD,CPU," + rank + ",0," + std::to_string(t + wait + model_ns) + "," +
                std::to_string(
                    static_cast<std::int64_t>(static_cast<double>(ns) * spec.loss_forward_share)) +
                "," + std::to_string(i) + ",0\n";
      }
      ns += model_ns - ns / 2;
      for (const std::string& key : spec.extra_keys)
        rows += key + ",CPU," + rank + ",0," + std::to_string(t + wait) + "," +
                std::to_string(ns / 4) + "," + std::to_string(i) + ",0\n";
      rows += "BATCH,CPU," + rank + ",0," + std::to_string(t) + "," + std::to_string(ns) + "," +
              std::to_string(i) + ",0";
      if (static_cast<std::size_t>(r) < spec.step_wait_share.size())
        rows += fmt::format(
            ",,,{}", static_cast<std::int64_t>(static_cast<double>(ns) * spec.step_wait_share[r]));
      rows += "\n";
      t += ns;
    }
    write_file(dir / ("regions-" + std::to_string(r) + ".csv"), rows, /*append=*/true);
    if (spec.tokens > 0) {
      std::string work;
      for (int i = 0; i < spec.steps; ++i)
        work += fmt::format("work/tokens,{},{},{},{}\n", spec.tokens, i, 1'000'000 + i, r);
      write_file(dir / ("metrics-" + std::to_string(r) + ".csv"), work, /*append=*/true);
    }
  }
  if (spec.other_cpu_pct >= 0) {
    // The host (h) 2 cores; the job uses one core (100%), others the rest.
    std::string rows = kMetricsHeader;
    if (spec.before_steps_pct >= 0) {
      rows += "system/cpu.util_pct," + std::to_string(50 + spec.before_steps_pct) + ",0,999000,\n";
      rows += "system/proc.cpu_pct,100,0,999000,\n";
    }
    for (int s = 0; s < 10; ++s) {
      const std::string ts = std::to_string(spec.host_start_ms + s * 300);
      rows += "system/cpu.util_pct," + std::to_string(50 + spec.other_cpu_pct) + ",0," + ts + ",\n";
      rows += "system/proc.cpu_pct,100,0," + ts + ",\n";
      rows += "system/cpu.0.util_pct,50,0," + ts + ",\n";
      rows += "system/cpu.1.util_pct,50,0," + ts + ",\n";
    }
    write_file(dir / "host-h.csv", rows);
  }
  if (!spec.pip_freeze.empty()) {
    fs::create_directories(dir / "artifacts");
    write_file(dir / "artifacts" / "pip-freeze.txt", spec.pip_freeze);
    write_file(
        dir / "environment.json",
        R"({"cpu_model": "cpu", "cores": 2, "memory_mb": 1000, "pip_freeze": "artifacts/pip-freeze.txt"})");
  }
  return dir;
}

// The runs here are drawn with no run-to-run spread of their own: a run-to-run
// term of 0.5% lets `same` be reached. The default (kDefaultRunNoise, 1.5%) is
// calibrated for real jobs on a shared machine (docs/compare-statistics.md).
CompareRequest synthetic() {
  CompareRequest request;
  request.options.stats.run_noise = 0.005;
  return request;
}

Comparison compared(const std::vector<std::string>& a, const std::vector<std::string>& b,
                    CompareRequest request = synthetic()) {
  request.a = a;
  request.b = b;
  absl::StatusOr<Comparison> c = compare::compare(request);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Comparison{};
}

const Row* row_named(const Pair& pair, const std::string& name) {
  for (const Row& r : pair.rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(CompareRunsTest, IdenticalJobsAreTheSameAndNothingFails) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  ASSERT_EQ(c.pairs.size(), 1u);
  const Pair& p = c.pairs[0];
  EXPECT_EQ(p.overall_basis, "step time (BATCH)");
  EXPECT_EQ(verdict_name(p.overall), "same") << p.overall.stats.reason;
  EXPECT_EQ(p.overall.stats.unit, stats::CompareUnit::kSteps);
  EXPECT_LT(p.overall.stats.low, 1.0);
  EXPECT_GT(p.overall.stats.high, 1.0);
  EXPECT_TRUE(failing_rows(c, {}, 0).empty());
  // Every key on both sides and the derived metrics are rows.
  for (const char* name : {"BATCH", "FORWARD", "IO", kThroughput, kDataWait})
    EXPECT_NE(row_named(p, name), nullptr) << name;
  EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  for (const Row& r : p.rows) EXPECT_EQ(r.note, "") << r.name;
}

TEST(CompareRunsTest, ATenPercentSlowdownIsSlowerWithAnIntervalAroundIt) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  spec.step_ms = 11;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const Row& o = c.pairs.at(0).overall;
  EXPECT_EQ(verdict_name(o), "slower");
  EXPECT_LT(o.stats.low, 1.10);
  EXPECT_GT(o.stats.high, 1.10);
  EXPECT_GT(o.stats.low, 1.05);
  // The gate: 5% is exceeded with confidence, 15% is not.
  EXPECT_THAT(failing_rows(c, {}, 5), ::testing::ElementsAre("step time (BATCH)"));
  EXPECT_TRUE(failing_rows(c, {}, 15).empty());
  EXPECT_THAT(failing_rows(c, {"FORWARD"}, 5), ::testing::ElementsAre("FORWARD"));
  // Steps/s is a throughput: selected, it fails when it is lower by more than PCT.
  EXPECT_THAT(failing_rows(c, {kThroughput}, 5), ::testing::ElementsAre(kThroughput));
  EXPECT_TRUE(failing_rows(c, {kThroughput}, 15).empty());
  // Throughput falls: its verdict is "lower", its ratio the inverse.
  const Row* tp = row_named(c.pairs[0], kThroughput);
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(verdict_name(*tp), "lower");
  EXPECT_NEAR(tp->stats.ratio * o.stats.ratio, 1.0, 0.02);
  // Sorted by effect: the data-wait share (unchanged) comes after the times.
  EXPECT_EQ(c.pairs[0].rows.back().name, kDataWait);
  const std::string text = format_comparison(c);
  EXPECT_THAT(text, HasSubstr("overall (step time (BATCH)): slower  +"));
}

// Fewer tokens in steps of the same time: the step time is the same, the
// tokens/s row lower, and --fail-if-slower fails on it (issue 42).
TEST(CompareRunsTest, FewerTokensPerSecondFailTheGateAtTheSameStepTime) {
  TempDir tmp;
  RunSpec spec;
  spec.tokens = 1000;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  const fs::path a2 = make_run(tmp.path() / "a2", spec);
  spec.tokens = 900;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  EXPECT_EQ(verdict_name(c.pairs.at(0).overall), "same");
  const Row* tokens = row_named(c.pairs[0], kTokensPerSecond);
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(verdict_name(*tokens), "lower");
  EXPECT_NEAR(tokens->stats.ratio, 0.9, 0.02);
  EXPECT_THAT(failing_rows(c, {}, 5), ::testing::ElementsAre(kTokensPerSecond));
  EXPECT_TRUE(failing_rows(c, {}, 15).empty());
  EXPECT_THAT(failing_rows(c, {kTokensPerSecond}, 5), ::testing::ElementsAre(kTokensPerSecond));
  EXPECT_TRUE(failing_rows(c, {"FORWARD"}, 5).empty());
  // More tokens, or the same, never fail it.
  EXPECT_TRUE(failing_rows(compared({b.string()}, {a.string()}), {}, 0).empty());
  EXPECT_TRUE(failing_rows(compared({a.string()}, {a2.string()}), {}, 0).empty());
}

// The ledger's MFU per step with work: FLOPs per step over the period and the
// peak (here the CPU's measured one), the counted step left out.
TEST(CompareRunsTest, MfuIsARowWhereBothSidesCountedTheirFlops) {
  TempDir tmp;
  RunSpec spec;
  spec.tokens = 1000;
  const fs::path none = make_run(tmp.path() / "none", spec);
  spec.params = {{"work/flops_per_step", "1e9"},
                 {"work/flops_step", "3"},
                 {"work/peak_flops", "1e12"},
                 {"work/peak_source", "cpu GEMM probe"}};
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  spec.step_ms = 11;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const Row* mfu = row_named(c.pairs.at(0), kMfu);
  ASSERT_NE(mfu, nullptr);
  EXPECT_EQ(mfu->kind, SeriesKind::kMetric);
  // 1e9 FLOPs in 10 ms of a 1e12 FLOP/s device: 0.1.
  EXPECT_NEAR(mfu->stats.median_a, 0.1, 0.01);
  EXPECT_EQ(verdict_name(*mfu), "lower");
  EXPECT_NEAR(mfu->stats.ratio, 1 / 1.1, 0.02);
  std::size_t mfu_steps = 0;
  for (const Series& s : c.a.series)
    if (s.name == kMfu) mfu_steps = s.runs.at(0).size();
  EXPECT_EQ(mfu_steps, 399u);  // less the counted step
  // A side without a FLOP count has no MFU: no row.
  EXPECT_EQ(row_named(compared({none.string()}, {b.string()}).pairs.at(0), kMfu), nullptr);
}

// FORWARD timed twice a step, by the model and by the loss module: compared
// per step (their sum), not as a mixture of both callers' calls.
TEST(CompareRunsTest, AKeyWithTwoCallersComparesPerStep) {
  TempDir tmp;
  RunSpec spec;
  spec.loss_forward_share = 0.05;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  const fs::path a2 = make_run(tmp.path() / "a2", spec);
  spec.seed = 3;
  spec.model_factor = 1.1;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison same = compared({a.string()}, {a2.string()});
  const Row* forward = row_named(same.pairs.at(0), "FORWARD");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(verdict_name(*forward), "same");
  const Comparison slower = compared({a.string()}, {b.string()});
  forward = row_named(slower.pairs.at(0), "FORWARD");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(verdict_name(*forward), "slower");
  // Per step: model 0.5 + loss 0.05 of the step, against 0.55 + 0.05.
  EXPECT_NEAR(forward->stats.ratio, 0.60 / 0.55, 0.02);
}

TEST(CompareRunsTest, AStallIsNamedInTheTailNotInTheVerdict) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  spec.stall_s = 2.0;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const Pair& p = c.pairs.at(0);
  EXPECT_EQ(verdict_name(p.overall), "same");
  EXPECT_NEAR(p.overall.max_b, 2.0, 1e-9);
  EXPECT_THAT(p.overall.note, HasSubstr("B's longest BATCH took 2 s"));
  EXPECT_THAT(p.overall.note, HasSubstr("stall"));
  EXPECT_THAT(format_comparison(c), HasSubstr("note: B's longest BATCH took 2 s"));
  // 50 ms against 10 ms steps (40 ms past the p99): named; a 4.5 ms step among
  // 1 ms steps (3.5 ms past the p99, a blip): not.
  spec.stall_s = 0.05;
  const fs::path b2 = make_run(tmp.path() / "b2", spec);
  EXPECT_THAT(compared({a.string()}, {b2.string()}).pairs.at(0).overall.note, HasSubstr("stall"));
  RunSpec fast;
  fast.step_ms = 1;
  const fs::path a3 = make_run(tmp.path() / "a3", fast);
  fast.seed = 2;
  fast.stall_s = 0.0045;
  const fs::path b3 = make_run(tmp.path() / "b3", fast);
  EXPECT_EQ(compared({a3.string()}, {b3.string()}).pairs.at(0).overall.note, "");
}

TEST(CompareRunsTest, ManyRanksCompareTheSlowestRankPerStepOrTheChosenOne) {
  TempDir tmp;
  RunSpec spec;
  spec.ranks = 2;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  spec.slow_rank = 1;
  spec.rank_factor = 1.2;
  const fs::path b = make_run(tmp.path() / "b", spec);
  EXPECT_EQ(verdict_name(compared({a.string()}, {b.string()}).pairs.at(0).overall), "slower");
  CompareRequest rank0 = synthetic();
  rank0.gather.rank = 0;
  EXPECT_EQ(verdict_name(compared({a.string()}, {b.string()}, rank0).pairs.at(0).overall), "same");
}

// The step wait share of the rank --rank picks (the job's, pooled, without).
TEST(CompareRunsTest, TheStepWaitShareIsTheChosenRanks) {
  TempDir tmp;
  RunSpec spec;
  spec.ranks = 2;
  spec.step_wait_share = {0.0, 0.3};
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison pooled = compared({a.string()}, {b.string()});
  EXPECT_NEAR(pooled.pairs.at(0).step_wait_a, 0.15, 0.01);
  EXPECT_NEAR(pooled.pairs.at(0).step_wait_b, 0.15, 0.01);
  for (const std::uint32_t rank : {0u, 1u}) {
    CompareRequest one = synthetic();
    one.gather.rank = rank;
    const Comparison c = compared({a.string()}, {b.string()}, one);
    EXPECT_NEAR(c.pairs.at(0).step_wait_a, rank == 0 ? 0.0 : 0.3, 1e-6) << rank;
    EXPECT_NEAR(c.pairs.at(0).step_wait_b, rank == 0 ? 0.0 : 0.3, 1e-6) << rank;
  }
}

TEST(CompareRunsTest, KeysOnOneSideAreWarnedAboutAndCannotBeSelected) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.extra_keys = {"EXTRA"};
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  EXPECT_THAT(c.pairs.at(0).warnings, ::testing::Contains("only in B, not compared: EXTRA"));
  CompareRequest request = synthetic();
  request.a = {a.string()};
  request.b = {b.string()};
  request.options.keys = {"EXTRA"};
  absl::StatusOr<Comparison> bad = compare::compare(request);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no such key on both sides: EXTRA"));
  request.options.keys = {"FORWARD"};
  const Comparison one = compared({a.string()}, {b.string()}, request);
  ASSERT_EQ(one.pairs.at(0).rows.size(), 1u);
  EXPECT_EQ(one.pairs[0].rows[0].name, "FORWARD");
}

TEST(CompareRunsTest, BadInputIsAnErrorNamingTheSideAndTheRun) {
  TempDir tmp;
  const fs::path a = make_run(tmp.path() / "a", RunSpec{});
  RunSpec empty;
  empty.steps = 0;
  const fs::path none = make_run(tmp.path() / "none", empty);
  const fs::path damaged = tmp.path() / "damaged";
  fs::create_directories(damaged);
  write_file(damaged / "run.json", "{not json");
  struct Case {
    std::string b;
    std::string message;
  };
  for (const Case& k : std::vector<Case>{
           {none.string(), "B's run " + none.string() + " recorded no regions"},
           {damaged.string(), "B: " + damaged.string()},
           {(tmp.path() / "missing").string(),
            "B: " + (tmp.path() / "missing").string() + ": no such run directory"},
           {(tmp.path() / "x-*").string(), "the glob matches no run directory"},
           {tmp.path().string() + "/a/run.json",
            "not a trainscope comparison: format: 'trainscope.run'"},
       }) {
    CompareRequest request = synthetic();
    request.a = {a.string()};
    request.b = {k.b};
    absl::StatusOr<Comparison> c = compare::compare(request);
    ASSERT_FALSE(c.ok()) << k.b;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(k.message)) << k.b;
  }
}

TEST(CompareRunsTest, ShortRunsAreInconclusiveAndSayHowManyMoreStepsWouldDecide) {
  TempDir tmp;
  RunSpec spec;
  spec.steps = 30;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const Row& o = c.pairs.at(0).overall;
  EXPECT_EQ(verdict_name(o), "inconclusive");
  EXPECT_GT(o.stats.more_a, 0u);
  EXPECT_THAT(format_comparison(c), HasSubstr("more steps a side would decide"));
}

TEST(CompareRunsTest, FoldersOfRepetitionsUseTheRunAsTheUnit) {
  TempDir tmp;
  RunSpec spec;
  for (int i = 0; i < 3; ++i) {
    spec.seed = 10 + static_cast<std::uint64_t>(i);
    spec.step_ms = 10;
    make_run(tmp.path() / "base" / ("r" + std::to_string(i)), spec);
    spec.seed = 20 + static_cast<std::uint64_t>(i);
    spec.step_ms = 11;
    make_run(tmp.path() / "new" / ("r" + std::to_string(i)), spec);
  }
  const Comparison c = compared({(tmp.path() / "base").string()}, {(tmp.path() / "new").string()});
  const Row& o = c.pairs.at(0).overall;
  EXPECT_EQ(o.stats.unit, stats::CompareUnit::kRuns);
  EXPECT_EQ(o.stats.n_a, 3u);
  EXPECT_EQ(verdict_name(o), "slower");
  // A glob names the same runs.
  const Comparison g =
      compared({(tmp.path() / "base" / "r*").string()}, {(tmp.path() / "new" / "r*").string()});
  EXPECT_EQ(g.pairs.at(0).runs_a.size(), 3u);
  EXPECT_DOUBLE_EQ(g.pairs[0].overall.stats.ratio, o.stats.ratio);
}

TEST(CompareRunsTest, TwoSweepsAreMatchedConfigurationByConfiguration) {
  TempDir tmp;
  RunSpec spec;
  for (const char* lr : {"0.1", "0.2"}) {
    spec.params = {{"lr", lr}, {"version", "1"}};
    spec.step_ms = 10;
    make_run(tmp.path() / "old" / lr, spec);
    spec.params = {{"lr", lr}, {"version", "2"}};
    spec.step_ms = std::string(lr) == "0.1" ? 10 : 12;
    spec.seed += 7;
    make_run(tmp.path() / "new" / lr, spec);
  }
  spec.params = {{"lr", "0.3"}, {"version", "2"}};
  make_run(tmp.path() / "new" / "0.3", spec);
  const Comparison c = compared({(tmp.path() / "old").string()}, {(tmp.path() / "new").string()});
  ASSERT_EQ(c.pairs.size(), 2u);
  EXPECT_EQ(c.pairs[0].config, "lr=0.1");
  EXPECT_EQ(verdict_name(c.pairs[0].overall), "same");
  EXPECT_EQ(c.pairs[1].config, "lr=0.2");
  EXPECT_EQ(verdict_name(c.pairs[1].overall), "slower");
  EXPECT_THAT(c.warnings, ::testing::ElementsAre("configuration lr=0.3 only in B"));
  EXPECT_THAT(failing_rows(c, {}, 5), ::testing::ElementsAre("step time (BATCH) [lr=0.2]"));
}

TEST(CompareRunsTest, FiltersOverARootPickEachSide) {
  TempDir tmp;
  RunSpec spec;
  spec.params = {{"workers", "0"}};
  make_run(tmp.path() / "w0", spec);
  spec.params = {{"workers", "2"}};
  spec.step_ms = 8;
  spec.wait_share = 0.01;
  make_run(tmp.path() / "w2", spec);
  CompareRequest request = synthetic();
  request.root = tmp.path().string();
  request.filter_a = "params.workers = '0'";
  request.filter_b = "params.workers = '2'";
  absl::StatusOr<Comparison> c = compare::compare(request);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->label_a, "params.workers = '0'");
  EXPECT_EQ(verdict_name(c->pairs.at(0).overall), "faster");
  EXPECT_EQ(verdict_name(*row_named(c->pairs[0], kDataWait)), "lower");
  request.filter_b = "params.workers = '4'";
  absl::StatusOr<Comparison> none = compare::compare(request);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("B: no run under"));
  request.filter_b = "params.workers ~ 4";
  EXPECT_THAT(std::string(compare::compare(request).status().message()), HasSubstr("bad filter"));
}

// A summary of `count` BATCH regions of `seconds` each, and two loss values.
void write_summary_and_loss(const fs::path& dir, std::size_t count, double seconds,
                            double last_loss) {
  Summary summary;
  summary.entries.push_back(
      SummaryEntry{"BATCH", Device::kCPU, compute_time_stats(std::vector<double>(count, seconds))});
  write_file(dir / "summary-0.json", format_summary(summary, StatsFormat::kJson));
  write_file(dir / "metrics-0.csv", std::string(kMetricsHeader) + "loss,9,0,1000,0\nloss," +
                                        std::to_string(last_loss) + ",1,1001,0\n");
}

// `compare --a "regions.BATCH.median < 0.5"` never matched while search_runs
// found the runs (issue 36): the filter row is one, with regions.* and
// metrics.* columns.
TEST(CompareRunsTest, FiltersSeeRegionStatisticsAndMetricsAsSearchRunsDoes) {
  TempDir tmp;
  RunSpec spec;
  const fs::path fast = make_run(tmp.path() / "fast", spec);
  write_summary_and_loss(fast, 400, 0.010, 0.25);
  spec.seed = 2;
  spec.step_ms = 20;
  const fs::path slow = make_run(tmp.path() / "slow", spec);
  write_summary_and_loss(slow, 400, 0.020, 0.75);
  CompareRequest request = synthetic();
  request.root = tmp.path().string();
  request.filter_a = "regions.BATCH.median < 0.015";
  request.filter_b = "regions.BATCH.median >= 0.015 and metrics.loss > 0.5";
  absl::StatusOr<Comparison> c = compare::compare(request);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->a.runs.size(), 1u);
  ASSERT_EQ(c->b.runs.size(), 1u);
  EXPECT_EQ(verdict_name(c->pairs.at(0).overall), "slower");
  request.filter_b = "metrics.loss < 0.5 and regions.BATCH.count = 400";
  c = compare::compare(request);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(verdict_name(c->pairs.at(0).overall), "same");  // fast against itself
}

TEST(CompareRunsTest, ASavedComparisonIsABaseline) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 2;
  spec.step_ms = 11;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison first = compared({a.string()}, {b.string()});
  const std::string saved = (tmp.path() / "ref.json").string();
  ASSERT_TRUE(write_comparison(first, saved).ok());
  // The saved file's A side against B gives the same comparison as the runs.
  const Comparison again = compared({saved + ":a"}, {b.string()});
  EXPECT_DOUBLE_EQ(again.pairs.at(0).overall.stats.ratio, first.pairs[0].overall.stats.ratio);
  EXPECT_DOUBLE_EQ(again.pairs[0].overall.stats.low, first.pairs[0].overall.stats.low);
  // Its B side (the default) against B itself: the same data, the same.
  EXPECT_EQ(verdict_name(compared({saved}, {b.string()}).pairs.at(0).overall), "same");
  // A --json document (no data) cannot be a baseline.
  write_file(tmp.path() / "nodata.json", compare_json(first, 1, /*with_data=*/false));
  CompareRequest request = synthetic();
  request.a = {(tmp.path() / "nodata.json").string()};
  request.b = {b.string()};
  EXPECT_THAT(std::string(compare::compare(request).status().message()),
              HasSubstr("holds no data of its B side"));
}

// Saving onto an input would replace the baseline compared against (issue 36):
// refused, naming it, whichever way the input is spelled; another existing
// file only with overwrite (--force).
TEST(CompareRunsTest, SavingOntoAnInputIsRefusedAndAnExistingFileNeedsForce) {
  TempDir tmp;
  const fs::path b = make_run(tmp.path() / "b", RunSpec{});
  const std::string base = (tmp.path() / "base.json").string();
  write_file(base, "{}");
  CompareRequest request = synthetic();
  request.b = {b.string()};
  for (const std::string& spec :
       {base, base + ":a", (tmp.path() / "." / "base.json").string() + ":b"}) {
    request.a = {spec};
    for (bool overwrite : {false, true}) {
      const absl::Status s = check_save_path(request, base, overwrite);
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << spec << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("an input of this comparison (" + spec));
    }
  }
  // Also as side B, and through another spelling of the saved path.
  request.a = {b.string()};
  request.b = {base};
  EXPECT_TRUE(absl::IsInvalidArgument(
      check_save_path(request, (tmp.path() / "." / "base.json").string(), true)));
  // Another file: a new one is fine, an existing one needs overwrite.
  request.b = {b.string()};
  EXPECT_TRUE(check_save_path(request, (tmp.path() / "new.json").string(), false).ok());
  const absl::Status exists = check_save_path(request, base, false);
  EXPECT_TRUE(absl::IsAlreadyExists(exists)) << exists;
  EXPECT_THAT(std::string(exists.message()), HasSubstr("--force"));
  EXPECT_TRUE(check_save_path(request, base, true).ok());
}

TEST(CompareDocumentTest, TheReaderReadsWhatTheWriterWrote) {
  TempDir tmp;
  RunSpec spec;
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 3;
  spec.step_ms = 10.5;
  spec.extra_keys = {"ONLY_B"};
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const std::string text = compare_json(c, -1, true);
  absl::StatusOr<Comparison> back = parse_comparison(text, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(compare_json(*back, -1, true), text);
  EXPECT_EQ(format_comparison(*back), format_comparison(c));
}

TEST(CompareDocumentTest, DamagedDocumentsAreErrorsNamingTheKey) {
  TempDir tmp;
  const fs::path a = make_run(tmp.path() / "a", RunSpec{});
  RunSpec spec;
  spec.seed = 9;
  const fs::path b = make_run(tmp.path() / "b", spec);
  nlohmann::json doc = nlohmann::json::parse(compare_json(compared({a.string()}, {b.string()})));
  struct Case {
    std::function<void(nlohmann::json&)> damage;
    std::string message;
  };
  for (const Case& k : std::vector<Case>{
           {[](nlohmann::json& d) { d["format"] = "x"; }, "format: 'x', not trainscope.compare"},
           {[](nlohmann::json& d) { d["version"] = 9; }, "version 9 is newer"},
           {[](nlohmann::json& d) { d["pairs"][0]["overall"]["verdict"] = "meh"; },
            "'meh' is no verdict"},
           {[](nlohmann::json& d) { d["a"]["series"][0]["runs"][0][0] = -1; }, "at least 0"},
           // Kinds and statuses are enums at the API: a name the reader does not know.
           {[](nlohmann::json& d) { d["a"]["series"][0]["kind"] = "regoin"; },
            "a.series[0].kind: 'regoin', not region or metric"},
           {[](nlohmann::json& d) { d["b"]["runs"][0]["status"] = "DONE"; }, "b.runs[0].status"},
           {[](nlohmann::json& d) { d["b"]["series"][0]["runs"].push_back({1}); },
            "2 series for 1 runs"},
           {[](nlohmann::json& d) { d.erase("pairs"); }, "pairs"},
       }) {
    nlohmann::json copy = doc;
    k.damage(copy);
    absl::StatusOr<Comparison> c = parse_comparison(copy.dump(), "ref.json");
    ASSERT_FALSE(c.ok()) << k.message;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("ref.json: "));
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(k.message));
  }
}

TEST(CompareWarningsTest, LoadedHostsAndOtherSoftwareAreWarnedAbout) {
  TempDir tmp;
  RunSpec spec;
  spec.other_cpu_pct = 5;
  spec.pip_freeze = "numpy==1.0\ntorch==2.0\n";
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.other_cpu_pct = 45;
  spec.pip_freeze = "numpy==1.0\ntorch==2.1\n";
  spec.seed = 5;
  const fs::path b = make_run(tmp.path() / "b", spec);
  const Comparison c = compared({a.string()}, {b.string()});
  const std::vector<std::string>& w = c.pairs.at(0).warnings;
  EXPECT_THAT(
      w, ::testing::Contains(HasSubstr("other processes used 5% of A's host CPUs and 45% of B's")));
  EXPECT_THAT(w, ::testing::Contains("different software: 1 package differs (torch 2.0 -> 2.1)"));
  EXPECT_NEAR(c.a.runs.at(0).other_cpu_share, 0.05, 1e-9);
  // Only the samples taken while the steps ran count (not the launcher's start).
  spec.host_start_ms = 1'000'100;
  spec.before_steps_pct = 90;
  spec.seed = 6;
  const fs::path b2 = make_run(tmp.path() / "b2", spec);
  EXPECT_NEAR(compared({a.string()}, {b2.string()}).b.runs.at(0).other_cpu_share, 0.45, 1e-9);
  // Equal hosts and software: no warning.
  spec.other_cpu_pct = 5;
  spec.pip_freeze = "numpy==1.0\ntorch==2.0\n";
  const fs::path a2 = make_run(tmp.path() / "a2", spec);
  EXPECT_TRUE(compared({a.string()}, {a2.string()}).pairs.at(0).warnings.empty());
}

// Two launchers (two hosts) each record their own environment and pip freeze:
// every host is described and every package compared, not the last writer's.
TEST(CompareWarningsTest, EveryLaunchersEnvironmentIsRead) {
  TempDir tmp;
  RunSpec spec;
  spec.pip_freeze = "numpy==1.0\ntorch==2.0\n";
  const fs::path a = make_run(tmp.path() / "a", spec);
  spec.seed = 5;
  const fs::path b = make_run(tmp.path() / "b", spec);
  for (const char* host : {"h1", "h2"}) {
    write_file(b / ("launcher-" + std::string(host) + "-7.json"),
               R"({"format": "trainscope.launcher", "version": 2, "host": ")" + std::string(host) +
                   R"(", "pid": 7, "status": "FINISHED", "start_time_ms": 1, "end_time_ms": 2,
                   "heartbeat_ms": 2, "flush_interval_ms": 1000, "exit_code": 0})");
  }
  write_file(b / "artifacts" / "pip-freeze-h1-7.txt", "numpy==1.0\ntorch==2.0\n");
  write_file(b / "artifacts" / "pip-freeze-h2-7.txt", "numpy==1.0\ntorch==2.1\n");
  write_file(b / "environment-h1-7.json",
             R"({"cpu_model": "cpu", "cores": 2, "memory_mb": 1000,
                 "pip_freeze": "artifacts/pip-freeze-h1-7.txt"})");
  write_file(b / "environment-h2-7.json",
             R"({"cpu_model": "gpu box", "cores": 64, "memory_mb": 1000,
                 "pip_freeze": "artifacts/pip-freeze-h2-7.txt"})");
  const Comparison c = compared({a.string()}, {b.string()});
  EXPECT_EQ(c.b.runs.at(0).hardware, "cpu, 2 cores, 1000 MB; gpu box, 64 cores, 1000 MB");
  EXPECT_THAT(c.pairs.at(0).warnings, ::testing::Contains(HasSubstr("different software")));
}

}  // namespace
}  // namespace trainscope::compare
