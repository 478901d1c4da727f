// Records per second the local run store sustains on one core (the pipeline
// thread's write path: format, append, renew the heartbeat) and bytes per
// record on disk, against two baselines measured in the same run: formatting
// the same CSV lines into a buffer, and one raw write() of those bytes.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "ratio_reporter.hpp"
#include "run/run_store_exporter.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using trainscope::testing::TempDir;

// Records per flush: a 1 s interval at ~1000 records/s (every batch of a fast
// loop timed with a few keys, plus 10 Hz samples).
constexpr std::size_t kBatch = 1024;
constexpr std::int64_t kStartNs = 1'750'000'000'000'000'000;

std::vector<RegionSample> region_batch() {
  const KeyId keys[] = {Key(TimeType::BATCH).id(), Key(TimeType::FORWARD).id(),
                        Key(TimeType::BACKWARD).id(), Key("data_loader").id()};
  std::vector<RegionSample> batch(kBatch);
  for (std::size_t i = 0; i < kBatch; ++i) {
    batch[i].key = keys[i % 4];
    batch[i].device = i % 8 < 6 ? Device::kCPU : Device::kGPU;
    batch[i].start_unix_ns = kStartNs + static_cast<std::int64_t>(i) * 2'500'000;
    batch[i].duration_ns = 1'000'000 + static_cast<std::int64_t>(i * 7919 % 900'000);
  }
  return batch;
}

std::vector<MetricPoint> metric_batch() {
  std::vector<MetricPoint> batch(kBatch);
  for (std::size_t i = 0; i < kBatch; ++i) {
    batch[i] = {i % 2 == 0 ? "train/loss" : "train/accuracy", 1.0 / (1.0 + static_cast<double>(i)),
                static_cast<std::int64_t>(i), 1'750'000'000'000 + static_cast<std::int64_t>(i), 0};
  }
  return batch;
}

std::shared_ptr<run::detail::RunStoreExporter> make_store(const TempDir& dir) {
  absl::StatusOr<std::shared_ptr<run::detail::RunStoreExporter>> store =
      run::detail::RunStoreExporter::Create({dir.str(), RankInfo{}, absl::Seconds(1), 0});
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    std::abort();
  }
  return *store;
}

void report(benchmark::State& state, const std::string& path, std::size_t header_bytes) {
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
  const double records = static_cast<double>(state.iterations()) * kBatch;
  state.counters["bytes_per_record"] =
      static_cast<double>(fs::file_size(path) - header_bytes) / records;
}

void BM_RunStoreRegions(benchmark::State& state) {
  const TempDir dir("run_store_bench");
  auto store = make_store(dir);
  const std::vector<RegionSample> batch = region_batch();
  for (auto _ : state) {
    (void)store->write_samples(batch);
    (void)store->flush();
  }
  report(state, dir.str() + "/" + run::detail::regions_file_name(0),
         run::detail::kRegionsHeader.size());
}
BENCHMARK(BM_RunStoreRegions);

void BM_RunStoreMetrics(benchmark::State& state) {
  const TempDir dir("run_store_bench");
  auto store = make_store(dir);
  const std::vector<MetricPoint> batch = metric_batch();
  for (auto _ : state) {
    (void)store->write_metrics(batch);
    (void)store->flush();
  }
  report(state, dir.str() + "/" + run::detail::metrics_file_name(0),
         run::detail::kMetricsHeader.size());
}
BENCHMARK(BM_RunStoreMetrics);

// What a flush with nothing to append costs: renewing the rank file's heartbeat.
void BM_RunStoreHeartbeat(benchmark::State& state) {
  const TempDir dir("run_store_bench");
  auto store = make_store(dir);
  for (auto _ : state) (void)store->flush();
}
BENCHMARK(BM_RunStoreHeartbeat);

// Baseline: the same region lines formatted with fmt into a reused buffer.
std::string format_regions(const std::vector<RegionSample>& batch, std::string* out) {
  out->clear();
  auto it = std::back_inserter(*out);
  for (const RegionSample& s : batch) {
    fmt::format_to(it, "{},{},0,{},{},{},0,0\n", Key::FromId(s.key).name(), device_name(s.device),
                   s.thread, s.start_unix_ns, s.duration_ns);
  }
  return *out;
}

void BM_BaselineFmtRegionLines(benchmark::State& state) {
  const std::vector<RegionSample> batch = region_batch();
  std::string buffer;
  for (auto _ : state) {
    format_regions(batch, &buffer);
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}
BENCHMARK(BM_BaselineFmtRegionLines);

// Baseline: one append-mode write() of the same bytes, already formatted.
void BM_BaselineRawWrite(benchmark::State& state) {
  const TempDir dir("run_store_bench");
  std::string buffer;
  format_regions(region_batch(), &buffer);
  const std::string path = dir.str() + "/raw.csv";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  for (auto _ : state) {
    if (::write(fd, buffer.data(), buffer.size()) != static_cast<ssize_t>(buffer.size())) {
      state.SkipWithError("write failed");
      break;
    }
  }
  ::close(fd);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}
BENCHMARK(BM_BaselineRawWrite);

}  // namespace
}  // namespace trainscope

int main(int argc, char** argv) {
  return trainscope::bench::run_with_ratios(
      argc, argv,
      {{"BM_RunStoreRegions", "BM_BaselineFmtRegionLines", 0.0},
       {"BM_RunStoreRegions", "BM_BaselineRawWrite", 0.0},
       {"BM_RunStoreMetrics", "BM_BaselineFmtRegionLines", 0.0}});
}
