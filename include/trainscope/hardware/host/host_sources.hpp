// The host sources (/proc and /sys): CPU, memory, swap, page cache, disks,
// network, the monitored process tree.
#ifndef TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_
#define TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_

#include <memory>
#include <vector>

#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope {

std::vector<std::unique_ptr<HardwareSource>> host_sources();

}  // namespace trainscope

#endif  // TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_
