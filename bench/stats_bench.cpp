// Cost of turning a key's samples into TimeStats, against the full sort it
// replaces, and the per-sample cost of the sketch past the exact cap.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ratio_reporter.hpp"
#include "trainscope/stats/detail/moments.hpp"
#include "trainscope/stats/detail/quantile_sketch.hpp"
#include "trainscope/stats/detail/sample_series.hpp"

namespace {

using trainscope::stats::detail::Moments;
using trainscope::stats::detail::QuantileSketch;

constexpr std::size_t kMillion = 1'000'000;

// Training-step-like durations: lognormal around 1 ms, plus a 100x stall
// every ~10k steps (checkpointing, data-loader hiccups).
const std::vector<std::int64_t>& Durations() {
  static const std::vector<std::int64_t> ns = [] {
    std::mt19937_64 rng(2024);
    std::lognormal_distribution<double> step(std::log(1e6), 0.25);
    std::vector<std::int64_t> v(kMillion);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = std::llround(step(rng) * (rng() % 10'000 == 0 ? 100 : 1));
    return v;
  }();
  return ns;
}

void BM_StdSort_1M(benchmark::State& state) {
  const std::vector<std::int64_t>& ns = Durations();
  std::vector<std::int64_t> scratch;
  for (auto _ : state) {
    scratch = ns;
    std::sort(scratch.begin(), scratch.end());
    benchmark::DoNotOptimize(scratch.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ns.size()));
}
BENCHMARK(BM_StdSort_1M)->Unit(benchmark::kMillisecond);

void BM_StatsFromSamples_1M(benchmark::State& state) {
  const std::vector<std::int64_t>& ns = Durations();
  Moments moments;
  for (const auto v : ns) moments.add(v);
  std::vector<std::int64_t> scratch;
  for (auto _ : state) {
    scratch = ns;
    benchmark::DoNotOptimize(trainscope::stats::detail::stats_from_samples(moments, &scratch));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ns.size()));
}
BENCHMARK(BM_StatsFromSamples_1M)->Unit(benchmark::kMillisecond);

void BM_SketchAdd(benchmark::State& state) {
  const std::vector<std::int64_t>& ns = Durations();
  QuantileSketch sketch(0.01);
  std::size_t i = 0;
  for (auto _ : state) {
    sketch.add(ns[i]);
    i = i + 1 == ns.size() ? 0 : i + 1;
  }
  benchmark::DoNotOptimize(sketch.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SketchAdd);

}  // namespace

int main(int argc, char** argv) {
  // Deep500 sorts (NumPy) to get its median; a million samples should cost
  // under a tenth of even a C++ full sort.
  return trainscope::bench::run_with_ratios(argc, argv,
                                            {{"BM_StatsFromSamples_1M", "BM_StdSort_1M", 0.1}});
}
