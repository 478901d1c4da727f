#include "hardware/gpu/nvml_source.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "hardware/gpu/dcgm_source.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/hardware/gpu/gpu_sources.hpp"

// NVML's C ABI, declared here rather than taken from nvml.h so that building
// needs neither the driver nor the CUDA toolkit. Only what the source calls;
// layouts and values as in nvml.h (CUDA 11.x-13.x, stable across them).
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

namespace trainscope {
namespace nvml {
namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kErrorUninitialized = 1;
constexpr nvmlReturn_t kErrorNotSupported = 3;
constexpr nvmlReturn_t kErrorNoPermission = 4;
constexpr nvmlReturn_t kErrorNotFound = 6;
constexpr nvmlReturn_t kErrorInsufficientSize = 7;
constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
constexpr nvmlReturn_t kErrorGpuIsLost = 15;
constexpr nvmlReturn_t kErrorResetRequired = 16;
constexpr nvmlReturn_t kErrorLibRmVersionMismatch = 18;
constexpr int kTemperatureGpu = 0;                        // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;                               // NVML_CLOCK_SM
constexpr int kClockMem = 2;                              // NVML_CLOCK_MEM
constexpr int kPcieTxBytes = 0;                           // NVML_PCIE_UTIL_TX_BYTES
constexpr int kPcieRxBytes = 1;                           // NVML_PCIE_UTIL_RX_BYTES
constexpr unsigned kMigEnabled = 1;                       // NVML_DEVICE_MIG_ENABLE
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned kUuidBufferSize = 96;                  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version on top.
constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

nvmlDevice_t native(Device device) { return static_cast<nvmlDevice_t>(const_cast<void*>(device)); }

}  // namespace

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

// Maps an NVML return code onto the NvmlApi convention (see nvml_source.hpp).
absl::Status to_status(const DlopenNvml::Functions& fn, nvmlReturn_t rc, const char* call) {
  if (rc == kSuccess) return absl::OkStatus();
  const std::string message =
      fmt::format("{}: {}", call, fn.error_string != nullptr ? fn.error_string(rc) : "error");
  switch (rc) {
    case kErrorUninitialized:
    case kErrorDriverNotLoaded:
    case kErrorGpuIsLost:
    case kErrorResetRequired:
    case kErrorLibRmVersionMismatch:
      return absl::UnavailableError(message);
    case kErrorNotSupported:
      return absl::UnimplementedError(message);
    case kErrorNoPermission:
      return absl::PermissionDeniedError(message);
    case kErrorNotFound:
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
      return absl::NotFoundError(fmt::format("{} not found (no NVIDIA driver?): {}", library_,
                                             why ? why : "dlopen failed"));
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
  char buffer[kUuidBufferSize] = {};
  absl::Status status =
      TS_NVML_CALL(uuid, "nvmlDeviceGetUUID", native(device), buffer, kUuidBufferSize);
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
    m.version = kMemoryV2Version;
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
  absl::Status status =
      TS_NVML_CALL(temperature, "nvmlDeviceGetTemperature", native(device), kTemperatureGpu, &c);
  if (!status.ok()) return status;
  return c;
}

absl::StatusOr<unsigned> DlopenNvml::clock_mhz(Device device, Clock clock) {
  unsigned mhz = 0;
  const int type = clock == Clock::kSm ? kClockSm : kClockMem;
  absl::Status status = TS_NVML_CALL(clock, "nvmlDeviceGetClockInfo", native(device), type, &mhz);
  if (!status.ok()) return status;
  return mhz;
}

absl::StatusOr<unsigned> DlopenNvml::pcie_kb_s(Device device, PcieDirection direction) {
  unsigned kb_s = 0;
  const int counter = direction == PcieDirection::kTx ? kPcieTxBytes : kPcieRxBytes;
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
    if (rc == kErrorInsufficientSize) {
      infos.resize(static_cast<std::size_t>(count) * 2 + 16);
      continue;
    }
    if (absl::Status status = to_status(*fn_, rc, call); !status.ok()) return status;
    std::vector<ProcessMemory> out;
    for (unsigned i = 0; i < count; ++i) {
      ProcessMemory p;
      p.pid = static_cast<pid_t>(infos[i].pid);
      if (infos[i].usedGpuMemory != kValueNotAvailable) p.used_bytes = infos[i].usedGpuMemory;
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
    if (rc == kErrorInsufficientSize) {
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
  return current == kMigEnabled;
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

#undef TS_NVML_CALL

// --- CUDA_VISIBLE_DEVICES ----------------------------------------------------

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A decimal number of at most 9 digits (GPU indices, instance ids, pids),
// which also rules out overflow.
std::optional<unsigned> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  unsigned value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value;
}

// "MIG-GPU-<uuid>/<gi>/<ci>" (the R450 form) → parent uuid and GPU instance.
std::optional<VisibleDevice> parse_legacy_mig(std::string_view entry) {
  const std::string_view rest = entry.substr(4);  // after "MIG-"
  const std::size_t slash = rest.find('/');
  const std::size_t slash2 = rest.find('/', slash == std::string_view::npos ? slash : slash + 1);
  if (slash == std::string_view::npos || slash2 == std::string_view::npos || slash == 4) {
    return std::nullopt;
  }
  const std::optional<unsigned> gi = parse_index(rest.substr(slash + 1, slash2 - slash - 1));
  if (!gi || !parse_index(rest.substr(slash2 + 1))) return std::nullopt;
  VisibleDevice device;
  device.kind = VisibleDevice::Kind::kMigLegacy;
  device.uuid = std::string(rest.substr(0, slash));
  device.gpu_instance = *gi;
  return device;
}

std::optional<VisibleDevice> parse_entry(std::string_view entry) {
  VisibleDevice device;
  if (std::optional<unsigned> index = parse_index(entry)) {
    device.index = *index;
    return device;
  }
  if (starts_with(entry, "MIG-GPU-") && entry.find('/') != std::string_view::npos) {
    return parse_legacy_mig(entry);
  }
  const bool gpu = starts_with(entry, "GPU-");
  if ((!gpu && !starts_with(entry, "MIG-")) || entry.size() == 4) return std::nullopt;
  device.kind = gpu ? VisibleDevice::Kind::kGpuUuid : VisibleDevice::Kind::kMigUuid;
  device.uuid = std::string(entry);
  return device;
}

}  // namespace

std::vector<VisibleDevice> parse_visible_devices(std::string_view text) {
  std::vector<VisibleDevice> devices;
  while (true) {
    const std::size_t comma = text.find(',');
    std::optional<VisibleDevice> device = parse_entry(trim(text.substr(0, comma)));
    if (!device) break;
    devices.push_back(std::move(*device));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return devices;
}

// --- process tree ------------------------------------------------------------

namespace {

// The parent pid from /proc/<pid>/stat: "pid (comm) state ppid ...", where
// comm may itself hold spaces and parentheses, hence the last ')'.
std::optional<pid_t> parent_of(const std::filesystem::path& stat_path) {
  std::ifstream in(stat_path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  char state = 0;
  long ppid = 0;
  if (!(rest >> state >> ppid)) return std::nullopt;
  return static_cast<pid_t>(ppid);
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root, const std::string& proc_root) {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    const std::optional<unsigned> pid = parse_index(name);
    if (!pid) continue;
    if (std::optional<pid_t> ppid = parent_of(entry.path() / "stat")) {
      children[*ppid].push_back(static_cast<pid_t>(*pid));
    }
  }
  std::vector<pid_t> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const auto it = children.find(tree[i]);
    if (it != children.end()) tree.insert(tree.end(), it->second.begin(), it->second.end());
  }
  return tree;
}

// --- NvmlSource --------------------------------------------------------------

namespace {

enum Metric : unsigned {
  kUtilization,  // util_pct and mem_util_pct
  kMemory,       // mem_used_mb and mem_total_mb
  kPower,
  kEnergy,
  kTemperature,
  kSmClock,
  kMemClock,
  kPcieTx,
  kPcieRx,
  kThrottle,
  kProcMemory,
  kProcUtil,
  kMetricCount
};

constexpr const char* kMetricNames[kMetricCount] = {"util_pct/mem_util_pct",
                                                    "mem_used_mb/mem_total_mb",
                                                    "power_w",
                                                    "energy_j",
                                                    "temp_c",
                                                    "sm_clock_mhz",
                                                    "mem_clock_mhz",
                                                    "pcie_tx_mb_s",
                                                    "pcie_rx_mb_s",
                                                    "throttle_reasons",
                                                    "proc.mem_used_mb",
                                                    "proc.util_pct"};

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

struct NvmlSource::Target {
  Device device = nullptr;
  unsigned index = 0;                    // physical NVML index
  std::optional<unsigned> gpu_instance;  // set for a MIG instance
  std::string prefix;                    // "system/gpu.0." or "system/gpu.0.mig1."
  std::bitset<kMetricCount> enabled;
  std::optional<std::uint64_t> energy_at_open_mj;
  std::uint64_t last_process_sample_us = 0;
};

namespace {

using Target = NvmlSource::Target;
using Readings = std::vector<HardwareReading>;

void put(Readings* out, const Target& t, const char* quantity, double value) {
  out->push_back({t.prefix + quantity, value});
}

// The value of `result`, appended as `quantity` scaled by `scale`.
template <typename T>
absl::Status put_scaled(const absl::StatusOr<T>& result, Readings* out, const Target& t,
                        const char* quantity, double scale) {
  if (!result.ok()) return result.status();
  put(out, t, quantity, static_cast<double>(*result) * scale);
  return absl::OkStatus();
}

absl::Status read_utilization(NvmlApi& api, const Target& t, Readings* out) {
  absl::StatusOr<Utilization> u = api.utilization(t.device);
  if (!u.ok()) return u.status();
  put(out, t, "util_pct", u->gpu_pct);
  put(out, t, "mem_util_pct", u->memory_pct);
  return absl::OkStatus();
}

absl::Status read_memory(NvmlApi& api, const Target& t, Readings* out) {
  absl::StatusOr<MemoryInfo> m = api.memory(t.device);
  if (!m.ok()) return m.status();
  put(out, t, "mem_used_mb", static_cast<double>(m->used_bytes) / kMiB);
  put(out, t, "mem_total_mb", static_cast<double>(m->total_bytes) / kMiB);
  return absl::OkStatus();
}

// Energy since open(): NVML's counter starts at driver load, which says
// nothing about this job.
absl::Status read_energy(NvmlApi& api, Target& t, Readings* out) {
  absl::StatusOr<std::uint64_t> mj = api.energy_mj(t.device);
  if (!mj.ok()) return mj.status();
  if (!t.energy_at_open_mj) t.energy_at_open_mj = *mj;
  const std::uint64_t used = *mj >= *t.energy_at_open_mj ? *mj - *t.energy_at_open_mj : 0;
  put(out, t, "energy_j", static_cast<double>(used) / 1000.0);
  return absl::OkStatus();
}

bool in_tree(const std::vector<pid_t>& tree, pid_t pid) {
  return std::find(tree.begin(), tree.end(), pid) != tree.end();
}

absl::Status read_proc_memory(NvmlApi& api, const Target& t, const std::vector<pid_t>& tree,
                              Readings* out) {
  absl::StatusOr<std::vector<ProcessMemory>> processes = api.compute_processes(t.device);
  if (!processes.ok()) return processes.status();
  std::uint64_t bytes = 0;
  for (const ProcessMemory& p : *processes) {
    if (p.used_bytes && in_tree(tree, p.pid)) bytes += *p.used_bytes;
  }
  put(out, t, "proc.mem_used_mb", static_cast<double>(bytes) / kMiB);
  return absl::OkStatus();
}

// The tree's SM utilisation: each process's newest sample since the last
// call, summed (capped at 100). No sample at all means the tree was idle.
absl::Status read_proc_util(NvmlApi& api, Target& t, const std::vector<pid_t>& tree,
                            Readings* out) {
  absl::StatusOr<std::vector<ProcessUtilization>> samples =
      api.process_utilization(t.device, t.last_process_sample_us);
  if (!samples.ok() && !absl::IsNotFound(samples.status())) return samples.status();
  std::map<pid_t, ProcessUtilization> newest;
  if (samples.ok()) {
    for (const ProcessUtilization& s : *samples) {
      t.last_process_sample_us = std::max(t.last_process_sample_us, s.timestamp_us);
      ProcessUtilization& slot = newest[s.pid];
      if (s.timestamp_us >= slot.timestamp_us) slot = s;
    }
  }
  unsigned pct = 0;
  for (const auto& [pid, s] : newest) {
    if (in_tree(tree, pid)) pct += s.sm_pct;
  }
  put(out, t, "proc.util_pct", std::min(pct, 100u));
  return absl::OkStatus();
}

absl::Status read_metric(NvmlApi& api, Metric metric, Target& t, const std::vector<pid_t>& tree,
                         Readings* out) {
  switch (metric) {
    case kUtilization:
      return read_utilization(api, t, out);
    case kMemory:
      return read_memory(api, t, out);
    case kPower:
      return put_scaled(api.power_mw(t.device), out, t, "power_w", 1e-3);
    case kEnergy:
      return read_energy(api, t, out);
    case kTemperature:
      return put_scaled(api.temperature_c(t.device), out, t, "temp_c", 1.0);
    case kSmClock:
      return put_scaled(api.clock_mhz(t.device, Clock::kSm), out, t, "sm_clock_mhz", 1.0);
    case kMemClock:
      return put_scaled(api.clock_mhz(t.device, Clock::kMemory), out, t, "mem_clock_mhz", 1.0);
    case kPcieTx:  // NVML's KB/s are KiB/s; MB here are MiB, as for memory
      return put_scaled(api.pcie_kb_s(t.device, PcieDirection::kTx), out, t, "pcie_tx_mb_s",
                        1 / 1024.0);
    case kPcieRx:
      return put_scaled(api.pcie_kb_s(t.device, PcieDirection::kRx), out, t, "pcie_rx_mb_s",
                        1 / 1024.0);
    case kThrottle:
      return put_scaled(api.throttle_reasons(t.device), out, t, "throttle_reasons", 1.0);
    case kProcMemory:
      return read_proc_memory(api, t, tree, out);
    case kProcUtil:
      return read_proc_util(api, t, tree, out);
    case kMetricCount:
      break;
  }
  return absl::InternalError("unknown metric");
}

std::string label(const Target& t) {
  // prefix without "system/" and the trailing '.'
  return t.prefix.substr(7, t.prefix.size() - 8);
}


}  // namespace


NvmlSource::NvmlSource(std::unique_ptr<NvmlApi> api,
                       std::optional<std::string> cuda_visible_devices, std::string proc_root)
    : api_(std::move(api)),
      cuda_visible_devices_(std::move(cuda_visible_devices)),
      proc_root_(std::move(proc_root)) {}

NvmlSource::~NvmlSource() {
  targets_.clear();  // handles die with shutdown
  if (initialised_) api_->shutdown();
}

absl::Status NvmlSource::open(const HardwareContext& context) {
  root_pid_ = context.root_pid != 0 ? context.root_pid : ::getpid();
  if (absl::Status status = api_->init(); !status.ok()) return status;
  initialised_ = true;
  if (absl::Status status = select_targets(context); !status.ok()) return status;
  std::vector<std::string> unsupported;
  for (auto& target : targets_) {
    if (absl::Status status = probe(*target, &unsupported); !status.ok()) return status;
  }
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string& u : unsupported) list += (list.empty() ? "" : "; ") + u;
    warn("nvml: not sampled where the GPU does not report them: " + list);
  }
  return absl::OkStatus();
}

namespace {

struct MigInstance {
  Device device;
  unsigned gpu_instance;
};

// A MIG-enabled GPU's instances; none for a GPU without MIG, an error only
// when NVML itself is gone.
absl::StatusOr<std::vector<MigInstance>> mig_instances(NvmlApi& api, Device gpu) {
  std::vector<MigInstance> instances;
  absl::StatusOr<bool> enabled = api.mig_enabled(gpu);
  if (!enabled.ok()) {
    // A GPU without MIG answers "not supported".
    if (absl::IsUnavailable(enabled.status())) return enabled.status();
    return instances;
  }
  if (!*enabled) return instances;
  absl::StatusOr<unsigned> max = api.max_mig_devices(gpu);
  if (!max.ok()) return max.status();
  for (unsigned i = 0; i < *max; ++i) {
    absl::StatusOr<Device> mig = api.mig_device(gpu, i);
    if (absl::IsNotFound(mig.status())) continue;  // no instance in this slot
    if (!mig.ok()) return mig.status();
    absl::StatusOr<unsigned> gi = api.gpu_instance_id(*mig);
    if (!gi.ok()) return gi.status();
    instances.push_back({*mig, *gi});
  }
  return instances;
}

// Collects the selection, each device once.
class Selection {
 public:
  explicit Selection(NvmlApi& api) : api_(api) {}
  std::vector<SelectedDevice> devices;

  absl::Status add_physical(unsigned index) {
    absl::StatusOr<Device> gpu = api_.device_by_index(index);
    if (!gpu.ok()) return gpu.status();
    add(*gpu, index, std::nullopt);
    absl::StatusOr<std::vector<MigInstance>> migs = mig_instances(api_, *gpu);
    if (!migs.ok()) return migs.status();
    for (const MigInstance& mig : *migs) add(mig.device, index, mig.gpu_instance);
    return absl::OkStatus();
  }

  // Resolves one CUDA_VISIBLE_DEVICES entry to physical GPUs or MIG
  // instances; kNotFound when it names none (a UUID prefix must name exactly one).
  absl::Status add_visible(const VisibleDevice& entry, unsigned count) {
    using Kind = VisibleDevice::Kind;
    if (entry.kind == Kind::kIndex) {
      if (entry.index >= count) return absl::NotFoundError("no such GPU");
      return add_physical(entry.index);
    }
    std::optional<unsigned> gpu_match;
    for (unsigned i = 0; i < count; ++i) {
      absl::StatusOr<Device> gpu = api_.device_by_index(i);
      if (!gpu.ok()) return gpu.status();
      absl::StatusOr<std::string> uuid = api_.uuid(*gpu);
      if (!uuid.ok()) return uuid.status();
      if (entry.kind == Kind::kGpuUuid) {
        if (!starts_with(*uuid, entry.uuid)) continue;
        if (gpu_match) return absl::NotFoundError("ambiguous GPU UUID prefix");
        gpu_match = i;
        continue;
      }
      if (entry.kind == Kind::kMigLegacy && *uuid != entry.uuid) continue;
      absl::StatusOr<std::vector<MigInstance>> migs = mig_instances(api_, *gpu);
      if (!migs.ok()) return migs.status();
      for (const MigInstance& mig : *migs) {
        bool match = mig.gpu_instance == entry.gpu_instance;
        if (entry.kind == Kind::kMigUuid) {
          absl::StatusOr<std::string> mig_uuid = api_.uuid(mig.device);
          if (!mig_uuid.ok()) return mig_uuid.status();
          match = *mig_uuid == entry.uuid;
        }
        if (match) {
          add(mig.device, i, mig.gpu_instance);
          return absl::OkStatus();
        }
      }
    }
    if (gpu_match) return add_physical(*gpu_match);
    return absl::NotFoundError("no such GPU");
  }

 private:
  void add(Device device, unsigned index, std::optional<unsigned> gpu_instance) {
    for (const SelectedDevice& d : devices) {
      if (d.index == index && d.gpu_instance == gpu_instance) return;
    }
    devices.push_back({device, index, gpu_instance});
  }

  NvmlApi& api_;
};

}  // namespace

absl::StatusOr<std::vector<SelectedDevice>> select_devices(NvmlApi& api, const HardwareContext& context,
                                                           const std::optional<std::string>& cuda_visible_devices) {
  absl::StatusOr<unsigned> count = api.device_count();
  if (!count.ok()) return count.status();
  if (*count == 0) return absl::NotFoundError("NVML sees no GPU");
  Selection selection(api);
  if (!context.gpu_devices.empty()) {
    for (int index : context.gpu_devices) {
      if (index < 0 || static_cast<unsigned>(index) >= *count) {
        return absl::InvalidArgumentError(
            fmt::format("GPU {} requested, NVML has GPUs 0-{}", index, *count - 1));
      }
      if (absl::Status s = selection.add_physical(static_cast<unsigned>(index)); !s.ok()) return s;
    }
  } else if (cuda_visible_devices) {
    for (const VisibleDevice& entry : parse_visible_devices(*cuda_visible_devices)) {
      absl::Status s = selection.add_visible(entry, *count);
      if (absl::IsNotFound(s)) break;  // as CUDA: the list ends there
      if (!s.ok()) return s;
    }
  } else {
    for (unsigned i = 0; i < *count; ++i) {
      if (absl::Status s = selection.add_physical(i); !s.ok()) return s;
    }
  }
  if (selection.devices.empty()) {
    return absl::NotFoundError(
        fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" selects no GPU", cuda_visible_devices.value_or("")));
  }
  return std::move(selection.devices);
}

absl::Status NvmlSource::select_targets(const HardwareContext& context) {
  absl::StatusOr<std::vector<SelectedDevice>> devices = select_devices(*api_, context, cuda_visible_devices_);
  if (!devices.ok()) return devices.status();
  for (const SelectedDevice& d : *devices) {
    auto target = std::make_unique<Target>();
    target->device = d.device;
    target->index = d.index;
    target->gpu_instance = d.gpu_instance;
    target->prefix = d.gpu_instance ? fmt::format("system/gpu.{}.mig{}.", d.index, *d.gpu_instance)
                                    : fmt::format("system/gpu.{}.", d.index);
    target->enabled.set();
    targets_.push_back(std::move(target));
  }
  return absl::OkStatus();
}

// Reads every metric once, keeping those the device answers (a MIG instance,
// for one, reports memory but not utilisation or power).
absl::Status NvmlSource::probe(Target& target, std::vector<std::string>* unsupported) {
  const std::vector<pid_t> tree{root_pid_};
  Readings scratch;
  for (unsigned m = 0; m < kMetricCount; ++m) {
    absl::Status status = read_metric(*api_, static_cast<Metric>(m), target, tree, &scratch);
    if (absl::IsUnavailable(status)) return status;
    if (status.ok()) continue;
    target.enabled.reset(m);
    unsupported->push_back(
        fmt::format("{} {} ({})", label(target), kMetricNames[m], std::string(status.message())));
  }
  return absl::OkStatus();
}

absl::Status NvmlSource::sample(std::vector<HardwareReading>* out) {
  const bool wants_tree = std::any_of(targets_.begin(), targets_.end(), [](const auto& t) {
    return t->enabled.test(kProcMemory) || t->enabled.test(kProcUtil);
  });
  const std::vector<pid_t> tree =
      wants_tree ? process_tree(root_pid_, proc_root_) : std::vector<pid_t>{};
  for (auto& target : targets_) {
    if (absl::Status status = sample_target(*target, tree, out); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status NvmlSource::sample_target(Target& target, const std::vector<pid_t>& tree,
                                       Readings* out) {
  for (unsigned m = 0; m < kMetricCount; ++m) {
    if (!target.enabled.test(m)) continue;
    absl::Status status = read_metric(*api_, static_cast<Metric>(m), target, tree, out);
    if (absl::IsUnavailable(status)) return status;
    if (status.ok()) continue;
    target.enabled.reset(m);
    warn(fmt::format("nvml: {} {} failed and is no longer sampled: {}", label(target),
                     kMetricNames[m], std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace nvml

std::vector<std::unique_ptr<HardwareSource>> gpu_sources() {
  std::vector<std::unique_ptr<HardwareSource>> sources;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  sources.push_back(std::make_unique<nvml::NvmlSource>(
      std::make_unique<nvml::DlopenNvml>(),
      visible != nullptr ? std::optional<std::string>(visible) : std::nullopt));
  if (std::unique_ptr<HardwareSource> dcgm = dcgm::make_dcgm_source(
          visible != nullptr ? std::optional<std::string>(visible) : std::nullopt)) {
    sources.push_back(std::move(dcgm));
  }
  return sources;
}

}  // namespace trainscope
