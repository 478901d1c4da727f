#include "trainscope/timing/testing/simulated_event_source.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace trainscope::testing {

std::string SimulatedEventSource::describe() const {
  return available_ ? fmt::format("simulated GPU device {}", device_)
                    : std::string("simulated GPU marked unavailable");
}

void SimulatedEventSource::enqueue_work(StreamHandle stream, std::int64_t ns) {
  std::int64_t& free_at = stream_free_at_[stream];
  free_at = std::max(free_at, now_ns_) + ns;
}

SimulatedEventSource::SimEvent* SimulatedEventSource::find(Event event) {
  auto it = events_.find(reinterpret_cast<std::uintptr_t>(event));
  return it == events_.end() ? nullptr : &it->second;
}

absl::Status SimulatedEventSource::create_event(Event* out) {
  if (fail_creates_ > 0) {
    --fail_creates_;
    return absl::ResourceExhaustedError("simulated event creation failure");
  }
  const std::uintptr_t id = next_id_++;
  events_[id].device = device_;
  ++created_;
  *out = reinterpret_cast<Event>(id);
  return absl::OkStatus();
}

void SimulatedEventSource::destroy_event(Event event) noexcept {
  events_.erase(reinterpret_cast<std::uintptr_t>(event));
}

absl::Status SimulatedEventSource::record(Event event, StreamHandle stream) {
  if (fail_records_ > 0) {
    --fail_records_;
    return absl::InternalError("simulated record failure");
  }
  SimEvent* e = find(event);
  if (e == nullptr) return absl::InvalidArgumentError("record of an unknown event");
  if (e->device != device_) return absl::InvalidArgumentError("event belongs to another device");
  ++records_;
  e->recorded = true;
  auto it = stream_free_at_.find(stream);
  e->gpu_time_ns = std::max(now_ns_, it == stream_free_at_.end() ? now_ns_ : it->second);
  return absl::OkStatus();
}

GpuEventSource::QueryResult SimulatedEventSource::query(Event event) noexcept {
  ++queries_;
  if (fail_queries_ > 0) {
    --fail_queries_;
    return QueryResult::kError;
  }
  SimEvent* e = find(event);
  if (e == nullptr || !e->recorded) return QueryResult::kError;
  return now_ns_ >= e->gpu_time_ns + completion_delay_ns_ ? QueryResult::kReady
                                                          : QueryResult::kPending;
}

absl::Status SimulatedEventSource::synchronize(Event event) {
  ++syncs_;
  SimEvent* e = find(event);
  if (e == nullptr || !e->recorded)
    return absl::InvalidArgumentError("synchronize on an unknown event");
  now_ns_ = std::max(now_ns_, e->gpu_time_ns + completion_delay_ns_);
  return absl::OkStatus();
}

absl::Status SimulatedEventSource::difference(Event from, Event to, std::int64_t* out) {
  SimEvent* f = find(from);
  SimEvent* t = find(to);
  if (f == nullptr || t == nullptr)
    return absl::InvalidArgumentError("elapsed of an unknown event");
  if (now_ns_ < f->gpu_time_ns + completion_delay_ns_ ||
      now_ns_ < t->gpu_time_ns + completion_delay_ns_) {
    return absl::UnavailableError("simulated events not complete");
  }
  *out = t->gpu_time_ns - f->gpu_time_ns;
  return absl::OkStatus();
}

absl::Status SimulatedEventSource::elapsed_ns(Event start, Event end, std::int64_t* out) {
  ++elapsed_reads_;
  return difference(start, end, out);
}

// Not counted in elapsed_reads(): tests count the reads of region durations.
absl::Status SimulatedEventSource::offset_ns(Event from, Event to, std::int64_t* out) {
  return difference(from, to, out);
}

}  // namespace trainscope::testing
