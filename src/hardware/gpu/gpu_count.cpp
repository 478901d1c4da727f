// count_gpus and check_gpu_indices (trainscope/hardware/gpu/nvml_api.hpp): the one
// place that says how many GPUs a machine has, for `trainscope run --devices` and
// the sweep's slots.
#include <dlfcn.h>

#include <string>
#include <vector>

#include "common/no_gpu.hpp"
#include "fmt/format.h"
#include "trainscope/hardware/gpu/nvml_api.hpp"

namespace trainscope::nvml {

bool driver_library_present(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

unsigned count_gpus(NvmlApi* api, std::string* why) {
  std::string reason;
  unsigned count = 0;
  if (api == nullptr) {
    reason = "no NVML";
  } else if (absl::Status status = api->init(); !status.ok()) {
    reason = absl::IsNotFound(status) ? std::string(detail::kNoGpuFound)
                                      : fmt::format("NVML: {}", std::string(status.message()));
  } else {
    absl::StatusOr<unsigned> n = api->device_count();
    if (n.ok()) {
      count = *n;
      if (count == 0) reason = "NVML lists no GPU";
    } else {
      reason = fmt::format("NVML: {}", std::string(n.status().message()));
    }
    api->shutdown();
  }
  if (why != nullptr) *why = reason;
  return count;
}

absl::Status check_gpu_indices(const std::string& flag, const std::vector<int>& devices,
                               NvmlApi* api) {
  if (devices.empty()) return absl::OkStatus();
  std::string why;
  const unsigned count = count_gpus(api, &why);
  return check_gpu_indices(flag, devices, count, why);
}

absl::Status check_gpu_indices(const std::string& flag, const std::vector<int>& devices,
                               unsigned count, const std::string& why) {
  if (devices.empty()) return absl::OkStatus();
  if (count == 0) {
    std::string list;
    for (int device : devices) list += fmt::format("{}{}", list.empty() ? "" : ",", device);
    return absl::InvalidArgumentError(
        fmt::format("{} {}: this machine has no GPU ({})", flag, list, why));
  }
  for (int device : devices) {
    if (device < 0 || static_cast<unsigned>(device) >= count) {
      return absl::InvalidArgumentError(
          fmt::format("{}: GPU {} does not exist (this machine has {} GPU(s): {})", flag, device,
                      count, count == 1 ? std::string("0") : fmt::format("0-{}", count - 1)));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainscope::nvml
