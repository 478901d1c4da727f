// Parsers of the /proc files the host sources read (those other rooms use too,
// /proc/meminfo and /proc/diskstats, are public: trainscope/hardware/host/proc_files.hpp),
// and factories for those
// sources rooted at any directory. Internal: the tests feed the parsers fixed
// texts and point the sources at fake or missing trees; the fuzz target feeds
// the parsers anything. Every parser accepts any input: lines it cannot read
// are skipped, so a kernel that adds a column or a field changes nothing.
#ifndef TRAINSCOPE_SRC_HARDWARE_HOST_HOST_PARSERS_HPP_
#define TRAINSCOPE_SRC_HARDWARE_HOST_HOST_PARSERS_HPP_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/hardware/hardware_source.hpp"
#include "trainscope/hardware/host/proc_files.hpp"  // parse_meminfo, parse_diskstats

namespace trainscope::host {

// One "cpu" or "cpuN" line of /proc/stat, in clock ticks.
struct CpuTimes {
  int core = -1;            // -1: the "cpu" line (all cores)
  std::uint64_t busy = 0;   // total minus idle and iowait
  std::uint64_t total = 0;  // user+nice+system+idle+iowait+irq+softirq+steal
  std::uint64_t steal = 0;  // taken by the hypervisor (a VM); 0 where not shown
};
// Appends nothing for a text without cpu lines; `out` is replaced.
void parse_proc_stat(std::string_view text, std::vector<CpuTimes>* out);

// One interface of /proc/net/dev.
struct NetCounters {
  std::string name;
  std::uint64_t rx_bytes = 0;
  std::uint64_t tx_bytes = 0;
};
void parse_net_dev(std::string_view text, std::vector<NetCounters>* out);

// The fields of /proc/<pid>/stat the process-tree source (and find_job_processes) needs.
struct ProcStat {
  pid_t ppid = 0;
  pid_t pgrp = 0;       // its process group
  bool exited = false;  // a zombie (state Z or X): exited, waiting for its parent to reap it
  // utime+stime+cutime+cstime: children reaped by a member stay counted, so
  // the tree's sum does not drop when a worker exits.
  std::uint64_t cpu_ticks = 0;
  std::uint64_t rss_pages = 0;
};
// False when the line is cut short or malformed. The command name may hold
// spaces and parentheses; parsing starts after its last ')'.
bool parse_pid_stat(std::string_view text, ProcStat* out);

// read_bytes/write_bytes of /proc/<pid>/io (bytes that reached the block
// layer, page-cache hits excluded). False when neither is present.
struct ProcIo {
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
};
bool parse_pid_io(std::string_view text, ProcIo* out);

// /proc/<pid>/task/<tid>/children: pids separated by spaces; appends to `out`.
void parse_pid_list(std::string_view text, std::vector<pid_t>* out);

// The sources of host_sources(), reading `proc_root` (normally "/proc") and
// `sys_root` (normally "/sys").
std::unique_ptr<HardwareSource> make_cpu_source(std::string proc_root);
std::unique_ptr<HardwareSource> make_memory_source(std::string proc_root);
std::unique_ptr<HardwareSource> make_disk_source(std::string proc_root, std::string sys_root);
std::unique_ptr<HardwareSource> make_network_source(std::string proc_root);
std::unique_ptr<HardwareSource> make_process_tree_source(std::string proc_root);

}  // namespace trainscope::host

#endif  // TRAINSCOPE_SRC_HARDWARE_HOST_HOST_PARSERS_HPP_
