// The warm-up rule and the run-wide data-wait share (trainscope/steps/warmup.hpp).
#include "trainscope/steps/warmup.hpp"

namespace trainscope::steps {

std::int64_t warmup_steps(const RankSteps& rank) {
  return rank.steps > static_cast<std::uint64_t>(kWarmupSteps) ? kWarmupSteps : 0;
}

void DataWait::add(const Step& step) {
  wait_s += step.data_wait_s();
  period_s += step.period_s;
  steps += step.steps;
}

}  // namespace trainscope::steps
