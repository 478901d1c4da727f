// The ledger (steps/ledger.hpp) on hand-made steps and work: rates over the
// steps with work, the FLOP-counted step left out, MFU against the GPU table,
// a measured peak or --peak-flops, and the notes that say what is missing.
#include "trainscope/steps/ledger.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainscope/hardware/gpu/peak_flops.hpp"
#include "trainscope/hardware/host/rapl.hpp"
#include "trainscope/run/step_work.hpp"

namespace trainscope::steps {
namespace {

using ::testing::HasSubstr;

RankSteps rank_with(std::uint32_t rank, const std::vector<double>& periods) {
  RankSteps out;
  out.rank = rank;
  for (std::size_t i = 0; i < periods.size(); ++i) {
    Step step;
    step.step = static_cast<std::int64_t>(i);
    step.period_s = periods[i];
    out.history.push_back(step);
  }
  out.steps = periods.size();
  return out;
}

MetricPoint point(std::string_view key, double value, std::int64_t step) {
  MetricPoint out;
  out.key = std::string(key);
  out.value = value;
  out.step = step;
  return out;
}

std::vector<MetricPoint> work(int steps, double samples, double tokens) {
  std::vector<MetricPoint> out;
  for (int i = 0; i < steps; ++i) {
    out.push_back(point(kStepSamplesMetric, samples, i));
    out.push_back(point(kStepTokensMetric, tokens, i));
  }
  return out;
}

TEST(LedgerTest, RatesAreTheWorkOverTheSummedPeriodsAndSumOverRanks) {
  RunSteps steps;
  steps.ranks = {rank_with(0, {0.1, 0.1, 0.1, 0.1}), rank_with(1, {0.2, 0.2, 0.2, 0.2})};
  steps.info.params[std::string(kStepFlopsParam)] = "1e+09";
  steps.info.params[std::string(kStepDeviceParam)] = "NVIDIA A100-SXM4-80GB";
  steps.info.params[std::string(kStepDtypeParam)] = "bf16";
  const Ledger ledger = conclude_ledger(steps, {work(4, 8, 1000), work(4, 8, 1000)});
  ASSERT_EQ(ledger.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(ledger.ranks[0].tokens_per_s, 10000.0);
  EXPECT_DOUBLE_EQ(ledger.ranks[1].tokens_per_s, 5000.0);
  EXPECT_DOUBLE_EQ(ledger.tokens_per_s, 15000.0);
  EXPECT_DOUBLE_EQ(ledger.samples_per_s, 80.0 + 40.0);
  EXPECT_DOUBLE_EQ(ledger.achieved_flops, 1e10 + 5e9);
  EXPECT_DOUBLE_EQ(ledger.peak_flops, 312e12);
  EXPECT_THAT(ledger.peak_source, HasSubstr("A100 bf16 dense"));
  EXPECT_DOUBLE_EQ(ledger.mfu, (1e10 / 312e12 + 5e9 / 312e12) / 2);
  ASSERT_EQ(ledger.notes.size(), 1u);  // no energy readings: said so
  EXPECT_THAT(ledger.notes[0], HasSubstr("energy: not recorded"));
}

TEST(LedgerTest, TheCountedStepAndStepsWithoutWorkAreLeftOut) {
  RunSteps steps;
  steps.ranks = {rank_with(0, {0.1, 0.1, 0.1, 5.0, 0.1, 9.0})};
  steps.info.params[std::string(kStepFlopsParam)] = "2e+06";
  steps.info.params[std::string(kStepFlopsStepParam)] = "3";  // slowed by the counting
  steps.info.params[std::string(kPeakFlopsParam)] = "1e+08";
  steps.info.params[std::string(kPeakSourceParam)] = "cpu GEMM probe";
  // Work for steps 0..4; step 5 (9 s) has none.
  const Ledger ledger = conclude_ledger(steps, {work(5, 4, 64)});
  ASSERT_EQ(ledger.ranks.size(), 1u);
  EXPECT_EQ(ledger.steps, 4u);
  EXPECT_DOUBLE_EQ(ledger.ranks[0].seconds, 0.4);
  EXPECT_DOUBLE_EQ(ledger.tokens_per_s, 4 * 64 / 0.4);
  EXPECT_DOUBLE_EQ(ledger.mfu, 2e6 / 0.1 / 1e8);
  EXPECT_EQ(ledger.peak_source, "cpu GEMM probe");
}

// Seen on pytorch/examples' word_language_model under --auto: "MFU 122.5% of 25.9 GFLOP/s"
// against a CPU probe cached while the machine was busy. Above 1 is impossible: no MFU, a note.
TEST(LedgerTest, AnAchievedRateAboveThePeakShowsNoMfuAndSaysThePeakIsTooLow) {
  RunSteps steps;
  steps.ranks = {rank_with(0, {0.1, 0.1, 0.1}), rank_with(1, {0.4, 0.4, 0.4})};
  steps.info.params[std::string(kStepFlopsParam)] = "3e+09";  // 30 GFLOP/s on rank 0
  steps.info.params[std::string(kPeakFlopsParam)] = "2.5e+10";
  steps.info.params[std::string(kPeakSourceParam)] = "cpu GEMM probe, cached";
  const Ledger ledger = conclude_ledger(steps, {work(3, 4, 64), work(3, 4, 64)});
  EXPECT_TRUE(std::isnan(ledger.mfu));
  ASSERT_EQ(ledger.ranks.size(), 2u);
  EXPECT_TRUE(std::isnan(ledger.ranks[0].mfu));
  EXPECT_TRUE(std::isnan(ledger.ranks[1].mfu));            // 0.3 alone, but the peak is known wrong
  EXPECT_DOUBLE_EQ(ledger.ranks[0].achieved_flops, 3e10);  // the rates stay
  EXPECT_THAT(ledger.notes, ::testing::Contains(HasSubstr(
                                "MFU not shown: the achieved 30 GFLOP/s is above the peak of 25 "
                                "GFLOP/s (cpu GEMM probe, cached)")));
  EXPECT_THAT(format_ledger_line(ledger), ::testing::Not(HasSubstr("MFU 1")));
  const MfuBasis basis = mfu_basis(steps.info, {});
  EXPECT_TRUE(std::isnan(basis.step_mfu(steps.ranks[0].history[0])));
  EXPECT_DOUBLE_EQ(basis.step_mfu(steps.ranks[1].history[0]), 3e9 / 0.4 / 2.5e10);
}

TEST(LedgerTest, PeakFlopsGivenWinsAndMissingFiguresSayWhy) {
  RunSteps steps;
  steps.ranks = {rank_with(0, {0.5, 0.5})};
  std::vector<MetricPoint> samples_only = {point(kStepSamplesMetric, 2, 0),
                                           point(kStepSamplesMetric, 2, 1)};
  steps.info.tags[std::string(kFlopsNoteTag)] = "not counted: torch 1.13 has no FlopCounterMode";
  LedgerOptions options;
  options.peak_flops = 5e9;
  const Ledger ledger = conclude_ledger(steps, {samples_only}, options);
  EXPECT_DOUBLE_EQ(ledger.samples_per_s, 4.0);
  EXPECT_TRUE(std::isnan(ledger.tokens_per_s));
  EXPECT_TRUE(std::isnan(ledger.mfu));
  EXPECT_EQ(ledger.peak_source, "--peak-flops");
  ASSERT_EQ(ledger.notes.size(), 2u);
  EXPECT_THAT(ledger.notes[0], HasSubstr("torch 1.13 has no FlopCounterMode"));
  EXPECT_THAT(format_ledger_line(ledger), HasSubstr("ledger: 4 samples/s; FLOPs not counted"));

  const Ledger none = conclude_ledger(steps, {{}});
  EXPECT_TRUE(none.ranks.empty());
  EXPECT_THAT(none.notes[0], HasSubstr("no work recorded"));
}

TEST(LedgerTest, AnUnknownGpuOrTypeHasNoPeakAndSaysSo) {
  RunSteps steps;
  steps.ranks = {rank_with(0, {0.5})};
  steps.info.params[std::string(kStepFlopsParam)] = "1e+12";
  steps.info.params[std::string(kStepDeviceParam)] = "NVIDIA GeForce GTX 1080";
  steps.info.params[std::string(kStepDtypeParam)] = "fp32";
  Ledger ledger = conclude_ledger(steps, {work(1, 1, 1)});
  EXPECT_TRUE(std::isnan(ledger.mfu));
  EXPECT_THAT(ledger.notes.at(0), HasSubstr("not in the GPU table (give --peak-flops)"));
  steps.info.params[std::string(kStepDeviceParam)] = "NVIDIA A100-PCIE-40GB";
  steps.info.params[std::string(kStepDtypeParam)] = "fp8";
  ledger = conclude_ledger(steps, {work(1, 1, 1)});
  EXPECT_THAT(ledger.notes.at(0), HasSubstr("A100 has no fp8 unit"));
}

TEST(LedgerTest, EnergyOverTheStepsTimeGivesPerStepPerTokensCostAndCo2) {
  RunSteps steps;
  RankSteps rank = rank_with(0, {1.0, 1.0, 1.0, 1.0});
  const std::int64_t t0 = 1'700'000'000'000'000'000;  // Unix ns
  for (std::size_t i = 0; i < rank.history.size(); ++i) {
    rank.history[i].start_ns = t0 + static_cast<std::int64_t>(i) * 1'000'000'000;
  }
  steps.ranks = {rank};
  // 100 W from 1 s before the steps to 1 s after: 4 s of steps, 400 J (readings every 2 s).
  const std::int64_t ms0 = t0 / 1'000'000;
  EnergySeries host = {{ms0 - 1000, 0}, {ms0 + 1000, 200}, {ms0 + 3000, 400}, {ms0 + 5000, 600}};
  LedgerOptions options;
  options.price_per_kwh = 0.36;     // per 3.6e6 J
  options.grams_co2_per_kwh = 360;  // likewise
  const Ledger ledger =
      conclude_ledger(steps, {work(4, 2, 500)}, options, {{EnergySource::kCpuRapl, host}});
  EXPECT_DOUBLE_EQ(ledger.seconds, 4.0);
  EXPECT_NEAR(ledger.energy_j, 400.0, 1e-9);
  EXPECT_NEAR(ledger.energy_per_step_j, 100.0, 1e-9);
  EXPECT_NEAR(ledger.energy_per_1k_tokens_j, 400.0 / 2.0, 1e-9);
  EXPECT_NEAR(ledger.cost, 0.36 * 400 / 3.6e6, 1e-15);
  EXPECT_NEAR(ledger.co2_g, 360 * 400 / 3.6e6, 1e-12);
  EXPECT_THAT(format_ledger_line(ledger), HasSubstr("400 J CPU energy, 100 J/step"));
  EXPECT_NEAR(ledger.cpu_energy_j, 400.0, 1e-9);
  EXPECT_TRUE(std::isnan(ledger.gpu_energy_j));

  // Two GPUs' NVML counters beside it (one 250 W, one 50 W over the 4 s): CPU and GPUs summed.
  EnergySeries gpu0 = {{ms0 - 500, 1e6}, {ms0 + 4500, 1e6 + 1250}};
  EnergySeries gpu1 = {{ms0 - 500, 7e5}, {ms0 + 4500, 7e5 + 250}};
  const Ledger both = conclude_ledger(steps, {work(4, 2, 500)}, options,
                                      {{EnergySource::kCpuRapl, host},
                                       {EnergySource::kGpuNvml, gpu0},
                                       {EnergySource::kGpuNvml, gpu1}});
  EXPECT_NEAR(both.gpu_energy_j, 1000.0 + 200.0, 1e-6);
  EXPECT_EQ(both.gpus, 2u);
  EXPECT_NEAR(both.energy_j, 1600.0, 1e-6);
  EXPECT_NEAR(both.energy_per_1k_tokens_j, 1600.0 / 2.0, 1e-6);
  EXPECT_THAT(format_ledger_line(both), HasSubstr("1.6 kJ energy (CPU 400 J, 2 GPUs 1.2 kJ)"));
  const Ledger gpus_only =
      conclude_ledger(steps, {work(4, 2, 500)}, options, {{EnergySource::kGpuNvml, gpu0}});
  EXPECT_THAT(format_ledger_line(gpus_only), HasSubstr("1 kJ GPU energy (1 GPU)"));

  // No readings: the run's tag says why, once, in the notes.
  steps.info.tags[std::string(host::kEnergyNoteTag)] =
      "no RAPL energy: /sys/class/powercap does not exist";
  const Ledger none = conclude_ledger(steps, {work(4, 2, 500)}, options);
  EXPECT_TRUE(std::isnan(none.energy_j));
  EXPECT_THAT(format_ledger_line(none), HasSubstr("energy: no RAPL energy: /sys/class/powercap"));
}

TEST(PeakFlopsTest, NamesFindTheirRowAndNoNeighboursOne) {
  using nvml::find_gpu_peak;
  using nvml::PeakDtype;
  EXPECT_EQ(find_gpu_peak("NVIDIA H100 80GB HBM3")->model, "H100 SXM");
  EXPECT_EQ(find_gpu_peak("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_EQ(find_gpu_peak("NVIDIA H200")->model, "H200 SXM");
  EXPECT_EQ(find_gpu_peak("NVIDIA A100-SXM4-40GB")->model, "A100");
  EXPECT_EQ(find_gpu_peak("NVIDIA A10")->model, "A10");
  EXPECT_EQ(find_gpu_peak("NVIDIA L4")->model, "L4");
  EXPECT_EQ(find_gpu_peak("NVIDIA L40S")->model, "L40S");
  EXPECT_EQ(find_gpu_peak("Tesla T4")->model, "T4");
  EXPECT_EQ(find_gpu_peak("NVIDIA L40"), nullptr);  // no row: not the L4's nor the L40S's
  EXPECT_EQ(find_gpu_peak("NVIDIA A10G"), nullptr);
  EXPECT_DOUBLE_EQ(*nvml::gpu_peak_flops("NVIDIA H100 80GB HBM3", PeakDtype::kBf16), 989.5e12);
  EXPECT_EQ(nvml::parse_peak_dtype("bfloat16"), PeakDtype::kBf16);
  EXPECT_EQ(nvml::parse_peak_dtype("int8"), std::nullopt);
  for (const nvml::GpuPeak& row : nvml::gpu_peaks()) {
    EXPECT_THAT(std::string(row.source), HasSubstr("datasheet")) << row.model;
    EXPECT_GT(row.flops[0], 0) << row.model;  // every row has its fp32 figure
  }
}

}  // namespace
}  // namespace trainscope::steps
