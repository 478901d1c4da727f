// Where GPU timestamps come from. CUDA events in production; a simulated
// source with a virtual clock in tests (trainscope/testing/simulated_event_source.hpp).
#ifndef TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_
#define TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_

#include <cstdint>
#include <memory>
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
};

// CUDA events when this build has CUDA and a GPU is visible; otherwise a
// source whose available() is false and whose describe() says why.
std::shared_ptr<GpuEventSource> default_gpu_event_source();

// True when the library was compiled with the CUDA runtime.
bool built_with_cuda() noexcept;

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_GPU_EVENT_SOURCE_HPP_
