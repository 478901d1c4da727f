#include "compare/contention.hpp"

#include <cmath>

#include "fmt/format.h"
#include "trainscope/stats/format_numbers.hpp"

namespace trainscope::compare::detail {

double side_contention(const Side& side, const std::vector<std::size_t>& runs) {
  double sum = 0;
  for (std::size_t i : runs) {
    const double share = side.runs[i].contention_share;
    if (!std::isfinite(share)) return kNaN;
    sum += share;
  }
  return runs.empty() ? kNaN : sum / static_cast<double>(runs.size());
}

std::string apply_contention(double a, double b, double threshold, Row* row) {
  stats::Comparison& c = row->stats;
  if (!std::isfinite(a) || !std::isfinite(b) || !(a < 1) || !(b < 1)) return {};
  if (c.verdict != stats::Verdict::kSame && c.verdict != stats::Verdict::kSlower &&
      c.verdict != stats::Verdict::kFaster) {
    return {};
  }
  if (!(c.low > 0) || !std::isfinite(c.high) || !(c.ratio > 0)) return {};
  const double k = (1 - b) / (1 - a);
  const double half_width = std::log(c.high / c.low) / 2;
  if (std::fabs(std::log(k)) <= half_width) return {};
  const double low = c.low * k, high = c.high * k, ratio = c.ratio * k;
  const stats::Verdict without = stats::decide(low, high, threshold);
  const std::string shares = fmt::format("A's threads waited for a CPU {} of the time, B's {}",
                                         stats::format_share(a), stats::format_share(b));
  if (without == c.verdict) {
    return fmt::format(
        "{}: {}; the verdict holds with the waiting time removed (B/A = {:.4f}, "
        "[{:.4f}, {:.4f}])",
        row->name, shares, ratio, low, high);
  }
  c.reason = fmt::format(
      "{}: a difference the interval [{:.4f}, {:.4f}] cannot tell from the code's; with the "
      "waiting time removed B/A = {:.4f} ([{:.4f}, {:.4f}]) would be {}",
      shares, c.low, c.high, ratio, low, high, stats::verdict_name(without));
  c.verdict = stats::Verdict::kInconclusiveContention;
  return {};
}

}  // namespace trainscope::compare::detail
