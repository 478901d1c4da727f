#include "hardware/gpu/nvml_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "common/no_gpu.hpp"
#include "hardware/gpu/nvml_abi.hpp"

namespace trainscope::nvml {

struct DlopenNvml::Functions {
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*memory_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*pcie)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*process_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*,
                               unsigned long long) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
};

namespace {

nvmlDevice_t native(Device device) { return static_cast<nvmlDevice_t>(const_cast<void*>(device)); }

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, symbol));
}

// The first of `symbols` the driver exports (NVML renames calls across
// releases and keeps the old names for a while).
template <typename Fn>
void resolve_any(void* handle, std::initializer_list<const char*> symbols, Fn* fn) {
  for (const char* symbol : symbols) {
    resolve(handle, symbol, fn);
    if (*fn != nullptr) return;
  }
}

void resolve_all(void* h, DlopenNvml::Functions* f) {
  resolve(h, "nvmlErrorString", &f->error_string);
  resolve(h, "nvmlInit_v2", &f->init);
  resolve(h, "nvmlShutdown", &f->shutdown);
  resolve(h, "nvmlDeviceGetCount_v2", &f->device_count);
  resolve(h, "nvmlDeviceGetHandleByIndex_v2", &f->handle_by_index);
  resolve(h, "nvmlDeviceGetUUID", &f->uuid);
  resolve(h, "nvmlDeviceGetUtilizationRates", &f->utilization);
  resolve(h, "nvmlDeviceGetMemoryInfo", &f->memory);
  resolve(h, "nvmlDeviceGetMemoryInfo_v2", &f->memory_v2);
  resolve(h, "nvmlDeviceGetPowerUsage", &f->power);
  resolve(h, "nvmlDeviceGetTotalEnergyConsumption", &f->energy);
  resolve(h, "nvmlDeviceGetTemperature", &f->temperature);
  resolve(h, "nvmlDeviceGetClockInfo", &f->clock);
  resolve(h, "nvmlDeviceGetPcieThroughput", &f->pcie);
  resolve_any(
      h, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
      &f->throttle);
  resolve(h, "nvmlDeviceGetComputeRunningProcesses_v3", &f->processes);
  resolve(h, "nvmlDeviceGetProcessUtilization", &f->process_util);
  resolve(h, "nvmlDeviceGetMigMode", &f->mig_mode);
  resolve(h, "nvmlDeviceGetMaxMigDeviceCount", &f->max_mig);
  resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", &f->mig_by_index);
  resolve(h, "nvmlDeviceGetGpuInstanceId", &f->gpu_instance_id);
}

// Maps an NVML return code onto the NvmlApi convention (see nvml_api.hpp).
absl::Status to_status(const DlopenNvml::Functions& fn, nvmlReturn_t rc, const char* call) {
  if (rc == abi::kSuccess) return absl::OkStatus();
  const std::string message =
      fmt::format("{}: {}", call, fn.error_string != nullptr ? fn.error_string(rc) : "error");
  switch (rc) {
    case abi::kErrorUninitialized:
    case abi::kErrorDriverNotLoaded:
    case abi::kErrorGpuIsLost:
    case abi::kErrorResetRequired:
    case abi::kErrorLibRmVersionMismatch:
      return absl::UnavailableError(message);
    case abi::kErrorNotSupported:
      return absl::UnimplementedError(message);
    case abi::kErrorNoPermission:
      return absl::PermissionDeniedError(message);
    case abi::kErrorNotFound:
      return absl::NotFoundError(message);
    default:
      return absl::InternalError(fmt::format("{} (NVML error {})", message, rc));
  }
}

absl::Status missing(const char* call) {
  return absl::UnimplementedError(fmt::format("{}: not exported by this driver's NVML", call));
}

}  // namespace

// Calls fn_->member(args...) if the driver exports it, as a Status.
#define TS_NVML_CALL(member, symbol, ...) \
  (fn_->member == nullptr ? missing(symbol) : to_status(*fn_, fn_->member(__VA_ARGS__), symbol))

std::unique_ptr<NvmlApi> load_nvml(std::string library) {
  return std::make_unique<DlopenNvml>(std::move(library));
}

DlopenNvml::DlopenNvml(std::string library)
    : library_(std::move(library)), fn_(std::make_unique<Functions>()) {}

DlopenNvml::~DlopenNvml() {
  shutdown();
  if (handle_ != nullptr) ::dlclose(handle_);
}

absl::Status DlopenNvml::init() {
  if (handle_ == nullptr) {
    handle_ = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = ::dlerror();
      return absl::NotFoundError(fmt::format("{} ({} is not installed: {})", detail::kNoGpuFound,
                                             library_, why ? why : "dlopen failed"));
    }
    resolve_all(handle_, fn_.get());
  }
  if (fn_->init == nullptr || fn_->device_count == nullptr || fn_->handle_by_index == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("{} lacks nvmlInit_v2 or device enumeration", library_));
  }
  absl::Status status = to_status(*fn_, fn_->init(), "nvmlInit_v2");
  initialised_ = status.ok();
  return status;
}

void DlopenNvml::shutdown() {
  if (initialised_ && fn_->shutdown != nullptr) fn_->shutdown();
  initialised_ = false;
}

absl::StatusOr<unsigned> DlopenNvml::device_count() {
  unsigned count = 0;
  absl::Status status = TS_NVML_CALL(device_count, "nvmlDeviceGetCount_v2", &count);
  if (!status.ok()) return status;
  return count;
}

absl::StatusOr<Device> DlopenNvml::device_by_index(unsigned index) {
  nvmlDevice_t device = nullptr;
  absl::Status status =
      TS_NVML_CALL(handle_by_index, "nvmlDeviceGetHandleByIndex_v2", index, &device);
  if (!status.ok()) return status;
  return static_cast<Device>(device);
}

absl::StatusOr<std::string> DlopenNvml::uuid(Device device) {
  char buffer[abi::kUuidBufferSize] = {};
  absl::Status status =
      TS_NVML_CALL(uuid, "nvmlDeviceGetUUID", native(device), buffer, abi::kUuidBufferSize);
  if (!status.ok()) return status;
  return std::string(buffer);
}

absl::StatusOr<Utilization> DlopenNvml::utilization(Device device) {
  nvmlUtilization_t u{};
  absl::Status status =
      TS_NVML_CALL(utilization, "nvmlDeviceGetUtilizationRates", native(device), &u);
  if (!status.ok()) return status;
  return Utilization{u.gpu, u.memory};
}

absl::StatusOr<MemoryInfo> DlopenNvml::memory(Device device) {
  if (fn_->memory_v2 != nullptr) {
    nvmlMemory_v2_t m{};
    m.version = abi::kMemoryV2Version;
    absl::Status status =
        to_status(*fn_, fn_->memory_v2(native(device), &m), "nvmlDeviceGetMemoryInfo_v2");
    if (!status.ok()) return status;
    return MemoryInfo{m.total, m.used};
  }
  nvmlMemory_t m{};
  absl::Status status = TS_NVML_CALL(memory, "nvmlDeviceGetMemoryInfo", native(device), &m);
  if (!status.ok()) return status;
  return MemoryInfo{m.total, m.used};
}

absl::StatusOr<unsigned> DlopenNvml::power_mw(Device device) {
  unsigned mw = 0;
  absl::Status status = TS_NVML_CALL(power, "nvmlDeviceGetPowerUsage", native(device), &mw);
  if (!status.ok()) return status;
  return mw;
}

absl::StatusOr<std::uint64_t> DlopenNvml::energy_mj(Device device) {
  unsigned long long mj = 0;
  absl::Status status =
      TS_NVML_CALL(energy, "nvmlDeviceGetTotalEnergyConsumption", native(device), &mj);
  if (!status.ok()) return status;
  return static_cast<std::uint64_t>(mj);
}

absl::StatusOr<unsigned> DlopenNvml::temperature_c(Device device) {
  unsigned c = 0;
  absl::Status status = TS_NVML_CALL(temperature, "nvmlDeviceGetTemperature", native(device),
                                     abi::kTemperatureGpu, &c);
  if (!status.ok()) return status;
  return c;
}

absl::StatusOr<unsigned> DlopenNvml::clock_mhz(Device device, Clock clock) {
  unsigned mhz = 0;
  const int type = clock == Clock::kSm ? abi::kClockSm : abi::kClockMem;
  absl::Status status = TS_NVML_CALL(clock, "nvmlDeviceGetClockInfo", native(device), type, &mhz);
  if (!status.ok()) return status;
  return mhz;
}

absl::StatusOr<unsigned> DlopenNvml::pcie_kb_s(Device device, PcieDirection direction) {
  unsigned kb_s = 0;
  const int counter = direction == PcieDirection::kTx ? abi::kPcieTxBytes : abi::kPcieRxBytes;
  absl::Status status =
      TS_NVML_CALL(pcie, "nvmlDeviceGetPcieThroughput", native(device), counter, &kb_s);
  if (!status.ok()) return status;
  return kb_s;
}

absl::StatusOr<std::uint64_t> DlopenNvml::throttle_reasons(Device device) {
  unsigned long long reasons = 0;
  absl::Status status =
      TS_NVML_CALL(throttle, "nvmlDeviceGetCurrentClocksEventReasons", native(device), &reasons);
  if (!status.ok()) return status;
  return static_cast<std::uint64_t>(reasons);
}

absl::StatusOr<std::vector<ProcessMemory>> DlopenNvml::compute_processes(Device device) {
  const char* call = "nvmlDeviceGetComputeRunningProcesses_v3";
  if (fn_->processes == nullptr) return missing(call);
  // The list can grow between the sizing call and the read: retry with room.
  std::vector<nvmlProcessInfo_t> infos(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned count = static_cast<unsigned>(infos.size());
    const nvmlReturn_t rc = fn_->processes(native(device), &count, infos.data());
    if (rc == abi::kErrorInsufficientSize) {
      infos.resize(static_cast<std::size_t>(count) * 2 + 16);
      continue;
    }
    if (absl::Status status = to_status(*fn_, rc, call); !status.ok()) return status;
    std::vector<ProcessMemory> out;
    for (unsigned i = 0; i < count; ++i) {
      ProcessMemory p;
      p.pid = static_cast<pid_t>(infos[i].pid);
      if (infos[i].usedGpuMemory != abi::kValueNotAvailable) p.used_bytes = infos[i].usedGpuMemory;
      out.push_back(p);
    }
    return out;
  }
  return absl::InternalError(fmt::format("{}: process list keeps growing", call));
}

absl::StatusOr<std::vector<ProcessUtilization>> DlopenNvml::process_utilization(
    Device device, std::uint64_t since_us) {
  const char* call = "nvmlDeviceGetProcessUtilization";
  if (fn_->process_util == nullptr) return missing(call);
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned count = static_cast<unsigned>(samples.size());
    const nvmlReturn_t rc = fn_->process_util(
        native(device), samples.empty() ? nullptr : samples.data(), &count, since_us);
    if (rc == abi::kErrorInsufficientSize) {
      samples.resize(static_cast<std::size_t>(count) * 2 + 16);
      continue;
    }
    if (absl::Status status = to_status(*fn_, rc, call); !status.ok()) return status;
    std::vector<ProcessUtilization> out;
    for (unsigned i = 0; i < count && i < samples.size(); ++i) {
      out.push_back({static_cast<pid_t>(samples[i].pid), samples[i].timeStamp, samples[i].smUtil});
    }
    return out;
  }
  return absl::InternalError(fmt::format("{}: sample list keeps growing", call));
}

absl::StatusOr<bool> DlopenNvml::mig_enabled(Device device) {
  unsigned current = 0;
  unsigned pending = 0;
  absl::Status status =
      TS_NVML_CALL(mig_mode, "nvmlDeviceGetMigMode", native(device), &current, &pending);
  if (!status.ok()) return status;
  return current == abi::kMigEnabled;
}

absl::StatusOr<unsigned> DlopenNvml::max_mig_devices(Device device) {
  unsigned count = 0;
  absl::Status status =
      TS_NVML_CALL(max_mig, "nvmlDeviceGetMaxMigDeviceCount", native(device), &count);
  if (!status.ok()) return status;
  return count;
}

absl::StatusOr<Device> DlopenNvml::mig_device(Device device, unsigned index) {
  nvmlDevice_t mig = nullptr;
  absl::Status status = TS_NVML_CALL(mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex",
                                     native(device), index, &mig);
  if (!status.ok()) return status;
  return static_cast<Device>(mig);
}

absl::StatusOr<unsigned> DlopenNvml::gpu_instance_id(Device mig_device) {
  unsigned id = 0;
  absl::Status status =
      TS_NVML_CALL(gpu_instance_id, "nvmlDeviceGetGpuInstanceId", native(mig_device), &id);
  if (!status.ok()) return status;
  return id;
}

}  // namespace trainscope::nvml
