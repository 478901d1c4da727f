// The pure step on hand-made inputs: each label from steps whose truth is
// known by construction, with seeded noise, and none where there is nothing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::IsEmpty;
using ::testing::Not;

constexpr std::size_t P(Phase p) { return static_cast<std::size_t>(p); }

// Steps of one rank: each phase's mean seconds, jittered by `noise` (relative, uniform).
struct Shape {
  double data_wait = 0, forward = 0, backward = 0, optimizer = 0, comm = 0, rest = 0.001;
  double gpu_forward = -1;  // < 0: not GPU-timed
  double noise = 0.05;
  double growth_per_step = 0;  // added to forward, seconds per step
  double gpu_backward = -1;    // < 0: not GPU-timed
  double gpu_util_pct = -1;    // >= 0: an NVML reading of this (jittered) every step
  double gpu_union = -1;       // >= 0: the steps' measured device union (Step::gpu_union_s)
};

RankInput rank_input(std::uint32_t rank, std::size_t steps, const Shape& shape,
                     std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - shape.noise, 1 + shape.noise);
  RankInput in;
  in.rank = rank;
  in.host = "h";
  in.step_key = "BATCH";
  in.cpu_measured[P(Phase::kDataWait)] = shape.data_wait > 0;
  in.cpu_measured[P(Phase::kForward)] = shape.forward > 0;
  in.cpu_measured[P(Phase::kBackward)] = shape.backward > 0;
  in.cpu_measured[P(Phase::kOptimizer)] = shape.optimizer > 0;
  in.cpu_measured[P(Phase::kComm)] = shape.comm > 0;
  in.gpu_measured[P(Phase::kForward)] = shape.gpu_forward >= 0;
  in.gpu_measured[P(Phase::kBackward)] = shape.gpu_backward >= 0;
  std::int64_t t = 1'000'000'000'000'000'000;
  for (std::size_t i = 0; i < steps; ++i) {
    StepSample s;
    s.step = static_cast<std::int64_t>(i);
    s.start_ns = t;
    s.cpu_s[P(Phase::kDataWait)] = shape.data_wait * jitter(rng);
    s.cpu_s[P(Phase::kForward)] =
        shape.forward * jitter(rng) + shape.growth_per_step * static_cast<double>(i);
    s.cpu_s[P(Phase::kBackward)] = shape.backward * jitter(rng);
    s.cpu_s[P(Phase::kOptimizer)] = shape.optimizer * jitter(rng);
    s.cpu_s[P(Phase::kComm)] = shape.comm * jitter(rng);
    s.cpu_s[P(Phase::kRest)] = shape.rest * jitter(rng);
    if (shape.gpu_forward >= 0) s.gpu_s[P(Phase::kForward)] = shape.gpu_forward * jitter(rng);
    if (shape.gpu_backward >= 0) s.gpu_s[P(Phase::kBackward)] = shape.gpu_backward * jitter(rng);
    s.gpu_busy_s = s.gpu_s[P(Phase::kForward)] + s.gpu_s[P(Phase::kBackward)];
    if (shape.gpu_union >= 0) {
      s.gpu_union_s = shape.gpu_union * jitter(rng);
      s.gpu_rows_placed = 2;
    }
    if (shape.gpu_util_pct >= 0) {
      in.gpu_util_pct.push_back(
          Reading{static_cast<double>(i), shape.gpu_util_pct * jitter(rng), t / 1'000'000});
    }
    for (double v : s.cpu_s) s.period_s += v;
    // COMM rows (timed by hand): communication the step waits for.
    s.comm_waited_s = s.cpu_s[P(Phase::kComm)];
    s.settle_comm();
    t += static_cast<std::int64_t>(s.period_s * 1e9);
    in.steps.push_back(s);
  }
  in.cpu_measured[P(Phase::kCommExposed)] = shape.comm > 0;
  return in;
}

Inputs one_rank(const Shape& shape, std::size_t steps = 200) {
  Inputs in;
  in.ranks.push_back(rank_input(0, steps, shape, 1));
  return in;
}

std::vector<std::string> names(const Scope& s) {
  std::vector<std::string> out;
  for (const Label& l : s.labels) out.push_back(std::string(label_name(l.name)));
  return out;
}

// Forward takes share_first of each step of the first nine tenths,
// share_second of the last tenth's (the rest untimed).
Inputs forward_shares(double share_first, double share_second, std::size_t steps = 200) {
  RankInput in;
  in.host = "h";
  in.step_key = "BATCH";
  in.cpu_measured[P(Phase::kForward)] = true;
  std::int64_t t = 1'000'000'000'000'000'000;
  for (std::size_t i = 0; i < steps; ++i) {
    StepSample s;
    s.step = static_cast<std::int64_t>(i);
    s.start_ns = t;
    s.period_s = 0.01;
    s.cpu_s[P(Phase::kForward)] = 0.01 * (i < steps * 9 / 10 ? share_first : share_second);
    s.cpu_s[P(Phase::kRest)] = std::max(0.0, s.period_s - s.cpu_s[P(Phase::kForward)]);
    t += 10'000'000;
    in.steps.push_back(s);
  }
  return Inputs{{in}, {}};
}

// Every share and its interval lie in [0, 1] (issue 36: "compute takes 94.1%
// [86.6%, 101.6%]"): the batch-means interval of a share near 1 is clipped
// there, without a note (it is the approximation, not the data).
TEST(Conclude, ASharesIntervalNeverLeavesZeroToOne) {
  // Batch means: nine of 1.0 and one of 0.5, 95% [83.7%, 106.3%] unclipped.
  const Scope s = conclude(forward_shares(1.0, 0.5), Thresholds{}, "run");
  const Label* compute = s.find(LabelName::kComputeBound);
  ASSERT_NE(compute, nullptr);
  EXPECT_NEAR(compute->value.value, 0.95, 1e-9);
  EXPECT_EQ(compute->value.high, 1.0);
  EXPECT_GT(compute->value.low, 0.5);
  EXPECT_THAT(compute->evidence, ::testing::HasSubstr("95.0% ["));
  EXPECT_THAT(compute->evidence, ::testing::HasSubstr(", 100.0%]"));
  EXPECT_THAT(s.notes, Not(::testing::Contains(::testing::HasSubstr("more than the whole step"))));
}

// Phases the data puts past the whole step (regions that overlap) are shown
// as 100%, and a note says why, naming them.
TEST(Conclude, PhasesLongerThanTheStepAreClippedAndNamed) {
  const Scope s = conclude(forward_shares(1.3, 1.3), Thresholds{}, "run");
  const Label* compute = s.find(LabelName::kComputeBound);
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(compute->value.value, 1.0);
  for (const PhaseRow& row : s.phases) EXPECT_LE(row.share, 1.0) << phase_name(row.phase);
  EXPECT_THAT(s.notes, ::testing::Contains(::testing::HasSubstr(
                           "the compute phases: 130.0% of the step, more than the whole step")));
}

TEST(Conclude, NoRankIsNoData) {
  const Scope s = conclude(Inputs{}, Thresholds{}, "run");
  ASSERT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kNoData))});
  EXPECT_THAT(s.labels[0].evidence, ::testing::HasSubstr("no rank"));
}

TEST(Conclude, TooFewStepsIsNoDataNamingTheCount) {
  const Scope s = conclude(one_rank(Shape{.forward = 0.01}, 5), Thresholds{}, "run");
  ASSERT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kNoData))});
  EXPECT_THAT(s.labels[0].evidence, ::testing::HasSubstr("5 steps"));
}

TEST(Conclude, NoStepKeyIsNoDataSayingHowToTimeSteps) {
  Inputs in;
  in.ranks.push_back(RankInput{});
  const Scope s = conclude(in, Thresholds{}, "run");
  ASSERT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kNoData))});
  EXPECT_THAT(s.labels[0].evidence, ::testing::HasSubstr("--phase step=KEY"));
}

TEST(Conclude, AnAutoRunIsNeverAdvisedToUseAuto) {
  // Issue 37: an --auto run that found no step was told to run with --auto.
  Inputs in;
  in.ranks.push_back(RankInput{});
  in.facts.auto_instrumented = true;
  const Scope s = conclude(in, Thresholds{}, "run");
  ASSERT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kNoData))});
  EXPECT_THAT(s.labels[0].evidence, ::testing::HasSubstr("--auto found no training step"));
  EXPECT_THAT(s.labels[0].next_step, Not(::testing::HasSubstr("--auto")));
  in.facts.auto_instrumented = false;
  EXPECT_THAT(conclude(in, Thresholds{}, "run").labels[0].next_step,
              ::testing::HasSubstr("trainscope run --auto"));
  // Nor in a note: a loop without a DataLoader has no data wait to time.
  Inputs steps = one_rank(Shape{.forward = 0.004, .backward = 0.004});
  steps.facts.auto_instrumented = true;
  for (const std::string& note : conclude(steps, Thresholds{}, "run").notes) {
    EXPECT_THAT(note, Not(::testing::HasSubstr("or --auto"))) << note;
  }
}

TEST(Conclude, ComputeBoundAdviceFitsTheDevices) {
  // Issue 37: a CPU-only run was advised --nsys and mixed precision.
  Inputs in = one_rank(Shape{.forward = 0.004, .backward = 0.004});
  in.facts.gpu_seen = false;
  const Scope cpu_only = conclude(in, Thresholds{}, "run");  // outlives the label it holds
  const Label* cpu = cpu_only.find(LabelName::kComputeBound);
  ASSERT_NE(cpu, nullptr);
  EXPECT_THAT(cpu->next_step, Not(::testing::HasSubstr("--nsys")));
  EXPECT_THAT(cpu->next_step, Not(::testing::HasSubstr("mixed precision")));
  EXPECT_THAT(cpu->next_step, ::testing::HasSubstr("CPU"));
  in.facts.gpu_seen = true;
  const Scope gpu = conclude(in, Thresholds{}, "run");
  ASSERT_NE(gpu.find(LabelName::kComputeBound), nullptr);
  EXPECT_THAT(gpu.find(LabelName::kComputeBound)->next_step, ::testing::HasSubstr("--nsys"));
}

TEST(Conclude, ALowMfuIsSaidOnComputeBound) {
  // Issue 42: the ledger's MFU below mfu_low on a compute-bound job.
  Inputs in = one_rank(Shape{.forward = 0.004, .backward = 0.004});
  Scope scope = conclude(in, Thresholds{}, "run");
  ASSERT_NE(scope.find(LabelName::kComputeBound), nullptr);
  const std::string evidence = scope.find(LabelName::kComputeBound)->evidence;
  steps::Ledger ledger;
  ledger.mfu = 0.12;
  ledger.peak_source = "H100 bf16 dense";
  ledger.device = "NVIDIA H100 80GB HBM3";
  note_ledger(scope, ledger, Thresholds{});
  const Label* compute = scope.find(LabelName::kComputeBound);
  EXPECT_EQ(compute->evidence, evidence + "; MFU 12.0% of H100 bf16 dense (below mfu_low 30%)");
  EXPECT_THAT(compute->next_step, ::testing::HasSubstr("far from the device's peak"));
  EXPECT_THAT(compute->next_step, ::testing::HasSubstr("bf16"));
  // At or above the threshold, without an MFU, or on another label: nothing.
  Thresholds low;
  low.mfu_low = 0.10;
  Scope again = conclude(in, Thresholds{}, "run");
  note_ledger(again, ledger, low);
  ledger.mfu = steps::kNoRate;
  note_ledger(again, ledger, Thresholds{});
  EXPECT_EQ(again.find(LabelName::kComputeBound)->evidence, evidence);
  Scope input =
      conclude(one_rank(Shape{.data_wait = 0.006, .forward = 0.002}), Thresholds{}, "run");
  ASSERT_EQ(input.find(LabelName::kComputeBound), nullptr);
  const std::vector<Label> before = input.labels;
  ledger.mfu = 0.01;
  note_ledger(input, ledger, Thresholds{});
  ASSERT_EQ(input.labels.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(input.labels[i].evidence, before[i].evidence);
}

TEST(Conclude, InputBoundWithTheBuiltInShare) {
  // 40% data wait.
  const Scope s = conclude(
      one_rank(Shape{.data_wait = 0.004, .forward = 0.003, .backward = 0.003, .rest = 0.0}),
      Thresholds{}, "run");
  const Label* l = s.find(LabelName::kInputBound);
  ASSERT_NE(l, nullptr) << names(s).size();
  EXPECT_NEAR(l->value.value, 0.4, 0.02);
  EXPECT_LT(l->value.low, l->value.value);
  EXPECT_GT(l->value.high, l->value.value);
  EXPECT_GT(l->value.low, 0.2);
  EXPECT_EQ(l->threshold_name, "input_bound_share");
  EXPECT_FALSE(l->next_step.empty());
  EXPECT_EQ(s.find(LabelName::kComputeBound), nullptr);
}

TEST(Conclude, ComputeBoundNamesTheLargestPhaseAndNothingElse) {
  const Scope s = conclude(
      one_rank(Shape{.data_wait = 0.0002, .forward = 0.003, .backward = 0.006, .optimizer = 0.001}),
      Thresholds{}, "run");
  EXPECT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kComputeBound))});
  EXPECT_EQ(s.labels[0].kind, LabelKind::kBackward);
  EXPECT_GT(s.labels[0].value.low, 0.5);
  // The phase table holds every timed phase and the rest.
  ASSERT_EQ(s.phases.size(), 5u);
  EXPECT_EQ(s.phases.back().phase, Phase::kRest);
  EXPECT_NEAR(s.phases[P(Phase::kForward) - 1].median_s, 0.003, 0.0003);
}

TEST(Conclude, WaitHeavyWhenCommunicationAndRestTakeTheStep) {
  const Scope s =
      conclude(one_rank(Shape{.forward = 0.002, .backward = 0.002, .comm = 0.001, .rest = 0.005}),
               Thresholds{}, "run");
  ASSERT_NE(s.find(LabelName::kWaitHeavy), nullptr);
  EXPECT_NEAR(s.find(LabelName::kWaitHeavy)->value.value, 0.6, 0.03);
  EXPECT_EQ(s.find(LabelName::kCommBound), nullptr);  // 10% waited for: under the threshold
}

TEST(Conclude, BalancedWhenNoPartDominates) {
  const Scope s = conclude(one_rank(Shape{.data_wait = 0.0016,
                                          .forward = 0.0024,
                                          .backward = 0.0023,
                                          .comm = 0.0012,
                                          .rest = 0.0025}),
                           Thresholds{}, "run");
  EXPECT_EQ(names(s), std::vector<std::string>{std::string(label_name(LabelName::kBalanced))});
}

// Two ranks of a DDP job: backward holds the all-reduce of its buckets; what
// the step waits for of it (comm_exposed) is `exposed`. Rank 1 enters each
// all-reduce `late` seconds after rank 0.
Inputs ddp(double exposed, double late, std::size_t steps = 200) {
  Inputs in;
  for (std::uint32_t r = 0; r < 2; ++r) {
    RankInput rank = rank_input(r, steps, Shape{.forward = 0.004, .backward = 0.004}, 20 + r);
    rank.cpu_measured[P(Phase::kComm)] = true;
    rank.cpu_measured[P(Phase::kCommExposed)] = true;
    CollectiveInput reduce{"COMM/all_reduce/world", steps, 0, {}};
    CollectiveInput broadcast{"COMM/broadcast/group1", 1, 0.0001, {}};
    broadcast.rows.emplace_back(rank.steps.front().start_ns, 100'000);
    for (StepSample& s : rank.steps) {
      // The all-reduce: 3 ms of backward, and `exposed` more after its compute.
      s.cpu_s[P(Phase::kBackward)] += exposed;
      s.period_s += exposed;
      s.collectives_s = 0.003 + exposed;
      s.ddp_exposed_s = exposed;
      s.settle_comm();
      // Every rank's i-th all-reduce at one time of a common schedule, rank 1 late.
      const std::int64_t start = 1'000'000'000'000'000'000 + s.step * 10'000'000 +
                                 (r == 1 ? static_cast<std::int64_t>(late * 1e9) : 0);
      reduce.rows.emplace_back(start, static_cast<std::int64_t>((0.003 + exposed) * 1e9));
      reduce.seconds += 0.003 + exposed;
    }
    rank.collectives = {broadcast, reduce};
    in.ranks.push_back(std::move(rank));
  }
  return in;
}

TEST(Conclude, CommBoundWhenTheStepWaitsForCommunicationNamingCollectiveAndLateRank) {
  const Scope s = conclude(ddp(/*exposed=*/0.004, /*late=*/0.002), Thresholds{}, "run");
  ASSERT_FALSE(s.labels.empty());
  EXPECT_EQ(s.labels[0].name, LabelName::kCommBound);         // the primary label
  EXPECT_NEAR(s.labels[0].value.value, 0.004 / 0.013, 0.03);  // of 9 ms + 4 ms
  EXPECT_THAT(s.labels[0].evidence, ::testing::HasSubstr("all_reduce on group world"));
  ASSERT_TRUE(s.labels[0].rank.has_value());
  EXPECT_EQ(*s.labels[0].rank, 1u);
  ASSERT_EQ(s.collectives.size(), 2u);
  const CollectiveRow& c = s.collectives[0];  // the most time first
  EXPECT_EQ(c.key, "COMM/all_reduce/world");
  EXPECT_EQ(c.op, "all_reduce");
  EXPECT_EQ(c.group, "world");
  EXPECT_EQ(c.matched, 200u);
  ASSERT_TRUE(c.last_rank.has_value());
  EXPECT_EQ(*c.last_rank, 1u);
  EXPECT_DOUBLE_EQ(c.last_share, 1.0);
  EXPECT_NEAR(c.lag_s, 0.002, 1e-6);
  EXPECT_NEAR(c.median_s, 0.007, 1e-6);
  EXPECT_EQ(s.collectives[1].group, "group1");
  // The comm and comm_exposed phases are in the table.
  bool comm = false, exposed = false;
  for (const PhaseRow& p : s.phases) {
    comm = comm || p.phase == Phase::kComm;
    exposed = exposed || p.phase == Phase::kCommExposed;
  }
  EXPECT_TRUE(comm && exposed);
}

TEST(Conclude, ARankWaitingInBackwardForALateRankIsNoStraggler) {
  // Rank 1 enters each all-reduce 4 ms late (an untimed lag, in its rest);
  // rank 0's backward waits for it: DDP's exposed part, not rank 0's compute.
  Inputs in = ddp(/*exposed=*/0.003, /*late=*/0.004);
  for (StepSample& s : in.ranks[0].steps) {
    s.cpu_s[P(Phase::kBackward)] += 0.004;
    s.period_s += 0.004;
    s.ddp_exposed_s += 0.004;
    s.collectives_s += 0.004;
    s.settle_comm();
  }
  for (StepSample& s : in.ranks[1].steps) {
    s.cpu_s[P(Phase::kRest)] += 0.004;
    s.period_s += 0.004;
  }
  const Scope s = conclude(in, Thresholds{}, "run");
  EXPECT_EQ(s.find(LabelName::kStraggler), nullptr) << s.labels.size();
  ASSERT_FALSE(s.collectives.empty());
  EXPECT_EQ(s.collectives[0].last_rank, 1u);
  EXPECT_NEAR(s.collectives[0].lag_s, 0.004, 1e-6);
  const Label* comm = s.find(LabelName::kCommBound);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->rank, 1u);
}

TEST(Conclude, CommunicationOverlappedWithBackwardIsNoCommBound) {
  const Scope s = conclude(ddp(/*exposed=*/0.0002, /*late=*/0.0), Thresholds{}, "run");
  EXPECT_EQ(s.find(LabelName::kCommBound), nullptr);
  ASSERT_FALSE(s.labels.empty());
  EXPECT_EQ(s.labels[0].name, LabelName::kComputeBound);
  ASSERT_FALSE(s.collectives.empty());
  EXPECT_GT(s.collectives[0].seconds, 0.5);  // communication there is, hidden
}

TEST(Conclude, RanksArrivingTogetherNameNoLateRank) {
  const Scope s = conclude(ddp(/*exposed=*/0.004, /*late=*/0.0), Thresholds{}, "run");
  const Label* comm = s.find(LabelName::kCommBound);
  ASSERT_NE(comm, nullptr);
  EXPECT_FALSE(comm->rank.has_value());  // no lag: nobody to wait for
  EXPECT_THAT(comm->evidence, Not(::testing::HasSubstr("enters it last")));
}

TEST(Conclude, ThresholdsAreOverridable) {
  const Inputs in = one_rank(Shape{.data_wait = 0.002, .forward = 0.008});  // 20% wait
  Thresholds t;
  EXPECT_EQ(conclude(in, t, "run").find(LabelName::kInputBound), nullptr);
  ASSERT_TRUE(t.set("input_bound_share", 0.1).ok());
  EXPECT_NE(conclude(in, t, "run").find(LabelName::kInputBound), nullptr);
}

TEST(Conclude, ComputeStragglerIsTheRankSlowInForwardNotTheOneWaitingInBackward) {
  // Rank 1's forward takes 4 ms longer; the others wait for it in backward
  // (DDP's all-reduce), where their excess shows.
  Inputs in;
  for (std::uint32_t r = 0; r < 4; ++r) {
    Shape shape{.data_wait = 0.0005, .forward = 0.005, .backward = 0.005, .optimizer = 0.001};
    if (r == 1) shape.forward += 0.004;
    if (r != 1) shape.backward += 0.004;
    in.ranks.push_back(rank_input(r, 200, shape, 10 + r));
  }
  const Scope s = conclude(in, Thresholds{}, "run");
  const Label* l = s.find(LabelName::kStraggler);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kCompute);
  ASSERT_TRUE(l->rank.has_value());
  EXPECT_EQ(*l->rank, 1u);
  EXPECT_NEAR(l->value.value, 0.004, 0.0008);
  EXPECT_THAT(l->evidence, ::testing::HasSubstr("forward"));
  // The phase table names rank 1 as the worst in forward, with its skew.
  for (const PhaseRow& p : s.phases) {
    if (p.phase == Phase::kForward) {
      EXPECT_EQ(p.worst_rank, 1u);
      EXPECT_NEAR(p.skew, 0.8, 0.1);
    }
  }
}

TEST(Conclude, TheLargestLagWhereTheRankIsBehindIsTheCause) {
  // Rank 1 also waits a little longer for data (its loader prefetches less),
  // but its forward's 10 ms is the cause; rank 0 waits in backward.
  Inputs in;
  for (std::uint32_t r = 0; r < 2; ++r) {
    Shape shape{.data_wait = 0.002, .forward = 0.006, .backward = 0.006, .optimizer = 0.0002};
    if (r == 1) {
      shape.data_wait += 0.0025;
      shape.forward += 0.010;
    } else {
      shape.backward += 0.0125;
    }
    in.ranks.push_back(rank_input(r, 150, shape, 40 + r));
  }
  const Scope s = conclude(in, Thresholds{}, "run");
  const Label* l = s.find(LabelName::kStraggler);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kCompute);
  EXPECT_EQ(*l->rank, 1u);
  EXPECT_NEAR(l->value.value, 0.010, 0.001);
}

TEST(Conclude, InputStragglerIsTheRankWaitingLongerForData) {
  Inputs in;
  for (std::uint32_t r = 0; r < 2; ++r) {
    Shape shape{.data_wait = 0.001, .forward = 0.004, .backward = 0.004, .comm = 0.0005};
    if (r == 1) shape.data_wait += 0.003;
    if (r == 0) shape.comm += 0.003;
    in.ranks.push_back(rank_input(r, 200, shape, 20 + r));
  }
  const Scope scope_l = conclude(in, Thresholds{}, "run");
  const Label* l = scope_l.find(LabelName::kStraggler);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kInput);
  EXPECT_EQ(*l->rank, 1u);
  EXPECT_NEAR(l->value.value, 0.003, 0.0006);
}

TEST(Conclude, EqualRanksHaveNoStraggler) {
  Inputs in;
  for (std::uint32_t r = 0; r < 8; ++r) {
    in.ranks.push_back(rank_input(r, 200, Shape{.forward = 0.004, .backward = 0.004}, 30 + r));
  }
  EXPECT_EQ(conclude(in, Thresholds{}, "run").find(LabelName::kStraggler), nullptr);
}

TEST(Conclude, MemoryCreepSlopeWithinItsInterval) {
  Inputs in = one_rank(Shape{.forward = 0.004}, 2000);
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0, 2.0);
  // 50 MB per 1,000 steps from 1,000 MB, read every 40 steps.
  for (int step = 0; step < 2000; step += 40) {
    in.ranks[0].rss_mb.push_back(
        Reading{static_cast<double>(step), 1000 + 0.05 * step + noise(rng), step});
  }
  const Scope scope_l = conclude(in, Thresholds{}, "run");
  const Label* l = scope_l.find(LabelName::kMemoryCreep);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kHost);
  EXPECT_NEAR(l->value.value, 50, 5);
  EXPECT_LT(l->value.low, 50);
  EXPECT_GT(l->value.high, 50);
}

TEST(Conclude, FlatMemoryWithNoiseIsNoCreep) {
  Inputs in = one_rank(Shape{.forward = 0.004}, 2000);
  std::mt19937 rng(6);
  std::normal_distribution<double> noise(0, 5.0);
  for (int step = 0; step < 2000; step += 40) {
    in.ranks[0].rss_mb.push_back(Reading{static_cast<double>(step), 1000 + noise(rng), step});
    in.ranks[0].gpu_mem_mb.push_back(Reading{static_cast<double>(step), 4000 + noise(rng), step});
  }
  EXPECT_EQ(conclude(in, Thresholds{}, "run").find(LabelName::kMemoryCreep), nullptr);
}

TEST(Conclude, MemoryThatGrowsOnlyWhileWorkersWarmUpIsNoCreep) {
  // Issue 37: imagenet with 2 DataLoader workers, RSS 2.21 -> 2.35 GB over the
  // first half of a 120-step run (the workers filling their pages), flat after:
  // the least-squares slope over the run is steep and sure, but it is warm-up.
  Inputs in = one_rank(Shape{.forward = 0.004}, 120);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 2.0);
  for (int step = 0; step < 120; step += 2) {
    const double warm = 140.0 * std::min(1.0, static_cast<double>(step) / 60.0);
    in.ranks[0].rss_mb.push_back(
        Reading{static_cast<double>(step), 2210 + warm + noise(rng), step});
  }
  const Scope s = conclude(in, Thresholds{}, "run");
  EXPECT_EQ(s.find(LabelName::kMemoryCreep), nullptr);
  EXPECT_THAT(s.notes, ::testing::Contains(::testing::HasSubstr("warm-up")));
  // The same rise going on through the second half is creep.
  Inputs leak = one_rank(Shape{.forward = 0.004}, 120);
  for (int step = 0; step < 120; step += 2) {
    leak.ranks[0].rss_mb.push_back(
        Reading{static_cast<double>(step), 2210 + 140.0 * step / 60.0 + noise(rng), step});
  }
  EXPECT_NE(conclude(leak, Thresholds{}, "run").find(LabelName::kMemoryCreep), nullptr);
}

TEST(Conclude, DeviceMemoryCreep) {
  Inputs in = one_rank(Shape{.forward = 0.004}, 1000);
  for (int step = 0; step < 1000; step += 20) {
    in.ranks[0].gpu_mem_mb.push_back(Reading{static_cast<double>(step), 2000 + 0.5 * step, step});
  }
  const Scope scope_l = conclude(in, Thresholds{}, "run");
  const Label* l = scope_l.find(LabelName::kMemoryCreep);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kDevice);
  EXPECT_NEAR(l->value.value, 500, 1);
}

TEST(Conclude, ThroughputDriftWhenStepsSlowDown) {
  // The forward grows by 10 us per step: 4 ms -> 8 ms over 400 steps.
  const Scope s = conclude(one_rank(Shape{.forward = 0.004, .growth_per_step = 1e-5}, 400),
                           Thresholds{}, "run");
  const Label* l = s.find(LabelName::kThroughputDrift);
  ASSERT_NE(l, nullptr);
  EXPECT_NEAR(l->value.value, 1.0, 0.25);
}

TEST(Conclude, SteadyComputeBoundJobHasNoFalseAlarm) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    Inputs in;
    for (std::uint32_t r = 0; r < 2; ++r) {
      in.ranks.push_back(rank_input(
          r, 300, Shape{.data_wait = 0.0002, .forward = 0.004, .backward = 0.004, .noise = 0.2},
          seed * 7 + r));
    }
    EXPECT_EQ(names(conclude(in, Thresholds{}, "run")),
              std::vector<std::string>{std::string(label_name(LabelName::kComputeBound))})
        << "seed " << seed;
  }
}

TEST(Conclude, GpuIdleWhenGpuWorkCoversLittleOfTheStep) {
  const Scope s =
      conclude(one_rank(Shape{.forward = 0.008, .gpu_forward = 0.002}), Thresholds{}, "run");
  const Label* l = s.find(LabelName::kGpuIdle);
  ASSERT_NE(l, nullptr);
  EXPECT_NEAR(l->value.value, 0.25, 0.03);
  // GPU rows are in the phase table as their own device.
  bool gpu_row = false;
  for (const PhaseRow& p : s.phases) gpu_row = gpu_row || p.device == Device::kGPU;
  EXPECT_TRUE(gpu_row);
  EXPECT_EQ(conclude(one_rank(Shape{.forward = 0.008, .gpu_forward = 0.0075}), Thresholds{}, "run")
                .find(LabelName::kGpuIdle),
            nullptr);
}

// Device-aware phases (issue 39). A GPU-bound job under --auto: forward and
// backward take 1 ms each to launch on the CPU, 10 and 20 ms on the GPU; the
// host waits for the device at an untimed sync (.item()), in the rest. Judged
// on CPU times it read WAIT-HEAVY; on the device's times it is COMPUTE-BOUND
// on the GPU, in backward.
TEST(Conclude, GpuBoundJobIsComputeBoundOnTheGpu) {
  const Scope s = conclude(one_rank(Shape{.data_wait = 0.0005,
                                          .forward = 0.001,
                                          .backward = 0.001,
                                          .rest = 0.029,
                                          .gpu_forward = 0.010,
                                          .gpu_backward = 0.020}),
                           Thresholds{}, "run");
  ASSERT_THAT(s.labels, Not(IsEmpty()));
  const Label& l = s.labels.front();
  EXPECT_EQ(l.name, LabelName::kComputeBound) << label_name(l.name);
  EXPECT_EQ(l.kind, LabelKind::kBackward);
  ASSERT_TRUE(l.device.has_value());
  EXPECT_EQ(*l.device, Device::kGPU);
  EXPECT_GT(l.value.low, 0.85);  // 30 ms of a 31.5 ms step
  EXPECT_EQ(s.find(LabelName::kWaitHeavy), nullptr);
  EXPECT_EQ(s.find(LabelName::kLaunchBound), nullptr);
}

// Many tiny kernels: the host launches for as long as the device runs (CPU
// 10 + 15 ms, GPU spans 9.5 + 14 ms) and NVML sees kernels 20% of the time:
// LAUNCH-BOUND, not COMPUTE-BOUND, with its next step; no GPU-IDLE beside it.
// Without NVML readings the CPU/GPU ratio alone decides, and says the busy
// share came from the event spans.
TEST(Conclude, TinyKernelsJobIsLaunchBound) {
  for (const double util : {20.0, -1.0}) {
    const Scope s = conclude(one_rank(Shape{.forward = 0.010,
                                            .backward = 0.015,
                                            .gpu_forward = 0.0095,
                                            .gpu_backward = 0.014,
                                            .gpu_util_pct = util}),
                             Thresholds{}, "run");
    ASSERT_THAT(s.labels, Not(IsEmpty()));
    const Label& l = s.labels.front();
    EXPECT_EQ(l.name, LabelName::kLaunchBound) << label_name(l.name) << " util " << util;
    EXPECT_EQ(s.find(LabelName::kComputeBound), nullptr);
    EXPECT_EQ(s.find(LabelName::kGpuIdle), nullptr);
    EXPECT_EQ(l.threshold_name, "launch_bound_cpu_gpu_ratio");
    EXPECT_NEAR(l.value.value, 25.0 / 23.5, 0.02);
    EXPECT_THAT(l.next_step, ::testing::HasSubstr("CUDA graphs"));
    EXPECT_THAT(l.next_step, ::testing::HasSubstr("torch.compile"));
    EXPECT_THAT(l.evidence, ::testing::HasSubstr(util >= 0 ? "NVML" : "event spans"));
  }
}

// The host paced by a busy device (a full launch queue: CPU time close to the
// GPU's) is no launch-bound job when NVML sees the GPU busy: COMPUTE-BOUND(gpu).
TEST(Conclude, HostPacedByABusyGpuIsComputeBound) {
  const Scope s = conclude(one_rank(Shape{.forward = 0.010,
                                          .backward = 0.015,
                                          .gpu_forward = 0.0095,
                                          .gpu_backward = 0.014,
                                          .gpu_util_pct = 95}),
                           Thresholds{}, "run");
  ASSERT_THAT(s.labels, Not(IsEmpty()));
  EXPECT_EQ(s.labels.front().name, LabelName::kComputeBound);
  EXPECT_EQ(s.labels.front().device, Device::kGPU);
  EXPECT_EQ(s.find(LabelName::kLaunchBound), nullptr);
}

// GPU-IDLE on the measured device union (issue 39): GPU-timed rows whose spans
// sum to 90% of the step (nested regions, two streams at once) cover 30% of it
// once overlaps count once. The union wins over NVML and over the spans, and
// the evidence says so; a step with a row of no device start falls back.
TEST(Conclude, GpuIdleIsJudgedOnTheDeviceUnionFirst) {
  Shape shape{.forward = 0.001, .rest = 0.029, .gpu_forward = 0.027, .gpu_union = 0.009};
  for (const double util : {-1.0, 90.0}) {
    shape.gpu_util_pct = util;
    const Scope s = conclude(one_rank(shape), Thresholds{}, "run");
    const Label* idle = s.find(LabelName::kGpuIdle);
    ASSERT_NE(idle, nullptr) << "util " << util;
    EXPECT_NEAR(idle->value.value, 0.30, 0.03);
    EXPECT_THAT(idle->evidence, ::testing::HasSubstr("union of the GPU-timed phases' device"));
  }
  shape.gpu_util_pct = -1;
  Inputs in = one_rank(shape);
  in.ranks[0].steps[7].gpu_rows_unplaced = 1;  // one row the union has no place for
  const Scope spans = conclude(in, Thresholds{}, "run");
  EXPECT_EQ(spans.find(LabelName::kGpuIdle), nullptr);  // spans: 90% busy
}

// GPU-IDLE on the measured busy share: GPU-timed spans cover 90% of the step,
// but NVML sees kernels run 20% of the time (gaps inside the spans).
TEST(Conclude, GpuIdleIsJudgedOnMeasuredBusyNotSpans) {
  Shape shape{.forward = 0.001, .rest = 0.002, .gpu_forward = 0.027, .gpu_util_pct = 20};
  Scope s = conclude(one_rank(shape), Thresholds{}, "run");
  const Label* idle = s.find(LabelName::kGpuIdle);
  ASSERT_NE(idle, nullptr);
  EXPECT_NEAR(idle->value.value, 0.20, 0.02);
  EXPECT_THAT(idle->evidence, ::testing::HasSubstr("NVML"));
  // The same spans with the GPU busy: no GPU-IDLE.
  shape.gpu_util_pct = 90;
  s = conclude(one_rank(shape), Thresholds{}, "run");
  EXPECT_EQ(s.find(LabelName::kGpuIdle), nullptr);
}

// An input-bound CUDA job stays INPUT-BOUND on the device's times.
TEST(Conclude, InputBoundCudaJobIsInputBound) {
  const Scope s = conclude(one_rank(Shape{.data_wait = 0.020,
                                          .forward = 0.001,
                                          .backward = 0.001,
                                          .rest = 0.004,
                                          .gpu_forward = 0.003,
                                          .gpu_backward = 0.006}),
                           Thresholds{}, "run");
  ASSERT_THAT(s.labels, Not(IsEmpty()));
  EXPECT_EQ(s.labels.front().name, LabelName::kInputBound);
}

TEST(Conclude, HostPressureFromOtherProcessesOrSwap) {
  Inputs in = one_rank(Shape{.forward = 0.004});
  HostInput host{"node1", {}};
  for (int i = 0; i < 20; ++i) {
    host.readings.push_back(HostReading{i * 1000, 97.0 + (i % 3), 40.0 + (i % 5), 0.0});
  }
  in.hosts.push_back(host);
  const Scope scope_l = conclude(in, Thresholds{}, "run");
  const Label* l = scope_l.find(LabelName::kHostPressure);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kCpu);
  EXPECT_EQ(l->host, "node1");
  EXPECT_NEAR(l->value.value, 0.58, 0.03);

  // The job itself keeping the host busy is no pressure.
  for (HostReading& r : in.hosts[0].readings) r.job_cpu_pct = r.cpu_util_pct - 2;
  EXPECT_EQ(conclude(in, Thresholds{}, "run").find(LabelName::kHostPressure), nullptr);
  // Swap growing is.
  for (std::size_t i = 0; i < in.hosts[0].readings.size(); ++i) {
    in.hosts[0].readings[i].swap_used_mb = 10.0 * static_cast<double>(i);
  }
  const Scope scope_swap = conclude(in, Thresholds{}, "run");
  const Label* swap = scope_swap.find(LabelName::kHostPressure);
  ASSERT_NE(swap, nullptr);
  EXPECT_EQ(swap->kind, LabelKind::kSwap);
}

// The job's threads waiting for a CPU (the contention share) is pressure even
// when the host-wide figures show none (the job's own threads outnumber the
// cores), and a share whose interval reaches below the threshold is not.
TEST(Conclude, HostPressureFromTheJobsRunQueueWait) {
  Inputs in = one_rank(Shape{.forward = 0.004});
  HostInput host{"node1", {}, {}};
  for (int i = 0; i < 20; ++i) {
    host.readings.push_back(HostReading{i * 1000, 60.0, 58.0, 0.0});  // the job's own CPU
  }
  host.contention = steps::ContentionShare{0.30, 0.25, 0.35, 20};
  in.hosts.push_back(host);
  const Scope scope = conclude(in, Thresholds{}, "run");
  const Label* l = scope.find(LabelName::kHostPressure);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kCpu);
  EXPECT_EQ(l->quantity, "contention_share");
  EXPECT_DOUBLE_EQ(l->value.value, 0.30);
  EXPECT_DOUBLE_EQ(l->value.low, 0.25);
  EXPECT_THAT(l->evidence, ::testing::HasSubstr("waited for a CPU"));
  in.hosts[0].contention = steps::ContentionShare{0.12, 0.05, 0.19, 20};
  EXPECT_EQ(conclude(in, Thresholds{}, "run").find(LabelName::kHostPressure), nullptr);
}

// The thread that times the steps waiting for a CPU in them is pressure even
// where the process tree's per-second share is low (its other threads sleep);
// beside a tree share above the threshold, the label names both.
TEST(Conclude, HostPressureFromTheStepThreadsOwnWait) {
  Inputs in = one_rank(Shape{.forward = 0.004});
  HostInput host{"node1", {}, {}};
  for (int i = 0; i < 20; ++i) {
    host.readings.push_back(HostReading{i * 1000, 60.0, 58.0, 0.0});
  }
  host.contention = steps::ContentionShare{0.04, 0.02, 0.06, 20};
  host.step_wait = steps::ContentionShare{0.30, 0.26, 0.34, 200};
  in.hosts.push_back(host);
  const Scope scope = conclude(in, Thresholds{}, "run");
  const Label* l = scope.find(LabelName::kHostPressure);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, LabelKind::kCpu);
  EXPECT_EQ(l->quantity, "step_wait_share");
  EXPECT_DOUBLE_EQ(l->value.value, 0.30);
  EXPECT_DOUBLE_EQ(l->value.low, 0.26);
  EXPECT_THAT(l->evidence, ::testing::HasSubstr("the thread that times the steps waited"));
  EXPECT_THAT(l->evidence, ::testing::HasSubstr("of its 200 steps"));
  EXPECT_THAT(l->evidence, ::testing::HasSubstr("the job's threads waited"));
  // Its interval reaching below the threshold: no label.
  in.hosts[0].step_wait = steps::ContentionShare{0.12, 0.05, 0.19, 200};
  EXPECT_EQ(conclude(in, Thresholds{}, "run").find(LabelName::kHostPressure), nullptr);
  // The tree's share above: that label, which names the step thread's too.
  in.hosts[0].contention = steps::ContentionShare{0.30, 0.25, 0.35, 20};
  const Scope both = conclude(in, Thresholds{}, "run");
  const Label* tree = both.find(LabelName::kHostPressure);
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(tree->quantity, "contention_share");
  EXPECT_THAT(tree->evidence, ::testing::HasSubstr("the thread that times the steps waited"));
  // A host share over one reading has no interval, and says over what.
  in.hosts[0].readings.resize(1);
  const Scope one_reading = conclude(in, Thresholds{}, "run");
  const Label* one = one_reading.find(LabelName::kHostPressure);
  ASSERT_NE(one, nullptr);
  EXPECT_THAT(one->evidence, ::testing::HasSubstr("(no interval: too few readings)"));
  EXPECT_THAT(one->evidence, Not(::testing::HasSubstr("too few steps")));
}

TEST(Conclude, NotesSayWhatCouldNotBeJudged) {
  const Scope s = conclude(one_rank(Shape{.forward = 0.004}), Thresholds{}, "run");
  EXPECT_THAT(s.notes, Not(IsEmpty()));
  bool input_note = false;
  for (const std::string& n : s.notes) input_note = input_note || n.rfind("INPUT-BOUND", 0) == 0;
  EXPECT_TRUE(input_note);
}

}  // namespace
}  // namespace trainscope::diagnosis
