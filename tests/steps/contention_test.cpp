// The contention share (docs/steps.md): the tree's run-queue wait per second,
// averaged over the readings of a range, at most 1, with its interval; read
// from a run directory written by hand, and on hand-made ranks.
#include <cmath>
#include <string>
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

}  // namespace
}  // namespace trainscope::steps
