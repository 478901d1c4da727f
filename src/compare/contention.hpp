// CPU contention in a comparison (docs/compare-statistics.md): each side's
// contention share, and the rule that makes a verdict `inconclusive
// (contention)` when the sides waited for a CPU differently enough to explain it.
#ifndef TRAINSCOPE_SRC_COMPARE_CONTENTION_HPP_
#define TRAINSCOPE_SRC_COMPARE_CONTENTION_HPP_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "trainscope/compare/compare.hpp"

namespace trainscope::compare::detail {

// The mean of the runs' contention shares; NaN when any of them lacks it.
double side_contention(const Side& side, const std::vector<std::size_t>& runs);
// The mean of the runs' step wait shares; NaN when any of them lacks it.
double side_step_wait(const Side& side, const std::vector<std::size_t>& runs);

// Whether the sides' contention shares differ beyond their runs' spread: with
// two runs a side or more, a Welch interval (at `confidence`) of the
// difference of the runs' mean shares that excludes 0; one run a side cannot
// show a spread: true (the shares are taken as they are). A run's share is
// read once a second, so a short run's (a few readings) varies from run to
// run as much as a burner's share: the rule below would otherwise turn runs
// of one loaded machine `inconclusive (contention)` for that noise.
bool contention_differs(const Side& a, const std::vector<std::size_t>& ia, const Side& b,
                        const std::vector<std::size_t>& ib, double confidence);

// A row timing the CPU, decided (same, slower, faster), with the sides'
// contention shares a and b known: removing the waiting time multiplies B/A by
// k = (1 - b) / (1 - a) when all of it fell in the typical step, and by 1 when
// all of it fell in the slowest steps (the median unchanged); the shares, of
// the whole run, do not say which. When |log k| is within the half-width of
// the row's log interval the contention cannot have made the verdict: nothing
// changes. Otherwise the verdict is decided again on the union of the interval
// and the interval times k: the same verdict stands (the returned note says
// so), another one makes the row kInconclusiveContention with a reason naming
// both shares and the range. "" when nothing is to say.
std::string apply_contention(double a, double b, double threshold, Row* row);

// The step row (the overall verdict) where both sides recorded each step's own
// run-queue wait (`less_wait`: the kStepLessWait row, the step less its
// wait, compared as any row): the verdict stands when the step less its wait
// decides the same (the note says so, with its B/A); otherwise the row
// becomes kInconclusiveContention naming both shares (a, b: NaN where not
// sampled) and what the steps less their waits say. Nothing is changed and
// nothing said (nullopt) where `less_wait` has no interval or `row` no
// verdict of same, slower or faster: apply_contention's bound then.
std::optional<std::string> apply_step_wait(double a, double b, const Row& less_wait, Row* row);

}  // namespace trainscope::compare::detail

#endif  // TRAINSCOPE_SRC_COMPARE_CONTENTION_HPP_
