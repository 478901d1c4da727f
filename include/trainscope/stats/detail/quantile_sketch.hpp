// Relative-error quantile sketch (DDSketch-style logarithmic buckets) for keys
// past their exact-sample cap: memory grows with log(max/min), not with n.
#ifndef TRAINSCOPE_STATS_DETAIL_QUANTILE_SKETCH_HPP_
#define TRAINSCOPE_STATS_DETAIL_QUANTILE_SKETCH_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainscope::stats::detail {

class QuantileSketch {
 public:
  // Every value returned is within `relative_accuracy` (e.g. 0.01 = 1%) of a
  // sample whose rank is the one asked for. Throws std::invalid_argument
  // outside [2e-8, 1).
  explicit QuantileSketch(double relative_accuracy = 0.01);
  // Whether the constructor accepts `relative_accuracy`.
  static bool valid_relative_accuracy(double relative_accuracy) noexcept;

  void add(std::int64_t ns, std::uint64_t n = 1);
  // Both sketches must have the same relative accuracy.
  void merge(const QuantileSketch& other);
  void clear();

  std::uint64_t count() const noexcept { return count_; }
  // Value (ns) of the sample with 0-based rank `rank` in sorted order,
  // rank < count() (else std::out_of_range). Values <= 0 come back as 0.
  double value_at_rank(std::uint64_t rank) const;
  // Linear interpolation between ranks floor/ceil of q*(n-1), as the exact
  // path; q outside [0, 1] throws std::invalid_argument.
  double quantile(double q) const;
  double relative_accuracy() const noexcept { return alpha_; }
  std::size_t memory_bytes() const noexcept;

 private:
  int bucket_index(double v) const;
  double bucket_value(int index) const;

  double alpha_;
  double gamma_;
  double log_gamma_;
  std::uint64_t count_ = 0;
  std::uint64_t zero_count_ = 0;  // values <= 0 ns
  int offset_ = 0;                // bucket index of counts_[0]
  std::vector<std::uint64_t> counts_;
};

}  // namespace trainscope::stats::detail

#endif  // TRAINSCOPE_STATS_DETAIL_QUANTILE_SKETCH_HPP_
