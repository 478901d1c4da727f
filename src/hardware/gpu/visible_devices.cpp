#include "hardware/gpu/visible_devices.hpp"

#include <fmt/format.h>

#include <cctype>
#include <utility>

#include "absl/status/status.h"

namespace trainscope::nvml {

// --- parsing CUDA_VISIBLE_DEVICES --------------------------------------------

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A decimal number of at most 9 digits (GPU indices, instance ids),
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

// --- selection ---------------------------------------------------------------

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

absl::StatusOr<std::vector<SelectedDevice>> select_devices(
    NvmlApi& api, const HardwareContext& context,
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
      absl::Status s = selection.add_physical(static_cast<unsigned>(index));
      if (!s.ok()) return s;
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
    return absl::NotFoundError(fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" selects no GPU",
                                           cuda_visible_devices.value_or("")));
  }
  return std::move(selection.devices);
}

}  // namespace trainscope::nvml
