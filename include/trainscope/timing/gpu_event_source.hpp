// Where GPU timestamps come from. CUDA events in production; a simulated
// source with a virtual clock in tests (trainscope/testing/simulated_event_source.hpp).
#ifndef TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_
#define TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope {

class GpuEventSource {
 public:
  using Event = void*;  // cudaEvent_t for CUDA

  enum class QueryResult { kReady, kPending, kError };

  virtual ~GpuEventSource() = default;

  // False when no GPU is visible (or the source was built without CUDA).
  virtual bool available() const noexcept = 0;
  // One line: the device in use, or why none is available.
  virtual std::string describe() const = 0;
  // The device that events created now belong to (pools are per device).
  virtual int current_device() noexcept = 0;

  // A timing-enabled event on the current device.
  virtual absl::Status create_event(Event* out) = 0;
  virtual void destroy_event(Event event) noexcept = 0;
  // Enqueue `event` on `stream`; never waits for the GPU.
  virtual absl::Status record(Event event, StreamHandle stream) = 0;
  // Non-blocking completion test.
  virtual QueryResult query(Event event) noexcept = 0;
  // Blocks until `event` completed. Counted: the hot path must never call it.
  virtual absl::Status synchronize(Event event) = 0;
  // GPU time between two completed events, in nanoseconds.
  virtual absl::Status elapsed_ns(Event start, Event end, std::int64_t* out) = 0;
  // Blocking waits so far (synchronize calls).
  virtual std::uint64_t blocking_waits() const noexcept = 0;
  // Signed GPU time from `from` to `to` (both completed), in nanoseconds:
  // negative where `to` ran first (events on two streams).
  virtual absl::Status offset_ns(Event from, Event to, std::int64_t* out) = 0;

  // The process's reference event, against which regions' device starts are
  // measured (CPUGPUTimer; docs/run-format.md `gpu_start_ns`): the first call
  // adopts `candidate` (a completed region start event on `device`; the source
  // owns it from then on, *adopted is set) and later calls return it. One
  // reference per source, on the first device: another device fails (its
  // regions have no device start). Takes a lock: a timer asks once, at its
  // first harvested GPU region. The event lives as long as the process (a
  // base class cannot destroy it): one event per source.
  absl::Status reference(int device, Event candidate, Event* out, bool* adopted);

 private:
  std::mutex reference_mu_;
  Event reference_ = nullptr;
  int reference_device_ = -1;
};

// CUDA events when this build has CUDA and a GPU is visible; otherwise a
// source whose available() is false and whose describe() says why.
std::shared_ptr<GpuEventSource> default_gpu_event_source();

// True when the library was compiled with the CUDA runtime.
bool built_with_cuda() noexcept;

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_
