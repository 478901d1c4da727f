// All completed durations of one key on one device: exact samples in fixed
// chunks (8 bytes per sample, no vector doubling), then a sketch past the cap.
#ifndef TRAINSCOPE_STATS_DETAIL_SAMPLE_SERIES_HPP_
#define TRAINSCOPE_STATS_DETAIL_SAMPLE_SERIES_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainscope/stats/detail/moments.hpp"
#include "trainscope/stats/detail/quantile_sketch.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::stats::detail {

class SampleSeries {
 public:
  // Chunks grow from 256 to 8192 samples (64 KiB), so a rarely used key costs
  // 2 KiB and a busy one 8 bytes per sample plus one pointer per chunk.
  static constexpr std::size_t kFirstChunkSamples = 256;
  static constexpr std::size_t kMaxChunkSamples = 8192;

  SampleSeries(std::size_t warmup, std::size_t exact_cap, double sketch_error) noexcept
      : warmup_left_(warmup), exact_cap_(exact_cap), sketch_error_(sketch_error) {}

  SampleSeries(SampleSeries&&) noexcept = default;
  SampleSeries& operator=(SampleSeries&&) noexcept = default;
  SampleSeries(const SampleSeries&) = delete;
  SampleSeries& operator=(const SampleSeries&) = delete;

  // Hot path: one branch for warm-up, exact moments, one store. Allocates a
  // chunk once every kMaxChunkSamples samples at most.
  void add(std::int64_t ns) {
    if (warmup_left_ != 0) {
      --warmup_left_;
      ++warmup_excluded_;
      return;
    }
    moments_.add(ns);
    if (sketch_ == nullptr) {
      if (tail_ == chunk_end_ || moments_.count > exact_cap_) {
        add_slow(ns);
        return;
      }
      *tail_++ = ns;
    } else {
      sketch_->add(ns);
    }
  }

  std::uint64_t count() const noexcept { return moments_.count; }
  std::uint64_t warmup_excluded() const noexcept { return warmup_excluded_; }
  bool exact() const noexcept { return sketch_ == nullptr; }
  const Moments& moments() const noexcept { return moments_; }

  // Exact samples in completion order (empty once the series is a sketch).
  void copy_samples(std::vector<std::int64_t>* out) const;
  TimeStats stats() const;
  // Folds `other` in (for merging per-thread timers). Keeps exactness while
  // both are exact and the sum fits under the cap.
  void merge(const SampleSeries& other);
  void clear() noexcept;
  std::size_t memory_bytes() const noexcept;

 private:
  // New chunk or spill to the sketch; `ns` is already in moments_.
  void add_slow(std::int64_t ns);
  static std::size_t chunk_size(std::size_t index) noexcept;

  std::size_t warmup_left_;
  std::size_t exact_cap_;
  double sketch_error_;
  std::uint64_t warmup_excluded_ = 0;
  Moments moments_;
  std::vector<std::unique_ptr<std::int64_t[]>> chunks_;
  std::int64_t* tail_ = nullptr;
  std::int64_t* chunk_end_ = nullptr;
  std::unique_ptr<QuantileSketch> sketch_;
};

// Statistics from exact samples; reorders `samples` (it is scratch space).
// `moments` must describe exactly these samples: its min and max size the
// selection tables.
TimeStats stats_from_samples(const Moments& moments, std::vector<std::int64_t>* samples);
// Statistics once a series lives in a sketch.
TimeStats stats_from_sketch(const Moments& moments, const QuantileSketch& sketch);

}  // namespace trainscope::stats::detail

#endif  // TRAINSCOPE_STATS_DETAIL_SAMPLE_SERIES_HPP_
