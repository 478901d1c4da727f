// State shared by Timer and CPUGPUTimer: which keys are open, the completed
// series per device, the optional export ring. All hot-path members are
// inline; everything that allocates or formats is out of line.
#ifndef TRAINSCOPE_TIMING_DETAIL_REGION_CORE_HPP_
#define TRAINSCOPE_TIMING_DETAIL_REGION_CORE_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "trainscope/common/clock.hpp"
#include "trainscope/timing/detail/nvtx.hpp"
#include "trainscope/timing/detail/open_regions.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"
#include "trainscope/timing/detail/series_table.hpp"
#include "trainscope/timing/gpu_event_source.hpp"
#include "trainscope/timing/region_sink.hpp"
#include "trainscope/timing/thread_wait.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope::timing::detail {

struct OpenSlot {
  std::int64_t start_ns = 0;
  std::uint64_t nvtx = 0;
  GpuEventSource::Event start_event = nullptr;  // set for GPU-timed regions
  int device = 0;
  // The step key's (options step_wait): the thread's run-queue wait at start
  // and at end (-1: not read) and the thread that read the first. Read inside
  // the step's clock reads, so that its wait lies within its time.
  std::int64_t wait_ns = -1;
  std::int64_t wait_end_ns = -1;
  std::uint32_t wait_thread = 0;
  bool open = false;
  bool gpu = false;  // the flag given at start
};

// Cold error builders; each message names the key.
absl::Status all_key_error(Key key, const char* operation);
absl::Status unknown_key_error(Key key);
absl::Status nesting_error(Key key);
absl::Status unbalanced_end_error(Key key);
absl::Status gpu_flag_mismatch_error(Key key, bool start_gpu, bool end_gpu);

class RegionCore {
 public:
  explicit RegionCore(const TimerOptions& options);
  RegionCore(RegionCore&&) noexcept;
  RegionCore& operator=(RegionCore&&) noexcept;
  ~RegionCore();

  // The slot of a key that may be started, or an error (nothing changed).
  absl::Status startable(Key key, OpenSlot** slot) {
    const KeyId id = key.id();
    // Unsigned wrap sends id 0 (never a valid key) to the slow path as well.
    if (ABSL_PREDICT_FALSE(id - 1u >= open_.size() - 1u || key.is_all()))
      return grow_for(key, slot);
    OpenSlot& s = open_[id];
    if (ABSL_PREDICT_FALSE(s.open)) return nesting_error(key);
    *slot = &s;
    return absl::OkStatus();
  }
  // The open slot of a key that may be ended, or an error (nothing changed).
  absl::Status endable(Key key, OpenSlot** slot) {
    const KeyId id = key.id();
    if (ABSL_PREDICT_FALSE(id >= open_.size() || !open_[id].open)) {
      return key.is_all() ? all_key_error(key, "end") : unbalanced_end_error(key);
    }
    *slot = &open_[id];
    return absl::OkStatus();
  }

  void open(OpenSlot& s, KeyId id, bool gpu) noexcept {
    s.open = true;
    s.gpu = gpu;
    if (nvtx_) s.nvtx = nvtx_range_start(id);
    s.start_ns = trainscope::detail::now_ns();
    if (ABSL_PREDICT_FALSE(id == kStepId) && step_wait_) read_wait(s);
    if (OpenStack* stack = published_.get()) stack->push(id, s.start_ns);
  }
  // Before the end's clock read: the step's wait at its end (nothing for any
  // other region).
  void read_end_wait(OpenSlot& s) noexcept {
    if (ABSL_PREDICT_FALSE(s.wait_ns >= 0) && s.wait_thread == trainscope::detail::thread_index())
      s.wait_end_ns = thread_wait_ns();
  }
  // Closes the slot without recording anything (cancel()).
  void abandon(OpenSlot& s) noexcept {
    s.open = false;
    s.wait_ns = -1;
    s.wait_end_ns = -1;
    if (OpenStack* stack = published_.get()) stack->pop(static_cast<KeyId>(&s - open_.data()));
    if (nvtx_) nvtx_range_end(s.nvtx);
  }
  // Records the CPU duration up to `end_ns` and closes the slot.
  void close(OpenSlot& s, KeyId id, std::int64_t end_ns) {
    s.open = false;
    if (OpenStack* stack = published_.get()) stack->pop(id);
    if (nvtx_) nvtx_range_end(s.nvtx);
    const std::int64_t wait = ABSL_PREDICT_FALSE(s.wait_ns >= 0) ? step_wait(s) : kNoCpuWait;
    record(id, Device::kCPU, s.start_ns, end_ns - s.start_ns, kNoGpuStart, 0, wait);
  }
  // `gpu_start_ns` and `stream`: a GPU region's device start and stream index
  // (RegionSample's fields).
  // `cpu_wait_ns`: a CPU step's run-queue wait (RegionSample's).
  void record(KeyId id, Device device, std::int64_t start_ns, std::int64_t duration_ns,
              std::int64_t gpu_start_ns = kNoGpuStart, std::uint32_t stream = 0,
              std::int64_t cpu_wait_ns = kNoCpuWait) {
    (device == Device::kCPU ? cpu_ : gpu_).add(id, duration_ns);
    if (ring_ != nullptr)
      push_sample(id, device, start_ns, duration_ns, gpu_start_ns, stream, cpu_wait_ns);
  }

  bool any_open() const noexcept;
  void attach(RegionSink& sink);
  void detach() noexcept;
  bool attached() const noexcept { return ring_ != nullptr; }

  const SeriesTable& table(Device device) const noexcept {
    return device == Device::kCPU ? cpu_ : gpu_;
  }
  SeriesTable& mutable_table(Device device) noexcept {
    return device == Device::kCPU ? cpu_ : gpu_;
  }
  const TimerOptions& options() const noexcept { return options_; }
  std::vector<OpenSlot>& slots() noexcept { return open_; }

  // Completed statistics and samples, per device.
  TimeStats stats(Key key, Device device) const;
  // Fails for a key past its exact-sample cap (only a sketch is kept).
  absl::Status samples_seconds(Key key, Device device, std::vector<double>* out) const;
  Summary summary(bool has_gpu_section) const;
  // Keys that completed at least one region on the device, first-completed order.
  std::vector<Key> keys(Device device) const;
  void merge_completed(const RegionCore& other);
  // Drops samples and open regions (open NVTX ranges are ended).
  void reset() noexcept;
  std::size_t memory_bytes() const noexcept;

 private:
  static constexpr KeyId kStepId = static_cast<KeyId>(TimeType::BATCH);
  absl::Status grow_for(Key key, OpenSlot** slot);
  // The step's wait (TimerOptions::step_wait): read after its start's clock
  // read and (read_end_wait) before its end's, and the difference (kNoCpuWait
  // for a step ended on another thread).
  void read_wait(OpenSlot& s) noexcept {
    s.wait_ns = thread_wait_ns();
    s.wait_end_ns = -1;
    s.wait_thread = trainscope::detail::thread_index();
  }
  std::int64_t step_wait(OpenSlot& s) noexcept {
    const std::int64_t start = s.wait_ns;
    const std::int64_t end = s.wait_end_ns;
    s.wait_ns = -1;
    s.wait_end_ns = -1;
    return end >= start ? end - start : kNoCpuWait;  // start >= 0: read at the start
  }
  // Inline: with the ring's push, a few stores and no call but the thread index.
  void push_sample(KeyId id, Device device, std::int64_t start_ns, std::int64_t duration_ns,
                   std::int64_t gpu_start_ns, std::uint32_t stream,
                   std::int64_t cpu_wait_ns) noexcept {
    RegionSample sample;
    sample.key = id;
    sample.device = device;
    sample.thread = trainscope::detail::thread_index();
    sample.start_unix_ns = start_ns;  // steady ns; the pipeline converts to wall time
    sample.duration_ns = duration_ns;
    sample.gpu_start_ns = gpu_start_ns;
    sample.stream = stream;
    sample.cpu_wait_ns = cpu_wait_ns;
    ring_->push(sample);
  }

  TimerOptions options_;
  bool nvtx_;
  std::vector<OpenSlot> open_;
  SeriesTable cpu_;
  SeriesTable gpu_;
  std::shared_ptr<SampleRing> ring_;
  bool step_wait_ = false;     // attached, with TimerOptions::step_wait, and readable
  OpenStackHandle published_;  // while attached: the regions open, for a dump
};

}  // namespace trainscope::timing::detail

#endif  // TRAINSCOPE_TIMING_DETAIL_REGION_CORE_HPP_
