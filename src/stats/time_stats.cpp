#include "trainscope/stats/time_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "trainscope/stats/detail/moments.hpp"
#include "trainscope/stats/detail/quantile_sketch.hpp"
#include "trainscope/stats/detail/sample_series.hpp"

namespace trainscope {
namespace {

constexpr double kNsPerSecond = 1e9;

constexpr std::pair<double, double TimeStats::*> kQuantileFields[] = {
    {0.05, &TimeStats::p5},  {0.25, &TimeStats::p25}, {0.5, &TimeStats::median},
    {0.75, &TimeStats::p75}, {0.95, &TimeStats::p95}, {0.99, &TimeStats::p99},
};

// 95% distribution-free confidence interval of the median from order
// statistics: [x_(k), x_(n-k+1)] (1-based) misses the median with probability
// 2 P(Bin(n, 1/2) <= k-1), so k is the largest rank keeping that tail at or
// below 2.5%. Up to n = 1000 the tail is the exact binomial CDF, summed term
// by term from 2^-n (still a normal double at n = 1000). Its rounding error,
// ~1e-13, cannot flip a comparison: for n <= 1000 no tail P(X <= j) comes
// within 1e-4 (relative) of 2.5% (checked with exact integers). Above 1000
// the normal approximation k = floor(n/2 - 1.96 sqrt(n)/2) is within a rank
// of the exact k (also checked) and costs nothing. Returns k, or 0 for n < 6:
// there even [x_(1), x_(n)] misses with probability 2^(1-n) > 5%.
std::uint64_t median_ci_lower_rank(std::uint64_t n) {
  if (n > 1000) {
    const double k = std::floor(n / 2.0 - 1.96 * std::sqrt(static_cast<double>(n)) / 2.0);
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(k));
  }
  double term = std::ldexp(1.0, -static_cast<int>(n));  // P(X = 0)
  double cdf = term;                                    // P(X <= j)
  std::uint64_t k = 0;
  for (std::uint64_t j = 0; cdf <= 0.025; ++j) {
    k = j + 1;
    term *= static_cast<double>(n - j) / static_cast<double>(j + 1);
    cdf += term;
  }
  return k;
}

// The 0-based ranks whose values the quantiles and the median CI read,
// sorted and unique.
std::vector<std::size_t> needed_ranks(std::size_t n) {
  std::vector<std::size_t> ranks;
  for (const auto& quantile : kQuantileFields) {
    const double h = quantile.first * static_cast<double>(n - 1);
    ranks.push_back(static_cast<std::size_t>(std::floor(h)));
    ranks.push_back(static_cast<std::size_t>(std::ceil(h)));
  }
  const std::uint64_t k = median_ci_lower_rank(n);
  if (k != 0) {
    ranks.push_back(k - 1);
    ranks.push_back(n - k);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// Fills the quantiles (type 7: linear between ranks floor/ceil of q(n-1)) and
// the median CI from `value_at(rank)`, which returns the value of a 0-based
// rank in the unit that `scale` divides into seconds.
template <typename ValueAt>
void fill_order_statistics(std::size_t n, const ValueAt& value_at, double scale, TimeStats* stats) {
  for (const auto& [q, field] : kQuantileFields) {
    const double h = q * static_cast<double>(n - 1);
    const double lo_rank = std::floor(h);
    double value = value_at(static_cast<std::size_t>(lo_rank));
    if (h > lo_rank)
      value += (h - lo_rank) * (value_at(static_cast<std::size_t>(lo_rank) + 1) - value);
    stats->*field = value / scale;
  }
  const std::uint64_t k = median_ci_lower_rank(n);
  if (k != 0) {
    stats->median_ci_low = value_at(k - 1) / scale;
    stats->median_ci_high = value_at(n - k) / scale;
  }
}

// --- Multi-rank selection -------------------------------------------------
//
// Sorting 1e6 samples to read ~14 order statistics wastes most of the work;
// select_ranks() finds just the values at the requested ranks. Elements map
// to unsigned keys that preserve their order. Each level histograms the keys,
// relative to the smallest, into log-linear buckets (HdrHistogram's layout).
// Durations spread on a log scale, so every bucket holds a small share of
// them whatever their spread or outliers. A rank that falls in a bucket of a
// single key is answered at once; the other buckets holding requested ranks
// are moved into their sorted place and searched again, each with its own,
// much narrower key range. For 1e6 realistic timings that is two sequential
// passes plus work on ~2% of the samples.

constexpr std::size_t kSortBelow = 512;

int bit_width(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

// Keys below 2^m get a bucket each; above, every power of two is split into
// 2^(m-1) buckets. m grows with n, up to 2^10 buckets (0.1% wide) per power
// of two for a million samples: at most ~56K counters.
class LogLinearBuckets {
 public:
  explicit LogLinearBuckets(std::size_t n) : m_(std::clamp(bit_width(n) - 9, 4, 11)) {}

  // The hot loop of the whole selection, so it reads the power of two and
  // the m-1 bits below the leading one off the key converted to a double (a
  // cheaper instruction than a bit scan). Rounding above 2^53 keeps the map
  // monotonic, which is all the selection needs outside the exact range.
  std::size_t index(std::uint64_t key) const {
    if (key < (std::uint64_t{1} << m_)) return key;
    const double d = static_cast<double>(key);
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    // The biased exponent of 2^m is 1023 + m; it maps to index 2^m.
    return (bits >> (53 - m_)) - (static_cast<std::uint64_t>(1021 + m_) << (m_ - 1));
  }
  bool single_key(std::size_t index) const { return index < (std::size_t{1} << m_); }

 private:
  int m_;
};

// A bucket that holds requested ranks [first_rank, end_rank) (indices into
// the rank list) and, once in place, covers data[begin, end).
struct WantedBucket {
  std::size_t bucket;
  std::size_t begin;
  std::size_t end;
  std::size_t first_rank;
  std::size_t end_rank;
};

std::vector<WantedBucket> find_wanted_buckets(const std::vector<std::size_t>& counts,
                                              const std::size_t* ranks, std::size_t num_ranks) {
  std::vector<WantedBucket> wanted;
  std::size_t start = 0;
  std::size_t r = 0;
  for (std::size_t b = 0; b < counts.size() && r < num_ranks; ++b) {
    const std::size_t end = start + counts[b];
    if (ranks[r] < end) {
      const std::size_t first_rank = r;
      while (r < num_ranks && ranks[r] < end) ++r;
      wanted.push_back({b, start, end, first_rank, r});
    }
    start = end;
  }
  return wanted;
}

constexpr std::uint16_t kNotGathered = 0xffff;

// Moves every element of the `gathered` buckets into its bucket's region; the
// rest end up anywhere outside those regions. One sequential scan: each
// bucket keeps a prefix of its region that already holds only its own
// elements, and an element met outside its prefix is swapped to the prefix's
// end. What comes back in exchange is looked at again at once, so nothing is
// moved to a position the scan has yet to reach. `slot_of` maps an element to
// its index in `gathered`, or kNotGathered.
template <typename T, typename SlotFn>
void gather_buckets(T* data, std::size_t n, const std::vector<WantedBucket>& gathered,
                    const SlotFn& slot_of) {
  std::vector<std::size_t> filled;  // end of each bucket's in-place prefix
  for (const WantedBucket& w : gathered) filled.push_back(w.begin);
  for (std::size_t i = 0; i < n; ++i) {
    for (;;) {
      const std::uint16_t s = slot_of(data[i]);
      if (s == kNotGathered) break;
      std::size_t& next = filled[s];
      while (next < gathered[s].end && slot_of(data[next]) == s) ++next;
      if (gathered[s].begin <= i && i < next) break;  // already in its prefix
      std::swap(data[i], data[next++]);
    }
  }
}

template <typename T, typename BucketFn>
std::vector<std::size_t> histogram(const T* data, std::size_t n, std::size_t num_buckets,
                                   const BucketFn& bucket) {
  std::vector<std::size_t> counts(num_buckets);
  std::size_t* const count = counts.data();  // a local the stores cannot alias
  for (std::size_t i = 0; i < n; ++i) ++count[bucket(data[i])];
  return counts;
}

template <typename T, typename Key>
std::pair<std::uint64_t, std::uint64_t> key_range(const T* data, std::size_t n, const Key& key) {
  std::uint64_t lo = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    lo = std::min(lo, key(data[i]));
    hi = std::max(hi, key(data[i]));
  }
  return {lo, hi};
}

// Writes to out[j] the value of 0-based rank ranks[j] among data[0, n),
// reordering data. `ranks` are sorted, unique and < n; `lo` and `hi` are the
// smallest and largest key in data.
template <typename T, typename Key>
void select_ranks(T* data, std::size_t n, const std::size_t* ranks, std::size_t num_ranks,
                  std::uint64_t lo, std::uint64_t hi, const Key& key, T* out) {
  if (lo == hi) {
    std::fill(out, out + num_ranks, key.value(lo));
    return;
  }
  if (n <= kSortBelow) {
    std::sort(data, data + n, [&key](const T& a, const T& b) { return key(a) < key(b); });
    for (std::size_t j = 0; j < num_ranks; ++j) out[j] = data[ranks[j]];
    return;
  }
  const LogLinearBuckets buckets(n);
  // By value: stores into data and counts may alias a referenced key.
  const auto bucket = [buckets, key, lo](const T& v) { return buckets.index(key(v) - lo); };
  const std::vector<std::size_t> counts = histogram(data, n, buckets.index(hi - lo) + 1, bucket);

  std::vector<WantedBucket> gathered;
  std::vector<std::uint16_t> slot_of_bucket(counts.size(), kNotGathered);
  for (const WantedBucket& w : find_wanted_buckets(counts, ranks, num_ranks)) {
    if (buckets.single_key(w.bucket)) {
      std::fill(out + w.first_rank, out + w.end_rank, key.value(lo + w.bucket));
    } else {
      slot_of_bucket[w.bucket] = static_cast<std::uint16_t>(gathered.size());
      gathered.push_back(w);
    }
  }
  if (gathered.empty()) return;
  const std::uint16_t* const slots = slot_of_bucket.data();
  gather_buckets(data, n, gathered, [bucket, slots](const T& v) { return slots[bucket(v)]; });

  std::vector<std::size_t> local_ranks;
  for (const WantedBucket& w : gathered) {
    local_ranks.clear();
    for (std::size_t j = w.first_rank; j < w.end_rank; ++j)
      local_ranks.push_back(ranks[j] - w.begin);
    T* const region = data + w.begin;
    const std::size_t size = w.end - w.begin;
    const auto [region_lo, region_hi] = key_range(region, size, key);
    select_ranks(region, size, local_ranks.data(), local_ranks.size(), region_lo, region_hi, key,
                 out + w.first_rank);
  }
}

// Integer nanoseconds: two's complement order becomes unsigned order once the
// minimum is subtracted modulo 2^64.
struct NsKey {
  std::uint64_t base;
  std::uint64_t operator()(std::int64_t v) const { return static_cast<std::uint64_t>(v) - base; }
  std::int64_t value(std::uint64_t key) const { return static_cast<std::int64_t>(key + base); }
};

// IEEE doubles: flipping all bits of negatives and the sign bit of the rest
// orders the bit patterns like the numbers (NaNs land at the ends, so they
// give wrong quantiles but never undefined behaviour).
std::uint64_t ordered_bits(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

double from_ordered_bits(std::uint64_t bits) {
  bits = (bits >> 63) != 0 ? bits & ~(std::uint64_t{1} << 63) : ~bits;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

struct SecondsKey {
  std::uint64_t base;
  std::uint64_t operator()(double v) const { return ordered_bits(v) - base; }
  double value(std::uint64_t key) const { return from_ordered_bits(key + base); }
};

// The values at needed_ranks(n) of `data` (which it reorders), looked up by rank.
template <typename T, typename Key>
class RankedValues {
 public:
  RankedValues(std::vector<T>* data, std::uint64_t max_key, const Key& key)
      : ranks_(needed_ranks(data->size())), values_(ranks_.size()) {
    select_ranks(data->data(), data->size(), ranks_.data(), ranks_.size(), 0, max_key, key,
                 values_.data());
  }
  double operator()(std::size_t rank) const {
    return static_cast<double>(
        values_[std::lower_bound(ranks_.begin(), ranks_.end(), rank) - ranks_.begin()]);
  }

 private:
  std::vector<std::size_t> ranks_;
  std::vector<T> values_;
};

// count, total, min, max, mean, stdev and cv: everything the exact moments give.
TimeStats stats_from_moments(const stats::detail::Moments& m) {
  TimeStats stats;
  stats.count = m.count;
  if (m.count == 0) return stats;
  stats.total = static_cast<double>(static_cast<long double>(m.sum) / kNsPerSecond);
  stats.min = m.min / kNsPerSecond;
  stats.max = m.max / kNsPerSecond;
  stats.mean = m.mean_ns() / kNsPerSecond;
  stats.stdev = m.stdev_ns() / kNsPerSecond;
  stats.cv = stats.stdev / stats.mean;
  return stats;
}

// Two-pass sums in long double: agrees with an exact (fraction) reference to
// ~1e-16 relative for any realistic set of durations.
void fill_moments_from_seconds(const std::vector<double>& seconds, TimeStats* stats) {
  const std::size_t n = seconds.size();
  long double sum = 0.0L;
  for (const double s : seconds) sum += s;
  const long double mean = sum / n;
  long double squares = 0.0L;
  for (const double s : seconds) squares += (s - mean) * (s - mean);
  stats->total = static_cast<double>(sum);
  stats->mean = static_cast<double>(mean);
  stats->stdev = n == 1 ? 0.0 : static_cast<double>(std::sqrt(squares / (n - 1)));
  stats->cv = stats->stdev / stats->mean;
}

}  // namespace

std::string TimeStats::to_string() const {
  return fmt::format("min: {:.5f} mean: {:.5f} median: {:.5f} max: {:.5f} stdev: {:.5f}", min, mean,
                     median, max, stdev);
}

TimeStats compute_time_stats(const std::vector<double>& seconds) {
  TimeStats stats;
  const std::size_t n = seconds.size();
  stats.count = n;
  if (n == 0) return stats;
  fill_moments_from_seconds(seconds, &stats);

  const auto [lowest, highest] =
      std::minmax_element(seconds.begin(), seconds.end(),
                          [](double a, double b) { return ordered_bits(a) < ordered_bits(b); });
  stats.min = *lowest;
  stats.max = *highest;
  std::vector<double> data = seconds;
  const SecondsKey key{ordered_bits(*lowest)};
  fill_order_statistics(n, RankedValues(&data, key(*highest), key), 1.0, &stats);
  return stats;
}

namespace stats::detail {
namespace {

using U128 = unsigned __int128;

// |sum| = q*n + r with q the integer nearest |mean|, so |r| <= n/2.
struct SplitSum {
  U128 abs_sum;
  U128 q;
  __int128 r;
};

SplitSum split_sum(__int128 sum, std::uint64_t n) {
  SplitSum split;
  split.abs_sum = sum < 0 ? U128{0} - static_cast<U128>(sum) : static_cast<U128>(sum);
  split.q = split.abs_sum / n;
  split.r = static_cast<__int128>(split.abs_sum % n);
  if (2 * split.r > static_cast<__int128>(n)) {
    ++split.q;
    split.r -= n;
  }
  return split;
}

}  // namespace

double Moments::mean_ns() const noexcept {
  if (count == 0) return TimeStats::kNaN;
  const SplitSum split = split_sum(sum, count);
  const long double magnitude = static_cast<long double>(split.q) +
                                static_cast<long double>(split.r) / static_cast<long double>(count);
  return static_cast<double>(sum < 0 ? -magnitude : magnitude);
}

// Exact for every input, not only where n*sum_sq - sum^2 fits in 128 bits:
// with y = |x| and q the integer nearest mean(y), D = sum (y - q)^2
// = sum_sq - 2 q sum(y) + n q^2 lies in [0, sum_sq] (as |r| <= sum(y)), so
// computing it modulo 2^128 gives it exactly. The sum of squared deviations
// is M2 = D - r^2/n, and M2 >= r^2/n (every integer y is at least |r|/n from
// the mean), so the subtraction loses at most one bit: long double rounding
// is the only error, however large the values or n.
double Moments::stdev_ns() const noexcept {
  if (count == 0) return TimeStats::kNaN;
  if (count == 1) return 0.0;
  const SplitSum split = split_sum(sum, count);
  const U128 n = count;
  const U128 d = sum_sq - 2 * split.q * split.abs_sum + n * split.q * split.q;
  const long double r = static_cast<long double>(split.r);
  const long double m2 = static_cast<long double>(d) - r * r / static_cast<long double>(count);
  return static_cast<double>(std::sqrt(std::max(0.0L, m2) / static_cast<long double>(count - 1)));
}

// `moments` must describe exactly `samples`: their min and max bound the keys
// that size the selection's histograms.
TimeStats stats_from_samples(const Moments& moments, std::vector<std::int64_t>* samples) {
  assert(samples->size() == moments.count);
  TimeStats stats = stats_from_moments(moments);
  const std::size_t n = samples->size();
  if (n == 0) return stats;
  const NsKey key{static_cast<std::uint64_t>(moments.min)};
  fill_order_statistics(n, RankedValues(samples, key(moments.max), key), kNsPerSecond, &stats);
  return stats;
}

TimeStats stats_from_sketch(const Moments& moments, const QuantileSketch& sketch) {
  TimeStats stats = stats_from_moments(moments);
  stats.approximate = true;
  if (moments.count == 0 || sketch.count() == 0) return stats;
  // A bucket's representative may lie up to alpha beyond the exact extremes,
  // which the true order statistics never do.
  const double lowest = static_cast<double>(moments.min);
  const double highest = static_cast<double>(moments.max);
  const auto value_at = [&](std::size_t rank) {
    return std::clamp(sketch.value_at_rank(rank), lowest, highest);
  };
  fill_order_statistics(sketch.count(), value_at, kNsPerSecond, &stats);
  return stats;
}

}  // namespace stats::detail
}  // namespace trainscope
