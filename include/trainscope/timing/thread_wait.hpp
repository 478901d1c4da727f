// The calling thread's run-queue wait: the time it was runnable but not
// running, the kernel's own account (/proc/thread-self/schedstat's second
// number; CONFIG_SCHEDSTATS). A timer attached to a run reads it when its step
// key (BATCH) starts and ends, and the step's region carries the difference
// (RegionSample::cpu_wait_ns, TimerOptions::step_wait): the steps room's
// per-step CPU wait (docs/steps.md). One pread of a descriptor kept per thread
// and its parse: about 0.6 us (bench/timer_bench.cpp, BM_ThreadSchedstatRead),
// twice a step.
#ifndef TRAINSCOPE_TIMING_THREAD_WAIT_HPP_
#define TRAINSCOPE_TIMING_THREAD_WAIT_HPP_

#include <cstdint>
#include <string_view>

namespace trainscope::timing {

// /proc/<pid>/task/<tid>/schedstat: "run_ns wait_ns timeslices".
struct SchedStat {
  std::uint64_t run_ns = 0;   // time on a CPU
  std::uint64_t wait_ns = 0;  // time runnable, waiting on a run queue
  std::uint64_t timeslices = 0;
};
// False when the first two numbers are missing (a kernel without
// CONFIG_SCHEDSTATS shows the file with zeros: true, all 0). Any input.
bool parse_schedstat(std::string_view text, SchedStat* out) noexcept;

// The calling thread's run-queue wait so far in ns; -1 where it cannot be read
// (no /proc, no schedstat). The descriptor is opened on a thread's first call
// and kept until the thread exits (a forked child opens its own). Allocates
// nothing, takes no lock, never blocks.
std::int64_t thread_wait_ns() noexcept;

}  // namespace trainscope::timing

#endif  // TRAINSCOPE_TIMING_THREAD_WAIT_HPP_
