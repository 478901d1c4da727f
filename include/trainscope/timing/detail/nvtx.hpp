// NVTX ranges, out of line so that users' code needs no NVTX headers. Start/end
// ranges (not push/pop) because Deep500 regions of different keys may overlap
// without nesting (BATCH ends while the next IO is already open).
#ifndef TRAINSCOPE_TIMING_DETAIL_NVTX_HPP_
#define TRAINSCOPE_TIMING_DETAIL_NVTX_HPP_

#include <cstdint>

#include "trainscope/timing/time_type.hpp"

namespace trainscope::timing::detail {

// True when this build has NVTX3 headers.
bool nvtx_compiled_in() noexcept;
std::uint64_t nvtx_range_start(KeyId key) noexcept;
void nvtx_range_end(std::uint64_t range) noexcept;

}  // namespace trainscope::timing::detail

#endif  // TRAINSCOPE_TIMING_DETAIL_NVTX_HPP_
