#include "trainscope/timing/detail/region_core.hpp"

#include <string>

#include <fmt/format.h>
#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope::timing::detail {

absl::Status all_key_error(Key key, const char* operation) {
  (void)key;
  return absl::InvalidArgumentError(
      fmt::format("Cannot use TimeType.ALL in {}(): ALL names every key and is only valid where "
                  "keys are listed",
                  operation));
}

absl::Status unknown_key_error(Key key) {
  return absl::InvalidArgumentError(
      fmt::format("Unknown timing region key id {}: build keys from TimeType or a name", key.id()));
}

absl::Status nesting_error(Key key) {
  return absl::FailedPreconditionError(fmt::format(
      "Detected nesting for timing region type {}: it is already open (different keys may nest, "
      "the same key may not)",
      key.name()));
}

absl::Status unbalanced_end_error(Key key) {
  return absl::FailedPreconditionError(
      fmt::format("Unbalanced end for timing region type {}: it was not started", key.name()));
}

absl::Status gpu_flag_mismatch_error(Key key, bool start_gpu, bool end_gpu) {
  return absl::InvalidArgumentError(fmt::format(
      "gpu flag mismatch for timing region type {}: started with gpu={}, ended with gpu={}; the "
      "region stays open",
      key.name(), start_gpu ? "True" : "False", end_gpu ? "True" : "False"));
}

RegionCore::RegionCore(const TimerOptions& options)
    : options_(options), nvtx_(options.nvtx && nvtx_compiled_in()), cpu_(options), gpu_(options) {
  open_.resize(key_count() + 1);
}

RegionCore::RegionCore(RegionCore&&) noexcept = default;
RegionCore& RegionCore::operator=(RegionCore&&) noexcept = default;

RegionCore::~RegionCore() { detach(); }

absl::Status RegionCore::grow_for(Key key, OpenSlot** slot) {
  if (key.is_all()) return all_key_error(key, "start");
  const KeyId count = key_count();
  if (key.id() == 0 || key.id() > count) return unknown_key_error(key);
  open_.resize(count + 1);  // a key interned after this timer was built
  return startable(key, slot);
}

bool RegionCore::any_open() const noexcept {
  for (const OpenSlot& s : open_) {
    if (s.open) return true;
  }
  return false;
}

void RegionCore::attach(RegionSink& sink) {
  detach();
  ring_ = sink.open_ring();
  step_wait_ = options_.step_wait && thread_wait_ns() >= 0;
  published_ = OpenStackHandle::claim();
  for (std::size_t id = 0; id < open_.size(); ++id) {  // regions open before the attach
    if (open_[id].open && published_.get() != nullptr) {
      published_.get()->push(static_cast<KeyId>(id), open_[id].start_ns);
    }
  }
}

void RegionCore::detach() noexcept {
  step_wait_ = false;
  published_.release();
  if (ring_ != nullptr) {
    ring_->release();
    ring_.reset();
  }
}

TimeStats RegionCore::stats(Key key, Device device) const {
  const stats::detail::SampleSeries* series = table(device).find(key.id());
  return series != nullptr ? series->stats() : TimeStats{};
}

absl::Status RegionCore::samples_seconds(Key key, Device device, std::vector<double>* out) const {
  out->clear();
  const stats::detail::SampleSeries* series = table(device).find(key.id());
  if (series == nullptr) return absl::OkStatus();
  if (!series->exact()) {
    return absl::FailedPreconditionError(fmt::format(
        "get_time({}): {} samples exceed the exact-sample cap of {}, so only a quantile sketch is "
        "kept; use get_time_stats(), or raise TimerOptions::exact_sample_cap",
        key.name(), series->count(), options_.exact_sample_cap));
  }
  std::vector<std::int64_t> ns;
  series->copy_samples(&ns);
  out->reserve(ns.size());
  // Division, not * 1e-9: the same correctly rounded seconds as TimeStats.
  for (std::int64_t v : ns) out->push_back(static_cast<double>(v) / 1e9);
  return absl::OkStatus();
}

Summary RegionCore::summary(bool has_gpu_section) const {
  Summary summary;
  summary.has_gpu_section = has_gpu_section;
  for (Device device : {Device::kCPU, Device::kGPU}) {
    if (device == Device::kGPU && !has_gpu_section) break;
    const SeriesTable& t = table(device);
    for (KeyId id : t.order()) {
      summary.entries.push_back({std::string(Key::FromId(id).name()), device, t.find(id)->stats()});
    }
  }
  return summary;
}

std::vector<Key> RegionCore::keys(Device device) const {
  std::vector<Key> keys;
  for (KeyId id : table(device).order()) keys.push_back(Key::FromId(id));
  return keys;
}

void RegionCore::merge_completed(const RegionCore& other) {
  for (Device device : {Device::kCPU, Device::kGPU}) {
    const SeriesTable& theirs = other.table(device);
    SeriesTable& mine = mutable_table(device);
    for (KeyId id : theirs.order()) mine.get_or_create(id).merge(*theirs.find(id));
  }
}

void RegionCore::reset() noexcept {
  if (OpenStack* stack = published_.get()) stack->clear();
  for (OpenSlot& s : open_) {
    if (s.open && nvtx_) nvtx_range_end(s.nvtx);
    s = OpenSlot{};
  }
  cpu_.clear();
  gpu_.clear();
}

std::size_t RegionCore::memory_bytes() const noexcept {
  return sizeof(*this) + open_.capacity() * sizeof(OpenSlot) + cpu_.memory_bytes() +
         gpu_.memory_bytes();
}

}  // namespace trainscope::timing::detail
