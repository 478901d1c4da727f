// The real NVML path (DlopenNvml, NvmlSource) against nvidia-smi, read at the
// same moments while the GPU is busy. Skips where libnvidia-ml.so.1 or
// nvidia-smi is missing, or nothing can keep the GPU busy (a build without
// CUDA, a failed cudaMalloc).
//
// "The same moment": each nvidia-smi reading is taken between two NVML
// readings, and must lie within [min, max] of them widened by a tolerance:
//   memory used  2 MiB (nvidia-smi rounds to MiB; both use the v2 "used")
//   temperature  2 °C  (integer degrees, the die warms under load)
//   power        15 W or 15 %, whichever is larger (both are ~1 s averages
//                with their own sampling phase; nvidia-smi itself takes
//                ~0.1-0.5 s to start)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
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

namespace trainscope::nvml {
namespace {

struct SmiRow {
  double memory_used_mib = 0;
  double temperature_c = 0;
  std::optional<double> power_w;  // "[N/A]" on some boards
};

// nvidia-smi's rows by index (NVML's index order, PCI bus order).
std::optional<std::vector<SmiRow>> nvidia_smi() {
  FILE* pipe = ::popen(
      "nvidia-smi --query-gpu=memory.used,temperature.gpu,power.draw --format=csv,noheader,nounits "
      "2>/dev/null",
      "r");
  if (pipe == nullptr) return std::nullopt;
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  if (::pclose(pipe) != 0 || text.empty()) return std::nullopt;
  std::vector<SmiRow> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    SmiRow row;
    std::string power;
    fields >> row.memory_used_mib >> row.temperature_c >> power;
    if (!fields.fail() && power.find("N/A") == std::string::npos) row.power_w = std::stod(power);
    rows.push_back(row);
  }
  return rows;
}

struct NvmlRow {
  double memory_used_mib = 0;
  double temperature_c = 0;
  std::optional<double> power_w;
};

NvmlRow read_nvml(NvmlApi& api, unsigned index) {
  NvmlRow row;
  absl::StatusOr<Device> device = api.device_by_index(index);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return row;
  absl::StatusOr<MemoryInfo> memory = api.memory(*device);
  absl::StatusOr<unsigned> temperature = api.temperature_c(*device);
  absl::StatusOr<unsigned> power = api.power_mw(*device);
  EXPECT_TRUE(memory.ok()) << memory.status();
  EXPECT_TRUE(temperature.ok()) << temperature.status();
  if (memory.ok())
    row.memory_used_mib = static_cast<double>(memory->used_bytes) / (1024.0 * 1024.0);
  if (temperature.ok()) row.temperature_c = *temperature;
  if (power.ok()) row.power_w = *power / 1000.0;
  return row;
}

void expect_between(double smi, double a, double b, double tolerance, const std::string& what) {
  EXPECT_GE(smi, std::min(a, b) - tolerance) << what << ": NVML read " << a << " then " << b;
  EXPECT_LE(smi, std::max(a, b) + tolerance) << what << ": NVML read " << a << " then " << b;
}

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
  for (int round = 0; round < 5; ++round) {
    std::vector<NvmlRow> before;
    for (unsigned i = 0; i < *count; ++i) before.push_back(read_nvml(api, i));
    const std::optional<std::vector<SmiRow>> smi = nvidia_smi();
    std::vector<NvmlRow> after;
    for (unsigned i = 0; i < *count; ++i) after.push_back(read_nvml(api, i));
    ASSERT_TRUE(smi.has_value());
    ASSERT_EQ(smi->size(), *count);
    for (unsigned i = 0; i < *count; ++i) {
      const std::string gpu = "round " + std::to_string(round) + " GPU " + std::to_string(i);
      expect_between((*smi)[i].memory_used_mib, before[i].memory_used_mib, after[i].memory_used_mib,
                     2.0, gpu + " memory used MiB");
      expect_between((*smi)[i].temperature_c, before[i].temperature_c, after[i].temperature_c, 2.0,
                     gpu + " temperature C");
      if ((*smi)[i].power_w && before[i].power_w && after[i].power_w) {
        const double tolerance = std::max(15.0, 0.15 * *(*smi)[i].power_w);
        expect_between(*(*smi)[i].power_w, *before[i].power_w, *after[i].power_w, tolerance,
                       gpu + " power W");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // The comparisons above hold either way; they were not all under load.
  if (!load.running()) GTEST_SKIP() << "the load stopped: " << load.why_not();
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
