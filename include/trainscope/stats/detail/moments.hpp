// Exact running moments of integer nanosecond durations. Integer sums make
// count/total/min/max/mean/stdev exact at any sample count (no Welford drift,
// no cancellation), at the cost of a 128-bit multiply-add per sample.
#ifndef TRAINSCOPE_STATS_DETAIL_MOMENTS_HPP_
#define TRAINSCOPE_STATS_DETAIL_MOMENTS_HPP_

#include <cstdint>
#include <limits>

namespace trainscope::stats::detail {

// __extension__ keeps -Wpedantic quiet in users' builds.
__extension__ using Int128 = __int128;
__extension__ using UInt128 = unsigned __int128;

struct Moments {
  std::uint64_t count = 0;
  std::int64_t min = std::numeric_limits<std::int64_t>::max();
  std::int64_t max = std::numeric_limits<std::int64_t>::min();
  Int128 sum = 0;
  UInt128 sum_sq = 0;

  void add(std::int64_t ns) noexcept {
    ++count;
    sum += ns;
    // Unsigned negation: -INT64_MIN would overflow.
    const std::uint64_t mag =
        ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
    sum_sq += static_cast<UInt128>(mag) * mag;
    if (ns < min) min = ns;
    if (ns > max) max = ns;
  }

  void merge(const Moments& o) noexcept {
    count += o.count;
    sum += o.sum;
    sum_sq += o.sum_sq;
    if (o.min < min) min = o.min;
    if (o.max > max) max = o.max;
  }

  // In nanoseconds. NaN for an empty set.
  double mean_ns() const noexcept;
  // Sample (n-1) standard deviation; 0 for one sample, NaN for none.
  double stdev_ns() const noexcept;
};

}  // namespace trainscope::stats::detail

#endif  // TRAINSCOPE_STATS_DETAIL_MOMENTS_HPP_
