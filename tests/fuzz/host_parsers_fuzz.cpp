// The /proc parsers of the host sources on arbitrary text: a future kernel,
// a container's fake /proc or a truncated read must never crash, hang or
// trip a sanitizer. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hardware/host/host_parsers.hpp"
#include "trainscope/hardware/host/sched_stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace trainscope::host;
  switch (data[0] % 9) {
    case 0: {
      std::vector<CpuTimes> cpus;
      parse_proc_stat(text, &cpus);
      for (const CpuTimes& c : cpus) {
        if (c.busy > c.total) __builtin_trap();  // busy is a part of total
      }
      break;
    }
    case 1: {
      MemInfo m;
      parse_meminfo(text, &m);
      break;
    }
    case 2: {
      std::vector<DiskCounters> disks(3);  // reused elements, as the source does
      parse_diskstats(text, &disks);
      break;
    }
    case 3: {
      std::vector<NetCounters> nets(3);
      parse_net_dev(text, &nets);
      break;
    }
    case 4: {
      ProcStat s;
      parse_pid_stat(text, &s);
      break;
    }
    case 5: {
      ProcIo io;
      parse_pid_io(text, &io);
      break;
    }
    case 6: {
      SchedStat s;
      parse_schedstat(text, &s);
      break;
    }
    case 7: {
      std::uint64_t n = 0;
      parse_involuntary_switches(text, &n);
      break;
    }
    default: {
      std::vector<pid_t> pids;
      parse_pid_list(text, &pids);
      for (pid_t p : pids) {
        if (p <= 0) __builtin_trap();
      }
      break;
    }
  }
  return 0;
}
