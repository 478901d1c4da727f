#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "common/files.hpp"
#include "common/no_gpu.hpp"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/match.h"

namespace trainscope {
namespace {

// Once per process: a training script builds many timers.
void warn_cpu_only(const GpuEventSource& source) {
  static std::atomic<bool> warned{false};
  const std::string why = source.describe();
  if (absl::StartsWith(why, detail::kNoGpuFound)) {  // a normal state, said once
    detail::note_no_gpu("gpu=true regions are timed on the CPU only");
    return;
  }
  if (!warned.exchange(true)) {
    warn("GPU-timed regions (gpu=true) are timed on the CPU only: " + why);
  }
}

absl::Status gpu_error(Key key, const char* what, const absl::Status& cause) {
  return absl::Status(
      cause.code(),
      fmt::format("GPU {} failed for timing region type {}: {}; the timer is unchanged", what,
                  key.name(), std::string(cause.message())));
}

}  // namespace

CPUGPUTimer::CPUGPUTimer(CPUGPUTimerOptions options)
    : CPUGPUTimer(default_gpu_event_source(), options) {}

namespace timing::detail {
// Streams in the order the process's timers first harvested a region on
// them; the default stream (nullptr) is 0.
std::uint32_t process_stream_index(StreamHandle stream) {
  if (stream == nullptr) return 0;
  static std::mutex mu;
  static std::vector<StreamHandle> streams;
  std::lock_guard<std::mutex> lock(mu);
  for (std::size_t i = 0; i < streams.size(); ++i) {
    if (streams[i] == stream) return static_cast<std::uint32_t>(i + 1);
  }
  streams.push_back(stream);
  return static_cast<std::uint32_t>(streams.size());
}
}  // namespace timing::detail

std::uint32_t CPUGPUTimer::stream_index(StreamHandle stream) {
  if (stream == nullptr) return 0;
  if (stream != cached_stream_) {  // a lock once per change of stream, not per region
    cached_stream_index_ = timing::detail::process_stream_index(stream);
    cached_stream_ = stream;
  }
  return cached_stream_index_;
}

std::int64_t CPUGPUTimer::device_start(const Pending& p, bool* keep_start) {
  *keep_start = false;
  if (ABSL_PREDICT_FALSE(!reference_asked_)) {  // once per timer; without it, no device starts
    reference_asked_ = true;
    bool adopted = false;
    if (source_->reference(p.device, p.start, &reference_, &adopted).ok()) {
      reference_device_ = p.device;
      if (adopted) {  // the process's first region: the source owns its start now
        *keep_start = true;
        return 0;
      }
    }
  }
  if (reference_ == nullptr || p.device != reference_device_) return kNoGpuStart;
  std::int64_t offset = 0;
  if (!source_->offset_ns(anchor_ != nullptr ? anchor_ : reference_, p.start, &offset).ok())
    return kNoGpuStart;  // e.g. the reference not complete yet: no wait for it
  const std::int64_t start = (anchor_ != nullptr ? anchor_ns_ : 0) + offset;
  if (anchor_ != nullptr) release_event(reference_device_, anchor_);
  anchor_ = p.start;
  anchor_ns_ = start;
  *keep_start = true;
  return start;
}

namespace {
const CPUGPUTimerOptions& checked(const CPUGPUTimerOptions& options) {
  detail::throw_if_error(validate_options(options));
  return options;
}
}  // namespace

CPUGPUTimer::CPUGPUTimer(std::shared_ptr<GpuEventSource> source, CPUGPUTimerOptions options)
    : options_(checked(options)),
      source_(source != nullptr ? std::move(source) : default_gpu_event_source()),
      gpu_available_(source_->available()),
      core_(options) {
  if (!gpu_available_ && options_.require_gpu) {
    throw TimerError(absl::FailedPreconditionError(
        "CPUGPUTimer(require_gpu=True): no GPU available: " + source_->describe()));
  }
}

CPUGPUTimer::~CPUGPUTimer() {
  // Destroying an event whose work is still queued is legal in CUDA: its
  // resources go back when the work completes. So no waiting here.
  for (std::size_t i = 0; i < pending_size_; ++i) {
    const Pending& p = pending_[(pending_head_ + i) % pending_.size()];
    source_->destroy_event(p.start);
    source_->destroy_event(p.end);
  }
  for (auto& slot : core_.slots()) {
    if (slot.start_event != nullptr) source_->destroy_event(slot.start_event);
  }
  for (auto& pool : pools_) {
    for (GpuEventSource::Event e : pool) source_->destroy_event(e);
  }
  if (anchor_ != nullptr) source_->destroy_event(anchor_);
}

absl::Status CPUGPUTimer::acquire_event(int device, GpuEventSource::Event* out) {
  if (device < 0) device = 0;
  if (static_cast<std::size_t>(device) >= pools_.size()) pools_.resize(device + 1);
  auto& pool = pools_[device];
  if (!pool.empty()) {
    *out = pool.back();
    pool.pop_back();
    return absl::OkStatus();
  }
  absl::Status status = source_->create_event(out);
  if (status.ok()) ++events_created_;
  return status;
}

void CPUGPUTimer::release_event(int device, GpuEventSource::Event event) noexcept {
  if (device < 0) device = 0;
  pools_[device].push_back(event);
}

absl::Status CPUGPUTimer::start_gpu(Key key, timing::detail::OpenSlot& slot, StreamHandle stream) {
  if (!gpu_available_) {
    warn_cpu_only(*source_);
    core_.open(slot, key.id(), true);
    return absl::OkStatus();
  }
  const int device = source_->current_device();
  GpuEventSource::Event event = nullptr;
  absl::Status status = acquire_event(device, &event);
  if (!status.ok()) return gpu_error(key, "event creation", status);
  status = source_->record(event, stream);
  if (!status.ok()) {
    release_event(device, event);
    return gpu_error(key, "event record at start", status);
  }
  slot.start_event = event;
  slot.device = device;
  core_.open(slot, key.id(), true);
  return absl::OkStatus();
}

absl::Status CPUGPUTimer::end_gpu(Key key, timing::detail::OpenSlot& slot, std::int64_t now,
                                  StreamHandle stream) {
  GpuEventSource::Event event = nullptr;
  absl::Status status = acquire_event(slot.device, &event);
  if (!status.ok()) return gpu_error(key, "event creation", status);
  status = source_->record(event, stream);
  if (!status.ok()) {
    release_event(slot.device, event);
    return gpu_error(key, "event record at end", status);
  }
  // Reserve the FIFO slot before committing, so that a failed allocation
  // leaves the region open and the timer unchanged.
  if (pending_size_ == pending_.size()) {
    try {
      push_pending({});
      --pending_size_;
    } catch (...) {
      release_event(slot.device, event);
      throw;
    }
  }
  push_pending({key.id(), slot.device, slot.start_event, event, slot.start_ns, stream});
  slot.start_event = nullptr;
  core_.close(slot, key.id(), now);
  maybe_harvest();
  return absl::OkStatus();
}

void CPUGPUTimer::push_pending(const Pending& p) {
  if (pending_size_ == pending_.size()) {
    // Grow the ring, unrolling it so the oldest entry is at index 0.
    std::vector<Pending> bigger(pending_.empty() ? 64 : pending_.size() * 2);
    for (std::size_t i = 0; i < pending_size_; ++i) {
      bigger[i] = pending_[(pending_head_ + i) % pending_.size()];
    }
    pending_.swap(bigger);
    pending_head_ = 0;
  }
  pending_[(pending_head_ + pending_size_) % pending_.size()] = p;
  ++pending_size_;
}

void CPUGPUTimer::pop_pending() noexcept {
  pending_head_ = (pending_head_ + 1) % pending_.size();
  --pending_size_;
}

bool CPUGPUTimer::finish_front(bool wait, absl::Status* error, bool known_ready) {
  const Pending p = pending_[pending_head_];
  GpuEventSource::QueryResult state =
      known_ready ? GpuEventSource::QueryResult::kReady : source_->query(p.end);
  if (state == GpuEventSource::QueryResult::kPending) {
    if (!wait) return false;
    ++blocking_waits_;
    absl::Status s = source_->synchronize(p.end);
    state = s.ok() ? GpuEventSource::QueryResult::kReady : GpuEventSource::QueryResult::kError;
  }
  std::int64_t ns = 0;
  absl::Status status = state == GpuEventSource::QueryResult::kReady
                            ? source_->elapsed_ns(p.start, p.end, &ns)
                            : absl::InternalError("event query reported an error");
  if (absl::IsUnavailable(status)) {  // start event on another stream, not done yet
    if (!wait) return false;
    ++blocking_waits_;
    status = source_->synchronize(p.start);
    if (status.ok()) status = source_->elapsed_ns(p.start, p.end, &ns);
  }
  pop_pending();
  if (status.ok()) {
    bool keep_start = false;
    const std::int64_t gpu_start = device_start(p, &keep_start);
    core_.record(p.key, Device::kGPU, p.cpu_start_ns, ns, gpu_start, stream_index(p.stream));
    if (!keep_start) release_event(p.device, p.start);
    release_event(p.device, p.end);
    return true;
  }
  // A GPU error may poison the events: destroy rather than reuse them.
  ++gpu_errors_;
  source_->destroy_event(p.start);
  source_->destroy_event(p.end);
  const std::string message = fmt::format("GPU time of a {} region was lost: {}",
                                          Key::FromId(p.key).name(), std::string(status.message()));
  warn(message);
  if (error != nullptr && error->ok()) *error = absl::DataLossError(message);
  return true;
}

std::size_t CPUGPUTimer::harvest(std::size_t limit) {
  std::size_t done = 0;
  bool probe = true;  // until a run's newest pair is found not done
  while (done < limit && pending_size_ != 0) {
    if (probe) {
      // The run of pairs at the front whose end events are on one stream.
      const StreamHandle stream = pending_[pending_head_].stream;
      std::size_t run = 1;
      while (run < pending_size_ && done + run < limit &&
             pending_[(pending_head_ + run) % pending_.size()].stream == stream) {
        ++run;
      }
      if (run > 1) {
        const Pending& newest = pending_[(pending_head_ + run - 1) % pending_.size()];
        if (source_->query(newest.end) == GpuEventSource::QueryResult::kReady) {
          for (std::size_t i = 0; i < run; ++i) {
            if (!finish_front(false, nullptr, /*known_ready=*/true)) return done;
            ++done;
          }
          continue;
        }
        probe = false;  // pair by pair from here: the oldest may still be done
      }
    }
    if (!finish_front(false, nullptr)) break;
    ++done;
  }
  return done;
}

absl::Status CPUGPUTimer::try_complete_all() {
  absl::Status first_error;
  if (pending_size_ == 0) return first_error;
  // One wait on the newest end event usually completes everything before it.
  const Pending& newest = pending_[(pending_head_ + pending_size_ - 1) % pending_.size()];
  if (source_->query(newest.end) == GpuEventSource::QueryResult::kPending) {
    ++blocking_waits_;
    absl::Status s = source_->synchronize(newest.end);
    (void)s;  // an error surfaces per pair below
  }
  while (pending_size_ != 0) finish_front(true, &first_error);
  return first_error;
}

absl::Status CPUGPUTimer::try_get_time(Key key, bool gpu, std::vector<double>* out) {
  absl::Status completed = try_complete_all();
  absl::Status status = core_.samples_seconds(key, gpu ? Device::kGPU : Device::kCPU, out);
  return status.ok() ? completed : status;
}

std::vector<double> CPUGPUTimer::get_time(Key key, bool gpu) {
  std::vector<double> out;
  detail::throw_if_error(try_get_time(key, gpu, &out));
  return out;
}

TimeStats CPUGPUTimer::get_time_stats(Key key, bool gpu) {
  // A GPU error was already reported through warn(); stats of what survived are still right.
  (void)try_complete_all();
  return core_.stats(key, gpu ? Device::kGPU : Device::kCPU);
}

void CPUGPUTimer::reset() {
  (void)try_complete_all();
  for (auto& slot : core_.slots()) {
    if (slot.start_event != nullptr) release_event(slot.device, slot.start_event);
  }
  core_.reset();
}

Summary CPUGPUTimer::summary() {
  (void)try_complete_all();
  return core_.summary(true);
}

absl::Status CPUGPUTimer::try_save_all_time_stats(std::string_view path) {
  absl::StatusOr<StatsFormat> format = stats_format_for_path(path);
  if (!format.ok()) return format.status();
  return detail::write_new_file(path, format_all_time_stats(*format));
}

void CPUGPUTimer::merge(CPUGPUTimer& other) {
  (void)other.try_complete_all();
  (void)try_complete_all();
  core_.merge_completed(other.core_);
}

void CPUGPUTimer::export_summary(RegionSink& sink) { sink.submit_summary(summary()); }

std::size_t CPUGPUTimer::memory_bytes() const noexcept {
  std::size_t bytes = sizeof(*this) - sizeof(core_) + core_.memory_bytes() +
                      pending_.capacity() * sizeof(Pending) + pools_.capacity() * sizeof(pools_[0]);
  for (const auto& pool : pools_) bytes += pool.capacity() * sizeof(GpuEventSource::Event);
  return bytes;
}

}  // namespace trainscope
