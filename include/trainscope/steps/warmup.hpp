// The warm-up rule and the run-wide data-wait share, decided once for every
// view (docs/steps.md, "Warm-up"): the diagnosis, stalls, the report and
// Python's Run.steps read a run's data-wait share through these, so one run
// shows one figure.
#ifndef TRAINSCOPE_STEPS_WARMUP_HPP_
#define TRAINSCOPE_STEPS_WARMUP_HPP_

#include <cstdint>

#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {

// A rank's first kWarmupSteps steps are its warm-up (compilation, autotuning,
// the loader's workers starting): every figure over a run's steps leaves them
// out (the diagnosis's scopes, whose Thresholds::warmup_steps defaults to it;
// stalls' shares of its passes and of the run; the report's), unless the rank
// has no step past them: then it keeps every step (stalls and the report show
// a short run's share; the diagnosis calls it NO-DATA). Per-step series keep
// every step: compare's rows (which drop their own warm-up before their
// statistics), RankSteps::history, Python's Run.steps (its `warmup` column).
inline constexpr std::int64_t kWarmupSteps = 5;

// How many of `rank`'s first steps are warm-up under the rule above:
// kWarmupSteps, or 0 when the rank has no more finalized steps than that.
std::int64_t warmup_steps(const RankSteps& rank);
// Whether `step` is one of the first `warmup` steps of its rank.
inline bool is_warmup(const Step& step, std::int64_t warmup) { return step.step < warmup; }

// The data wait of a set of steps: the summed data wait over the summed
// periods (the "data-wait share" of docs/steps.md).
struct DataWait {
  double wait_s = 0;
  double period_s = 0;
  std::uint64_t steps = 0;

  void add(const Step& step);
  // wait_s / period_s; 0 without a period.
  double share() const { return period_s > 0 ? wait_s / period_s : 0; }
};

}  // namespace trainscope::steps

#endif  // TRAINSCOPE_STEPS_WARMUP_HPP_
