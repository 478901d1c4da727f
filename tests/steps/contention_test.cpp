// The contention share (docs/steps.md): the tree's run-queue wait per second,
// averaged over the readings of a range, at most 1, with its interval; read
// from a run directory written by hand, and on hand-made ranks.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {
namespace {

using testing::RankJson;
using testing::RunJson;
using testing::TempDir;

TEST(ContentionShare, IsTheRankTreesWaitPerSecondOverTheReadings) {
  TempDir tmp;
  RankJson rank;
  rank.status = "FINISHED";
  rank.end_time_ms = 2;
  rank.heartbeat_ms = 2;
  const auto dir = testing::write_run_dir(tmp.file("run"), RunJson{}, {rank});
  std::string host = testing::kMetricsHeader;
  for (int i = 0; i < 4; ++i) {
    const std::string t = std::to_string(1000 + i * 1000);
    host += std::string(host::kCpuUtilMetric) + ",90," + std::to_string(i) + "," + t + ",\n";
    host += std::string(host::kCpuStealMetric) + ",3," + std::to_string(i) + "," + t + ",\n";
    // 100% of one core running; waiting the whole second (i even) or half of it.
    host += std::string(host::kProcCpuMetric) + ",100," + std::to_string(i) + "," + t + ",0\n";
    host += std::string(host::kProcCpuWaitMetric) + "," + (i % 2 == 0 ? "100" : "50") + "," +
            std::to_string(i) + "," + t + ",0\n";
  }
  testing::write_file(dir / "host-h.csv", host);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<RunSteps> s = read_steps(*reader);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->ranks.size(), 1u);
  EXPECT_EQ(s->ranks[0].cpu_wait_pct.size(), 4u);
  ASSERT_EQ(s->hosts.size(), 1u);
  EXPECT_DOUBLE_EQ(s->hosts[0].samples.at(0).steal_pct, 3.0);

  const ContentionShare all = contention_share({&s->ranks[0]});
  EXPECT_EQ(all.readings, 4u);
  EXPECT_NEAR(all.share, 0.75, 1e-12);
  EXPECT_LT(all.low, all.share);
  EXPECT_GT(all.high, all.share);
  // A range: the last two readings only.
  const ContentionShare late = contention_share({&s->ranks[0]}, 2500, 5000);
  EXPECT_EQ(late.readings, 2u);
  EXPECT_NEAR(late.share, 0.75, 1e-12);
}

TEST(ContentionShare, UnknownWithoutWaitReadingsAtMostOne) {
  RankSteps old_run;  // recorded before the wait was sampled
  old_run.cpu_pct = {{1000, 100.0}, {2000, 100.0}};
  EXPECT_FALSE(contention_share({&old_run}).known());
  EXPECT_TRUE(std::isnan(contention_share({&old_run}).share));
  RankSteps one;
  one.cpu_wait_pct = {{1000, 40.0}};
  const ContentionShare c = contention_share({&one});
  EXPECT_DOUBLE_EQ(c.share, 0.4);
  EXPECT_TRUE(std::isnan(c.low));  // one reading: no interval
  RankSteps many_threads;          // eight threads waiting half the time each: 400% of one core
  many_threads.cpu_wait_pct = {{1000, 400.0}, {2000, 400.0}};
  EXPECT_DOUBLE_EQ(contention_share({&many_threads}).share, 1.0);
}

TEST(ContentionShare, SteadyWaitHasANarrowInterval) {
  RankSteps steady, noisy;
  for (int i = 0; i < 20; ++i) {
    steady.cpu_pct[i * 1000] = 100;
    steady.cpu_wait_pct[i * 1000] = 25;
    noisy.cpu_pct[i * 1000] = 100;
    noisy.cpu_wait_pct[i * 1000] = i % 2 == 0 ? 5 : 45;
  }
  const ContentionShare a = contention_share({&steady});
  const ContentionShare b = contention_share({&noisy});
  EXPECT_DOUBLE_EQ(a.share, 0.25);
  EXPECT_NEAR(a.high - a.low, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(b.share, 0.25);
  EXPECT_GT(b.high - b.low, 0.05);
}

// The step wait share (docs/steps.md): the step threads' waits summed over
// their steps' periods, of ranks whose rows carry the wait, from a step on.
RankSteps waited_steps(std::uint32_t rank, std::vector<std::pair<double, double>> wait_period) {
  RankSteps r;
  r.rank = rank;
  r.cpu_wait_measured = true;
  std::int64_t start = 0;
  for (const auto& [wait, period] : wait_period) {
    Step s;
    s.start_ns = start;
    s.period_s = period;
    s.cpu_wait_s = wait;
    r.history.push_back(s);
    start += static_cast<std::int64_t>(period * 1e9);
  }
  return r;
}

TEST(StepWaitShare, IsTheWaitsOverThePeriodsOfTheSteps) {
  // 0.01 s of 0.1 s, then 0.06 s of 0.2 s: (0.01 * 5 + 0.06 * 5) / (0.5 + 1.0).
  std::vector<std::pair<double, double>> steps(5, {0.01, 0.1});
  steps.insert(steps.end(), 5, {0.06, 0.2});
  const RankSteps r = waited_steps(0, steps);
  const ContentionShare all = step_wait_share({&r});
  EXPECT_EQ(all.readings, 10u);
  EXPECT_NEAR(all.share, 0.35 / 1.5, 1e-12);
  EXPECT_LT(all.low, all.share);
  EXPECT_GT(all.high, all.share);
  // From the sixth step on (it starts at 0.5 s): 0.3 s of 1.0 s, all alike.
  const ContentionShare late = step_wait_share({&r}, 500'000'000);
  EXPECT_EQ(late.readings, 5u);
  EXPECT_NEAR(late.share, 0.3, 1e-12);
  EXPECT_NEAR(late.high - late.low, 0.0, 1e-9);
}

TEST(StepWaitShare, PoolsRanksThatMeasuredItAndIsUnknownWithoutThem) {
  const RankSteps a = waited_steps(0, std::vector<std::pair<double, double>>(4, {0.0, 0.1}));
  const RankSteps b = waited_steps(1, std::vector<std::pair<double, double>>(4, {0.05, 0.1}));
  RankSteps unmeasured = waited_steps(2, std::vector<std::pair<double, double>>(4, {0.1, 0.1}));
  unmeasured.cpu_wait_measured = false;
  EXPECT_NEAR(step_wait_share({&a, &b, &unmeasured, nullptr}).share, 0.25, 1e-12);
  EXPECT_NEAR(step_wait_share({&b}).share, 0.5, 1e-12);
  const ContentionShare none = step_wait_share({&unmeasured});
  EXPECT_FALSE(none.known());
  EXPECT_TRUE(std::isnan(none.share));
  // One step: a share, no interval.
  const RankSteps one = waited_steps(0, {{0.02, 0.1}});
  const ContentionShare single = step_wait_share({&one});
  EXPECT_NEAR(single.share, 0.2, 1e-12);
  EXPECT_TRUE(std::isnan(single.low));
}

}  // namespace
}  // namespace trainscope::steps
