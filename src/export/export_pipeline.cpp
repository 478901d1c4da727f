#include "trainscope/export/export_pipeline.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
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

// Rings hold it by shared_ptr, so a producer that outlives the pipeline (a
// timer never detached) wakes nothing instead of a destroyed pipeline.
class ExportPipeline::Waker final : public timing::detail::RingWaker {
 public:
  explicit Waker(ExportPipeline* pipeline) : pipeline_(pipeline) {}
  void wake() noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (pipeline_ != nullptr) pipeline_->wake_from_ring();
  }
  void disconnect() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    pipeline_ = nullptr;
  }

 private:
  std::mutex mu_;
  ExportPipeline* pipeline_;
};

ExportPipeline::ExportPipeline() : ExportPipeline(Options{}) {}

// thread_ is the last member, so everything run() touches exists before it starts.
ExportPipeline::ExportPipeline(Options options)
    : options_(options), waker_(std::make_shared<Waker>(this)), thread_([this] { run(); }) {}

ExportPipeline::~ExportPipeline() {
  waker_->disconnect();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ExportPipeline::add_exporter(std::shared_ptr<Exporter> exporter) {
  if (exporter == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  exporters_.push_back(std::move(exporter));
}

void ExportPipeline::submit_summary(Summary summary) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_events_.emplace_back(std::move(summary));
}

void ExportPipeline::submit_metric(MetricPoint metric) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_events_.emplace_back(std::move(metric));
}

void ExportPipeline::submit_run_info(RunInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_events_.emplace_back(std::move(info));
}

void ExportPipeline::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t ticket = ++requested_;
  cv_.notify_all();
  cv_.wait(lock, [this, ticket] { return completed_ >= ticket; });
}

std::uint64_t ExportPipeline::dropped_samples() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t dropped = dropped_from_closed_.load(std::memory_order_relaxed);
  for (const auto& ring : rings_) dropped += ring->dropped();
  return dropped;
}

std::uint64_t ExportPipeline::export_errors() const noexcept {
  return export_errors_.load(std::memory_order_relaxed);
}

std::shared_ptr<timing::detail::SampleRing> ExportPipeline::open_ring() {
  timing::detail::SampleRing::Options ring_options;
  ring_options.chunk_capacity = options_.ring_capacity;
  ring_options.max_pending_bytes = options_.max_pending_bytes;
  ring_options.waker = waker_;
  auto ring = std::make_shared<timing::detail::SampleRing>(std::move(ring_options));
  std::lock_guard<std::mutex> lock(mu_);
  rings_.push_back(ring);
  return ring;
}

void ExportPipeline::adopt_ring(std::shared_ptr<timing::detail::SampleRing> ring) {
  if (ring == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rings_.push_back(std::move(ring));
    ring_wake_ = true;  // a held backlog: drain it now rather than at the next interval
  }
  cv_.notify_all();
}

void ExportPipeline::run() {
  // Producers store steady-clock nanoseconds in start_unix_ns: reading it is
  // cheapest on the hot path, and it cannot step. One steady->Unix offset,
  // captured as the pipeline starts, turns them into wall-clock time, so a
  // wall-clock adjustment during the run never reorders samples.
  const std::int64_t steady_to_unix = detail::unix_now_ns() - detail::now_ns();
  const absl::Duration interval = std::max(options_.flush_interval, kMinFlushInterval);
  // now() + an infinite chrono duration overflows: wait without a deadline instead.
  const bool periodic = interval != absl::InfiniteDuration();
  const auto chrono_interval =
      periodic ? absl::ToChronoNanoseconds(interval) : std::chrono::nanoseconds(0);
  std::vector<ExporterSlot> exporters;
  std::vector<RegionSample> batch;
  std::vector<Event> events;
  bool drops_warned = false;
  for (bool stopping = false; !stopping;) {
    std::uint64_t target;
    bool flush_requested;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto wake = [this] { return stop_ || requested_ != completed_ || ring_wake_; };
      if (periodic) {
        cv_.wait_for(lock, chrono_interval, wake);
      } else {
        cv_.wait(lock, wake);
      }
      stopping = stop_;
      ring_wake_ = false;  // the drain below serves it
      // Everything pushed or submitted before the flush() calls counted in
      // `target` is visible to the drain below, which starts after this lock.
      target = requested_;
      flush_requested = requested_ != completed_;
      for (std::size_t i = exporters.size(); i < exporters_.size(); ++i) {
        exporters.push_back({exporters_[i]});
      }
      events.swap(pending_events_);
    }
    batch.clear();
    drain_once(&batch);
    for (RegionSample& sample : batch) sample.start_unix_ns += steady_to_unix;
    deliver(&exporters, batch, events, flush_requested || stopping, &export_errors_);
    events.clear();
    // A burst leaves a large buffer behind; give it back.
    if (batch.capacity() > kKeptBatchCapacity) std::vector<RegionSample>().swap(batch);
    if (!drops_warned && dropped_samples() != 0) {
      drops_warned = true;
      warn_noexcept(absl::StrCat(
          "export queues full: samples arrived faster than the exporters took them and the "
          "samples waiting reached ExportPipeline::Options::max_pending_bytes (",
          options_.max_pending_bytes >> 20,
          " MiB), so some were dropped from the export stream (timer statistics keep them); "
          "raise max_pending_bytes for longer bursts. ExportPipeline::dropped_samples() counts "
          "them"));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_ = target;
    }
    cv_.notify_all();
  }
}

void ExportPipeline::wake_from_ring() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring_wake_ = true;
  }
  cv_.notify_all();  // flush() callers share cv_: notify_one could wake one of them
}

void ExportPipeline::drain_once(std::vector<RegionSample>* batch) {
  // The rings are popped outside mu_: a producer's wake takes mu_, and must
  // not wait for a long drain. Only this thread removes rings.
  std::vector<std::shared_ptr<timing::detail::SampleRing>> rings;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rings = rings_;
  }
  std::vector<const timing::detail::SampleRing*> finished;
  for (const auto& ring : rings) {
    ring->pop_all(batch);
    // released() first: once it reads true the producer's last push is
    // visible, so empty() cannot miss a sample pushed just before release().
    if (ring->released() && ring->empty()) finished.push_back(ring.get());
  }
  if (finished.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto is_finished = [&](const std::shared_ptr<timing::detail::SampleRing>& ring) {
    if (std::find(finished.begin(), finished.end(), ring.get()) == finished.end()) return false;
    dropped_from_closed_.fetch_add(ring->dropped(), std::memory_order_relaxed);
    return true;
  };
  rings_.erase(std::remove_if(rings_.begin(), rings_.end(), is_finished), rings_.end());
}

}  // namespace trainscope
