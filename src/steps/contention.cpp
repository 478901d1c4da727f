// The contention share and the step wait share, defined once (trainscope/steps/steps.hpp,
// docs/steps.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
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

ContentionShare step_wait_share(const std::vector<const RankSteps*>& ranks, std::int64_t from_ns) {
  // Per step: (its wait, its period). A merged step of the history sums both.
  std::vector<std::pair<double, double>> steps;
  for (const RankSteps* rank : ranks) {
    if (rank == nullptr || !rank->cpu_wait_measured) continue;
    for (const Step& s : rank->history) {
      if (s.start_ns < from_ns || !(s.period_s > 0) || !std::isfinite(s.cpu_wait_s)) continue;
      steps.emplace_back(std::max(0.0, s.cpu_wait_s), s.period_s);
    }
  }
  ContentionShare out;
  out.readings = steps.size();
  if (steps.empty()) return out;
  double waited = 0, period = 0;
  for (const auto& [w, p] : steps) {
    waited += w;
    period += p;
  }
  const double ratio = waited / period;
  out.share = std::min(1.0, ratio);
  if (steps.size() < 2) return out;
  // The ratio estimator's standard error: the residuals w - ratio * p over the
  // mean period.
  const double n = static_cast<double>(steps.size());
  double sum_sq = 0;
  for (const auto& [w, p] : steps) sum_sq += (w - ratio * p) * (w - ratio * p);
  const double se = std::sqrt(sum_sq / (n - 1) / n) / (period / n);
  const double t = stats::student_t_quantile(0.975, n - 1);
  out.low = std::clamp(ratio - t * se, 0.0, 1.0);
  out.high = std::clamp(ratio + t * se, 0.0, 1.0);
  return out;
}

}  // namespace trainscope::steps
