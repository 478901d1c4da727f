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
  // Per reading (one tick of one tree): its wait and its wait plus CPU.
  std::vector<std::pair<double, double>> readings;
  for (const RankSteps* rank : ranks) {
    if (rank == nullptr) continue;
    for (auto it = rank->cpu_wait_pct.lower_bound(from_ms);
         it != rank->cpu_wait_pct.end() && it->first <= to_ms; ++it) {
      const auto cpu = rank->cpu_pct.find(it->first);
      if (cpu == rank->cpu_pct.end()) continue;
      const double wait = std::max(0.0, it->second);
      const double demand = wait + std::max(0.0, cpu->second);
      if (!std::isfinite(demand) || demand <= 0) continue;  // asleep throughout
      readings.emplace_back(wait, demand);
    }
  }
  ContentionShare out;
  out.readings = readings.size();
  if (readings.empty()) return out;
  double wait = 0, demand = 0;
  for (const auto& [w, d] : readings) {
    wait += w;
    demand += d;
  }
  out.share = wait / demand;
  const std::size_t n = readings.size();
  if (n < 2) return out;
  // The ratio estimator's standard error: residuals of each reading's wait
  // from the pooled share times its demand.
  double sum_sq = 0;
  for (const auto& [w, d] : readings) sum_sq += (w - out.share * d) * (w - out.share * d);
  const double mean_demand = demand / static_cast<double>(n);
  const double se =
      std::sqrt(sum_sq / static_cast<double>(n - 1) / static_cast<double>(n)) / mean_demand;
  const double t = stats::student_t_quantile(0.975, static_cast<double>(n - 1));
  out.low = std::clamp(out.share - t * se, 0.0, 1.0);
  out.high = std::clamp(out.share + t * se, 0.0, 1.0);
  return out;
}

}  // namespace trainscope::steps
