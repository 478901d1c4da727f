// The warm-up rule and the data-wait share of a set of steps
// (trainscope/steps/warmup.hpp): one for every view.
#include "trainscope/steps/warmup.hpp"

#include "gtest/gtest.h"

namespace trainscope::steps {
namespace {

Step step_of(std::int64_t index, double period_s, double wait_s) {
  Step s;
  s.step = index;
  s.period_s = period_s;
  s.cpu_s[static_cast<std::size_t>(Phase::kDataWait)] = wait_s;
  return s;
}

TEST(Warmup, TheFirstFiveStepsUnlessTheRankHasNoMore) {
  RankSteps rank;
  rank.steps = 6;
  EXPECT_EQ(warmup_steps(rank), kWarmupSteps);
  EXPECT_TRUE(is_warmup(step_of(4, 1, 0), warmup_steps(rank)));
  EXPECT_FALSE(is_warmup(step_of(5, 1, 0), warmup_steps(rank)));
  // A short run keeps every step: a share over none would say nothing.
  rank.steps = static_cast<std::uint64_t>(kWarmupSteps);
  EXPECT_EQ(warmup_steps(rank), 0);
  EXPECT_FALSE(is_warmup(step_of(0, 1, 0), warmup_steps(rank)));
}

TEST(Warmup, TheDataWaitShareIsTheSummedWaitOverTheSummedPeriods) {
  DataWait w;
  EXPECT_EQ(w.share(), 0);  // no period: no share
  w.add(step_of(5, 0.010, 0.001));
  w.add(step_of(6, 0.030, 0.009));
  EXPECT_EQ(w.steps, 2u);
  EXPECT_NEAR(w.share(), 0.010 / 0.040, 1e-12);  // not the mean of 10% and 30%
}

}  // namespace
}  // namespace trainscope::steps
