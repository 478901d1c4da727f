// The sampling thread. Ticks follow a fixed schedule on the steady clock
// (start + k * interval), so a slow tick delays only itself and the series
// does not drift; ticks that could not run in time are skipped, not bunched.
// Sources are opened and sampled only on this thread, so they need no locks.
#include "trainscope/hardware/sampler.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/no_gpu.hpp"
#include "fmt/format.h"
#include "trainscope/common/errors.hpp"

namespace trainscope {
namespace {

using SteadyClock = std::chrono::steady_clock;

void disable(const HardwareSource& source, const char* what, const absl::Status& status) {
  if (absl::StartsWith(status.message(), detail::kNoGpuFound)) {  // a normal state, said once
    detail::note_no_gpu("GPU metrics and GPU timing are off");
    return;
  }
  warn(fmt::format("hardware source {} disabled ({} failed): {}", source.name(), what,
                   std::string(status.message())));
}

}  // namespace

Sampler::Sampler(SamplerOptions options, std::vector<std::unique_ptr<HardwareSource>> sources,
                 ExportPipeline* pipeline)
    : options_(std::move(options)),
      sources_(std::move(sources)),
      enabled_(sources_.size(), false),
      pipeline_(pipeline) {}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (thread_.joinable() || stop_) return;
  }
  thread_ = std::thread([this] { run(); });
}

void Sampler::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();  // run() takes the final sample before it returns
}

void Sampler::run() {
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const absl::Status status = sources_[i]->open(options_.context);
    enabled_[i] = status.ok();
    if (!status.ok()) disable(*sources_[i], "open", status);
  }
  const auto interval = std::max(absl::ToChronoNanoseconds(options_.interval),
                                 std::chrono::nanoseconds(std::chrono::milliseconds(1)));
  auto next = SteadyClock::now() + interval;
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_) {
    if (stop_cv_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    tick();
    lock.lock();
    // Next slot on the grid strictly after now.
    next += interval * ((SteadyClock::now() - next) / interval + 1);
  }
  lock.unlock();
  tick();
}

void Sampler::tick() {
  // Kept across ticks (one sampler thread owns it): no allocation once it has grown.
  thread_local std::vector<HardwareReading> readings;
  readings.clear();
  const std::int64_t step = options_.current_step ? options_.current_step() : 0;
  const std::int64_t unix_ms = absl::ToUnixMillis(absl::Now());
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    if (!enabled_[i]) continue;
    const std::size_t before = readings.size();
    const absl::Status status = sources_[i]->sample(&readings);
    if (!status.ok()) {
      readings.resize(before);  // nothing from a failed sample
      enabled_[i] = false;
      disable(*sources_[i], "sample", status);
    }
  }
  const bool by_process = static_cast<bool>(options_.process_rank);
  const std::uint32_t process_rank = by_process ? options_.process_rank() : options_.rank;
  for (HardwareReading& r : readings) {
    const std::uint32_t rank = !by_process                 ? options_.rank
                               : is_process_metric(r.name) ? process_rank
                                                           : kNoRank;
    pipeline_->submit_metric(MetricPoint{std::move(r.name), r.value, step, unix_ms, rank});
  }
  ticks_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace trainscope
