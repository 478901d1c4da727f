// The kernel's own account of a thread waiting for a CPU: the run-queue delay
// of /proc/<pid>/task/<tid>/schedstat (time runnable but not running), the
// involuntary context switches of .../status, and, in a VM, the steal time of
// /proc/stat (host_parsers.hpp's CpuTimes::steal). The process-tree source
// reads them per second for every thread of the tree
// (host_metrics.hpp: kProcCpuWaitMetric, kProcInvoluntarySwitchesMetric); the
// steps room derives the contention share from them (docs/steps.md).
// Every parser accepts any input.
#ifndef TRAINSCOPE_HARDWARE_HOST_SCHED_STATS_HPP_
#define TRAINSCOPE_HARDWARE_HOST_SCHED_STATS_HPP_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/timing/thread_wait.hpp"

namespace trainscope::host {

// /proc/<pid>/task/<tid>/schedstat and its parser: the timing room's (the
// timers read their own thread's per step, trainscope/timing/thread_wait.hpp).
using timing::parse_schedstat;
using timing::SchedStat;

// "nonvoluntary_ctxt_switches:" of /proc/<pid>/task/<tid>/status; false when absent.
bool parse_involuntary_switches(std::string_view text, std::uint64_t* out);

// <proc_root>/<pid>/task/<tid>/schedstat; the error names the file.
absl::StatusOr<SchedStat> read_thread_schedstat(pid_t pid, pid_t tid,
                                                const std::string& proc_root = "/proc");

// The share of the time a thread wanted a CPU that it waited for one, between
// two readings: wait / (run + wait) of the differences; NaN when neither grew.
double wait_share(const SchedStat& before, const SchedStat& after);

// Per-thread totals of a set of processes, read from <proc_root>/<pid>/task/*.
// read() returns what every thread accrued since the previous read() (a
// thread new since then: all it accrued; one gone since then: nothing), so
// a thread's exit never shows as a negative wait. Buffers are kept between
// reads.
struct SchedDelta {
  std::uint64_t run_ns = 0;
  std::uint64_t wait_ns = 0;
  std::uint64_t involuntary_switches = 0;
  std::size_t threads = 0;  // threads read
};
class ThreadSchedReader {
 public:
  explicit ThreadSchedReader(std::string proc_root = "/proc");
  // The first read() after construction sets the baseline and returns zeros.
  // A process gone while reading is skipped; an error only when none of
  // `pids` could be read (naming the first one's task directory).
  absl::Status read(const std::vector<pid_t>& pids, SchedDelta* delta);

 private:
  struct Thread {
    pid_t tid = 0;
    std::uint64_t run_ns = 0, wait_ns = 0, switches = 0;
  };
  std::string proc_root_;
  bool first_ = true;
  std::vector<Thread> previous_, current_;
  std::string path_, buffer_;
};

}  // namespace trainscope::host

#endif  // TRAINSCOPE_HARDWARE_HOST_SCHED_STATS_HPP_
