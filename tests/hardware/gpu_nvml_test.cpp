// The real NVML path (DlopenNvml, NvmlSource) against nvidia-smi, read at the
// same moments while the GPU is busy. Skips where libnvidia-ml.so.1 or
// nvidia-smi is missing, or nothing can keep the GPU busy (a build without
// CUDA, a failed cudaMalloc).
//
// "The same moment": each nvidia-smi reading is taken between two NVML
// readings, and must lie within [min, max] of them widened by 2% or one unit
// of the metric (nvidia-smi prints integers, and memory in MiB), whichever is
// larger. Each metric's largest distance outside that bracket and from the
// bracket's middle are recorded as test properties (the GPU suite reports them).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(TRAINSCOPE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "gtest/gtest.h"
#include "hardware/gpu/nvml_library.hpp"
#include "hardware/gpu/nvml_source.hpp"
#include "trainscope/hardware/gpu/nvml_api.hpp"

namespace trainscope::nvml {
namespace {

// One reading of each compared metric, by name; a metric the board does not
// report ("[N/A]", or an NVML error of kind "not supported") is absent.
using Readings = std::map<std::string, double>;

struct Metric {
  const char* name;       // as in the figures
  const char* smi_field;  // nvidia-smi --query-gpu field
  double unit;            // one unit of nvidia-smi's output
};
constexpr Metric kMetrics[] = {
    {"memory_used_mib", "memory.used", 1.0},
    {"temperature_c", "temperature.gpu", 1.0},
    {"power_w", "power.draw", 0.01},
    {"utilization_gpu_pct", "utilization.gpu", 1.0},
    {"clock_sm_mhz", "clocks.sm", 1.0},
    {"clock_memory_mhz", "clocks.mem", 1.0},
    {"utilization_memory_pct", "utilization.memory", 1.0},
};

// nvidia-smi's readings by index (NVML's index order, PCI bus order).
std::optional<std::vector<Readings>> nvidia_smi() {
  std::string query;
  for (const Metric& m : kMetrics) query += std::string(query.empty() ? "" : ",") + m.smi_field;
  const std::string command =
      "nvidia-smi --query-gpu=" + query + " --format=csv,noheader,nounits 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  if (::pclose(pipe) != 0 || text.empty()) return std::nullopt;
  std::vector<Readings> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    Readings row;
    std::istringstream fields(line);
    std::string field;
    for (const Metric& m : kMetrics) {
      if (!std::getline(fields, field, ',')) break;
      char* end = nullptr;
      const double value = std::strtod(field.c_str(), &end);
      if (end != field.c_str()) row[m.name] = value;
    }
    rows.push_back(row);
  }
  return rows;
}

Readings read_nvml(NvmlApi& api, unsigned index) {
  Readings row;
  absl::StatusOr<Device> device = api.device_by_index(index);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return row;
  absl::StatusOr<MemoryInfo> memory = api.memory(*device);
  EXPECT_TRUE(memory.ok()) << memory.status();
  if (memory.ok()) row["memory_used_mib"] = memory->used_bytes / (1024.0 * 1024.0);
  if (absl::StatusOr<unsigned> t = api.temperature_c(*device); t.ok()) row["temperature_c"] = *t;
  if (absl::StatusOr<unsigned> p = api.power_mw(*device); p.ok()) row["power_w"] = *p / 1000.0;
  if (absl::StatusOr<Utilization> u = api.utilization(*device); u.ok()) {
    row["utilization_gpu_pct"] = u->gpu_pct;
    row["utilization_memory_pct"] = u->memory_pct;
  }
  if (absl::StatusOr<unsigned> c = api.clock_mhz(*device, Clock::kSm); c.ok()) {
    row["clock_sm_mhz"] = *c;
  }
  if (absl::StatusOr<unsigned> c = api.clock_mhz(*device, Clock::kMemory); c.ok()) {
    row["clock_memory_mhz"] = *c;
  }
  return row;
}

// The largest distances seen per metric, over rounds and GPUs.
struct Deviation {
  double outside_bracket = 0;  // beyond [min, max] of the two NVML readings
  double from_middle = 0;      // from their mean
  int compared = 0;
};

// Keeps GPU 0 busy (memory traffic through cudaMemset) until destroyed, as
// long as running() says so; why_not() says why it is not (a build without
// CUDA, or a CUDA call that failed, at the start or later).
class GpuLoad {
 public:
  GpuLoad() {
#if defined(TRAINSCOPE_HAVE_CUDA)
    if (const cudaError_t error = cudaMalloc(&buffer_, kBytes); error != cudaSuccess) {
      buffer_ = nullptr;
      why_not_ = std::string("cudaMalloc of 1 GiB failed: ") + cudaGetErrorString(error);
      return;
    }
    // One round here, so that a GPU that cannot run it is known before the
    // comparison starts.
    if (const cudaError_t error = memset_round(0); error != cudaSuccess) {
      why_not_ = std::string("cudaMemset failed: ") + cudaGetErrorString(error);
      return;
    }
    thread_ = std::thread([this] {
      for (int value = 1; !stop_.load(); ++value) {
        if (const cudaError_t error = memset_round(value); error != cudaSuccess) {
          loop_error_.store(error);
          return;
        }
      }
    });
#else
    why_not_ = "built without CUDA: nothing loads the GPU";
#endif
  }
  ~GpuLoad() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
#if defined(TRAINSCOPE_HAVE_CUDA)
    if (buffer_ != nullptr) cudaFree(buffer_);
#endif
  }
  GpuLoad(const GpuLoad&) = delete;
  GpuLoad& operator=(const GpuLoad&) = delete;

  bool running() const { return why_not().empty(); }
  std::string why_not() const {
#if defined(TRAINSCOPE_HAVE_CUDA)
    if (const cudaError_t error = loop_error_.load(); why_not_.empty() && error != cudaSuccess) {
      return std::string("cudaMemset failed: ") + cudaGetErrorString(error);
    }
#endif
    return why_not_;
  }

 private:
#if defined(TRAINSCOPE_HAVE_CUDA)
  cudaError_t memset_round(int value) {
    if (const cudaError_t error = cudaMemset(buffer_, value & 0xff, kBytes); error != cudaSuccess) {
      return error;
    }
    return cudaDeviceSynchronize();
  }
#endif

  static constexpr std::size_t kBytes = std::size_t{1} << 30;
  void* buffer_ = nullptr;
  std::string why_not_;  // set before the thread starts
#if defined(TRAINSCOPE_HAVE_CUDA)
  std::atomic<cudaError_t> loop_error_{cudaSuccess};
#endif
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(GpuNvml, MatchesNvidiaSmiUnderLoad) {
  DlopenNvml api;
  if (absl::Status status = api.init(); !status.ok()) {
    GTEST_SKIP() << "NVML unavailable, nothing to compare: " << status;
  }
  absl::StatusOr<unsigned> count = api.device_count();
  ASSERT_TRUE(count.ok()) << count.status();
  if (*count == 0) GTEST_SKIP() << "NVML sees no GPU";
  if (!nvidia_smi()) GTEST_SKIP() << "nvidia-smi not found or failed";

  GpuLoad load;
  if (!load.running()) GTEST_SKIP() << "no load to compare under: " << load.why_not();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let power and clocks settle
  std::map<std::string, Deviation> deviations;
  for (int round = 0; round < 8; ++round) {
    std::vector<Readings> before;
    for (unsigned i = 0; i < *count; ++i) before.push_back(read_nvml(api, i));
    const std::optional<std::vector<Readings>> smi = nvidia_smi();
    std::vector<Readings> after;
    for (unsigned i = 0; i < *count; ++i) after.push_back(read_nvml(api, i));
    ASSERT_TRUE(smi.has_value());
    ASSERT_EQ(smi->size(), *count);
    for (unsigned i = 0; i < *count; ++i) {
      for (const Metric& m : kMetrics) {
        const auto s = (*smi)[i].find(m.name);
        const auto a = before[i].find(m.name);
        const auto b = after[i].find(m.name);
        if (s == (*smi)[i].end() || a == before[i].end() || b == after[i].end()) continue;
        const double low = std::min(a->second, b->second);
        const double high = std::max(a->second, b->second);
        const double tolerance = std::max(m.unit, 0.02 * std::abs(s->second));
        Deviation& d = deviations[m.name];
        d.outside_bracket = std::max({d.outside_bracket, low - s->second, s->second - high, 0.0});
        d.from_middle = std::max(d.from_middle, std::abs(s->second - (low + high) / 2));
        ++d.compared;
        EXPECT_GE(s->second, low - tolerance)
            << "round " << round << " GPU " << i << " " << m.name << ": NVML read " << a->second
            << " then " << b->second << ", nvidia-smi " << s->second;
        EXPECT_LE(s->second, high + tolerance)
            << "round " << round << " GPU " << i << " " << m.name << ": NVML read " << a->second
            << " then " << b->second << ", nvidia-smi " << s->second;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (const auto& [name, d] : deviations) {
    std::ostringstream figure;
    figure << "outside_bracket=" << d.outside_bracket << " from_middle=" << d.from_middle
           << " compared=" << d.compared;
    ::testing::Test::RecordProperty(name, figure.str());
  }
  // Memory, temperature and the SM clock are read by every NVML board.
  for (const char* name : {"memory_used_mib", "temperature_c", "clock_sm_mhz"}) {
    EXPECT_GT(deviations[name].compared, 0) << name << " was never compared";
  }
  // The comparisons above hold either way; they were not all under load.
  if (!load.running()) GTEST_SKIP() << "the load stopped: " << load.why_not();
}

// load_nvml(), the public factory the sweep finds its GPUs with, sees the
// GPUs nvidia-smi lists, in its order.
TEST(GpuNvml, LoadNvmlListsTheGpusNvidiaSmiLists) {
  std::unique_ptr<NvmlApi> api = load_nvml();
  if (absl::Status status = api->init(); !status.ok()) {
    GTEST_SKIP() << "NVML unavailable: " << status;
  }
  const std::optional<std::vector<Readings>> smi = nvidia_smi();
  if (!smi) GTEST_SKIP() << "nvidia-smi not found or failed";
  absl::StatusOr<unsigned> count = api->device_count();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, smi->size());
  for (unsigned i = 0; i < *count; ++i) {
    absl::StatusOr<Device> device = api->device_by_index(i);
    ASSERT_TRUE(device.ok()) << device.status();
    absl::StatusOr<std::string> uuid = api->uuid(*device);
    ASSERT_TRUE(uuid.ok()) << uuid.status();
    EXPECT_EQ(uuid->rfind("GPU-", 0), 0u) << *uuid;
  }
  api->shutdown();
}

TEST(GpuNvml, SourceNamesPhysicalDevices) {
  if (absl::Status status = DlopenNvml().init(); !status.ok()) {
    GTEST_SKIP() << "NVML unavailable: " << status;
  }
  NvmlSource source(std::make_unique<DlopenNvml>(), std::nullopt);
  ASSERT_TRUE(source.open({}).ok());
  std::vector<HardwareReading> readings;
  ASSERT_TRUE(source.sample(&readings).ok());
  std::map<std::string, double> values;
  for (const HardwareReading& r : readings) values[r.name] = r.value;
  // Every GPU reports its memory (MIG-mode GPUs included).
  ASSERT_TRUE(values.count("system/gpu.0.mem_total_mb")) << readings.size() << " readings";
  EXPECT_GT(values["system/gpu.0.mem_total_mb"], 1000);
  EXPECT_TRUE(values.count("system/gpu.0.proc.mem_used_mb"));
}

}  // namespace
}  // namespace trainscope::nvml
