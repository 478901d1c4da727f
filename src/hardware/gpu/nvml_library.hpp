// The driver's NVML (libnvidia-ml.so.1), loaded at run time with dlopen: no
// build-time dependency on the driver or the CUDA toolkit.
#ifndef TRAINSCOPE_SRC_HARDWARE_GPU_NVML_LIBRARY_HPP_
#define TRAINSCOPE_SRC_HARDWARE_GPU_NVML_LIBRARY_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainscope/hardware/gpu/nvml_api.hpp"

namespace trainscope::nvml {

// libnvidia-ml.so.1 through dlopen/dlsym, with the C prototypes and struct
// layouts of nvml_abi.hpp (nvml.h is not needed). A symbol an older driver
// lacks makes that one call fail with kUnimplemented.
class DlopenNvml final : public NvmlApi {
 public:
  explicit DlopenNvml(std::string library = "libnvidia-ml.so.1");
  ~DlopenNvml() override;
  DlopenNvml(const DlopenNvml&) = delete;
  DlopenNvml& operator=(const DlopenNvml&) = delete;

  absl::Status init() override;
  void shutdown() override;
  absl::StatusOr<unsigned> device_count() override;
  absl::StatusOr<Device> device_by_index(unsigned index) override;
  absl::StatusOr<std::string> uuid(Device device) override;
  absl::StatusOr<Utilization> utilization(Device device) override;
  absl::StatusOr<MemoryInfo> memory(Device device) override;
  absl::StatusOr<unsigned> power_mw(Device device) override;
  absl::StatusOr<std::uint64_t> energy_mj(Device device) override;
  absl::StatusOr<unsigned> temperature_c(Device device) override;
  absl::StatusOr<unsigned> clock_mhz(Device device, Clock clock) override;
  absl::StatusOr<unsigned> pcie_kb_s(Device device, PcieDirection direction) override;
  absl::StatusOr<std::uint64_t> throttle_reasons(Device device) override;
  absl::StatusOr<std::vector<ProcessMemory>> compute_processes(Device device) override;
  absl::StatusOr<std::vector<ProcessUtilization>> process_utilization(
      Device device, std::uint64_t since_us) override;
  absl::StatusOr<bool> mig_enabled(Device device) override;
  absl::StatusOr<unsigned> max_mig_devices(Device device) override;
  absl::StatusOr<Device> mig_device(Device device, unsigned index) override;
  absl::StatusOr<unsigned> gpu_instance_id(Device mig_device) override;

  struct Functions;  // the resolved symbols; defined in nvml_library.cpp

 private:
  std::string library_;
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::unique_ptr<Functions> fn_;
};

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_SRC_HARDWARE_GPU_NVML_LIBRARY_HPP_
