// Furcate's JSON config: its README examples expand to exactly the configs
// Furcate's ConfigReader produces (checked against furcate/config_reader.py
// with the shuffle switched off: same count, same order, same values).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "support/warnings.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::HasSubstr;
const std::vector<std::string> kProgram = {"python", "train.py"};

TEST(FurcateJson, ReadmeExample) {
  testing::TempDir tmp;
  const std::string path = tmp.file("config.json");
  testing::write_file(path, R"({"data_name": "example", "data_dir": "foo/",
                               "batch_size": [32, 64], "epochs": 50})");
  absl::StatusOr<Plan> plan = read_furcate_json(path, kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 2u);
  // Furcate's code writes "example0__bs32" (basename of "foo/" is ""); its
  // README shows "example0_foo_bs32", which we follow.
  EXPECT_EQ(plan->jobs[0].id, "example0_foo_bs32");
  EXPECT_EQ(plan->jobs[1].id, "example1_foo_bs64");
  using P = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(
      plan->jobs[0].params,
      (P{{"data_name", "example"}, {"data_dir", "foo/"}, {"batch_size", "32"}, {"epochs", "50"}}));
  EXPECT_EQ(nlohmann::json::parse(plan->jobs[1].config_json),
            nlohmann::json::parse(
                R"({"data_name": "example", "data_dir": "foo/", "batch_size": 64, "epochs": 50})"));
  EXPECT_EQ(plan->jobs[0].command, kProgram);
  EXPECT_FALSE(plan->allow_cpu);  // Furcate's default
  EXPECT_EQ(plan->max_parallel, 0);
}

TEST(FurcateJson, ExcludeConfigsExample) {
  testing::CapturedWarnings warnings;
  absl::StatusOr<Plan> plan = parse_furcate_json(R"({
    "data_name": "example", "data_dir": "foo/", "batch_size": [32, 64], "epochs": 50,
    "learning_rate": [0.0001, 0.001, 0.00001],
    "optimizer_name": ["RMSProp", "SGD", "Adam", "Nadam", "Adadelta"],
    "meta": {"max_threads": 3, "allow_cpu": true, "exclude_configs": [
      {"optimizer_name": "Adadelta", "batch_size": 32},
      {"optimizer_name": "SGD", "learning_rate": 0.001}]}})",
                                                 "ex.json", kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(warnings.count(), 0u);
  // Furcate's ConfigReader (shuffle off): 25 configs in this order.
  const std::vector<std::string> expected = {
      "example0_foo_lr0-0001_bs32_onRMSProp",  "example1_foo_lr0-0001_bs32_onSGD",
      "example2_foo_lr0-0001_bs32_onAdam",     "example3_foo_lr0-0001_bs32_onNadam",
      "example4_foo_lr0-0001_bs64_onRMSProp",  "example5_foo_lr0-0001_bs64_onSGD",
      "example6_foo_lr0-0001_bs64_onAdam",     "example7_foo_lr0-0001_bs64_onNadam",
      "example8_foo_lr0-0001_bs64_onAdadelta", "example9_foo_lr0-001_bs32_onRMSProp",
      "example10_foo_lr0-001_bs32_onAdam",     "example11_foo_lr0-001_bs32_onNadam",
      "example12_foo_lr0-001_bs64_onRMSProp",  "example13_foo_lr0-001_bs64_onAdam",
      "example14_foo_lr0-001_bs64_onNadam",    "example15_foo_lr0-001_bs64_onAdadelta",
      "example16_foo_lr1e-05_bs32_onRMSProp",  "example17_foo_lr1e-05_bs32_onSGD",
      "example18_foo_lr1e-05_bs32_onAdam",     "example19_foo_lr1e-05_bs32_onNadam",
      "example20_foo_lr1e-05_bs64_onRMSProp",  "example21_foo_lr1e-05_bs64_onSGD",
      "example22_foo_lr1e-05_bs64_onAdam",     "example23_foo_lr1e-05_bs64_onNadam",
      "example24_foo_lr1e-05_bs64_onAdadelta"};
  std::vector<std::string> ids;
  for (const Job& job : plan->jobs) ids.push_back(job.id);
  EXPECT_EQ(ids, expected);
  for (const Job& job : plan->jobs) {
    const auto config = nlohmann::json::parse(job.config_json);
    EXPECT_FALSE(config["optimizer_name"] == "Adadelta" && config["batch_size"] == 32);
    EXPECT_FALSE(config["optimizer_name"] == "SGD" && config["learning_rate"] == 0.001);
    EXPECT_TRUE(config["meta"].is_object());  // the program gets the whole config
    for (const auto& [key, value] : job.params) EXPECT_NE(key, "meta");
  }
  EXPECT_EQ(plan->max_parallel, 3);
  EXPECT_TRUE(plan->allow_cpu);
}

TEST(FurcateJson, ListsInsideObjectsDoNotExpand) {
  absl::StatusOr<Plan> plan = parse_furcate_json(
      R"({"data_name": "d", "model": {"layers": [1, 2]}, "lr": [1, 2]})", "c.json", kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 2u);
  EXPECT_EQ(plan->jobs[0].params[1],
            (std::pair<std::string, std::string>{"model", R"({"layers":[1,2]})"}));
  EXPECT_EQ(plan->jobs[0].id, "d0_l1");  // no data_dir: no "_dir" part
}

TEST(FurcateJson, IdsAreStableAndUnique) {
  const char* text = R"({"data_name": "x", "batch_size": [1, 2], "base_size": [3, 4]})";
  absl::StatusOr<Plan> a = parse_furcate_json(text, "c.json", kProgram);
  absl::StatusOr<Plan> b = parse_furcate_json(text, "c.json", kProgram);
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<std::string> ids;
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].id, b->jobs[i].id);
    ids.insert(a->jobs[i].id);
  }
  EXPECT_EQ(ids.size(), 4u);  // "bs" twice in each name, the index keeps them apart
  EXPECT_EQ(a->jobs[0].id, "x0_bs1_bs3");
}

TEST(FurcateJson, ExcludeMatchingNothingWarns) {
  testing::CapturedWarnings warnings;
  absl::StatusOr<Plan> plan = parse_furcate_json(
      R"({"data_name": "d", "bs": [1, 2], "meta": {"exclude_configs": [{"bs": 3}]}})", "c.json",
      kProgram);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->jobs.size(), 2u);
  ASSERT_EQ(warnings.count(), 1u);
  EXPECT_THAT(warnings.messages()[0], HasSubstr("meta.exclude_configs[0]"));
  EXPECT_THAT(warnings.messages()[0], HasSubstr("c.json"));
}

TEST(FurcateJson, BadInputNamesFileAndKey) {
  auto error = [](const char* text) {
    absl::StatusOr<Plan> plan = parse_furcate_json(text, "bad.json", kProgram);
    EXPECT_FALSE(plan.ok());
    return std::string(plan.status().message());
  };
  EXPECT_THAT(error(R"({"a": [1, [2]]})"), HasSubstr("key 'a[1]'"));
  EXPECT_THAT(error(R"({"a": null})"), HasSubstr("key 'a'"));
  EXPECT_THAT(error(R"({"a": []})"), HasSubstr("empty list"));
  EXPECT_THAT(error(R"([1, 2])"), HasSubstr("object"));
  EXPECT_THAT(error(R"({"a": 1e505})"), HasSubstr("bad.json"));  // found by fuzzing
  EXPECT_THAT(error("{\n\"a\": 1,\n}"), HasSubstr("bad.json:3"));
  EXPECT_THAT(error(R"({"meta": {"max_threads": "x"}})"), HasSubstr("meta.max_threads"));
  EXPECT_THAT(error(R"({"meta": {"exclude_configs": [1]}})"), HasSubstr("meta.exclude_configs[0]"));
  EXPECT_THAT(error(R"({"a": [1], "meta": {"exclude_configs": [{"a": 1}]}})"),
              HasSubstr("excludes every config"));
  EXPECT_FALSE(parse_furcate_json(R"({"a": 1})", "c.json", {}).ok());  // no program
}

}  // namespace
}  // namespace trainscope::sweep
