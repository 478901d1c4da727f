// What a timer streams completed regions into. The timing layer knows only
// this interface; ExportPipeline (trainscope/export/) implements it.
#ifndef TRAINSCOPE_TIMING_REGION_SINK_HPP_
#define TRAINSCOPE_TIMING_REGION_SINK_HPP_

#include <cstdint>
#include <memory>

#include "trainscope/stats/summary.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {

// A GPU region whose device start is unknown (a CPU region, an older run, a
// region on another device than the rank's reference event).
inline constexpr std::int64_t kNoGpuStart = INT64_MIN;
// A region without a run-queue wait reading (every region but a step's, a step
// timed without TimerOptions::step_wait).
inline constexpr std::int64_t kNoCpuWait = -1;

// One completed region, as streamed to exporters.
struct RegionSample {
  KeyId key = 0;
  Device device = Device::kCPU;
  std::uint32_t thread = 0;        // small per-process thread index
  std::int64_t start_unix_ns = 0;  // wall clock at start (CPU start for GPU regions)
  std::int64_t duration_ns = 0;
  // GPU regions: the device start, ns after the rank's reference event
  // (GpuEventSource::reference), and the per-process index of the stream of
  // its end event (0: the default stream). kNoGpuStart where unknown.
  std::int64_t gpu_start_ns = kNoGpuStart;
  std::uint32_t stream = 0;
  // A CPU step region (BATCH): the thread's run-queue wait while it ran
  // (trainscope/timing/thread_wait.hpp), kNoCpuWait where not read.
  std::int64_t cpu_wait_ns = kNoCpuWait;
};

namespace timing::detail {
class SampleRing;
}

class RegionSink {
 public:
  virtual ~RegionSink() = default;
  // A new single-producer ring for one timer, drained until the producer
  // releases it.
  virtual std::shared_ptr<timing::detail::SampleRing> open_ring() = 0;
  // Queues a summary the caller computed.
  virtual void submit_summary(Summary summary) = 0;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_REGION_SINK_HPP_
