#include "sweep/slots.hpp"

#include <algorithm>
#include <memory>

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
  unsigned count = 0;
  std::string why;
  if (api == nullptr) {
    why = "no NVML";
  } else if (absl::Status status = api->init(); !status.ok()) {
    why = fmt::format("NVML: {}", std::string(status.message()));
  } else {
    absl::StatusOr<unsigned> n = api->device_count();
    if (n.ok()) {
      count = *n;
      if (count == 0) why = "NVML lists no GPU";
    } else {
      why = fmt::format("NVML: {}", std::string(n.status().message()));
    }
    api->shutdown();
  }
  if (count == 0) {
    if (!request.devices.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("--devices {}: this machine has no GPU ({}); run on CPU slots with --slots N",
                      join(request.devices), why));
    }
    if (note != nullptr) {
      *note = fmt::format("no GPU ({}): one CPU slot, one job at a time (--slots N for more)", why);
    }
    return cpu_slots(1);
  }
  std::vector<int> devices = request.devices;
  for (int device : devices) {
    if (device < 0 || static_cast<unsigned>(device) >= count) {
      return absl::InvalidArgumentError(
          fmt::format("--devices: GPU {} does not exist (this machine has {} GPU(s): {})", device,
                      count, count == 1 ? std::string("0") : fmt::format("0-{}", count - 1)));
    }
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
