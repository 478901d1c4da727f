// Text, table, JSON and CSV renderings of a timer's Summary.
#ifndef TRAINSCOPE_STATS_STATS_FORMAT_HPP_
#define TRAINSCOPE_STATS_STATS_FORMAT_HPP_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/stats/summary.hpp"

namespace trainscope {

enum class StatsFormat {
  kDeep500,  // Deep500's exact text (seconds, %.5f), the default
  kTable,  // readable: automatic units, count, total, median with CI, p95; CPU and GPU side by side
  kJson,
  kCsv,
};

std::string format_summary(const Summary& summary, StatsFormat format);
// ".txt" -> kDeep500, ".json" -> kJson, ".csv" -> kCsv; an error naming the
// path and its extension otherwise.
absl::StatusOr<StatsFormat> stats_format_for_path(std::string_view path);
// "deep500", "table", "json", "csv".
absl::StatusOr<StatsFormat> parse_stats_format(std::string_view name);
// A duration in seconds with a unit that keeps 3-4 significant digits:
// "812 ns", "12.4 us", "3.21 ms", "1.234 s". NaN -> "-".
std::string format_duration(double seconds);

}  // namespace trainscope

#endif  // TRAINSCOPE_STATS_STATS_FORMAT_HPP_
