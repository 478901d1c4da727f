// Summary statistics of one key's region times, in seconds.
#ifndef TRAINSCOPE_TIME_STATS_HPP_
#define TRAINSCOPE_TIME_STATS_HPP_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace trainscope {

// Every field but `count`, `total` and `warmup_excluded` is NaN when count is
// 0 (an empty key is not an error). `stdev` is the sample (n-1) standard
// deviation, 0.0 for a single sample, as in Deep500. Percentiles interpolate
// linearly between order statistics (NumPy's default, "type 7"), so `median`
// is Deep500's (mean of the two middle values for even n). The 95% confidence
// interval of the median is the distribution-free one from order statistics
// (exact binomial up to n = 1000, normal approximation above); it is NaN for
// n < 6, where no pair of order statistics reaches 95% coverage.
struct TimeStats {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  std::uint64_t count = 0;
  double total = 0.0;
  double min = kNaN;
  double mean = kNaN;
  double median = kNaN;
  double max = kNaN;
  double stdev = kNaN;
  double p5 = kNaN;
  double p25 = kNaN;
  double p75 = kNaN;
  double p95 = kNaN;
  double p99 = kNaN;
  double cv = kNaN;  // stdev / mean (inf or NaN when the mean is 0)
  double median_ci_low = kNaN;
  double median_ci_high = kNaN;
  // Samples dropped as warm-up (TimerOptions::warmup); not in any field above.
  std::uint64_t warmup_excluded = 0;
  // True once the key passed its exact-sample cap: quantiles (median, p*, CI)
  // then come from a sketch with bounded relative error; count, total, min,
  // max, mean and stdev stay exact.
  bool approximate = false;

  // Deep500's text: "min: 0.00730 mean: 0.00894 median: 0.00894 max: 0.01058 stdev: 0.00232".
  std::string to_string() const;
};

// Statistics of plain durations in seconds (all of them; no warm-up).
TimeStats compute_time_stats(const std::vector<double>& seconds);

}  // namespace trainscope

#endif  // TRAINSCOPE_TIME_STATS_HPP_
