// trainscope run's live watch (trainscope/diagnosis/live_watch.hpp): the
// ledger's figures as run metrics, from the follower the capture requests use.
#include "trainscope/diagnosis/live_watch.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/diagnosis/end_of_run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/ledger.hpp"

namespace trainscope::diagnosis {
namespace {

using testing::RankJson;
using testing::RunJson;
using testing::TempDir;
using testing::write_file;
using testing::write_run_dir;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // ns
constexpr std::int64_t kMs = 1'000'000;

const RunMetric* find(const std::vector<RunMetric>& metrics, std::string_view key) {
  for (const RunMetric& m : metrics) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

TEST(LedgerRunMetrics, TheJobsFiguresThatAreNumbersAtTheMostStepsOfARank) {
  steps::Ledger ledger;
  EXPECT_TRUE(ledger_run_metrics(ledger).empty());  // no work: nothing
  ledger.ranks.resize(2);
  ledger.ranks[0].steps = 40;
  ledger.ranks[1].steps = 38;
  ledger.tokens_per_s = 5000;
  ledger.samples_per_s = 40;
  ledger.achieved_flops = 2e9;
  ledger.mfu = 0.25;  // energy unknown: NaN, left out
  const std::vector<RunMetric> metrics = ledger_run_metrics(ledger);
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_EQ(metrics[0].key, steps::kLedgerTokensPerSMetric);
  EXPECT_EQ(metrics[0].value, 5000);
  EXPECT_EQ(find(metrics, steps::kLedgerSamplesPerSMetric)->value, 40);
  EXPECT_EQ(find(metrics, steps::kLedgerFlopsPerSMetric)->value, 2e9);
  EXPECT_EQ(find(metrics, steps::kLedgerMfuMetric)->value, 0.25);
  EXPECT_EQ(find(metrics, steps::kLedgerEnergyPer1kTokensMetric), nullptr);
  for (const RunMetric& m : metrics) EXPECT_EQ(m.step, 40);
  ledger.energy_per_1k_tokens_j = 12.5;
  EXPECT_EQ(find(ledger_run_metrics(ledger), steps::kLedgerEnergyPer1kTokensMetric)->value, 12.5);
}

// Two live ranks with work: 128 tokens and 4 samples a step of 10-12 ms
// (rank 1: 5 ms more), FLOPs and peak given.
std::filesystem::path run_with_work(TempDir& tmp, int steps) {
  RankJson r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r0.world_size = r1.world_size = 2;
  r0.heartbeat_ms = r1.heartbeat_ms = trainscope::detail::unix_now_ms() + 3'600'000;
  RunJson run;
  run.params["work/flops_per_step"] = "2e+06";
  run.params["work/peak_flops"] = "1e+09";
  const auto dir = write_run_dir(tmp.file("run"), run, {r0, r1});
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    std::string regions, metrics;
    for (int i = 0; i < steps; ++i) {
      const std::int64_t period = (10 + 5 * rank + i % 3) * kMs;
      const std::int64_t start =
          kT0 + ((10 + 5 * rank) * i + 3 * (i / 3) + (i % 3 == 2 ? 1 : 0)) * kMs;
      regions += "BATCH,CPU," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
                 std::to_string(period) + "," + std::to_string(i) + ",0\n";
      metrics += "work/samples,4," + std::to_string(i) + ",1," + std::to_string(rank) + "\n";
      metrics += "work/tokens,128," + std::to_string(i) + ",1," + std::to_string(rank) + "\n";
    }
    write_file(dir / ("regions-" + std::to_string(rank) + ".csv"), regions, /*append=*/true);
    write_file(dir / ("metrics-" + std::to_string(rank) + ".csv"), metrics, /*append=*/true);
  }
  return dir;
}

TEST(LiveWatch, HandsTheLedgerOfTheRunSoFarToTheLauncherOnceForEachNewStep) {
  TempDir tmp;
  const auto dir = run_with_work(tmp, 300);
  LiveWatchOptions options;
  options.capture_on_labels = false;
  auto watch = with_live_follower(nullptr, options);
  const WatchVerdict first = watch(dir.string());
  EXPECT_EQ(first.action, WatchVerdict::Action::kContinue);
  // The same figures as the ledger read from the whole run (one derivation).
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<steps::Ledger> whole = steps::read_ledger(*reader);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const RunMetric* tokens = find(first.metrics, steps::kLedgerTokensPerSMetric);
  ASSERT_NE(tokens, nullptr);
  EXPECT_NEAR(tokens->value, whole->tokens_per_s, 1e-9 * whole->tokens_per_s);
  EXPECT_NEAR(tokens->value, 128 / 0.011 + 128 / 0.016, 0.02 * tokens->value);
  const RunMetric* mfu = find(first.metrics, steps::kLedgerMfuMetric);
  ASSERT_NE(mfu, nullptr);
  EXPECT_NEAR(mfu->value, whole->mfu, 1e-12);
  EXPECT_GT(tokens->step, 250);
  // Nothing new read: nothing logged again (no point twice at one step).
  EXPECT_TRUE(watch(dir.string()).metrics.empty());
}

TEST(LiveWatch, NoMetricsWithoutWorkOrWhenTheLedgerIsOff) {
  TempDir tmp;
  const auto dir = run_with_work(tmp, 100);
  LiveWatchOptions off;
  off.capture_on_labels = false;
  off.ledger_metrics = false;
  EXPECT_TRUE(with_live_follower(nullptr, off)(dir.string()).metrics.empty());
  // No run at the path yet: nothing, and no error (the next call looks again).
  LiveWatchOptions on;
  on.capture_on_labels = false;
  auto watch = with_live_follower(nullptr, on);
  EXPECT_TRUE(watch(tmp.file("not-yet")).metrics.empty());
}

TEST(LiveWatch, AStopOfTheInnerWatchWinsAndNothingElseIsDone) {
  TempDir tmp;
  const auto dir = run_with_work(tmp, 100);
  LiveWatchOptions options;
  auto watch = with_live_follower(
      [](const std::string&) {
        WatchVerdict v;
        v.action = WatchVerdict::Action::kStop;
        v.reason = "hang";
        return v;
      },
      options);
  const WatchVerdict verdict = watch(dir.string());
  EXPECT_EQ(verdict.action, WatchVerdict::Action::kStop);
  EXPECT_TRUE(verdict.metrics.empty());
}

// Issue 42: NVML's energy counters of the GPUs the job used (a rank's process
// tree held memory there), not of the host's other GPUs, over the steps' time.
TEST(LedgerEnergy, TheGpuEnergyIsThatOfTheJobsGpusOverTheSteps) {
  TempDir tmp;
  const auto dir = run_with_work(tmp, 300);
  std::string host = testing::kMetricsHeader;
  for (int i = -2; i <= 12; ++i) {
    const std::string ms = std::to_string(kT0 / kMs + i * 1000);
    // GPU 0 (the job's): 100 W; GPU 1 (another job's): 300 W.
    host += "system/gpu.0.energy_j," + std::to_string(5000 + 100 * (i + 2)) + ",0," + ms + ",\n";
    host += "system/gpu.1.energy_j," + std::to_string(9000 + 300 * (i + 2)) + ",0," + ms + ",\n";
    host += "system/gpu.0.proc.mem_used_mb,900,0," + ms + ",0\n";
  }
  write_file(dir / "host-h.csv", host);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<steps::Ledger> ledger = steps::read_ledger(*reader);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  EXPECT_EQ(ledger->gpus, 1u);
  ASSERT_TRUE(std::isfinite(ledger->seconds));
  EXPECT_NEAR(ledger->gpu_energy_j, 100 * ledger->seconds, 1e-6 * 100 * ledger->seconds);
  EXPECT_NEAR(ledger->energy_j, ledger->gpu_energy_j, 1e-9);  // no RAPL here
  EXPECT_TRUE(std::isnan(ledger->cpu_energy_j));
  EXPECT_THAT(steps::format_ledger_line(*ledger), ::testing::HasSubstr("GPU energy (1 GPU)"));
  // The live metrics carry it per 1k tokens.
  EXPECT_NE(find(ledger_run_metrics(*ledger), steps::kLedgerEnergyPer1kTokensMetric), nullptr);
}

TEST(EndOfRun, TheHookHandsTheLedgersFinalFiguresAsMetrics) {
  TempDir tmp;
  const auto dir = run_with_work(tmp, 200);
  LaunchResult result;
  result.run_dir = dir.string();
  auto end = std::make_shared<EndOfRun>();
  const EndRecord record = end_of_run_hook(end)(result);
  ASSERT_TRUE(end->diagnosis.has_value()) << end->error;
  ASSERT_TRUE(end->diagnosis->ledger.has_value());
  const RunMetric* tokens = find(record.metrics, steps::kLedgerTokensPerSMetric);
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->value, end->diagnosis->ledger->tokens_per_s);  // the summary's figure
  // --peak-flops reaches it: half the peak, twice the MFU.
  steps::LedgerOptions ledger;
  ledger.peak_flops = 0.5e9;
  const EndRecord halved = end_of_run_hook(std::make_shared<EndOfRun>(), {}, ledger)(result);
  EXPECT_NEAR(find(halved.metrics, steps::kLedgerMfuMetric)->value,
              2 * find(record.metrics, steps::kLedgerMfuMetric)->value, 1e-12);
}

}  // namespace
}  // namespace trainscope::diagnosis
