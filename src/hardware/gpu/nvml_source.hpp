// GPU metrics from NVML, loaded at run time with dlopen (no build-time
// dependency on the driver or the CUDA toolkit). NvmlApi holds exactly the
// NVML calls the source makes, so tests drive NvmlSource with a simulated
// device and the real library is one implementation among others.
#ifndef TRAINSCOPE_SRC_NVML_SOURCE_HPP_
#define TRAINSCOPE_SRC_NVML_SOURCE_HPP_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/hardware/hardware_source.hpp"

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

// The driver's libnvidia-ml.so.1 through dlopen/dlsym, with the C prototypes
// and struct layouts declared in nvml_source.cpp (nvml.h is not needed).
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

  struct Functions;  // the resolved symbols; defined in nvml_source.cpp

 private:
  std::string library_;
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::unique_ptr<Functions> fn_;
};

// One entry of CUDA_VISIBLE_DEVICES.
struct VisibleDevice {
  enum class Kind {
    kIndex,      // "1": a CUDA device index
    kGpuUuid,    // "GPU-8932f937-..." (or a unique prefix of one)
    kMigUuid,    // "MIG-7d1a...": a MIG instance (driver R470 and later)
    kMigLegacy,  // "MIG-GPU-<uuid>/<gi>/<ci>" (driver R450)
  };
  Kind kind = Kind::kIndex;
  unsigned index = 0;         // kIndex
  std::string uuid;           // kGpuUuid, kMigUuid; the parent's "GPU-..." for kMigLegacy
  unsigned gpu_instance = 0;  // kMigLegacy
  bool operator==(const VisibleDevice& o) const {
    return kind == o.kind && index == o.index && uuid == o.uuid && gpu_instance == o.gpu_instance;
  }
};

// Parses CUDA_VISIBLE_DEVICES the way the CUDA runtime does: comma-separated
// entries, blanks around them ignored, and the list ends at the first entry
// that is not a device ("-1", "none", garbage): CUDA hides it and all after it.
std::vector<VisibleDevice> parse_visible_devices(std::string_view text);

// One GPU or MIG instance the job uses: its handle, the physical index of its
// GPU and, for a MIG instance, the GPU instance id.
struct SelectedDevice {
  Device device;
  unsigned index;
  std::optional<unsigned> gpu_instance;
};
// The devices the job uses, each once: `context.gpu_devices` (physical
// indices) if set, else `cuda_visible_devices` resolved as CUDA does (the
// first entry that names no device ends the list), else every GPU; a
// MIG-enabled GPU brings its instances. NotFound when nothing is selected.
absl::StatusOr<std::vector<SelectedDevice>> select_devices(NvmlApi& api, const HardwareContext& context,
                                                           const std::optional<std::string>& cuda_visible_devices);

// `root` and all its descendants, found by reading <proc_root>/<pid>/stat.
std::vector<pid_t> process_tree(pid_t root, const std::string& proc_root = "/proc");

// Samples the GPUs the job uses. Which ones: HardwareContext::gpu_devices
// (physical NVML indices) if set, else CUDA_VISIBLE_DEVICES if set, else all.
// A MIG-enabled GPU contributes its instances as "system/gpu.<i>.mig<gi>.*".
// A metric a device does not support is left out with one warning at open();
// one that starts failing later is dropped with one warning; a lost GPU or
// driver fails sample(), which disables the source.
class NvmlSource final : public HardwareSource {
 public:
  // `cuda_visible_devices`: the job's CUDA_VISIBLE_DEVICES (nullopt: unset).
  NvmlSource(std::unique_ptr<NvmlApi> api, std::optional<std::string> cuda_visible_devices,
             std::string proc_root = "/proc");
  ~NvmlSource() override;
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  std::string name() const override { return "nvml"; }
  absl::Status open(const HardwareContext& context) override;
  absl::Status sample(std::vector<HardwareReading>* out) override;

  struct Target;  // one sampled GPU or MIG instance; defined in nvml_source.cpp

 private:
  absl::Status select_targets(const HardwareContext& context);
  absl::Status probe(Target& target, std::vector<std::string>* unsupported);
  absl::Status sample_target(Target& target, const std::vector<pid_t>& tree,
                             std::vector<HardwareReading>* out);

  std::unique_ptr<NvmlApi> api_;
  std::optional<std::string> cuda_visible_devices_;
  std::string proc_root_;
  pid_t root_pid_ = 0;
  bool initialised_ = false;
  std::vector<std::unique_ptr<Target>> targets_;
};

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_SRC_NVML_SOURCE_HPP_
