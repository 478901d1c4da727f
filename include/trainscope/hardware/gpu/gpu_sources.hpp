// The GPU sources: NVML (and DCGM when present), loaded with dlopen at run
// time, so nothing links against the driver.
#ifndef TRAINSCOPE_HARDWARE_GPU_GPU_SOURCES_HPP_
#define TRAINSCOPE_HARDWARE_GPU_GPU_SOURCES_HPP_

#include <memory>
#include <vector>

#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope {

// The sources' names (HardwareSource::name()).
inline constexpr char kNvmlSource[] = "nvml";
inline constexpr char kDcgmSource[] = "dcgm";

std::vector<std::unique_ptr<HardwareSource>> gpu_sources();

}  // namespace trainscope

#endif  // TRAINSCOPE_HARDWARE_GPU_GPU_SOURCES_HPP_
