// CPU region timer, a drop-in for Deep500's Timer.
//
// Thread safety: a Timer belongs to one thread at a time, like a std::vector:
// start/end take no lock. Time other threads with their own Timer and
// combine with merge(); attach any number of timers, from any threads, to one
// ExportPipeline. Key interning and the pipeline are thread-safe.
#ifndef TRAINSCOPE_TIMING_TIMER_HPP_
#define TRAINSCOPE_TIMING_TIMER_HPP_

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/timing/detail/region_core.hpp"
#include "trainscope/timing/scoped_region.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope {

class Timer {
 public:
  static constexpr bool kTimesGpu = false;

  // Throws TimerError (kInvalidArgument) naming a bad option (validate_options).
  explicit Timer(TimerOptions options = {}) : core_(checked(options)) {}

  // Different keys may overlap and nest; the same key may not. Errors name
  // the key and leave the timer unchanged.
  absl::Status try_start(Key key) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.startable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    core_.open(*slot, key.id(), false);
    return absl::OkStatus();
  }
  absl::Status try_end(Key key) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.endable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    core_.read_end_wait(*slot);
    const std::int64_t now = detail::now_ns();
    core_.close(*slot, key.id(), now);
    return absl::OkStatus();
  }
  // Closes an open region without recording it: a region that turned out to
  // time nothing (the timed loader's wait that ends the pass, not a batch).
  // Errors as end()'s; nothing changes then.
  absl::Status try_cancel(Key key) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.endable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    core_.abandon(*slot);
    return absl::OkStatus();
  }
  void start(Key key) { detail::throw_if_error(try_start(key)); }
  void end(Key key) { detail::throw_if_error(try_end(key)); }
  void cancel(Key key) { detail::throw_if_error(try_cancel(key)); }
  // Starts now, ends when the guard leaves scope.
  [[nodiscard]] ScopedRegion<Timer> scope(Key key) { return ScopedRegion<Timer>(*this, key); }

  // Completed durations in seconds (a copy), in completion order. Fails for a
  // key past its exact-sample cap, whose samples live in a sketch.
  absl::Status try_get_time(Key key, std::vector<double>* out) const;
  std::vector<double> get_time(Key key) const;
  // Never fails: an empty key gives count 0 and NaN. Open regions are left out.
  TimeStats get_time_stats(Key key) const { return core_.stats(key, Device::kCPU); }
  // CPU regions complete at end(); kept for Deep500 parity.
  void complete_all() noexcept {}
  // Drops every sample and every open region.
  void reset() noexcept { core_.reset(); }
  // Keys with at least one completed region, in first-completed order.
  std::vector<Key> keys() const { return core_.keys(Device::kCPU); }

  Summary summary() const { return core_.summary(false); }
  std::string format_all_time_stats(StatsFormat format = StatsFormat::kDeep500) const {
    return format_summary(summary(), format);
  }
  void print_all_time_stats(std::ostream& out = std::cout,
                            StatsFormat format = StatsFormat::kDeep500) const {
    out << format_all_time_stats(format);
  }
  // Format by extension (.txt Deep500 text, .json, .csv); the file must not exist.
  absl::Status try_save_all_time_stats(std::string_view path) const;
  void save_all_time_stats(std::string_view path) const {
    detail::throw_if_error(try_save_all_time_stats(path));
  }

  // Adds another timer's completed regions (its open ones are ignored).
  void merge(const Timer& other) { core_.merge_completed(other.core_); }
  // Streams every completed region to the sink (an ExportPipeline, a Run's
  // pipeline) from now on.
  void attach(RegionSink& sink) { core_.attach(sink); }
  void detach() noexcept { core_.detach(); }
  // Computes the summary here and queues it for the sink's exporters.
  void export_summary(RegionSink& sink) const { sink.submit_summary(summary()); }

  const TimerOptions& options() const noexcept { return core_.options(); }
  std::size_t memory_bytes() const noexcept { return core_.memory_bytes(); }

 private:
  static const TimerOptions& checked(const TimerOptions& options) {
    detail::throw_if_error(validate_options(options));
    return options;
  }

  timing::detail::RegionCore core_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_TIMER_HPP_
