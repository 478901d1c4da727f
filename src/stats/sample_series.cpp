#include "trainscope/stats/detail/sample_series.hpp"

#include <algorithm>

namespace trainscope::stats::detail {

std::size_t SampleSeries::chunk_size(std::size_t index) noexcept {
  const std::size_t shift = std::min<std::size_t>(index, 5);  // 256 << 5 == 8192
  return kFirstChunkSamples << shift;
}

void SampleSeries::add_slow(std::int64_t ns) {
  if (moments_.count > exact_cap_) {
    // Past the cap: everything kept so far moves into the sketch, whose size
    // depends on the range of values only.
    sketch_ = std::make_unique<QuantileSketch>(sketch_error_);
    std::vector<std::int64_t> kept;
    copy_samples(&kept);
    for (std::int64_t v : kept) sketch_->add(v);
    sketch_->add(ns);
    chunks_.clear();
    chunks_.shrink_to_fit();
    tail_ = chunk_end_ = nullptr;
    return;
  }
  const std::size_t size = chunk_size(chunks_.size());
  chunks_.push_back(std::make_unique<std::int64_t[]>(size));
  tail_ = chunks_.back().get();
  chunk_end_ = tail_ + size;
  *tail_++ = ns;
}

void SampleSeries::copy_samples(std::vector<std::int64_t>* out) const {
  out->clear();
  if (sketch_ != nullptr) return;
  out->reserve(moments_.count);
  for (std::size_t i = 0; i < chunks_.size(); ++i) {
    const std::int64_t* begin = chunks_[i].get();
    const std::int64_t* end = (i + 1 == chunks_.size()) ? tail_ : begin + chunk_size(i);
    out->insert(out->end(), begin, end);
  }
}

TimeStats SampleSeries::stats() const {
  TimeStats stats;
  if (sketch_ != nullptr) {
    stats = stats_from_sketch(moments_, *sketch_);
  } else {
    std::vector<std::int64_t> scratch;
    copy_samples(&scratch);
    stats = stats_from_samples(moments_, &scratch);
  }
  stats.warmup_excluded = warmup_excluded_;
  return stats;
}

void SampleSeries::merge(const SampleSeries& other) {
  warmup_excluded_ += other.warmup_excluded_;
  if (other.sketch_ == nullptr) {
    std::vector<std::int64_t> theirs;
    other.copy_samples(&theirs);
    // add() keeps the cap rule; moments are merged exactly by re-adding.
    const std::size_t saved_warmup = warmup_left_;
    warmup_left_ = 0;
    for (std::int64_t v : theirs) add(v);
    warmup_left_ = saved_warmup;
    return;
  }
  if (sketch_ == nullptr) {
    sketch_ = std::make_unique<QuantileSketch>(sketch_error_);
    std::vector<std::int64_t> mine;
    copy_samples(&mine);
    for (std::int64_t v : mine) sketch_->add(v);
    chunks_.clear();
    tail_ = chunk_end_ = nullptr;
  }
  sketch_->merge(*other.sketch_);
  moments_.merge(other.moments_);
}

void SampleSeries::clear() noexcept {
  moments_ = Moments{};
  chunks_.clear();
  tail_ = chunk_end_ = nullptr;
  sketch_.reset();
  warmup_excluded_ = 0;
}

std::size_t SampleSeries::memory_bytes() const noexcept {
  std::size_t bytes = sizeof(*this) + chunks_.capacity() * sizeof(chunks_[0]);
  for (std::size_t i = 0; i < chunks_.size(); ++i) bytes += chunk_size(i) * sizeof(std::int64_t);
  if (sketch_ != nullptr) bytes += sketch_->memory_bytes();
  return bytes;
}

}  // namespace trainscope::stats::detail
