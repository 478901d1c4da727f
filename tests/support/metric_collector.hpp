// An Exporter that keeps every MetricPoint the pipeline delivers, for tests
// of what hardware sources and the sampler emit. Thread-safe: the pipeline
// thread writes, the test thread reads.
#ifndef TRAINSCOPE_TESTS_METRIC_COLLECTOR_HPP_
#define TRAINSCOPE_TESTS_METRIC_COLLECTOR_HPP_

#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope::testing {

class MetricCollector : public Exporter {
 public:
  std::string name() const override { return "collector"; }
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override {
    std::lock_guard<std::mutex> lock(mu_);
    received_.insert(received_.end(), metrics.begin(), metrics.end());
    return absl::OkStatus();
  }
  std::vector<MetricPoint> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<MetricPoint> received_;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_METRIC_COLLECTOR_HPP_
