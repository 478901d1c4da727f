// CPU + GPU region timer, a drop-in for Deep500's CPUGPUTimer.
//
// gpu=true regions are timed on the CPU and, with CUDA events, on the GPU.
// end() never waits for the GPU: finished event pairs are harvested with
// non-blocking queries, oldest first, as the loop goes; complete_all() and
// every read of statistics wait for what is still outstanding. Events come
// from a per-device pool that grows on demand, so the number of outstanding
// regions is limited by memory only. With no GPU visible, gpu=true regions are
// timed on the CPU only (one warning per process) unless require_gpu is set.
// A GPU region also records its device start and stream (RegionSample): read
// when its pair is harvested, against the previous harvested start, never by
// waiting (docs/run-format.md `gpu_start_ns`).
//
// Thread safety: as Timer (one thread at a time; merge() to combine).
#ifndef TRAINSCOPE_TIMING_CPU_GPU_TIMER_HPP_
#define TRAINSCOPE_TIMING_CPU_GPU_TIMER_HPP_

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/timing/detail/region_core.hpp"
#include "trainscope/timing/gpu_event_source.hpp"
#include "trainscope/timing/scoped_region.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope {

class CPUGPUTimer {
 public:
  static constexpr bool kTimesGpu = true;

  // Uses CUDA events when a GPU is visible. Throws TimerError if
  // options.require_gpu is set and none is.
  explicit CPUGPUTimer(CPUGPUTimerOptions options = {});
  // Uses `source` (e.g. testing::SimulatedEventSource) for GPU timestamps.
  CPUGPUTimer(std::shared_ptr<GpuEventSource> source, CPUGPUTimerOptions options = {});
  // Returns every event to the source without waiting for the GPU.
  ~CPUGPUTimer();
  CPUGPUTimer(const CPUGPUTimer&) = delete;
  CPUGPUTimer& operator=(const CPUGPUTimer&) = delete;

  // The same key may not be open twice; `gpu` at end must equal `gpu` at
  // start. Either way, a failed call (misuse or a GPU error) changes nothing.
  absl::Status try_start(Key key, bool gpu = false) { return try_start(key, gpu, options_.stream); }
  absl::Status try_start(Key key, bool gpu, StreamHandle stream) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.startable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    if (gpu) return start_gpu(key, *slot, stream);
    core_.open(*slot, key.id(), false);
    return absl::OkStatus();
  }
  absl::Status try_end(Key key, bool gpu = false) { return try_end(key, gpu, options_.stream); }
  absl::Status try_end(Key key, bool gpu, StreamHandle stream) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.endable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    if (ABSL_PREDICT_FALSE(slot->gpu != gpu))
      return timing::detail::gpu_flag_mismatch_error(key, slot->gpu, gpu);
    core_.read_end_wait(*slot);
    const std::int64_t now = detail::now_ns();
    if (slot->start_event != nullptr) return end_gpu(key, *slot, now, stream);
    core_.close(*slot, key.id(), now);
    maybe_harvest();
    return absl::OkStatus();
  }
  // Closes an open region (CPU or GPU) without recording it; a GPU region's
  // start event goes back to the pool. Errors as end()'s; nothing changes then.
  absl::Status try_cancel(Key key) {
    timing::detail::OpenSlot* slot;
    absl::Status status = core_.endable(key, &slot);
    if (ABSL_PREDICT_FALSE(!status.ok())) return status;
    if (slot->start_event != nullptr) {
      release_event(slot->device, slot->start_event);
      slot->start_event = nullptr;
    }
    core_.abandon(*slot);
    return absl::OkStatus();
  }
  void cancel(Key key) { detail::throw_if_error(try_cancel(key)); }
  void start(Key key, bool gpu = false) { detail::throw_if_error(try_start(key, gpu)); }
  void start(Key key, bool gpu, StreamHandle stream) {
    detail::throw_if_error(try_start(key, gpu, stream));
  }
  void end(Key key, bool gpu = false) { detail::throw_if_error(try_end(key, gpu)); }
  void end(Key key, bool gpu, StreamHandle stream) {
    detail::throw_if_error(try_end(key, gpu, stream));
  }
  [[nodiscard]] ScopedRegion<CPUGPUTimer> scope(Key key, bool gpu = false) {
    return ScopedRegion<CPUGPUTimer>(*this, key, gpu);
  }

  // Reads wait for outstanding GPU regions first.
  absl::Status try_get_time(Key key, bool gpu, std::vector<double>* out);
  std::vector<double> get_time(Key key, bool gpu = false);
  TimeStats get_time_stats(Key key, bool gpu = false);
  // Waits for every outstanding GPU region and records it.
  absl::Status try_complete_all();
  void complete_all() { detail::throw_if_error(try_complete_all()); }
  // Records finished GPU regions without waiting, oldest first, at most
  // `limit`; returns how many were recorded or dropped. Regions on one stream
  // finish in order: one query of the newest of a run of them tells that the
  // whole run is done, so a run costs one query and one elapsed-time read per
  // region, not a query and a read each.
  std::size_t harvest(std::size_t limit = SIZE_MAX);
  void reset();
  std::vector<Key> keys(bool gpu = false) const {
    return core_.keys(gpu ? Device::kGPU : Device::kCPU);
  }

  Summary summary();
  std::string format_all_time_stats(StatsFormat format = StatsFormat::kDeep500) {
    return format_summary(summary(), format);
  }
  void print_all_time_stats(std::ostream& out = std::cout,
                            StatsFormat format = StatsFormat::kDeep500) {
    out << format_all_time_stats(format);
  }
  absl::Status try_save_all_time_stats(std::string_view path);
  void save_all_time_stats(std::string_view path) {
    detail::throw_if_error(try_save_all_time_stats(path));
  }

  // Completes `other` first, then adds its regions.
  void merge(CPUGPUTimer& other);
  void attach(RegionSink& sink) { core_.attach(sink); }
  void detach() noexcept { core_.detach(); }
  // Completes outstanding GPU regions, then queues the summary for the exporters.
  void export_summary(RegionSink& sink);

  bool gpu_available() const noexcept { return gpu_available_; }
  std::string gpu_description() const { return source_->describe(); }
  void set_stream(StreamHandle stream) noexcept { options_.stream = stream; }
  // GPU regions whose end was recorded but whose time is not yet harvested.
  std::size_t outstanding() const noexcept { return pending_size_; }
  // Blocking waits this timer made on the GPU (only complete_all and reads wait).
  std::uint64_t blocking_waits() const noexcept { return blocking_waits_; }
  std::uint64_t events_created() const noexcept { return events_created_; }
  // GPU regions lost to GPU errors (each also reported through warn()).
  std::uint64_t gpu_errors() const noexcept { return gpu_errors_; }
  const CPUGPUTimerOptions& options() const noexcept { return options_; }
  std::size_t memory_bytes() const noexcept;

 private:
  struct Pending {
    KeyId key;
    int device;
    GpuEventSource::Event start;
    GpuEventSource::Event end;
    std::int64_t cpu_start_ns;
    StreamHandle stream;  // of the end event
  };

  // end() harvests once more than harvest_per_end regions are outstanding, so
  // that a run of them is read with one query (the newest just recorded waits).
  void maybe_harvest() {
    if (options_.harvest_per_end != 0 && pending_size_ > options_.harvest_per_end)
      harvest(options_.harvest_per_end);
  }

  // The per-process index of `stream` (RegionSample::stream), cached per timer.
  std::uint32_t stream_index(StreamHandle stream);
  // The device start of a harvested pair, ns after the source's reference
  // event (kNoGpuStart where unknown). Measured from the previous harvested
  // start (the anchor, kept out of the pool) so that cudaEventElapsedTime's
  // float milliseconds stay short; *keep_start: p.start is the new anchor.
  std::int64_t device_start(const Pending& p, bool* keep_start);

  absl::Status start_gpu(Key key, timing::detail::OpenSlot& slot, StreamHandle stream);
  absl::Status end_gpu(Key key, timing::detail::OpenSlot& slot, std::int64_t now,
                       StreamHandle stream);
  absl::Status acquire_event(int device, GpuEventSource::Event* out);
  void release_event(int device, GpuEventSource::Event event) noexcept;
  void push_pending(const Pending& p);
  void pop_pending() noexcept;
  // Records (or drops, on error) the oldest pending pair if `wait` or it is done.
  // `known_ready`: the front's end event is known to have completed (no query).
  bool finish_front(bool wait, absl::Status* error, bool known_ready = false);

  CPUGPUTimerOptions options_;
  std::shared_ptr<GpuEventSource> source_;
  bool gpu_available_;
  timing::detail::RegionCore core_;
  std::vector<std::vector<GpuEventSource::Event>> pools_;  // free events per device
  std::vector<Pending> pending_;                           // ring buffer
  std::size_t pending_head_ = 0;
  std::size_t pending_size_ = 0;
  std::uint64_t blocking_waits_ = 0;
  std::uint64_t events_created_ = 0;
  std::uint64_t gpu_errors_ = 0;
  // Device starts: the source's reference event (asked once, at the first
  // harvested GPU region) and the anchor (the last harvested start, at
  // anchor_ns_ after the reference).
  bool reference_asked_ = false;
  GpuEventSource::Event reference_ = nullptr;
  int reference_device_ = 0;
  GpuEventSource::Event anchor_ = nullptr;
  std::int64_t anchor_ns_ = 0;
  StreamHandle cached_stream_ = nullptr;
  std::uint32_t cached_stream_index_ = 0;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_CPU_GPU_TIMER_HPP_
