#include "trainscope/stats/detail/quantile_sketch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "trainscope/stats/numbers.hpp"

namespace trainscope::stats::detail {

namespace {

// Bucket i holds (gamma^(i-1), gamma^i]. Positive ns are >= 1, so i >= 0.
double index_for(double v, double log_gamma) { return std::ceil(std::log(v) / log_gamma); }

// The bucket of the largest positive int64: no add() goes past it.
int max_index(double log_gamma) {
  return static_cast<int>(
      index_for(static_cast<double>(std::numeric_limits<std::int64_t>::max()), log_gamma));
}

// Grows `counts` (whose first element is bucket `*offset`) so that it covers
// buckets [lo, hi]. Adds half the new span as slack on the growing side to
// keep growth amortized, but never past [0, max_index]: no positive int64
// maps outside it, which bounds memory at ~17 KiB for alpha = 1%.
void cover_buckets(int lo, int hi, double log_gamma, int* offset,
                   std::vector<std::uint64_t>* counts) {
  const int old_lo = *offset;
  const int old_hi = *offset + static_cast<int>(counts->size()) - 1;
  if (!counts->empty() && lo >= old_lo && hi <= old_hi) return;
  int new_lo = counts->empty() ? lo : std::min(lo, old_lo);
  int new_hi = counts->empty() ? hi : std::max(hi, old_hi);
  const int slack = (new_hi - new_lo + 1) / 2;
  if (!counts->empty() && lo < old_lo) new_lo = std::max(0, new_lo - slack);
  if (!counts->empty() && hi > old_hi) new_hi = std::min(max_index(log_gamma), new_hi + slack);
  std::vector<std::uint64_t> grown(static_cast<std::size_t>(new_hi - new_lo + 1), 0);
  std::copy(counts->begin(), counts->end(), grown.begin() + (old_lo - new_lo));
  counts->swap(grown);
  *offset = new_lo;
}

}  // namespace

bool QuantileSketch::valid_relative_accuracy(double relative_accuracy) noexcept {
  // The negated test also rejects NaN.
  if (!(relative_accuracy > 0.0 && relative_accuracy < 1.0)) return false;
  const double log_gamma = std::log1p(2.0 * relative_accuracy / (1.0 - relative_accuracy));
  return index_for(static_cast<double>(std::numeric_limits<std::int64_t>::max()), log_gamma) <=
         std::numeric_limits<int>::max() / 2;
}

QuantileSketch::QuantileSketch(double relative_accuracy) : alpha_(relative_accuracy) {
  // The negated test also rejects NaN.
  if (!(relative_accuracy > 0.0 && relative_accuracy < 1.0)) {
    throw std::invalid_argument("QuantileSketch: relative accuracy must lie in (0, 1)");
  }
  gamma_ = (1.0 + alpha_) / (1.0 - alpha_);
  // log1p keeps log(gamma) accurate for tiny alpha, where gamma rounds near 1.
  log_gamma_ = std::log1p(2.0 * alpha_ / (1.0 - alpha_));
  // Bucket indices are ints; below ~2e-8 the largest int64 would overflow one
  // (and a dense store that fine would take gigabytes anyway).
  if (index_for(static_cast<double>(std::numeric_limits<std::int64_t>::max()), log_gamma_) >
      std::numeric_limits<int>::max() / 2) {
    throw std::invalid_argument("QuantileSketch: relative accuracy too small");
  }
}

int QuantileSketch::bucket_index(double v) const {
  return static_cast<int>(index_for(v, log_gamma_));
}

// The point whose relative distance to both bucket ends is alpha.
double QuantileSketch::bucket_value(int index) const {
  return 2.0 * std::exp(index * log_gamma_) / (gamma_ + 1.0);
}

void QuantileSketch::add(std::int64_t ns, std::uint64_t n) {
  if (n == 0) return;
  count_ += n;
  if (ns <= 0) {
    zero_count_ += n;
    return;
  }
  const int index = bucket_index(static_cast<double>(ns));
  cover_buckets(index, index, log_gamma_, &offset_, &counts_);
  counts_[static_cast<std::size_t>(index - offset_)] += n;
}

void QuantileSketch::merge(const QuantileSketch& other) {
  if (other.alpha_ != alpha_) {
    throw std::invalid_argument("QuantileSketch::merge: sketches differ in relative accuracy");
  }
  const auto& theirs = other.counts_;
  const auto first =
      std::find_if(theirs.begin(), theirs.end(), [](std::uint64_t c) { return c != 0; });
  if (first != theirs.end()) {
    const auto last =
        std::find_if(theirs.rbegin(), theirs.rend(), [](std::uint64_t c) { return c != 0; });
    const int lo = other.offset_ + static_cast<int>(first - theirs.begin());
    const int hi = other.offset_ + static_cast<int>(theirs.rend() - last) - 1;
    cover_buckets(lo, hi, log_gamma_, &offset_, &counts_);
    for (int i = lo; i <= hi; ++i) {
      counts_[static_cast<std::size_t>(i - offset_)] +=
          theirs[static_cast<std::size_t>(i - other.offset_)];
    }
  }
  count_ += other.count_;
  zero_count_ += other.zero_count_;
}

void QuantileSketch::clear() {
  count_ = 0;
  zero_count_ = 0;
  offset_ = 0;
  std::vector<std::uint64_t>().swap(counts_);
}

double QuantileSketch::value_at_rank(std::uint64_t rank) const {
  if (rank >= count_) throw std::out_of_range("QuantileSketch::value_at_rank: rank >= count()");
  if (rank < zero_count_) return 0.0;
  std::uint64_t below = zero_count_;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    below += counts_[i];
    if (rank < below) return bucket_value(offset_ + static_cast<int>(i));
  }
  throw std::logic_error("QuantileSketch: bucket counts do not add up to count()");
}

double QuantileSketch::quantile(double q) const {
  if (!(q >= 0.0 && q <= 1.0))
    throw std::invalid_argument("QuantileSketch::quantile: q must lie in [0, 1]");
  if (count_ == 0) return stats::kNaN;
  const double h = q * static_cast<double>(count_ - 1);
  const double lo_rank = std::floor(h);
  const double lo = value_at_rank(static_cast<std::uint64_t>(lo_rank));
  const double hi = value_at_rank(static_cast<std::uint64_t>(std::ceil(h)));
  return lo + (h - lo_rank) * (hi - lo);
}

std::size_t QuantileSketch::memory_bytes() const noexcept {
  return sizeof(*this) + counts_.capacity() * sizeof(std::uint64_t);
}

}  // namespace trainscope::stats::detail
