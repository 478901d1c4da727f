// One rank's steps, built row by row (the room's own header: the reader
// feeds it, its tests drive it directly). The definitions are the public
// header's (trainscope/steps/steps.hpp).
#ifndef TRAINSCOPE_SRC_STEPS_STEP_BUILDER_HPP_
#define TRAINSCOPE_SRC_STEPS_STEP_BUILDER_HPP_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "trainscope/steps/steps.hpp"
#include "trainscope/timing/region_sink.hpp"

namespace trainscope::steps::detail {

// A row waiting for its step's period to be known.
struct PendingRow {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  // saturated
  std::int64_t duration_ns = 0;
  std::uint32_t key = 0;
  int phase = -1;  // a Phase, or -1: a key of no phase (kept for its key sum)
  bool gpu = false;
  std::uint32_t thread = 0;
  // A data wait already held to the step it starts in (its overlap with a
  // later step is still to come).
  bool carried = false;
  bool collective = false;                  // a COMM/ key's row (Step::collectives_s)
  std::int64_t gpu_start_ns = kNoGpuStart;  // a GPU row's device start (RegionView's)
};

// The device intervals [start, end) of one step's GPU-timed compute rows, kept
// disjoint and sorted: add() returns the time a new interval adds to their
// union (0 for one inside what is there: nested regions, a second stream's
// overlapping work).
class DeviceIntervals {
 public:
  std::int64_t add(std::int64_t start, std::int64_t end);
  const std::vector<std::pair<std::int64_t, std::int64_t>>& intervals() const { return spans_; }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;
};

class StepBuilder {
 public:
  StepBuilder(std::size_t window_steps, std::size_t max_history_steps, bool key_sums)
      : window_steps_(window_steps), max_history_(max_history_steps), key_sums_(key_sums) {}

  RankSteps& out() { return out_; }
  const RankSteps& out() const { return out_; }

  // A step row (the rank's step key, on its thread): closes the open step at
  // its start. `index`: the step's own number (a BATCH row's), or -1;
  // `cpu_wait_ns` its run-queue wait (kNoCpuWait: none).
  void on_step(std::int64_t start_ns, std::int64_t duration_ns, std::int64_t index,
               std::uint32_t key, std::int64_t cpu_wait_ns = kNoCpuWait);
  // Any other row of the rank (`phase` -1: a key of no phase).
  void on_row(const PendingRow& row);
  // The rank ended: its open step closes with its own duration.
  void close();
  // The rows waiting for a step (of none yet, or after the last) into
  // RankSteps::unstepped (StepOptions::key_sums), one each.
  void flush_unstepped();
  // The open step's key sums so far (its step row).
  const std::vector<KeySum>& open_keys() const { return current_keys_; }
  // `bytes` of the rank's rows are not read (the read budget).
  void skip(std::uint64_t bytes);

 private:
  bool is_wait(const PendingRow& r) const {
    return !r.gpu && r.phase == static_cast<int>(Phase::kDataWait) && r.thread == out_.step_thread;
  }
  // Adds the row's phase time to `s` (a CPU row longer than the step is left
  // out and counted): by start, or a data wait by its overlap with the period.
  // `union_s`: the time a GPU compute row adds to its step's device union
  // (Step::gpu_union_s), or < 0 where it has no place in it.
  void credit(Step* s, const PendingRow& r, double union_s = -1);
  // The time GPU compute row `r` adds to the union of step `step_start_ns`'s
  // device intervals; < 0 where the row has no device start or the step's
  // intervals are no longer kept.
  double place(std::int64_t step_start_ns, const PendingRow& r);
  bool is_gpu_compute(const PendingRow& r) const {
    return r.gpu && r.phase >= 0 && is_compute(static_cast<Phase>(r.phase));
  }
  void add_key(std::vector<KeySum>* sums, const PendingRow& r);
  void take_pending(std::int64_t until);
  void finalize();
  void add_late(const PendingRow& r);

  std::size_t window_steps_;
  std::size_t max_history_;
  bool key_sums_;
  RankSteps out_;
  bool closed_ = false;
  Step current_;
  std::int64_t current_end_ns_ = 0;
  std::vector<KeySum> current_keys_;
  std::vector<PendingRow> pending_;
  // The device intervals of the open step and of the last kKeptIntervalSteps
  // closed ones (by step start), for the GPU rows collected after their step.
  static constexpr std::size_t kKeptIntervalSteps = 64;
  DeviceIntervals current_intervals_;
  std::deque<std::pair<std::int64_t, DeviceIntervals>> closed_intervals_;
  bool after_skip_ = false;
  std::uint64_t steps_at_skip_ = 0;
  // Late rows that start before this joined no step read (the first step
  // after a skip starts here).
  std::int64_t late_floor_ns_ = std::numeric_limits<std::int64_t>::min();
};

}  // namespace trainscope::steps::detail

#endif  // TRAINSCOPE_SRC_STEPS_STEP_BUILDER_HPP_
