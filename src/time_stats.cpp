#include "trainscope/time_stats.hpp"

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

#include "trainscope/detail/moments.hpp"
#include "trainscope/detail/quantile_sketch.hpp"
#include "trainscope/detail/sample_series.hpp"

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
// by term from 2^-n (still a normal double at n = 1000; the terms are ratios
// of small integers, so the sum stays accurate to ~1e-13, far from any
// threshold crossing). Above 1000 the normal approximation
// k = floor(n/2 - 1.96 sqrt(n)/2) is within a rank of the exact k and costs
// nothing. Returns k, or 0 for n < 6: there even [x_(1), x_(n)] misses with
// probability 2^(1-n) > 5%.
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
    if (h > lo_rank) value += (h - lo_rank) * (value_at(static_cast<std::size_t>(lo_rank) + 1) - value);
    stats->*field = value / scale;
  }
  const std::uint64_t k = median_ci_lower_rank(n);
  if (k != 0) {
    stats->median_ci_low = value_at(k - 1) / scale;
    stats->median_ci_high = value_at(n - k) / scale;
  }
}

// --- Multi-rank radix selection ---------------------------------------------
//
// Sorting 1e6 samples to read ~14 order statistics wastes most of the work.
// select_ranks() instead leaves, for every requested rank r, the r-th smallest
// element at data[r] (std::nth_element for many ranks at once). Elements map
// to unsigned keys that preserve their order, relative to the minimum so that
// only the bits the data spans are looked at. Each level histograms the next
// kDigitBits of the key, moves just the buckets that hold a requested rank to
// their sorted place (an in-place "American flag" permutation that fills only
// those regions), and descends into them. On realistic timings one histogram
// pass over all samples plus work on a few percent of them does it.

constexpr int kDigitBits = 11;       // 16 KiB of counters: stays in L1/L2
constexpr std::size_t kSortBelow = 512;

int bit_width(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

// One level's buckets in sorted order, coalesced into groups: each bucket that
// holds a requested rank is a group of its own; each run of buckets between
// those is one group, whose inner order nobody needs.
struct BucketGroups {
  std::vector<std::uint16_t> of_bucket;
  std::vector<std::size_t> begin;      // per group, plus the end of the last
  std::vector<std::uint16_t> wanted;  // groups holding a requested rank
};

BucketGroups group_buckets(const std::vector<std::size_t>& counts, const std::size_t* rank,
                           const std::size_t* rank_end) {
  BucketGroups groups;
  groups.of_bucket.resize(counts.size());
  std::size_t start = 0;
  bool previous_wanted = false;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    const std::size_t end = start + counts[b];
    const bool wanted = rank != rank_end && *rank < end;
    if (b == 0 || wanted || previous_wanted) {
      groups.begin.push_back(start);
      if (wanted) groups.wanted.push_back(static_cast<std::uint16_t>(groups.begin.size() - 1));
    }
    groups.of_bucket[b] = static_cast<std::uint16_t>(groups.begin.size() - 1);
    while (rank != rank_end && *rank < end) ++rank;
    previous_wanted = wanted;
    start = end;
  }
  groups.begin.push_back(start);
  return groups;
}

// Fills each wanted group's region with exactly its own elements. Every step
// of the inner loop drops one element into its group's next free slot, so the
// cost is bounded by the wanted regions plus the elements they displace.
template <typename T, typename BucketFn>
void permute_wanted_groups(T* data, const BucketGroups& groups, const BucketFn& bucket) {
  std::vector<std::size_t> next(groups.begin.begin(), groups.begin.end() - 1);
  for (const std::uint16_t group : groups.wanted) {
    const std::size_t end = groups.begin[group + 1];
    while (next[group] < end) {
      T value = data[next[group]];
      std::uint16_t home = groups.of_bucket[bucket(value)];
      while (home != group) {
        std::swap(value, data[next[home]++]);
        home = groups.of_bucket[bucket(value)];
      }
      data[next[group]++] = value;
    }
  }
}

// `ranks` are sorted, unique and < n; every key of data[0, n) is below
// 2^key_bits (and equal above it).
template <typename T, typename KeyFn>
void select_ranks(T* data, std::size_t n, const std::size_t* ranks, std::size_t num_ranks, int key_bits,
                  const KeyFn& key) {
  if (num_ranks == 0 || key_bits == 0) return;  // key_bits == 0: all keys equal
  if (n <= kSortBelow) {
    std::sort(data, data + n, [&key](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  const int width = std::min(kDigitBits, key_bits);
  const int shift = key_bits - width;
  const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
  const auto bucket = [&key, shift, mask](const T& v) { return (key(v) >> shift) & mask; };

  std::vector<std::size_t> counts(std::size_t{1} << width);
  for (std::size_t i = 0; i < n; ++i) ++counts[bucket(data[i])];
  const BucketGroups groups = group_buckets(counts, ranks, ranks + num_ranks);
  permute_wanted_groups(data, groups, bucket);

  std::vector<std::size_t> local_ranks;
  const std::size_t* rank = ranks;
  for (const std::uint16_t group : groups.wanted) {
    const std::size_t begin = groups.begin[group];
    const std::size_t end = groups.begin[group + 1];
    local_ranks.clear();
    for (; rank != ranks + num_ranks && *rank < end; ++rank) local_ranks.push_back(*rank - begin);
    select_ranks(data + begin, end - begin, local_ranks.data(), local_ranks.size(), shift, key);
  }
}

// Integer nanoseconds: two's complement order becomes unsigned order once the
// minimum is subtracted modulo 2^64.
struct NsKey {
  std::uint64_t base;
  std::uint64_t operator()(std::int64_t v) const { return static_cast<std::uint64_t>(v) - base; }
};

// IEEE doubles: flipping all bits of negatives and the sign bit of the rest
// orders the bit patterns like the numbers (NaNs land at the ends, so they
// give wrong quantiles but never undefined behaviour).
std::uint64_t ordered_bits(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

struct SecondsKey {
  std::uint64_t base;
  std::uint64_t operator()(double v) const { return ordered_bits(v) - base; }
};

// count, total, min, max, mean, stdev and cv: everything the exact moments give.
TimeStats stats_from_moments(const detail::Moments& m) {
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
  return fmt::format("min: {:.5f} mean: {:.5f} median: {:.5f} max: {:.5f} stdev: {:.5f}", min, mean, median, max,
                     stdev);
}

TimeStats compute_time_stats(const std::vector<double>& seconds) {
  TimeStats stats;
  const std::size_t n = seconds.size();
  stats.count = n;
  if (n == 0) return stats;
  fill_moments_from_seconds(seconds, &stats);

  const auto [lowest, highest] = std::minmax_element(
      seconds.begin(), seconds.end(), [](double a, double b) { return ordered_bits(a) < ordered_bits(b); });
  stats.min = *lowest;
  stats.max = *highest;
  std::vector<double> data = seconds;
  const SecondsKey key{ordered_bits(*lowest)};
  const std::vector<std::size_t> ranks = needed_ranks(n);
  select_ranks(data.data(), n, ranks.data(), ranks.size(), bit_width(key(*highest)), key);
  fill_order_statistics(n, [&data](std::size_t rank) { return data[rank]; }, 1.0, &stats);
  return stats;
}

namespace detail {
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
  const long double magnitude =
      static_cast<long double>(split.q) + static_cast<long double>(split.r) / static_cast<long double>(count);
  return static_cast<double>(sum < 0 ? -magnitude : magnitude);
}

// Exact for every input, not only where n*sum_sq - sum^2 fits in 128 bits:
// with y = |x| and q the integer nearest mean(y), D = sum (y - q)^2
// = sum_sq - 2 q sum(y) + n q^2 lies in [0, sum_sq] (as |r| <= sum(y)), so
// computing it modulo 2^128 gives it exactly. The sum of squared deviations
// is then D - r^2/n with r^2/n <= D, so the only roundings are the final
// long double ones: no cancellation however large the values or n.
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

TimeStats stats_from_samples(const Moments& moments, std::vector<std::int64_t>* samples) {
  assert(samples->size() == moments.count);
  TimeStats stats = stats_from_moments(moments);
  const std::size_t n = samples->size();
  if (n == 0) return stats;
  const NsKey key{static_cast<std::uint64_t>(moments.min)};
  const std::vector<std::size_t> ranks = needed_ranks(n);
  select_ranks(samples->data(), n, ranks.data(), ranks.size(), bit_width(key(moments.max)), key);
  const std::int64_t* data = samples->data();
  fill_order_statistics(n, [data](std::size_t rank) { return static_cast<double>(data[rank]); }, kNsPerSecond,
                        &stats);
  return stats;
}

TimeStats stats_from_sketch(const Moments& moments, const QuantileSketch& sketch) {
  TimeStats stats = stats_from_moments(moments);
  stats.approximate = true;
  if (sketch.count() == 0) return stats;
  // A bucket's representative may lie up to alpha beyond the exact extremes,
  // which the true order statistics never do.
  const double lowest = static_cast<double>(moments.min);
  const double highest = static_cast<double>(moments.max);
  const auto value_at = [&](std::size_t rank) { return std::clamp(sketch.value_at_rank(rank), lowest, highest); };
  fill_order_statistics(sketch.count(), value_at, kNsPerSecond, &stats);
  return stats;
}

}  // namespace detail
}  // namespace trainscope
