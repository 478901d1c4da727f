// The host sources (/proc and /sys): CPU, memory, swap, page cache, disks,
// network, the monitored process tree.
#ifndef TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_
#define TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_

#include <memory>
#include <vector>

#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope {

// The sources' names (HardwareSource::name()): what `trainscope sweep`'s
// listeners select and `trainscope run` keeps on a host it does not own.
inline constexpr char kHostCpuSource[] = "host.cpu";
inline constexpr char kHostMemorySource[] = "host.memory";
inline constexpr char kHostDiskSource[] = "host.disk";
inline constexpr char kHostNetworkSource[] = "host.network";
inline constexpr char kHostProcSource[] = "host.proc";  // the monitored process tree

std::vector<std::unique_ptr<HardwareSource>> host_sources();

}  // namespace trainscope

#endif  // TRAINSCOPE_HARDWARE_HOST_HOST_SOURCES_HPP_
