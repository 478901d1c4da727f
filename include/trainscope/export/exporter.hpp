// Export backends behind one interface (as spdlog's sinks, google/benchmark's
// reporters). Exporters are called only from the ExportPipeline's background
// thread, never from the thread that times regions.
#ifndef TRAINSCOPE_EXPORT_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_EXPORTER_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/stats/summary.hpp"
#include "trainscope/timing/region_sink.hpp"

namespace trainscope {

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

#endif  // TRAINSCOPE_EXPORT_EXPORTER_HPP_
