// The contention share, defined once (trainscope/steps/steps.hpp, docs/steps.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "trainscope/stats/numbers.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {

ContentionShare contention_share(const std::vector<const RankSteps*>& ranks, std::int64_t from_ms,
                                 std::int64_t to_ms) {
  // Per reading (one sampling interval of one tree): the seconds its threads
  // waited per second of the interval.
  std::vector<double> readings;
  for (const RankSteps* rank : ranks) {
    if (rank == nullptr) continue;
    for (auto it = rank->cpu_wait_pct.lower_bound(from_ms);
         it != rank->cpu_wait_pct.end() && it->first <= to_ms; ++it) {
      if (std::isfinite(it->second)) readings.push_back(std::max(0.0, it->second) / 100);
    }
  }
  ContentionShare out;
  out.readings = readings.size();
  if (readings.empty()) return out;
  double sum = 0;
  for (double x : readings) sum += x;
  const double n = static_cast<double>(readings.size());
  const double mean = sum / n;
  out.share = std::min(1.0, mean);
  if (readings.size() < 2) return out;
  double sum_sq = 0;
  for (double x : readings) sum_sq += (x - mean) * (x - mean);
  const double se = std::sqrt(sum_sq / (n - 1) / n);
  const double t = stats::student_t_quantile(0.975, n - 1);
  out.low = std::clamp(mean - t * se, 0.0, 1.0);
  out.high = std::clamp(mean + t * se, 0.0, 1.0);
  return out;
}

}  // namespace trainscope::steps
