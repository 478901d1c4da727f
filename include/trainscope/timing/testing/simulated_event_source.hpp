// A GpuEventSource driven by a virtual clock, so the GPU bookkeeping
// (batching, FIFO harvesting, pool growth, all-or-nothing) is tested on any
// machine. Each stream is a queue of simulated work: an event recorded on a
// stream fires when the work enqueued before it has run.
#ifndef TRAINSCOPE_TIMING_TESTING_SIMULATED_EVENT_SOURCE_HPP_
#define TRAINSCOPE_TIMING_TESTING_SIMULATED_EVENT_SOURCE_HPP_

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "trainscope/timing/gpu_event_source.hpp"

namespace trainscope::testing {

class SimulatedEventSource final : public GpuEventSource {
 public:
  SimulatedEventSource() = default;

  // --- the simulation ---
  std::int64_t now_ns() const noexcept { return now_ns_; }
  void advance(std::int64_t ns) noexcept { now_ns_ += ns; }
  // Enqueue `ns` of GPU work on `stream`: it starts when the stream is free
  // (or now, whichever is later).
  void enqueue_work(StreamHandle stream, std::int64_t ns);
  // Extra delay between an event's GPU timestamp and query() reporting it done.
  void set_completion_delay(std::int64_t ns) noexcept { completion_delay_ns_ = ns; }
  // Failure injection: the next N calls of the kind fail.
  void fail_next_creates(int n) noexcept { fail_creates_ = n; }
  void fail_next_records(int n) noexcept { fail_records_ = n; }
  void fail_next_queries(int n) noexcept { fail_queries_ = n; }
  void set_device(int device) noexcept { device_ = device; }
  void set_available(bool available) noexcept { available_ = available; }

  // --- what happened ---
  std::uint64_t events_created() const noexcept { return created_; }
  std::uint64_t events_alive() const noexcept { return events_.size(); }
  std::uint64_t records() const noexcept { return records_; }
  std::uint64_t queries() const noexcept { return queries_; }
  std::uint64_t elapsed_reads() const noexcept { return elapsed_reads_; }

  // --- GpuEventSource ---
  bool available() const noexcept override { return available_; }
  std::string describe() const override;
  int current_device() noexcept override { return device_; }
  absl::Status create_event(Event* out) override;
  void destroy_event(Event event) noexcept override;
  absl::Status record(Event event, StreamHandle stream) override;
  QueryResult query(Event event) noexcept override;
  absl::Status synchronize(Event event) override;
  absl::Status elapsed_ns(Event start, Event end, std::int64_t* out) override;
  std::uint64_t blocking_waits() const noexcept override { return syncs_; }
  absl::Status offset_ns(Event from, Event to, std::int64_t* out) override;

 private:
  struct SimEvent {
    int device = 0;
    bool recorded = false;
    std::int64_t gpu_time_ns = 0;
  };
  SimEvent* find(Event event);
  // The signed virtual time from `from` to `to`, both complete.
  absl::Status difference(Event from, Event to, std::int64_t* out);

  std::int64_t now_ns_ = 1'000'000'000;
  std::int64_t completion_delay_ns_ = 0;
  std::map<StreamHandle, std::int64_t> stream_free_at_;
  std::map<std::uintptr_t, SimEvent> events_;
  std::uintptr_t next_id_ = 1;
  int device_ = 0;
  bool available_ = true;
  int fail_creates_ = 0;
  int fail_records_ = 0;
  int fail_queries_ = 0;
  std::uint64_t created_ = 0;
  std::uint64_t records_ = 0;
  std::uint64_t queries_ = 0;
  std::uint64_t elapsed_reads_ = 0;
  std::uint64_t syncs_ = 0;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TIMING_TESTING_SIMULATED_EVENT_SOURCE_HPP_
