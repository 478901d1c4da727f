#include "compare/contention.hpp"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::compare::detail {

namespace {

double mean_of_runs(const Side& side, const std::vector<std::size_t>& runs,
                    double SideRun::*field) {
  double sum = 0;
  for (std::size_t i : runs) {
    const double share = side.runs[i].*field;
    if (!std::isfinite(share)) return kNaN;
    sum += share;
  }
  return runs.empty() ? kNaN : sum / static_cast<double>(runs.size());
}

}  // namespace

double side_contention(const Side& side, const std::vector<std::size_t>& runs) {
  return mean_of_runs(side, runs, &SideRun::contention_share);
}

double side_step_wait(const Side& side, const std::vector<std::size_t>& runs) {
  return mean_of_runs(side, runs, &SideRun::step_wait_share);
}

bool contention_differs(const Side& a, const std::vector<std::size_t>& ia, const Side& b,
                        const std::vector<std::size_t>& ib, double confidence) {
  const auto shares = [](const Side& side, const std::vector<std::size_t>& runs) {
    std::vector<double> out;
    for (std::size_t i : runs) out.push_back(side.runs[i].contention_share);
    return out;
  };
  const std::vector<double> sa = shares(a, ia), sb = shares(b, ib);
  if (sa.size() < 2 || sb.size() < 2) return true;  // one run a side: no spread to judge by
  const stats::Welch w = stats::welch(sa, sb);
  if (!std::isfinite(w.difference)) return true;
  if (!(w.se > 0)) return w.difference != 0;
  const double t = stats::student_t_quantile(1 - (1 - confidence) / 2, w.df);
  return std::fabs(w.difference) > t * w.se;
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
  // The shares are of the whole run's time; where the waits fell is not known:
  // all in the typical step (its time scales by k) or all in the slowest ones
  // (the median unchanged). Without the wait B/A lies between the two.
  const double low = std::min(c.low, c.low * k), high = std::max(c.high, c.high * k);
  const stats::Verdict without = stats::decide(low, high, threshold);
  const std::string shares = fmt::format("A's threads waited for a CPU {} of the time, B's {}",
                                         stats::format_share(a), stats::format_share(b));
  const std::string range = fmt::format(
      "with the waiting time removed B/A lies between {:.4f} (none of the wait in the typical "
      "step) and {:.4f} (all of it), [{:.4f}, {:.4f}]",
      c.ratio, c.ratio * k, low, high);
  if (without == c.verdict) {
    return fmt::format("{}: {}; the verdict holds either way ({})", row->name, shares, range);
  }
  c.reason = fmt::format(
      "{}: a difference the interval [{:.4f}, {:.4f}] cannot tell from the "
      "code's; {}, which is {}",
      shares, c.low, c.high, range, stats::verdict_name(without));
  c.verdict = stats::Verdict::kInconclusiveContention;
  return {};
}

std::optional<std::string> apply_step_wait(double a, double b, const Row& less_wait, Row* row) {
  stats::Comparison& c = row->stats;
  const stats::Comparison& w = less_wait.stats;
  if (c.verdict != stats::Verdict::kSame && c.verdict != stats::Verdict::kSlower &&
      c.verdict != stats::Verdict::kFaster) {
    return std::nullopt;
  }
  if (w.verdict != stats::Verdict::kSame && w.verdict != stats::Verdict::kSlower &&
      w.verdict != stats::Verdict::kFaster) {
    return std::nullopt;
  }
  if (!(w.low > 0) || !std::isfinite(w.high) || !(w.ratio > 0)) return std::nullopt;
  const std::string shares =
      std::isfinite(a) && std::isfinite(b)
          ? fmt::format("A's threads waited for a CPU {} of the time, B's {}",
                        stats::format_share(a), stats::format_share(b))
          : std::string("the sides waited for a CPU differently");
  const std::string without =
      fmt::format("with each step's own wait for a CPU removed B/A = {:.4f} [{:.4f}, {:.4f}]",
                  w.ratio, w.low, w.high);
  if (w.verdict == c.verdict)
    return fmt::format("{}: {}; the verdict holds: {}, {}", row->name, shares, without,
                       stats::verdict_name(w.verdict));
  c.reason = fmt::format(
      "{}: a difference the interval [{:.4f}, {:.4f}] cannot tell from the code's; {}, which "
      "is {}",
      shares, c.low, c.high, without, stats::verdict_name(w.verdict));
  c.verdict = stats::Verdict::kInconclusiveContention;
  return std::string();
}

}  // namespace trainscope::compare::detail
