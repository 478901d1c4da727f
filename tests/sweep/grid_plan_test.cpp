#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::HasSubstr;
const std::vector<std::string> kProgram = {"python", "train.py"};

TEST(GridPlan, CartesianProductFirstSpecOutermost) {
  absl::StatusOr<Plan> plan = grid_plan({"batch_size=32,64,128", "lr=0.1,0.01"}, 1, kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 6u);
  EXPECT_EQ(plan->jobs[0].id, "batch_size=32_lr=0.1");
  EXPECT_EQ(plan->jobs[1].id, "batch_size=32_lr=0.01");
  EXPECT_EQ(plan->jobs[5].id, "batch_size=128_lr=0.01");
  using P = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(plan->jobs[2].params, (P{{"batch_size", "64"}, {"lr", "0.1"}}));
  EXPECT_EQ(plan->jobs[2].command, kProgram);
  EXPECT_EQ(plan->jobs[2].group, -1);
}

TEST(GridPlan, RepeatsGetSuffixes) {
  absl::StatusOr<Plan> plan = grid_plan({"lr=0.1,0.01"}, 3, kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 6u);
  EXPECT_EQ(plan->jobs[0].id, "lr=0.1-r0");
  EXPECT_EQ(plan->jobs[2].id, "lr=0.1-r2");
  EXPECT_EQ(plan->jobs[2].repeat, 2);
  EXPECT_EQ(plan->jobs[3].id, "lr=0.01-r0");
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) ids.insert(job.id);
  EXPECT_EQ(ids.size(), 6u);
  absl::StatusOr<Plan> plain = grid_plan({}, 2, kProgram);  // only repeats
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->jobs[1].id, "run-r1");
}

TEST(GridPlan, UnsafeCharactersInIds) {
  absl::StatusOr<Plan> plan = grid_plan({"data=/tmp/a b"}, 1, kProgram);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->jobs[0].id, "data=-tmp-a-b");
  EXPECT_EQ(plan->jobs[0].params[0].second, "/tmp/a b");
}

// The name (the default directory) identifies the grid and the program:
// another grid or program is another sweep; more repetitions are the same.
TEST(GridPlan, NameIsTheKeysAndAHashOfTheGridAndTheProgram) {
  const auto name = [](const std::vector<std::string>& specs, int repeat,
                       const std::vector<std::string>& program) {
    absl::StatusOr<Plan> plan = grid_plan(specs, repeat, program);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? plan->name : std::string();
  };
  const std::string base = name({"batch_size=32,64", "lr=0.1"}, 1, kProgram);
  EXPECT_THAT(base, ::testing::MatchesRegex("grid-batch_size-lr-[0-9a-f]{8}"));
  EXPECT_EQ(name({"batch_size=32, 64", " lr=0.1"}, 3, kProgram), base);  // same grid
  std::set<std::string> others = {
      base,
      name({"batch_size=32,64", "lr=0.2"}, 1, kProgram),
      name({"batch_size=32,64,128", "lr=0.1"}, 1, kProgram),
      name({"lr=0.1", "batch_size=32,64"}, 1, kProgram),
      name({"batch_size=32,64", "lr=0.1"}, 1, {"python", "train2.py"}),
      name({"batch_size=32,64", "lr=0.1"}, 1, {"python", "train.py", "--fast"}),
      name({"batch_size=32,64", "lr=0.1"}, 1, {"python train.py"}),
  };
  EXPECT_EQ(others.size(), 7u);
  EXPECT_THAT(name({}, 2, kProgram), ::testing::MatchesRegex("grid-[0-9a-f]{8}"));
  const std::string long_keys = name({std::string(200, 'k') + "=1"}, 1, kProgram);
  EXPECT_EQ(long_keys.size(), std::string("grid-").size() + 40 + 1 + 8) << long_keys;
}

TEST(GridPlan, BadSpecs) {
  EXPECT_THAT(grid_plan({"lr"}, 1, kProgram).status().message(), HasSubstr("key=value1"));
  EXPECT_THAT(grid_plan({"lr=1,,2"}, 1, kProgram).status().message(), HasSubstr("empty value"));
  EXPECT_THAT(grid_plan({"lr=1", "lr=2"}, 1, kProgram).status().message(), HasSubstr("twice"));
  EXPECT_THAT(grid_plan({"lr=1"}, 0, kProgram).status().message(), HasSubstr("--repeat"));
  EXPECT_FALSE(grid_plan({"lr=1"}, 1, {}).ok());
  std::string big = "a=";
  for (int i = 0; i < 400; ++i) big += std::to_string(i) + ",";
  big += "x";
  const std::string b = "b" + big.substr(1), c = "c" + big.substr(1);
  EXPECT_THAT(grid_plan({big, b, c}, 1, kProgram).status().message(), HasSubstr("more than"));
}

}  // namespace
}  // namespace trainscope::sweep
