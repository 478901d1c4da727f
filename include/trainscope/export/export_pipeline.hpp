// Moves samples from timers to exporters off the training thread. Each timer
// attached to a pipeline gets its own single-producer ring, so end() pushes
// with two relaxed/acquire-release atomics and no lock; one background thread
// drains the rings every `flush_interval` and calls the exporters. A full ring
// drops the sample from the stream (counted and warned once); the timer's own
// statistics never lose it.
#ifndef TRAINSCOPE_EXPORT_PIPELINE_HPP_
#define TRAINSCOPE_EXPORT_PIPELINE_HPP_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope {

class ExportPipeline final : public RegionSink {
 public:
  struct Options {
    absl::Duration flush_interval = absl::Milliseconds(200);
    std::size_t ring_capacity = std::size_t{1} << 15;  // samples per attached timer
  };

  ExportPipeline();
  explicit ExportPipeline(Options options);
  // Drains everything and calls flush() on every exporter.
  ~ExportPipeline();
  ExportPipeline(const ExportPipeline&) = delete;
  ExportPipeline& operator=(const ExportPipeline&) = delete;

  void add_exporter(std::shared_ptr<Exporter> exporter);
  // Queued for the background thread (computing it is the caller's job).
  void submit_summary(Summary summary) override;
  // Scalars and run metadata, queued likewise (a mutex: these are not per region).
  void submit_metric(MetricPoint metric);
  void submit_run_info(RunInfo info);
  // Blocks until everything pushed or submitted before the call reached
  // every exporter, then flushes them.
  void flush();
  // Samples that did not fit in a ring (the stream lost them; stats did not).
  std::uint64_t dropped_samples() const noexcept;
  // Exporter calls that returned an error.
  std::uint64_t export_errors() const noexcept;

  // For timers: a new producer ring, drained until the producer releases it.
  std::shared_ptr<detail::SampleRing> open_ring() override;

 private:
  void run();
  void drain_once(std::vector<RegionSample>* batch);

  Options options_;
  // std::mutex rather than absl::Mutex: distribution builds of Abseil are not
  // TSan-instrumented, and the threading tests run under TSan.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the thread (stop, flush) and flush() callers
  // Guarded by mu_:
  std::vector<std::shared_ptr<Exporter>> exporters_;
  std::vector<std::shared_ptr<detail::SampleRing>> rings_;
  // Summaries, metrics and run infos in submission order (see deliver()).
  std::vector<std::variant<Summary, MetricPoint, RunInfo>> pending_events_;
  std::uint64_t requested_ = 0;  // flush() calls so far
  std::uint64_t completed_ = 0;  // flush() calls whose data reached the exporters
  bool stop_ = false;
  std::atomic<std::uint64_t> export_errors_{0};
  std::atomic<std::uint64_t> dropped_from_closed_{0};
  std::thread thread_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_PIPELINE_HPP_
