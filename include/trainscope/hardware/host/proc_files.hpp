// Parsers of the /proc files other rooms read too: /proc/meminfo and
// /proc/diskstats (the stalls room's available memory and disk read rate).
// Every parser accepts any input: lines it cannot read are skipped, so a
// kernel that adds a column or a field changes nothing. The host sources'
// other parsers are internal (src/hardware/host/host_parsers.hpp).
#ifndef TRAINSCOPE_HARDWARE_HOST_PROC_FILES_HPP_
#define TRAINSCOPE_HARDWARE_HOST_PROC_FILES_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::host {

// /proc/meminfo, in kB. Fields the kernel does not show stay 0.
struct MemInfo {
  std::uint64_t total_kb = 0;
  std::uint64_t free_kb = 0;
  std::uint64_t available_kb = 0;
  std::uint64_t buffers_kb = 0;
  std::uint64_t cached_kb = 0;  // the page cache
  std::uint64_t swap_total_kb = 0;
  std::uint64_t swap_free_kb = 0;
  bool has_available = false;  // MemAvailable appeared in Linux 3.14
};
// False when MemTotal is missing.
bool parse_meminfo(std::string_view text, MemInfo* out);

// One line of /proc/diskstats. Sectors are 512 bytes whatever the device's.
struct DiskCounters {
  std::string name;
  unsigned major = 0;
  unsigned minor = 0;
  std::uint64_t reads = 0;  // completed
  std::uint64_t read_sectors = 0;
  std::uint64_t writes = 0;  // completed
  std::uint64_t write_sectors = 0;
  std::uint64_t io_ms = 0;  // time the device was busy (field 13, "io_ticks"); 0 if absent
};
// `out` is replaced; its elements are reused so a steady device list does not
// allocate.
void parse_diskstats(std::string_view text, std::vector<DiskCounters>* out);

}  // namespace trainscope::host

#endif  // TRAINSCOPE_HARDWARE_HOST_PROC_FILES_HPP_
