// The floating-point fields of TimeStats, by name and in output order: the
// stats JSON and CSV writers and the summary reader share this list (internal).
#ifndef TRAINSCOPE_SRC_STATS_FIELDS_HPP_
#define TRAINSCOPE_SRC_STATS_FIELDS_HPP_

#include "trainscope/stats/time_stats.hpp"

namespace trainscope::detail {

struct StatsDoubleField {
  const char* name;
  double TimeStats::*member;
};

inline constexpr StatsDoubleField kStatsDoubleFields[] = {
    {"total", &TimeStats::total},
    {"min", &TimeStats::min},
    {"mean", &TimeStats::mean},
    {"median", &TimeStats::median},
    {"max", &TimeStats::max},
    {"stdev", &TimeStats::stdev},
    {"p5", &TimeStats::p5},
    {"p25", &TimeStats::p25},
    {"p75", &TimeStats::p75},
    {"p95", &TimeStats::p95},
    {"p99", &TimeStats::p99},
    {"cv", &TimeStats::cv},
    {"median_ci_low", &TimeStats::median_ci_low},
    {"median_ci_high", &TimeStats::median_ci_high},
};

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_STATS_FIELDS_HPP_
