// Summary statistics of one key's region times, in seconds.
#ifndef TRAINSCOPE_STATS_TIME_STATS_HPP_
#define TRAINSCOPE_STATS_TIME_STATS_HPP_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "trainscope/stats/numbers.hpp"

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
  static constexpr double kNaN = stats::kNaN;

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

// The fields of TimeStats in output order, with their kind and unit: the one
// list that the stats JSON and CSV writers, the run store's summary reader,
// the report's statistics and the Python TimeStats (attributes, _asdict(),
// trainscope.read_run's columns) are driven by. A new TimeStats field goes
// here too (the static_assert below catches a forgotten one).
enum class TimeStatsFieldKind { kInteger, kDouble, kBoolean };

struct TimeStatsField {
  const char* name;
  TimeStatsFieldKind kind;
  // True for durations in seconds; false for counts, flags and the ratio cv.
  bool seconds;
  // The member of `kind`; the other two are null.
  std::uint64_t TimeStats::*integer;
  double TimeStats::*number;
  bool TimeStats::*boolean;

  static constexpr TimeStatsField integer_field(const char* name,
                                                std::uint64_t TimeStats::*member) {
    return {name, TimeStatsFieldKind::kInteger, false, member, nullptr, nullptr};
  }
  static constexpr TimeStatsField seconds_field(const char* name, double TimeStats::*member) {
    return {name, TimeStatsFieldKind::kDouble, true, nullptr, member, nullptr};
  }
  static constexpr TimeStatsField ratio_field(const char* name, double TimeStats::*member) {
    return {name, TimeStatsFieldKind::kDouble, false, nullptr, member, nullptr};
  }
  static constexpr TimeStatsField flag_field(const char* name, bool TimeStats::*member) {
    return {name, TimeStatsFieldKind::kBoolean, false, nullptr, nullptr, member};
  }

  // The field of `stats` as a double (a count converted, a flag 0 or 1).
  double value(const TimeStats& stats) const {
    switch (kind) {
      case TimeStatsFieldKind::kInteger:
        return static_cast<double>(stats.*integer);
      case TimeStatsFieldKind::kDouble:
        return stats.*number;
      case TimeStatsFieldKind::kBoolean:
        return stats.*boolean ? 1.0 : 0.0;
    }
    return TimeStats::kNaN;
  }
};

inline constexpr TimeStatsField kTimeStatsFields[] = {
    TimeStatsField::integer_field("count", &TimeStats::count),
    TimeStatsField::seconds_field("total", &TimeStats::total),
    TimeStatsField::seconds_field("min", &TimeStats::min),
    TimeStatsField::seconds_field("mean", &TimeStats::mean),
    TimeStatsField::seconds_field("median", &TimeStats::median),
    TimeStatsField::seconds_field("max", &TimeStats::max),
    TimeStatsField::seconds_field("stdev", &TimeStats::stdev),
    TimeStatsField::seconds_field("p5", &TimeStats::p5),
    TimeStatsField::seconds_field("p25", &TimeStats::p25),
    TimeStatsField::seconds_field("p75", &TimeStats::p75),
    TimeStatsField::seconds_field("p95", &TimeStats::p95),
    TimeStatsField::seconds_field("p99", &TimeStats::p99),
    TimeStatsField::ratio_field("cv", &TimeStats::cv),
    TimeStatsField::seconds_field("median_ci_low", &TimeStats::median_ci_low),
    TimeStatsField::seconds_field("median_ci_high", &TimeStats::median_ci_high),
    TimeStatsField::integer_field("warmup_excluded", &TimeStats::warmup_excluded),
    TimeStatsField::flag_field("approximate", &TimeStats::approximate),
};

namespace stats::detail {
// sizeof(TimeStats) if it held exactly the fields of kTimeStatsFields (no padding but the tail).
constexpr std::size_t time_stats_listed_size() {
  std::size_t size = 0;
  for (const TimeStatsField& f : kTimeStatsFields) {
    size += f.kind == TimeStatsFieldKind::kInteger  ? sizeof(std::uint64_t)
            : f.kind == TimeStatsFieldKind::kDouble ? sizeof(double)
                                                    : sizeof(bool);
  }
  return (size + alignof(TimeStats) - 1) / alignof(TimeStats) * alignof(TimeStats);
}
}  // namespace stats::detail
static_assert(sizeof(TimeStats) == stats::detail::time_stats_listed_size(),
              "TimeStats has a field that kTimeStatsFields does not list (or new padding)");

// Statistics of plain durations in seconds (all of them; no warm-up).
TimeStats compute_time_stats(const std::vector<double>& seconds);

}  // namespace trainscope

#endif  // TRAINSCOPE_STATS_TIME_STATS_HPP_
