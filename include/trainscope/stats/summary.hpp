// A timer's end-of-run statistics, per key and device: what the stats formats
// render and what exporters receive.
#ifndef TRAINSCOPE_STATS_SUMMARY_HPP_
#define TRAINSCOPE_STATS_SUMMARY_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/stats/time_stats.hpp"

namespace trainscope {

enum class Device : std::uint8_t { kCPU = 0, kGPU = 1 };
std::string_view device_name(Device device) noexcept;  // "CPU" / "GPU"

struct SummaryEntry {
  std::string key;
  Device device = Device::kCPU;
  TimeStats stats;
};
struct Summary {
  // True for a CPUGPUTimer: Deep500 prints separate CPU and GPU sections.
  bool has_gpu_section = false;
  // Per device, in the order keys first completed a region.
  std::vector<SummaryEntry> entries;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_STATS_SUMMARY_HPP_
