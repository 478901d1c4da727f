// The NVML calls trainscope makes, as an interface: load_nvml() gives the
// driver's library (libnvidia-ml.so.1, loaded at run time: no build-time
// dependency on the driver, no vendor header), the tests drive the GPU
// sources and the sweep's slot and MIG lookups with a simulated device.
// Public on purpose: the rooms above hardware/gpu (sweep) query GPUs through
// it, never through NVML's internals.
#ifndef TRAINSCOPE_HARDWARE_GPU_NVML_API_HPP_
#define TRAINSCOPE_HARDWARE_GPU_NVML_API_HPP_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope::nvml {

// An NVML device handle (a whole GPU or a MIG instance); valid until
// NvmlApi::shutdown().
using Device = const void*;

struct Utilization {
  unsigned gpu_pct = 0;     // time a kernel ran over the driver's last period
  unsigned memory_pct = 0;  // time device memory was read or written
};

struct MemoryInfo {
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;
};

enum class Clock { kSm, kMemory };
enum class PcieDirection { kTx, kRx };

struct ProcessMemory {
  pid_t pid = 0;
  std::optional<std::uint64_t> used_bytes;  // unset where NVML cannot tell
};

struct ProcessUtilization {
  pid_t pid = 0;
  std::uint64_t timestamp_us = 0;  // CPU time of the driver's sample
  unsigned sm_pct = 0;
};

// Errors follow one convention, relied on by NvmlSource: kUnavailable means
// NVML or the GPU is gone (lost GPU, driver unloaded, not initialised) and
// nothing more can be read; kNotFound from process_utilization() means "no
// sample since `since_us`"; from mig_device() "no instance at this index";
// any other code concerns that one call on that one device (not supported,
// no permission, symbol missing from an older driver).
class NvmlApi {
 public:
  virtual ~NvmlApi() = default;
  virtual absl::Status init() = 0;
  virtual void shutdown() = 0;
  virtual absl::StatusOr<unsigned> device_count() = 0;
  virtual absl::StatusOr<Device> device_by_index(unsigned index) = 0;
  virtual absl::StatusOr<std::string> uuid(Device device) = 0;
  virtual absl::StatusOr<Utilization> utilization(Device device) = 0;
  virtual absl::StatusOr<MemoryInfo> memory(Device device) = 0;
  virtual absl::StatusOr<unsigned> power_mw(Device device) = 0;
  virtual absl::StatusOr<std::uint64_t> energy_mj(Device device) = 0;
  virtual absl::StatusOr<unsigned> temperature_c(Device device) = 0;
  virtual absl::StatusOr<unsigned> clock_mhz(Device device, Clock clock) = 0;
  virtual absl::StatusOr<unsigned> pcie_kb_s(Device device, PcieDirection direction) = 0;
  virtual absl::StatusOr<std::uint64_t> throttle_reasons(Device device) = 0;
  virtual absl::StatusOr<std::vector<ProcessMemory>> compute_processes(Device device) = 0;
  virtual absl::StatusOr<std::vector<ProcessUtilization>> process_utilization(
      Device device, std::uint64_t since_us) = 0;
  virtual absl::StatusOr<bool> mig_enabled(Device device) = 0;
  virtual absl::StatusOr<unsigned> max_mig_devices(Device device) = 0;
  virtual absl::StatusOr<Device> mig_device(Device device, unsigned index) = 0;
  virtual absl::StatusOr<unsigned> gpu_instance_id(Device mig_device) = 0;
};

// The driver's NVML through dlopen: nothing is loaded before init(), which
// fails (NotFound naming the library) where no NVIDIA driver is installed. A
// symbol an older driver lacks makes that one call fail with kUnimplemented.
std::unique_ptr<NvmlApi> load_nvml(std::string library = "libnvidia-ml.so.1");

// Whether the driver's NVML library can be loaded at all (a dlopen, no init):
// false on a machine without an NVIDIA driver.
bool driver_library_present(const std::string& library = "libnvidia-ml.so.1");

// How many GPUs NVML lists through `api` (init and shutdown around the call):
// 0 with the reason in *why ("no NVIDIA GPU/driver found (...)", NVML's error,
// "NVML lists no GPU") when none can be used. A null `api`: 0, "no NVML".
unsigned count_gpus(NvmlApi* api, std::string* why);

// OK when `devices` is empty or each index names a GPU NVML lists; else
// InvalidArgument naming `flag`, the index and what the machine has:
// "--devices 7: this machine has no GPU (no NVIDIA GPU/driver found ...)",
// "--devices: GPU 7 does not exist (this machine has 2 GPU(s): 0-1)".
absl::Status check_gpu_indices(const std::string& flag, const std::vector<int>& devices,
                               NvmlApi* api);
// The same against a count already read (count_gpus's and its reason).
absl::Status check_gpu_indices(const std::string& flag, const std::vector<int>& devices,
                               unsigned count, const std::string& why);

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_HARDWARE_GPU_NVML_API_HPP_
