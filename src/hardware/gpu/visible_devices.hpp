// Which GPUs the job uses: CUDA_VISIBLE_DEVICES parsed and resolved the way
// the CUDA runtime does, over NVML's physical devices and MIG instances.
// Shared by the NVML and DCGM sources.
#ifndef TRAINSCOPE_SRC_HARDWARE_GPU_VISIBLE_DEVICES_HPP_
#define TRAINSCOPE_SRC_HARDWARE_GPU_VISIBLE_DEVICES_HPP_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope::nvml {

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
// `api` must be initialised.
absl::StatusOr<std::vector<SelectedDevice>> select_devices(
    NvmlApi& api, const HardwareContext& context,
    const std::optional<std::string>& cuda_visible_devices);

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_SRC_HARDWARE_GPU_VISIBLE_DEVICES_HPP_
