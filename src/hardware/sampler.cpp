// The sampling thread. Ticks follow a fixed schedule on the steady clock
// (start + k * interval), so a slow tick delays only itself and the series
// does not drift; ticks that could not run in time are skipped, not bunched.
// Sources are opened and sampled only on this thread, so they need no locks.
#include "trainscope/hardware/sampler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/fork_owner.hpp"
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

struct Sampler::State {
  State(SamplerOptions options, std::vector<std::unique_ptr<HardwareSource>> sources,
        ExportPipeline* pipeline)
      : options(std::move(options)),
        sources(std::move(sources)),
        enabled(this->sources.size(), false),
        pipeline(pipeline) {}

  void run();
  void tick();

  const detail::ForkOwner owner;  // the process the thread runs in
  SamplerOptions options;
  std::vector<std::unique_ptr<HardwareSource>> sources;
  std::vector<bool> enabled;
  ExportPipeline* pipeline;
  std::atomic<std::uint64_t> ticks{0};
  // stop() wakes the thread at once instead of it polling a flag (polling
  // costs wakeups at every interval, which is most of the 1 Hz cost).
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;  // guarded by stop_mutex
  std::thread thread;
};

Sampler::Sampler(SamplerOptions options, std::vector<std::unique_ptr<HardwareSource>> sources,
                 ExportPipeline* pipeline)
    : state_(std::make_unique<State>(std::move(options), std::move(sources), pipeline)) {}

Sampler::~Sampler() {
  if (state_->owner.forked()) {
    detail::abandon(state_);  // the thread and what it waits on are the parent's
    return;
  }
  stop();
}

std::uint64_t Sampler::ticks() const noexcept {
  return state_->ticks.load(std::memory_order_relaxed);
}

void Sampler::start() {
  State& s = *state_;
  if (s.owner.forked()) return;  // a forked child samples nothing for its parent
  {
    std::lock_guard<std::mutex> lock(s.stop_mutex);
    if (s.thread.joinable() || s.stop) return;
  }
  s.thread = std::thread([&s] { s.run(); });
}

void Sampler::stop() {
  State& s = *state_;
  if (s.owner.forked() || !s.thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(s.stop_mutex);
    s.stop = true;
  }
  s.stop_cv.notify_all();
  s.thread.join();  // run() takes the final sample before it returns
}

void Sampler::State::run() {
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const absl::Status status = sources[i]->open(options.context);
    enabled[i] = status.ok();
    if (!status.ok()) disable(*sources[i], "open", status);
  }
  const auto interval = std::max(absl::ToChronoNanoseconds(options.interval),
                                 std::chrono::nanoseconds(std::chrono::milliseconds(1)));
  auto next = SteadyClock::now() + interval;
  std::unique_lock<std::mutex> lock(stop_mutex);
  while (!stop) {
    if (stop_cv.wait_until(lock, next, [this] { return stop; })) break;
    lock.unlock();
    tick();
    lock.lock();
    // Next slot on the grid strictly after now.
    next += interval * ((SteadyClock::now() - next) / interval + 1);
  }
  lock.unlock();
  tick();
}

void Sampler::State::tick() {
  // Kept across ticks (one sampler thread owns it): no allocation once it has grown.
  thread_local std::vector<HardwareReading> readings;
  readings.clear();
  const std::int64_t step = options.current_step ? options.current_step() : 0;
  const std::int64_t unix_ms = absl::ToUnixMillis(absl::Now());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (!enabled[i]) continue;
    const std::size_t before = readings.size();
    const absl::Status status = sources[i]->sample(&readings);
    if (!status.ok()) {
      readings.resize(before);  // nothing from a failed sample
      enabled[i] = false;
      disable(*sources[i], "sample", status);
    }
  }
  const bool by_process = static_cast<bool>(options.process_rank);
  const std::uint32_t process_rank = by_process ? options.process_rank() : options.rank;
  for (HardwareReading& r : readings) {
    const std::uint32_t rank = !by_process                 ? options.rank
                               : is_process_metric(r.name) ? process_rank
                                                           : kNoRank;
    pipeline->submit_metric(MetricPoint{std::move(r.name), r.value, step, unix_ms, rank});
  }
  ticks.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace trainscope
