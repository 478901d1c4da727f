#include "trainscope/export/export_pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/fork_owner.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope {
namespace {

// A zero interval would turn the background thread into a busy loop.
constexpr absl::Duration kMinFlushInterval = absl::Milliseconds(1);
// Samples the drain buffer keeps room for between drains (2 MiB).
constexpr std::size_t kKeptBatchCapacity = std::size_t{1} << 16;

// An exporter as the background thread sees it.
struct ExporterSlot {
  std::shared_ptr<Exporter> exporter;
  bool warned = false;  // failures are reported once per exporter, then only counted
};

// A throwing warning handler must not take the pipeline thread down.
void warn_noexcept(const std::string& message) noexcept {
  try {
    warn(message);
  } catch (...) {
  }
}

std::string exporter_name(const Exporter& exporter) noexcept {
  try {
    return exporter.name();
  } catch (...) {
    return "(unnamed)";
  }
}

// Runs one exporter call; an error status or an exception is counted in
// `errors` and, the first time for this exporter, reported through warn().
template <typename Call>
void call_exporter(ExporterSlot& slot, const char* method, Call call,
                   std::atomic<std::uint64_t>* errors) noexcept {
  absl::Status status;
  try {
    status = call(*slot.exporter);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("exception: ", e.what()));
  } catch (...) {
    status = absl::UnknownError("exception of unknown type");
  }
  if (status.ok()) return;
  errors->fetch_add(1, std::memory_order_relaxed);
  if (slot.warned) return;
  slot.warned = true;
  warn_noexcept(absl::StrCat("exporter ", exporter_name(*slot.exporter), " failed in ", method,
                             ": ", status.ToString(),
                             " (later failures of this exporter are only counted in "
                             "ExportPipeline::export_errors())"));
}

using Event = std::variant<Summary, MetricPoint, RunInfo>;

// Samples first, then the other events in submission order, so that a run's
// final status never overtakes the summary submitted before it. Consecutive
// metrics go out as one write_metrics() call.
void deliver(std::vector<ExporterSlot>* exporters, const std::vector<RegionSample>& batch,
             const std::vector<Event>& events, bool flush, std::atomic<std::uint64_t>* errors) {
  std::vector<MetricPoint> metrics;
  for (ExporterSlot& slot : *exporters) {
    if (!batch.empty()) {
      call_exporter(
          slot, "write_samples", [&](Exporter& e) { return e.write_samples(batch); }, errors);
    }
    const auto send_metrics = [&] {
      if (metrics.empty()) return;
      call_exporter(
          slot, "write_metrics", [&](Exporter& e) { return e.write_metrics(metrics); }, errors);
      metrics.clear();
    };
    for (const Event& event : events) {
      if (const auto* metric = std::get_if<MetricPoint>(&event)) {
        metrics.push_back(*metric);
        continue;
      }
      send_metrics();
      if (const auto* summary = std::get_if<Summary>(&event)) {
        call_exporter(
            slot, "write_summary", [&](Exporter& e) { return e.write_summary(*summary); }, errors);
      } else {
        const auto& info = std::get<RunInfo>(event);
        call_exporter(
            slot, "write_run_info", [&](Exporter& e) { return e.write_run_info(info); }, errors);
      }
    }
    send_metrics();
    if (flush) {
      call_exporter(
          slot, "flush", [](Exporter& e) { return e.flush(); }, errors);
    }
  }
}

}  // namespace

struct ExportPipeline::State {
  explicit State(Options options) : options(options) {}

  void run();
  void drain_once(std::vector<RegionSample>* batch);
  void wake_from_ring();
  std::uint64_t dropped_samples() const noexcept;

  const Options options;
  const detail::ForkOwner owner;  // the process whose thread drains
  // std::mutex rather than absl::Mutex: distribution builds of Abseil are not
  // TSan-instrumented, and the threading tests run under TSan.
  mutable std::mutex mu;
  std::condition_variable cv;  // wakes the thread (stop, flush) and flush() callers
  // Guarded by mu:
  std::vector<std::shared_ptr<Exporter>> exporters;
  std::vector<std::shared_ptr<timing::detail::SampleRing>> rings;
  // Summaries, metrics and run infos in submission order (see deliver()).
  std::vector<Event> pending_events;
  std::uint64_t requested = 0;  // flush() calls so far
  std::uint64_t completed = 0;  // flush() calls whose data reached the exporters
  bool stop = false;
  bool ring_wake = false;  // a ring passed its high-water mark since the last drain
  std::atomic<std::uint64_t> export_errors{0};
  std::atomic<std::uint64_t> dropped_from_closed{0};
  std::shared_ptr<Waker> waker;
  std::thread thread;
};

// Rings hold it by shared_ptr, so a producer that outlives the pipeline (a
// timer never detached) wakes nothing instead of a destroyed pipeline. In a
// forked child it wakes nothing either: the thread it would wake is the
// parent's, and its lock may be held forever.
class ExportPipeline::Waker final : public timing::detail::RingWaker {
 public:
  explicit Waker(State* state) : state_(state) {}
  void wake() noexcept override {
    if (owner_.forked()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != nullptr) state_->wake_from_ring();
  }
  void disconnect() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = nullptr;
  }

 private:
  const detail::ForkOwner owner_;
  std::mutex mu_;
  State* state_;
};

ExportPipeline::ExportPipeline() : ExportPipeline(Options{}) {}

ExportPipeline::ExportPipeline(Options options) : state_(std::make_unique<State>(options)) {
  State* state = state_.get();
  state->waker = std::make_shared<Waker>(state);
  // Last: everything run() touches exists before it starts.
  state->thread = std::thread([state] { state->run(); });
}

ExportPipeline::~ExportPipeline() {
  if (state_->owner.forked()) {
    // The thread, its lock and its condition variable are the parent's.
    detail::abandon(state_);
    return;
  }
  state_->waker->disconnect();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void ExportPipeline::add_exporter(std::shared_ptr<Exporter> exporter) {
  if (exporter == nullptr || state_->owner.forked()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->exporters.push_back(std::move(exporter));
}

void ExportPipeline::submit_summary(Summary summary) {
  if (state_->owner.forked()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pending_events.emplace_back(std::move(summary));
}

void ExportPipeline::submit_metric(MetricPoint metric) {
  if (state_->owner.forked()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pending_events.emplace_back(std::move(metric));
}

void ExportPipeline::submit_run_info(RunInfo info) {
  if (state_->owner.forked()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pending_events.emplace_back(std::move(info));
}

void ExportPipeline::flush() {
  State& s = *state_;
  if (s.owner.forked()) return;  // no thread here to wait for
  std::unique_lock<std::mutex> lock(s.mu);
  const std::uint64_t ticket = ++s.requested;
  s.cv.notify_all();
  s.cv.wait(lock, [&s, ticket] { return s.completed >= ticket; });
}

std::uint64_t ExportPipeline::dropped_samples() const noexcept {
  if (state_->owner.forked()) return 0;
  return state_->dropped_samples();
}

std::uint64_t ExportPipeline::State::dropped_samples() const noexcept {
  std::lock_guard<std::mutex> lock(mu);
  std::uint64_t dropped = dropped_from_closed.load(std::memory_order_relaxed);
  for (const auto& ring : rings) dropped += ring->dropped();
  return dropped;
}

std::uint64_t ExportPipeline::export_errors() const noexcept {
  return state_->export_errors.load(std::memory_order_relaxed);
}

std::shared_ptr<timing::detail::SampleRing> ExportPipeline::open_ring() {
  State& s = *state_;
  timing::detail::SampleRing::Options ring_options;
  ring_options.chunk_capacity = s.options.ring_capacity;
  ring_options.max_pending_bytes = s.options.max_pending_bytes;
  if (s.owner.forked()) {
    // Never drained: it keeps up to the budget, then counts drops.
    return std::make_shared<timing::detail::SampleRing>(std::move(ring_options));
  }
  ring_options.waker = s.waker;
  auto ring = std::make_shared<timing::detail::SampleRing>(std::move(ring_options));
  std::lock_guard<std::mutex> lock(s.mu);
  s.rings.push_back(ring);
  return ring;
}

void ExportPipeline::adopt_ring(std::shared_ptr<timing::detail::SampleRing> ring) {
  State& s = *state_;
  if (ring == nullptr || s.owner.forked()) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.rings.push_back(std::move(ring));
    s.ring_wake = true;  // a held backlog: drain it now rather than at the next interval
  }
  s.cv.notify_all();
}

void ExportPipeline::State::run() {
  // Producers store steady-clock nanoseconds in start_unix_ns: reading it is
  // cheapest on the hot path, and it cannot step. One steady->Unix offset,
  // captured as the pipeline starts, turns them into wall-clock time, so a
  // wall-clock adjustment during the run never reorders samples.
  const std::int64_t steady_to_unix = detail::unix_now_ns() - detail::now_ns();
  const absl::Duration interval = std::max(options.flush_interval, kMinFlushInterval);
  // now() + an infinite chrono duration overflows: wait without a deadline instead.
  const bool periodic = interval != absl::InfiniteDuration();
  const auto chrono_interval =
      periodic ? absl::ToChronoNanoseconds(interval) : std::chrono::nanoseconds(0);
  std::vector<ExporterSlot> slots;
  std::vector<RegionSample> batch;
  std::vector<Event> events;
  bool drops_warned = false;
  for (bool stopping = false; !stopping;) {
    std::uint64_t target;
    bool flush_requested;
    {
      std::unique_lock<std::mutex> lock(mu);
      const auto wake = [this] { return stop || requested != completed || ring_wake; };
      if (periodic) {
        cv.wait_for(lock, chrono_interval, wake);
      } else {
        cv.wait(lock, wake);
      }
      stopping = stop;
      ring_wake = false;  // the drain below serves it
      // Everything pushed or submitted before the flush() calls counted in
      // `target` is visible to the drain below, which starts after this lock.
      target = requested;
      flush_requested = requested != completed;
      for (std::size_t i = slots.size(); i < exporters.size(); ++i) {
        slots.push_back({exporters[i]});
      }
      events.swap(pending_events);
    }
    batch.clear();
    drain_once(&batch);
    for (RegionSample& sample : batch) sample.start_unix_ns += steady_to_unix;
    deliver(&slots, batch, events, flush_requested || stopping, &export_errors);
    events.clear();
    // A burst leaves a large buffer behind; give it back.
    if (batch.capacity() > kKeptBatchCapacity) std::vector<RegionSample>().swap(batch);
    if (!drops_warned && dropped_samples() != 0) {
      drops_warned = true;
      warn_noexcept(absl::StrCat(
          "export queues full: samples arrived faster than the exporters took them and the "
          "samples waiting reached ExportPipeline::Options::max_pending_bytes (",
          options.max_pending_bytes >> 20,
          " MiB), so some were dropped from the export stream (timer statistics keep them); "
          "raise max_pending_bytes for longer bursts. ExportPipeline::dropped_samples() counts "
          "them"));
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      completed = target;
    }
    cv.notify_all();
  }
}

void ExportPipeline::State::wake_from_ring() {
  {
    std::lock_guard<std::mutex> lock(mu);
    ring_wake = true;
  }
  cv.notify_all();  // flush() callers share cv: notify_one could wake one of them
}

void ExportPipeline::State::drain_once(std::vector<RegionSample>* batch) {
  // The rings are popped outside mu: a producer's wake takes mu, and must
  // not wait for a long drain. Only this thread removes rings.
  std::vector<std::shared_ptr<timing::detail::SampleRing>> current;
  {
    std::lock_guard<std::mutex> lock(mu);
    current = rings;
  }
  std::vector<const timing::detail::SampleRing*> finished;
  for (const auto& ring : current) {
    ring->pop_all(batch);
    // released() first: once it reads true the producer's last push is
    // visible, so empty() cannot miss a sample pushed just before release().
    if (ring->released() && ring->empty()) finished.push_back(ring.get());
  }
  if (finished.empty()) return;
  std::lock_guard<std::mutex> lock(mu);
  auto is_finished = [&](const std::shared_ptr<timing::detail::SampleRing>& ring) {
    if (std::find(finished.begin(), finished.end(), ring.get()) == finished.end()) return false;
    dropped_from_closed.fetch_add(ring->dropped(), std::memory_order_relaxed);
    return true;
  };
  rings.erase(std::remove_if(rings.begin(), rings.end(), is_finished), rings.end());
}

}  // namespace trainscope
