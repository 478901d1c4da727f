// radT's YAML sweep and W&B's sweep file, read with yaml-cpp.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using P = std::vector<std::pair<std::string, std::string>>;

// itu-rad/radt examples/yaml/experiment_grid_context.yaml
constexpr const char* kRadtExample = R"(name: Sweep name
experiment: 0
collocation: "-"
devices: 0
listeners: smi+top
file: ../pytorch/cifar10_context.py
method: grid
parameters:
  batch-size:
    values: [8, 16, 32, 64, 128]
  learning-rate: 
    values: [0.001, 0.0015, 0.002]
)";

TEST(SweepYaml, RadtGridExample) {
  testing::TempDir tmp;
  const std::string path = tmp.file("sweep.yaml");
  testing::write_file(path, kRadtExample);
  absl::StatusOr<Plan> plan = read_sweep_yaml(path, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name, "Sweep name");
  ASSERT_EQ(plan->jobs.size(), 15u);
  const Job& job = plan->jobs[4];  // radT: itertools.product, first key outermost
  EXPECT_EQ(job.params, (P{{"batch-size", "16"}, {"learning-rate", "0.0015"}}));
  EXPECT_EQ(job.id, "batch-size=16_learning-rate=0.0015");
  EXPECT_EQ(job.group, 4);  // radT runs them one after another
  EXPECT_THAT(job.command, ElementsAre("python", "../pytorch/cifar10_context.py"));
  EXPECT_THAT(job.devices, ElementsAre(0));
  EXPECT_THAT(job.listeners, ElementsAre("smi", "top"));
  EXPECT_EQ(job.collocation, "-");
  // The program on the command line wins.
  EXPECT_THAT(read_plan(path, {"python3", "x.py"})->jobs[0].command,
              ElementsAre("python3", "x.py"));
}

TEST(SweepYaml, RadtStatusSkipsFinished) {
  const std::string text = std::string(kRadtExample) +
                           "status:\n  0: FINISHED abc (--batch-size 8 --learning-rate 0.001)\n"
                           "  1: FAILED abd (--batch-size 8 --learning-rate 0.0015)\n";
  absl::StatusOr<Plan> plan = parse_sweep_yaml(text, "s.yaml", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->jobs.size(), 14u);
  EXPECT_EQ(plan->jobs[0].id, "batch-size=8_learning-rate=0.0015");
}

TEST(SweepYaml, WandbGridAndRandom) {
  const char* grid = R"(program: train.py
method: grid
parameters:
  optimizer:
    values: ["adam", "sgd"]
  epochs:
    value: 5
)";
  absl::StatusOr<Plan> plan = parse_sweep_yaml(grid, "w.yaml", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 2u);
  EXPECT_EQ(plan->jobs[1].params, (P{{"optimizer", "sgd"}, {"epochs", "5"}}));
  EXPECT_THAT(plan->jobs[1].command, ElementsAre("python", "train.py"));
  EXPECT_EQ(plan->jobs[1].group, -1);

  const char* random = R"(program: train.py
method: random
run_cap: 20
parameters:
  lr:
    distribution: log_uniform_values
    min: 0.0001
    max: 0.1
  layers:
    distribution: int_uniform
    min: 1
    max: 4
  act:
    values: [relu, gelu]
)";
  absl::StatusOr<Plan> a = parse_sweep_yaml(random, "w.yaml", {}, 7);
  absl::StatusOr<Plan> b = parse_sweep_yaml(random, "w.yaml", {}, 7);
  absl::StatusOr<Plan> c = parse_sweep_yaml(random, "w.yaml", {}, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status();
  ASSERT_EQ(a->jobs.size(), 20u);
  std::set<std::string> ids;
  bool differs = false;
  for (std::size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(a->jobs[i].params, b->jobs[i].params);  // seeded: the same
    EXPECT_EQ(a->jobs[i].id, b->jobs[i].id);
    differs |= a->jobs[i].params != c->jobs[i].params;
    ids.insert(a->jobs[i].id);
    const double lr = std::stod(a->jobs[i].params[0].second);
    EXPECT_GE(lr, 0.0001);
    EXPECT_LE(lr, 0.1);
    const int layers = std::stoi(a->jobs[i].params[1].second);
    EXPECT_GE(layers, 1);
    EXPECT_LE(layers, 4);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(ids.size(), 20u);
}

TEST(SweepYaml, RandomWithoutCountShufflesTheGrid) {
  const std::string text =
      std::string(kRadtExample)
          .replace(std::string(kRadtExample).find("method: grid"), 12, "method: random");
  absl::StatusOr<Plan> plan = parse_sweep_yaml(text, "s.yaml", {}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 15u);
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) ids.insert(job.id);
  EXPECT_EQ(ids.size(), 15u);
}

TEST(SweepYaml, BadInput) {
  auto error = [](const std::string& text) {
    absl::StatusOr<Plan> plan = parse_sweep_yaml(text, "bad.yaml", {"python", "t.py"});
    EXPECT_FALSE(plan.ok());
    return std::string(plan.status().message());
  };
  EXPECT_THAT(error("method: grid\nparameters: {a: {values: [1, [2]]}}\n"),
              HasSubstr("parameters.a"));
  EXPECT_THAT(error("method: bayes\nparameters: {a: {values: [1]}}\n"), HasSubstr("bayes"));
  EXPECT_THAT(error("method: grid\nparameters: {a: {min: 1, max: 2}}\n"),
              HasSubstr("method: random"));
  EXPECT_THAT(error("method: random\nparameters: {a: {min: 1, max: 2}}\n"), HasSubstr("count"));
  EXPECT_THAT(error("parameters: {a: {values: [1]}}\n"), HasSubstr("method"));
  EXPECT_THAT(error("method: grid\nparameters:\n  a: [1\n"), HasSubstr("bad.yaml:"));
  EXPECT_THAT(error("method: grid\ndevices: x\nparameters: {a: {values: [1]}}\n"),
              HasSubstr("bad.yaml:2: key 'devices'"));
  EXPECT_FALSE(parse_sweep_yaml("method: grid\nparameters: {a: {values: [1]}}\n", "x.yaml", {})
                   .ok());  // no program anywhere
}

// Found by sweep_yaml_fuzz: random draws of the same values repeat a long
// id, and the "-2" that makes it unique must not take it
// past the 120 bytes ids are kept to.
TEST(SweepYaml, RepeatedLongIdsStayUniqueAndShort) {
  const std::string key(118, 'k');  // "k...k=a": 120 bytes, not shortened
  absl::StatusOr<Plan> plan = parse_sweep_yaml(
      "method: random\nrun_cap: 12\nparameters:\n  " + key + ":\n    values: [a]\n", "w.yaml",
      {"python", "t.py"}, 7);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 12u);
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) {
    EXPECT_LE(job.id.size(), 120u) << job.id;
    ids.insert(job.id);
  }
  EXPECT_EQ(ids.size(), 12u);
}

}  // namespace
}  // namespace trainscope::sweep
