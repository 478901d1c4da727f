// An Exporter that records everything the pipeline delivers (samples,
// summaries, metrics, run infos) and the order of the calls, for tests of the
// pipeline, the sampler and the hardware sources. Thread-safe: the pipeline
// thread writes, the test thread reads.
#ifndef TRAINSCOPE_TESTS_SUPPORT_RECORDING_EXPORTER_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_RECORDING_EXPORTER_HPP_

#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope::testing {

class RecordingExporter : public Exporter {
 public:
  std::string name() const override { return "recording"; }
  absl::Status write_samples(absl::Span<const RegionSample> samples) override {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.insert(samples_.end(), samples.begin(), samples.end());
    events_.push_back("samples");
    return absl::OkStatus();
  }
  absl::Status write_summary(const Summary& summary) override {
    std::lock_guard<std::mutex> lock(mu_);
    summaries_.push_back(summary);
    events_.push_back("summary");
    return absl::OkStatus();
  }
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.insert(metrics_.end(), metrics.begin(), metrics.end());
    events_.push_back("metrics");
    return absl::OkStatus();
  }
  absl::Status write_run_info(const RunInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    run_infos_.push_back(info);
    events_.push_back("run_info");
    return absl::OkStatus();
  }
  absl::Status flush() override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back("flush");
    ++flushes_;
    return absl::OkStatus();
  }

  std::vector<RegionSample> samples() const { return locked(samples_); }
  std::vector<Summary> summaries() const { return locked(summaries_); }
  // The metric points received, in delivery order.
  std::vector<MetricPoint> received() const { return locked(metrics_); }
  std::vector<RunInfo> run_infos() const { return locked(run_infos_); }
  // "samples", "summary", "metrics", "run_info", "flush" in call order.
  std::vector<std::string> events() const { return locked(events_); }
  int flushes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return flushes_;
  }

 private:
  template <typename T>
  T locked(const T& member) const {
    std::lock_guard<std::mutex> lock(mu_);
    return member;
  }

  mutable std::mutex mu_;
  std::vector<RegionSample> samples_;
  std::vector<Summary> summaries_;
  std::vector<MetricPoint> metrics_;
  std::vector<RunInfo> run_infos_;
  std::vector<std::string> events_;
  int flushes_ = 0;
};

// What the sampler and hardware tests call it.
using MetricCollector = RecordingExporter;

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_RECORDING_EXPORTER_HPP_
