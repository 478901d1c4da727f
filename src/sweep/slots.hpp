// Slot discovery over the NvmlApi seam (internal): choose_slots() with the
// driver's NVML, or a simulated one in the tests.
#ifndef TRAINSCOPE_SRC_SWEEP_SLOTS_HPP_
#define TRAINSCOPE_SRC_SWEEP_SLOTS_HPP_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep::detail {

// `api` not initialised yet (choose_slots calls init and shutdown); nullptr: no NVML.
absl::StatusOr<std::vector<Slot>> choose_slots(const SlotRequest& request, nvml::NvmlApi* api,
                                               std::string* note);

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_SLOTS_HPP_
