// Moves samples from timers to exporters off the training thread. Each timer
// attached to a pipeline gets its own single-producer queue (a SampleRing), so
// end() pushes with a relaxed load, a store and a release store, and no lock.
// One background thread drains the queues every `flush_interval`, and sooner
// whenever a queue's backlog passes its high-water mark (half a chunk): the
// producer wakes the thread then, once per drain. A burst that outruns the
// exporters grows the queues by chunks up to `max_pending_bytes` for the
// whole process; only past that are samples dropped from the stream (counted
// and warned once); the timer's own statistics never lose them.
//
// In a process forked from the one that made it, a pipeline does nothing:
// flush() returns at once, submissions and exporters are dropped, new rings
// are never drained, and its destructor leaves the parent's thread, locks and
// files alone. A forked child that records starts a run of its own.
#ifndef TRAINSCOPE_EXPORT_EXPORT_PIPELINE_HPP_
#define TRAINSCOPE_EXPORT_EXPORT_PIPELINE_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope {

class ExportPipeline final : public RegionSink {
 public:
  struct Options {
    absl::Duration flush_interval = absl::Milliseconds(200);
    // Samples per chunk of an attached timer's queue (rounded up to a power of
    // two): each queue starts with one chunk (32 bytes a sample) and grows by
    // chunks of this size. Before queues could grow this was their fixed size.
    std::size_t ring_capacity = std::size_t{1} << 15;
    // Samples waiting in the queues of all pipelines of the process may take
    // this many bytes (whole chunks, counted process-wide); a queue that would
    // pass it drops new samples until the thread has drained it. Every queue
    // may hold two chunks regardless, so it never stalls. 64 MiB = 2.8M samples.
    std::size_t max_pending_bytes = std::size_t{64} << 20;
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
  // Samples that did not fit in the queues (the stream lost them; stats did not).
  std::uint64_t dropped_samples() const noexcept;
  // Exporter calls that returned an error.
  std::uint64_t export_errors() const noexcept;

  // For timers: a new producer ring, drained until the producer releases it.
  std::shared_ptr<timing::detail::SampleRing> open_ring() override;
  // Drains a ring opened elsewhere (a HoldingSink's) as its own: what it holds
  // now and what its producer pushes until it releases it. Its samples are
  // steady-clock stamped like every ring's.
  void adopt_ring(std::shared_ptr<timing::detail::SampleRing> ring);

 private:
  // Everything the background thread shares, behind a pointer: a forked child
  // (which has no such thread) abandons it rather than destroy what the thread
  // held or waited on (src/common/fork_owner.hpp).
  struct State;
  class Waker;  // a ring's high-water wake; outlives the pipeline if a ring does
  std::unique_ptr<State> state_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_EXPORT_PIPELINE_HPP_
