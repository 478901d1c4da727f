#include "sweep/slots.hpp"

#include <algorithm>
#include <memory>

#include "common/no_gpu.hpp"
#include "fmt/format.h"

namespace trainscope::sweep {
namespace detail {
namespace {

std::string join(const std::vector<int>& values) {
  std::string out;
  for (int value : values) out += (out.empty() ? "" : ",") + std::to_string(value);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Slot>> choose_slots(const SlotRequest& request, nvml::NvmlApi* api,
                                               std::string* note) {
  if (request.cpu_slots > 0) {
    if (!request.devices.empty()) {
      return absl::InvalidArgumentError(
          "--slots (CPU slots) and --devices (GPUs) exclude each other");
    }
    if (note != nullptr) {
      *note = fmt::format("{} CPU slot(s), standing in for GPUs 0-{}", request.cpu_slots,
                          request.cpu_slots - 1);
    }
    return stand_in_slots(request.cpu_slots, request.per_gpu);
  }
  // How many GPUs NVML lists, or why none.
  std::string why;
  const unsigned count = nvml::count_gpus(api, &why);
  if (count == 0) {
    if (!request.devices.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("--devices {}: this machine has no GPU ({}); run on CPU slots with --slots N",
                      join(request.devices), why));
    }
    if (note != nullptr) {
      *note = fmt::format("no GPU ({}): one CPU slot, one job at a time (--slots N for more)", why);
      trainscope::detail::mark_no_gpu_noted();  // the caller says it: its jobs stay quiet about it
    }
    return cpu_slots(1);
  }
  std::vector<int> devices = request.devices;
  if (absl::Status known = nvml::check_gpu_indices("--devices", devices, count, why); !known.ok()) {
    return known;
  }
  if (devices.empty()) {
    for (unsigned i = 0; i < count; ++i) devices.push_back(static_cast<int>(i));
  }
  absl::StatusOr<std::vector<Slot>> slots = gpu_slots(devices, request.per_gpu, true);
  if (slots.ok() && note != nullptr) {
    std::vector<int> used;
    for (const Slot& slot : *slots) {
      if (std::find(used.begin(), used.end(), slot.devices[0]) == used.end())
        used.push_back(slot.devices[0]);
    }
    *note = fmt::format("GPU(s) {}, {} job(s) per GPU", join(used), request.per_gpu);
  }
  return slots;
}

}  // namespace detail

absl::StatusOr<std::vector<Slot>> choose_slots(const SlotRequest& request, std::string* note) {
  if (request.cpu_slots > 0) return detail::choose_slots(request, nullptr, note);
  std::unique_ptr<nvml::NvmlApi> library = nvml::load_nvml();
  return detail::choose_slots(request, library.get(), note);
}

}  // namespace trainscope::sweep
