// NVML's C ABI, declared here rather than taken from nvml.h so that building
// needs neither the driver nor the CUDA toolkit. Only what DlopenNvml calls;
// layouts and values as in nvml.h (CUDA 11.x-13.x, stable across them).
#ifndef TRAINSCOPE_SRC_HARDWARE_GPU_NVML_ABI_HPP_
#define TRAINSCOPE_SRC_HARDWARE_GPU_NVML_ABI_HPP_

extern "C" {
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlDeviceGetMemoryInfo_v2: "used" without the driver's reservation, as
// nvidia-smi reports it (v1's "used" includes the reservation).
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// The layout of nvmlDeviceGetComputeRunningProcesses_v3 (v1 lacked the
// instance ids, so the versioned symbol is what fixes this layout).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
}  // extern "C"

namespace trainscope::nvml::abi {

inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorUninitialized = 1;
inline constexpr nvmlReturn_t kErrorNotSupported = 3;
inline constexpr nvmlReturn_t kErrorNoPermission = 4;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kErrorResetRequired = 16;
inline constexpr nvmlReturn_t kErrorLibRmVersionMismatch = 18;
inline constexpr int kTemperatureGpu = 0;                        // NVML_TEMPERATURE_GPU
inline constexpr int kClockSm = 1;                               // NVML_CLOCK_SM
inline constexpr int kClockMem = 2;                              // NVML_CLOCK_MEM
inline constexpr int kPcieTxBytes = 0;                           // NVML_PCIE_UTIL_TX_BYTES
inline constexpr int kPcieRxBytes = 1;                           // NVML_PCIE_UTIL_RX_BYTES
inline constexpr unsigned kMigEnabled = 1;                       // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
inline constexpr unsigned kUuidBufferSize = 96;                  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version on top.
inline constexpr unsigned kMemoryV2Version =
    static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

}  // namespace trainscope::nvml::abi

#endif  // TRAINSCOPE_SRC_HARDWARE_GPU_NVML_ABI_HPP_
