// Export backends behind one interface (as spdlog's sinks, google/benchmark's
// reporters). Exporters are called only from the ExportPipeline's background
// thread, never from the thread that times regions.
#ifndef TRAINSCOPE_EXPORTER_HPP_
#define TRAINSCOPE_EXPORTER_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trainscope/run_record.hpp"
#include "trainscope/time_stats.hpp"
#include "trainscope/time_type.hpp"

namespace trainscope {

enum class Device : std::uint8_t { kCPU = 0, kGPU = 1 };
std::string_view device_name(Device device) noexcept;  // "CPU" / "GPU"

// One completed region, as streamed to exporters.
struct RegionSample {
  KeyId key = 0;
  Device device = Device::kCPU;
  std::uint32_t thread = 0;          // small per-process thread index
  std::int64_t start_unix_ns = 0;    // wall clock at start (CPU start for GPU regions)
  std::int64_t duration_ns = 0;
};

// End-of-run statistics of one timer.
struct SummaryEntry {
  std::string key;
  Device device = Device::kCPU;
  TimeStats stats;
};
struct Summary {
  // True for a CPUGPUTimer: Deep500 prints separate CPU and GPU sections.
  bool has_gpu_section = false;
  // Per device, in the order keys first completed a region.
  std::vector<SummaryEntry> entries;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  // For messages: "stdout", "file:/path/run.json".
  virtual std::string name() const = 0;
  // A batch of samples in completion order per producing thread.
  virtual absl::Status write_samples(absl::Span<const RegionSample> samples) {
    (void)samples;
    return absl::OkStatus();
  }
  virtual absl::Status write_summary(const Summary& summary) {
    (void)summary;
    return absl::OkStatus();
  }
  // Scalars logged by the user, in logging order.
  virtual absl::Status write_metrics(absl::Span<const MetricPoint> metrics) {
    (void)metrics;
    return absl::OkStatus();
  }
  // The run's metadata when it starts, when params or tags change, and when
  // it ends (status and end time set).
  virtual absl::Status write_run_info(const RunInfo& info) {
    (void)info;
    return absl::OkStatus();
  }
  virtual absl::Status flush() { return absl::OkStatus(); }
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORTER_HPP_
