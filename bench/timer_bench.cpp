// Host cost of a region (start + end) against bare clock reads measured in the
// same run, and memory per sample. GPU benchmarks report an error (skipped)
// when no GPU is visible.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "ratio_reporter.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/stats/detail/sample_series.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"
#include "trainscope/timing/timer.hpp"

#if defined(TRAINSCOPE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace trainscope {
namespace {

void BM_BareSteadyClockPair(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::chrono::steady_clock::now());
    benchmark::DoNotOptimize(std::chrono::steady_clock::now());
  }
}
BENCHMARK(BM_BareSteadyClockPair);

void BM_TimerPair(benchmark::State& state) {
  TimerOptions options;
  options.nvtx = state.range(0) != 0;
  Timer timer(options);
  for (auto _ : state) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  // Keep memory flat across long runs: samples are not what is measured here.
  state.counters["samples"] = static_cast<double>(timer.get_time_stats(TimeType::BATCH).count);
}
BENCHMARK(BM_TimerPair)->Arg(1)->Arg(0)->ArgName("nvtx");

void BM_TimerTryPair(benchmark::State& state) {
  Timer timer;
  for (auto _ : state) {
    benchmark::DoNotOptimize(timer.try_start(TimeType::BATCH));
    benchmark::DoNotOptimize(timer.try_end(TimeType::BATCH));
  }
}
BENCHMARK(BM_TimerTryPair);

void BM_TimerPairNamedKey(benchmark::State& state) {
  Timer timer;
  const Key key("data_aug");
  for (auto _ : state) {
    timer.start(key);
    timer.end(key);
  }
}
BENCHMARK(BM_TimerPairNamedKey);

void BM_TimerPairWithPipeline(benchmark::State& state) {
  ExportPipeline pipeline;
  Timer timer;
  timer.attach(pipeline);
  for (auto _ : state) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  timer.detach();
  state.counters["dropped"] = static_cast<double>(pipeline.dropped_samples());
}
BENCHMARK(BM_TimerPairWithPipeline);

void BM_CPUGPUTimerPairCpuOnly(benchmark::State& state) {
  CPUGPUTimer timer(std::make_shared<testing::SimulatedEventSource>());
  for (auto _ : state) {
    timer.start(TimeType::BATCH, false);
    timer.end(TimeType::BATCH, false);
  }
}
BENCHMARK(BM_CPUGPUTimerPairCpuOnly);

// Host-side bookkeeping of a GPU region (pool, FIFO, harvest) with the
// simulated source, which itself costs a map lookup per call.
void BM_CPUGPUTimerPairSimulatedGpu(benchmark::State& state) {
  auto sim = std::make_shared<testing::SimulatedEventSource>();
  CPUGPUTimer timer(sim);
  for (auto _ : state) {
    timer.start(TimeType::BATCH, true);
    timer.end(TimeType::BATCH, true);
    sim->advance(1000);
  }
  state.counters["blocking_waits"] = static_cast<double>(timer.blocking_waits());
}
BENCHMARK(BM_CPUGPUTimerPairSimulatedGpu);

// Bytes per completed sample in exact mode.
void BM_ExactBytesPerSample(benchmark::State& state) {
  for (auto _ : state) {
    detail::SampleSeries series(0, std::size_t{1} << 30, 0.01);
    const std::size_t empty = series.memory_bytes();
    constexpr int kSamples = 1'000'000;
    for (int i = 0; i < kSamples; ++i) series.add(1'000'000 + (i % 977));
    state.counters["bytes_per_sample"] =
        static_cast<double>(series.memory_bytes() - empty) / kSamples;
  }
}
BENCHMARK(BM_ExactBytesPerSample)->Iterations(1)->Unit(benchmark::kMillisecond);

// Memory of one key after 10^8 samples in bounded (sketch) mode.
void BM_BoundedMemoryAfter1e8(benchmark::State& state) {
  for (auto _ : state) {
    detail::SampleSeries series(0, 1'000'000, 0.01);
    std::uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 100'000'000; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      series.add(1000 + static_cast<std::int64_t>(x % 100'000'000));  // 1 us .. 100 ms
    }
    state.counters["bytes"] = static_cast<double>(series.memory_bytes());
    state.counters["count"] = static_cast<double>(series.count());
  }
}
BENCHMARK(BM_BoundedMemoryAfter1e8)->Iterations(1)->Unit(benchmark::kMillisecond);

#if defined(TRAINSCOPE_HAVE_CUDA)
bool gpu_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void BM_BareCudaEventRecordPair(benchmark::State& state) {
  if (!gpu_visible()) {
    state.SkipWithError("no GPU visible");
    return;
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (auto _ : state) {
    cudaEventRecord(a, nullptr);
    cudaEventRecord(b, nullptr);
  }
  cudaDeviceSynchronize();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}
BENCHMARK(BM_BareCudaEventRecordPair);

void BM_CPUGPUTimerPairCuda(benchmark::State& state) {
  if (!gpu_visible()) {
    state.SkipWithError("no GPU visible");
    return;
  }
  CPUGPUTimerOptions options;
  options.nvtx = false;
  CPUGPUTimer timer(options);
  for (auto _ : state) {
    timer.start(TimeType::BATCH, true);
    timer.end(TimeType::BATCH, true);
  }
  state.counters["blocking_waits_in_loop"] = static_cast<double>(timer.blocking_waits());
  timer.complete_all();
}
BENCHMARK(BM_CPUGPUTimerPairCuda);
#endif

}  // namespace
}  // namespace trainscope

int main(int argc, char** argv) {
  return trainscope::bench::run_with_ratios(
      argc, argv,
      {{"BM_TimerPair/nvtx:1", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerPair/nvtx:0", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerTryPair", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerPairNamedKey", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerPairWithPipeline", "BM_BareSteadyClockPair", 0},
       {"BM_CPUGPUTimerPairCpuOnly", "BM_BareSteadyClockPair", 2.0},
       {"BM_CPUGPUTimerPairCuda", "BM_BareCudaEventRecordPair", 1.2}});
}
