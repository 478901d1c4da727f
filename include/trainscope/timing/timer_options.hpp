#ifndef TRAINSCOPE_TIMING_TIMER_OPTIONS_HPP_
#define TRAINSCOPE_TIMING_TIMER_OPTIONS_HPP_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace trainscope {

// A CUDA stream (cudaStream_t) without pulling CUDA headers into users' code.
// nullptr is the legacy default stream.
using StreamHandle = void*;

struct TimerOptions {
  // The first `warmup` completed regions of every key are left out of its
  // statistics (and of get_time); they are still counted in warmup_excluded.
  std::size_t warmup = 0;
  // Exact samples kept per key (8 bytes each). Past this the key switches to
  // a quantile sketch: memory stays bounded, count/total/min/max/mean/stdev
  // stay exact, quantiles carry at most `sketch_relative_error` relative error.
  std::size_t exact_sample_cap = std::size_t{1} << 24;
  double sketch_relative_error = 0.01;
  // Open an NVTX range (domain "trainscope") named after the key for every
  // region, so Nsight Systems shows it. Costs a few ns with no tool attached.
  bool nvtx = true;
  // While attached to a run (attach()): read the thread's run-queue wait
  // when the step key (BATCH) starts and ends; the step's region carries the
  // difference (RegionSample::cpu_wait_ns; the run's cpu_wait_ns column,
  // trainscope/timing/thread_wait.hpp). About 1.2 us a step, inside the
  // step's time (the reads lie between its clock reads: its wait never exceeds it).
  bool step_wait = true;
};

struct CPUGPUTimerOptions : TimerOptions {
  // Fail construction instead of degrading to CPU-only timing when no GPU is
  // visible.
  bool require_gpu = false;
  // Stream that GPU events are recorded on unless a call names another.
  StreamHandle stream = nullptr;
  // end() harvests finished GPU pairs once more than this many are outstanding,
  // at most this many at once (0 disables harvesting in end(); complete_all()
  // and reads still harvest everything). A run of pairs on one stream costs one
  // event query and one elapsed-time read per pair.
  std::size_t harvest_per_end = 4;
};

// OK, or InvalidArgument naming the first bad option and its value. Timers
// check their options when built (constructors throw TimerError with this
// status), so a bad option never surfaces later from inside start()/end().
absl::Status validate_options(const TimerOptions& options);
absl::Status validate_options(const CPUGPUTimerOptions& options);

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_TIMER_OPTIONS_HPP_
