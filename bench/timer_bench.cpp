// Host cost of a region (start + end) against bare clock reads measured in the
// same run, and memory per sample. GPU benchmarks report an error (skipped)
// when no GPU is visible.
//
// The export limits of an attached timer, into a real run store (temporary
// directory): the sustained limit (records/s the pipeline thread writes, and a
// paced loop at 1M regions/s that must drop nothing) and the burst capacity
// (regions an unpaced loop ends before the first drop; a 1M burst must drop
// nothing), against formatting the same lines alone on one core.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "ratio_reporter.hpp"
#include "run/run_format.hpp"
#include "run/run_store_exporter.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/host/sched_stats.hpp"
#include "trainscope/stats/detail/sample_series.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
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

// What a reading of the timing thread's run-queue wait costs (issue 41; a step
// reads it twice, BM_TimerPairWithPipeline/step_wait:1): one pread of /proc/thread-self/schedstat
// on a descriptor kept open, and its parse, against a Timer pair (the ratio is reported).
void BM_ThreadSchedstatRead(benchmark::State& state) {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    state.SkipWithError("no /proc/thread-self/schedstat");
    return;
  }
  char buffer[128];
  host::SchedStat stat;
  for (auto _ : state) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
    benchmark::DoNotOptimize(host::parse_schedstat(
        std::string_view(buffer, n > 0 ? static_cast<std::size_t>(n) : 0), &stat));
  }
  ::close(fd);
  state.counters["wait_ms"] = static_cast<double>(stat.wait_ns) / 1e6;
}
BENCHMARK(BM_ThreadSchedstatRead);

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

// Every region also goes to the pipeline, whose thread drains it (no
// exporter): the producer's side of the export queue. The step key, BATCH,
// with and without its run-queue wait read at start and end (step_wait, on
// by default for an attached timer: the two reads are the difference).
void BM_TimerPairWithPipeline(benchmark::State& state) {
  ExportPipeline pipeline;
  TimerOptions options;
  options.step_wait = state.range(0) != 0;
  Timer timer(options);
  timer.attach(pipeline);
  for (auto _ : state) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  timer.detach();
  state.counters["dropped"] = static_cast<double>(pipeline.dropped_samples());
}
BENCHMARK(BM_TimerPairWithPipeline)->Arg(0)->Arg(1)->ArgName("step_wait");

// ---- Export limits into a real run store ----

namespace fs = std::filesystem;
using trainscope::testing::TempDir;
using Clock = std::chrono::steady_clock;

// A timer attached to a pipeline whose exporter is a run store, as Run builds it.
struct RunStoreSetup {
  explicit RunStoreSetup(
      std::size_t max_pending_bytes = ExportPipeline::Options{}.max_pending_bytes)
      : pipeline(options(max_pending_bytes)) {
    absl::StatusOr<std::shared_ptr<run::detail::RunStoreExporter>> created =
        run::detail::RunStoreExporter::Create({dir.str(), RankInfo{}, absl::Seconds(1), 0});
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      std::abort();
    }
    store = *created;
    pipeline.add_exporter(store);
    timer.attach(pipeline);
  }
  static ExportPipeline::Options options(std::size_t max_pending_bytes) {
    ExportPipeline::Options o;
    o.flush_interval = absl::Seconds(1);  // Run's default
    o.max_pending_bytes = max_pending_bytes;
    return o;
  }
  // Everything on disk; samples lost by the queues or the store.
  std::uint64_t finish() {
    timer.detach();
    pipeline.flush();
    return pipeline.dropped_samples() + store->dropped_records();
  }
  // Data rows in the regions file (a check that the figures are real).
  double rows_on_disk() const {
    std::FILE* f = std::fopen((dir.str() + "/" + run::detail::regions_file_name(0)).c_str(), "rb");
    if (f == nullptr) return -1;
    std::vector<char> block(1 << 20);
    double lines = 0;
    for (std::size_t n; (n = std::fread(block.data(), 1, block.size(), f)) > 0;) {
      for (std::size_t i = 0; i < n; ++i) lines += block[i] == '\n';
    }
    std::fclose(f);
    return lines - 1;  // the header
  }

  const TempDir dir{"timer_bench"};
  ExportPipeline pipeline;
  std::shared_ptr<run::detail::RunStoreExporter> store;
  Timer timer{quiet_options()};

  static TimerOptions quiet_options() {
    TimerOptions o;
    o.nvtx = false;
    return o;
  }
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Sustained limit: an unpaced burst of 4M regions with a bound that never
// drops, timed until the last one is on disk. The producer is far faster
// than the store, so this is the pipeline thread's write rate.
void BM_ExportRateToRunStore(benchmark::State& state) {
  constexpr int kRegions = 4'000'000;
  for (auto _ : state) {
    RunStoreSetup setup(std::size_t{1} << 30);
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kRegions; ++i) {
      setup.timer.start(TimeType::BATCH);
      setup.timer.end(TimeType::BATCH);
    }
    const std::uint64_t dropped = setup.finish();
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    state.counters["records_per_s"] = kRegions / elapsed;
    state.counters["dropped"] = static_cast<double>(dropped);
    state.counters["rows"] = setup.rows_on_disk();
  }
}
BENCHMARK(BM_ExportRateToRunStore)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// A loop paced at `rate` regions/s for 3 s (busy-waiting in batches of 1000),
// default bound: what must drop nothing.
void BM_PacedToRunStore(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(0));
  constexpr int kBatch = 1000;
  constexpr double kSeconds = 3.0;
  const int batches = static_cast<int>(rate * kSeconds / kBatch);
  for (auto _ : state) {
    RunStoreSetup setup;
    const Clock::time_point t0 = Clock::now();
    for (int b = 0; b < batches; ++b) {
      const Clock::time_point due = t0 + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(b * kBatch / rate));
      while (Clock::now() < due) {
      }
      for (int i = 0; i < kBatch; ++i) {
        setup.timer.start(TimeType::BATCH);
        setup.timer.end(TimeType::BATCH);
      }
    }
    const double pushed_for = seconds_since(t0);
    state.counters["achieved_rate"] = batches * kBatch / pushed_for;
    state.counters["dropped"] = static_cast<double>(setup.finish());
    state.counters["rows"] = setup.rows_on_disk();
    state.SetIterationTime(pushed_for);
  }
}
BENCHMARK(BM_PacedToRunStore)
    ->Arg(1'000'000)
    ->Arg(2'000'000)
    ->ArgName("rate")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Burst capacity: an unpaced loop (far faster than any store) with the
// default bound, until its first drop (at most 40M regions).
void BM_BurstToFirstDrop(benchmark::State& state) {
  constexpr int kMax = 40'000'000;
  constexpr int kCheckEvery = 4096;
  for (auto _ : state) {
    RunStoreSetup setup;
    int regions = 0;
    const Clock::time_point t0 = Clock::now();
    while (regions < kMax && setup.pipeline.dropped_samples() == 0) {
      for (int i = 0; i < kCheckEvery; ++i) {
        setup.timer.start(TimeType::BATCH);
        setup.timer.end(TimeType::BATCH);
      }
      regions += kCheckEvery;
    }
    const double elapsed = seconds_since(t0);
    setup.finish();
    state.SetIterationTime(elapsed);
    state.counters["absorbed"] = regions;  // to the check that saw the first drop
    state.counters["burst_rate"] = regions / elapsed;
  }
}
BENCHMARK(BM_BurstToFirstDrop)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// A burst of 1M regions, default bound: must drop nothing.
void BM_Burst1M(benchmark::State& state) {
  constexpr int kRegions = 1'000'000;
  for (auto _ : state) {
    RunStoreSetup setup;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kRegions; ++i) {
      setup.timer.start(TimeType::BATCH);
      setup.timer.end(TimeType::BATCH);
    }
    state.SetIterationTime(seconds_since(t0));
    state.counters["dropped"] = static_cast<double>(setup.finish());
    state.counters["rows"] = setup.rows_on_disk();
  }
}
BENCHMARK(BM_Burst1M)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// Baseline: the same region lines formatted with fmt into a reused buffer, on
// one core (the store's work without statistics and write()).
void BM_BaselineFmtRegionLines(benchmark::State& state) {
  constexpr int kLines = 4096;
  std::string buffer;
  const std::string_view key = Key(TimeType::BATCH).name();
  std::int64_t start = 1'750'000'000'000'000'000;
  for (auto _ : state) {
    buffer.clear();
    auto out = std::back_inserter(buffer);
    for (int i = 0; i < kLines; ++i) {
      fmt::format_to(out, "{},CPU,0,0,{},{},{},0\n", key, start, 1000 + i % 977, i);
      start += 1500;
    }
    benchmark::DoNotOptimize(buffer.data());
  }
  state.counters["records_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kLines, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BaselineFmtRegionLines);

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
    stats::detail::SampleSeries series(0, std::size_t{1} << 30, 0.01);
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
    stats::detail::SampleSeries series(0, 1'000'000, 0.01);
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
       {"BM_TimerPair/nvtx:0", "BM_BareSteadyClockPair", 1.25},
       {"BM_TimerTryPair", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerPairNamedKey", "BM_BareSteadyClockPair", 1.5},
       {"BM_TimerPairWithPipeline", "BM_BareSteadyClockPair", 0},
       {"BM_ThreadSchedstatRead", "BM_TimerPair/nvtx:0", 0},
       {"BM_CPUGPUTimerPairCpuOnly", "BM_BareSteadyClockPair", 2.0},
       {"BM_CPUGPUTimerPairCuda", "BM_BareCudaEventRecordPair", 1.2}},
      {{"BM_ExportRateToRunStore", "records_per_s", 1e6, 0, "BM_BaselineFmtRegionLines",
        "records_per_s"},
       {"BM_ExportRateToRunStore", "dropped", 0, 0.5},
       {"BM_ExportRateToRunStore", "rows", 4e6, 0},
       {"BM_PacedToRunStore/rate:1000000", "dropped", 0, 0.5},
       {"BM_PacedToRunStore/rate:1000000", "achieved_rate", 0, 0},
       {"BM_PacedToRunStore/rate:1000000", "rows", 3e6, 0},
       {"BM_PacedToRunStore/rate:2000000", "dropped", 0, 0},
       {"BM_PacedToRunStore/rate:2000000", "achieved_rate", 0, 0},
       {"BM_Burst1M", "dropped", 0, 0.5},
       {"BM_Burst1M", "rows", 1e6, 0},
       {"BM_BurstToFirstDrop", "absorbed", 1e6, 0},
       {"BM_BurstToFirstDrop", "burst_rate", 0, 0}});
}
