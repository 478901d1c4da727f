// The live and differential analyses on recorded timings (the arithmetic of
// DS-Analyzer on known inputs; fetch stalls need a slow device, which CI
// cannot make, so they are tested here on recorded numbers).
#include "trainscope/stalls/analysis.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::stalls {
namespace {

TEST(StallsAnalysis, ClassesAreTensorFlows) {
  EXPECT_EQ(input_bound_class(0.0), "not");
  EXPECT_EQ(input_bound_class(0.0499), "not");
  EXPECT_EQ(input_bound_class(0.05), "moderately");
  EXPECT_EQ(input_bound_class(0.1999), "moderately");
  EXPECT_EQ(input_bound_class(0.20), "highly");
}

TEST(StallsAnalysis, PassSharesSpreadAndBunchedWaits) {
  // 40 batches of 10 ms; waits of 1 ms each: spread, 10% of 0.44 s.
  std::vector<double> spread(40, 0.001);
  const PassStalls s = pass_stalls(spread, 0.44);
  EXPECT_NEAR(s.share, 0.04 / 0.44, 1e-12);
  EXPECT_EQ(s.batches, 40u);
  EXPECT_NEAR(s.wait_p50_s, 0.001, 1e-12);
  EXPECT_FALSE(s.bunched);
  // The same wait, all in the first 2 batches (worker start-up).
  std::vector<double> bunched(40, 0.0);
  bunched[0] = 0.03;
  bunched[1] = 0.01;
  const PassStalls b = pass_stalls(bunched, 0.44);
  EXPECT_NEAR(b.share, s.share, 1e-12);
  EXPECT_TRUE(b.bunched);
  EXPECT_NEAR(b.startup_wait_share, 1.0, 1e-12);
  EXPECT_EQ(startup_batches(40), 4u);
  EXPECT_EQ(startup_batches(5), 2u);
  EXPECT_EQ(startup_batches(1), 1u);
}

TEST(StallsAnalysis, MeasuredTimeSkipsTheWarmUpAndGivesAnInterval) {
  std::vector<double> its = {9, 9, 9, 1, 2, 3, 4, 5};  // the first 3 are warm-up
  absl::StatusOr<Timing> t = measured_time(its, 3, 5);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->total_s, 15);
  // sd of 1..5 = sqrt(2.5); CI of the total = 1.96 * sd * sqrt(5).
  EXPECT_NEAR(t->ci_half_s, 1.959963984540054 * std::sqrt(2.5) * std::sqrt(5.0), 1e-9);
  absl::StatusOr<Timing> short_run = measured_time(its, 5, 5);
  ASSERT_FALSE(short_run.ok());
  EXPECT_NE(short_run.status().message().find("8 iterations, 10 needed"), std::string::npos)
      << short_run.status();
}

Timing timing(double total, std::size_t n = 100, double ci = 0.0) {
  Timing t;
  t.total_s = total;
  t.iterations = n;
  t.ci_half_s = ci;
  return t;
}

TEST(StallsAnalysis, DifferentialArithmeticIsDsAnalyzers) {
  // 100 iterations of 32 samples: T1 = 10 s, T2 = 25 s, T3 = 16 s.
  const Differential d =
      differential(timing(10, 100, 0.3), timing(25, 100, 0.4), timing(16, 100, 0.3), 32, 0.58);
  EXPECT_DOUBLE_EQ(d.ingestion_rate, 3200.0 / 10);
  EXPECT_DOUBLE_EQ(d.prep_rate, 3200.0 / 16);
  EXPECT_DOUBLE_EQ(d.fetch_rate, 3200.0 / 9);
  EXPECT_DOUBLE_EQ(d.prep_stall_s, 6);
  EXPECT_DOUBLE_EQ(d.fetch_stall_s, 9);
  EXPECT_DOUBLE_EQ(d.prep_share, 6.0 / 25);
  EXPECT_DOUBLE_EQ(d.fetch_share, 9.0 / 25);
  EXPECT_NEAR(d.prep_share_ci, std::hypot(0.3, 0.3) / 25, 1e-12);
  EXPECT_NEAR(d.fetch_share_ci, std::hypot(0.4, 0.3) / 25, 1e-12);
  // Differential 60%, live 58%: the methods agree.
  EXPECT_TRUE(d.agree);
  EXPECT_TRUE(d.reconcile.empty());
  const Differential off = differential(timing(10), timing(25), timing(16), 32, 0.40);
  EXPECT_FALSE(off.agree);
  EXPECT_NE(off.reconcile.find("differential share is larger"), std::string::npos);
  const Differential live = differential(timing(10), timing(25), timing(16), 32, 0.75);
  EXPECT_NE(live.reconcile.find("live share is larger"), std::string::npos);
  // A warm run slower than the cold one (noise): no fetch stall, no negative share.
  const Differential noisy = differential(timing(10), timing(15), timing(15.5), 32, 0.3);
  EXPECT_EQ(noisy.fetch_rate, 0);
  EXPECT_EQ(noisy.fetch_share, 0);
}

TEST(StallsAnalysis, CacheWhatIfReproducesBothRunsAndFitsTheOverlap) {
  // 100 iterations of 32 samples. Ingestion 320/s (T1 10 s), warm 200/s (T3
  // 16 s: 5 ms a sample); 1 MB samples, disk 100 MB/s, memory 10 GB/s: the
  // disk adds 9.9 ms a sample.
  const double extra = 1e6 * (1 / 100e6 - 1 / 10000e6);
  // Reading adds to prep (one worker): T2 = 3200 * (5 ms + 9.9 ms).
  Differential d = differential(timing(10), timing(3200 * (0.005 + extra)), timing(16), 32, 0.7);
  CacheModel m = cache_what_if(d, 1e6, 100, 10000);
  EXPECT_NEAR(m.overlap_k, 1, 1e-6);
  ASSERT_EQ(m.points.size(), 11u);
  EXPECT_NEAR(m.points[0].samples_per_s, 1 / (0.005 + extra), 1e-3);  // the cold run
  EXPECT_NEAR(m.points[5].samples_per_s, 1 / (0.005 + extra / 2), 1e-3);
  EXPECT_NEAR(m.points[10].samples_per_s, 200, 1e-9);  // the warm run
  for (std::size_t i = 1; i < m.points.size(); ++i) {
    EXPECT_GE(m.points[i].samples_per_s, m.points[i - 1].samples_per_s);
  }
  // Workers overlap reading with prep: T2 between max(a, b) and a + b; the
  // fitted k reproduces it, and half cached is then faster than additive.
  const double t2 = std::sqrt(0.005 * 0.005 + extra * extra);  // k = 2
  d = differential(timing(10), timing(3200 * t2), timing(16), 32, 0.7);
  m = cache_what_if(d, 1e6, 100, 10000);
  EXPECT_NEAR(m.overlap_k, 2, 1e-6);
  EXPECT_NEAR(m.points[0].samples_per_s, 1 / t2, 1e-3);
  EXPECT_NEAR(m.points[5].samples_per_s, 1 / std::hypot(0.005, extra / 2), 1e-3);
  // Fully overlapped, disk-bound: the slower of the two.
  d = differential(timing(10), timing(3200 * extra), timing(16), 32, 0.7);
  m = cache_what_if(d, 1e6, 100, 10000);
  EXPECT_TRUE(std::isinf(m.overlap_k));
  EXPECT_NEAR(m.points[0].samples_per_s, 1 / extra, 1e-3);
  EXPECT_NEAR(m.points[6].samples_per_s, 1 / std::max(0.005, 0.4 * extra), 1e-3);
  // No disk rate: the measured fetch stall, in proportion to the uncached share.
  d = differential(timing(10), timing(32), timing(16), 32, 0.7);
  m = cache_what_if(d, 0, 0, 10000);
  EXPECT_NEAR(m.points[0].samples_per_s, 100, 1e-9);
  EXPECT_NEAR(m.points[5].samples_per_s, 1 / 0.0075, 1e-6);
  // Never faster than ingestion: a synthetic run slower than the warm one.
  d = differential(timing(20), timing(32), timing(16), 32, 0.7);
  m = cache_what_if(d, 0, 0, 10000);
  EXPECT_NEAR(m.points[10].samples_per_s, 160, 1e-9);
}

TEST(StallsAnalysis, WorkerWhatIfFitsPrepBoundRunsAndFindsTheCountThatKeepsUp) {
  // 60 samples/s per worker while prep-bound; ingestion 200/s; 8 cores.
  const std::vector<WorkerRun> runs = {{1, 60, 0.7}, {2, 120, 0.4}};
  absl::StatusOr<WorkerFit> fit = worker_what_if(runs, 200, 8);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->per_worker_rate, 60, 1e-9);
  EXPECT_EQ(fit->fitted_runs, 2);
  EXPECT_EQ(fit->workers_to_keep_up, 4);  // 240 >= 200
  EXPECT_NEAR(predict_throughput(*fit, 3, 200), 180, 1e-9);
  EXPECT_NEAR(predict_throughput(*fit, 6, 200), 200, 1e-9);
  EXPECT_NEAR(predict_throughput(*fit, 16, 0), 480, 1e-9);  // capped at the cores
  // A run that kept up (no wait) says nothing about prep capacity.
  absl::StatusOr<WorkerFit> none = worker_what_if({{4, 200, 0.01}}, 200, 8);
  EXPECT_FALSE(none.ok());
}

TEST(StallsAnalysis, GpuWhatIfSharesTheLoaderAmongTheGpus) {
  // Ingestion 320/s per GPU; the loader alone 400/s: data-bound past 1.25 GPUs.
  Differential d;
  d.ingestion_rate = 320;
  d.prep_rate = 300;  // the warm run, held back by the step
  CacheModel cache;
  GpuWhatIf g = gpu_what_if(d, 400, cache);
  EXPECT_NEAR(g.gpus_until_data_bound, 1.25, 1e-12);
  EXPECT_NEAR(g.gpus_until_data_bound_cold, 1.25, 1e-12);  // no disk time
  ASSERT_EQ(g.predicted.size(), 8u);
  EXPECT_NEAR(g.predicted[0].second, 320, 1e-12);
  EXPECT_NEAR(g.predicted[1].second, 400, 1e-12);  // 2 GPUs: loader-bound
  // Uncached, each sample also waits 2.5 ms for the disk, not overlapped: 1/(2.5+2.5 ms).
  cache.disk_extra_s = 0.0025;
  cache.overlap_k = 1;
  g = gpu_what_if(d, 400, cache);
  EXPECT_NEAR(g.loader_rate_cold, 200, 1e-9);
  EXPECT_NEAR(g.gpus_until_data_bound_cold, 200.0 / 320, 1e-12);
  // No loader run: the warm run's rate, a lower bound, said so.
  g = gpu_what_if(d, 0, CacheModel{});
  EXPECT_NEAR(g.gpus_until_data_bound, 300.0 / 320, 1e-12);
  EXPECT_NE(g.basis.find("lower bound"), std::string::npos);
}

// A run as the timed loader writes it: two passes of 10 batches; pass 1
// waits 50 ms for its first batch (worker start-up) and 1 ms after, pass 2
// waits 4 ms for every batch; each iteration is 10 ms of compute + the wait.
TEST(StallsAnalysis, AnalyzeRunReadsTheTimedLoadersRows) {
  testing::TempDir tmp;
  testing::RunJson run;
  run.tags = {{"trainscope.stalls.batch_size", "16"}};  // report_test reads the older param
  testing::RankJson rank;
  rank.status = "FINISHED";
  const auto dir = testing::write_run_dir(tmp.path() / "run", run, {rank});
  std::int64_t t = 1'700'000'000'000'000'000;
  constexpr std::int64_t kMs = 1'000'000;
  const std::string rows = testing::timed_loader_rows(
      2, 10, 10 * kMs,
      [](int pass, int b) -> std::int64_t { return (pass == 0 ? (b == 0 ? 50 : 1) : 4) * kMs; },
      &t);
  testing::write_file(dir / "regions-0.csv", rows, /*append=*/true);
  absl::StatusOr<RunStalls> stalls = analyze_run(dir.string());
  ASSERT_TRUE(stalls.ok()) << stalls.status();
  ASSERT_EQ(stalls->passes.size(), 2u);
  EXPECT_EQ(stalls->batch_size, 16);
  EXPECT_EQ(stalls->status, "FINISHED");
  EXPECT_EQ(stalls->passes[0].batches, 10u);
  // The passes' shares are their steps' past the warm-up (docs/steps.md): a
  // step's period runs to the next step's start, so pass 1's steps 6-10 hold
  // 4 of its later waits (1 ms) and pass 2's first (4 ms: between the
  // passes), 8 ms of 4 * 11 + 14 ms; steps 1-5 are warm-up; the wait for the
  // very first batch (50 ms) is before any step.
  EXPECT_NEAR(stalls->passes[0].wait_s, 0.008, 1e-9);
  EXPECT_NEAR(stalls->passes[0].wall_s, 0.058, 1e-9);
  EXPECT_TRUE(stalls->passes[0].bunched);  // the IO rows' start-up share: 51 of 59 ms
  EXPECT_NEAR(stalls->passes[1].share, 0.036 / 0.136, 1e-9);
  EXPECT_FALSE(stalls->passes[1].bunched);
  EXPECT_NEAR(stalls->total.share, 0.044 / 0.194, 1e-9);
  EXPECT_EQ(stalls->iteration_s.size(), 20u);
  EXPECT_EQ(input_bound_class(stalls->total.share), "highly");
  // Iterations 11..18 (pass 2, but its last, which waits for nothing): 4 ms of every 14.
  EXPECT_NEAR(measured_wait_share(*stalls, 11, 8), 4.0 / 14, 1e-9);
}

TEST(StallsAnalysis, EveryRankGetsItsShare) {
  // Two ranks of one pass of 4 batches, 10 ms steps: rank 0 waits 1 ms a
  // batch, rank 1 (a slower loader) 10 ms.
  testing::TempDir tmp;
  testing::RankJson r0, r1;
  r0.world_size = r1.world_size = 2;
  r1.rank = 1;
  r1.pid = 2;
  const auto dir = testing::write_run_dir(tmp.path() / "run", {}, {r0, r1});
  constexpr std::int64_t kMs = 1'000'000;
  for (const std::uint32_t rank : {0u, 1u}) {
    const std::int64_t wait = (rank == 0 ? 1 : 10) * kMs;
    std::int64_t t = 1'700'000'000'000'000'000;
    testing::write_file(dir / fmt::format("regions-{}.csv", rank),
                        testing::timed_loader_rows(
                            1, 4, 10 * kMs, [&](int, int) { return wait; }, &t, rank),
                        /*append=*/true);
  }
  absl::StatusOr<RunStalls> stalls = analyze_run(dir.string());
  ASSERT_TRUE(stalls.ok()) << stalls.status();
  EXPECT_EQ(stalls->rank, 0u);
  ASSERT_EQ(stalls->ranks.size(), 2u);
  EXPECT_EQ(stalls->ranks[0].rank, 0u);
  // Over the steps' periods: the waits for batches 2-4 (the first is before any step).
  EXPECT_NEAR(stalls->ranks[0].total.share, 3.0 / 43, 1e-9);
  EXPECT_EQ(stalls->ranks[1].rank, 1u);
  EXPECT_NEAR(stalls->ranks[1].total.share, 30.0 / 70, 1e-9);
  const nlohmann::json j = nlohmann::json::parse(run_stalls_json(*stalls));
  ASSERT_EQ(j.at("ranks").size(), 2u);
  EXPECT_EQ(j.at("ranks")[1].at("rank"), 1);
  EXPECT_NEAR(j.at("ranks")[1].at("data_wait_share").get<double>(), 30.0 / 70, 1e-9);
  EXPECT_EQ(j.at("ranks")[1].at("input_bound"), "highly");
}

TEST(StallsAnalysis, ARunWithoutIoRowsSaysHowToTimeTheLoader) {
  testing::TempDir tmp;
  testing::RankJson rank;
  const auto dir = testing::write_run_dir(tmp.path() / "run", {}, {rank});
  absl::StatusOr<RunStalls> stalls = analyze_run(dir.string());
  ASSERT_FALSE(stalls.ok());
  EXPECT_NE(stalls.status().message().find("tmr.timed(loader)"), std::string::npos)
      << stalls.status();
}

}  // namespace
}  // namespace trainscope::stalls
