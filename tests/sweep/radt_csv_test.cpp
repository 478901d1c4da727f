// radT's experiment CSV: its READMEs' examples expand as radT's loader
// (radt/schedule/schedule.py) reads them, and Status/Run are written back.
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

// Resource-Aware-Data-systems-RAD/radt README: padded fields, k=v params.
constexpr const char* kOldReadme =
    "Experiment,Workload,Status,Run,Devices,Collocation,    File,    Listeners,Params\n"
    "         1,       1,      ,   ,      0,          -,train.py,smi+top+dcgmi,batch-size=128\n"
    "         1,       1,      ,   ,      1,          -,train.py,smi+top+dcgmi,batch-size=128\n"
    "         1,       2,      ,   ,      2,    3g.20gb,train.py,smi+top+dcgmi,batch-size=128\n"
    "         1,       2,      ,   ,      2,    3g.20gb,train.py,smi+top+dcgmi,batch-size=128\n"
    "         1,       3,      ,   ,      1,          -,train.py,smi+top+dcgmi,batch-size=256\n";

// itu-rad/radt README: 10-field rows (a Name after Workload) under 9 names.
constexpr const char* kNewReadme =
    "Experiment,Workload,Status,Run,Devices,Collocation,    File,    Listeners,Params\n"
    "0,1,no sharing,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,2,shared gpu 1,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,2,shared gpu 2,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,3,MPS shared gpu 1,,,0,MPS,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,3,MPS shared gpu 2,,,0,MPS,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,4,MIG shared gpu 1,,,2,3g.20gb,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n"
    "0,4,MIG shared gpu 2,,,2,3g.20gb,../pytorch/cifar10_context.py,smi+top,--batch-size 128\n";

TEST(RadtCsv, OldReadmeExample) {
  absl::StatusOr<Plan> plan = parse_radt_csv(kOldReadme, "exp.csv");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 5u);
  std::vector<int> groups;
  for (const Job& job : plan->jobs) groups.push_back(job.group);
  EXPECT_THAT(groups, ElementsAre(0, 0, 1, 1, 2));
  const Job& job = plan->jobs[2];
  EXPECT_EQ(job.id, "e1-w2-r1");
  EXPECT_EQ(plan->jobs[3].id, "e1-w2-r2");
  EXPECT_EQ(job.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(job.params, (P{{"batch-size", "128"}}));
  EXPECT_THAT(job.devices, ElementsAre(2));
  EXPECT_EQ(job.collocation, "3g.20gb");
  EXPECT_THAT(job.listeners, ElementsAre("smi", "top", "dcgmi"));
  EXPECT_EQ(job.source, "exp.csv:4");
  EXPECT_EQ(plan->jobs[0].collocation, "-");
  EXPECT_EQ(*radt_line(job), 4);
}

TEST(RadtCsv, NewReadmeExampleWithNames) {
  absl::StatusOr<Plan> plan = parse_radt_csv(kNewReadme, "exp.csv");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 7u);
  std::vector<int> groups;
  for (const Job& job : plan->jobs) groups.push_back(job.group);
  EXPECT_THAT(groups, ElementsAre(0, 1, 1, 2, 2, 3, 3));
  EXPECT_EQ(plan->jobs[0].id, "e0-w1-no-sharing");
  EXPECT_EQ(plan->jobs[4].id, "e0-w3-MPS-shared-gpu-2");
  EXPECT_EQ(plan->jobs[4].collocation, "mps");
  EXPECT_EQ(plan->jobs[5].collocation, "3g.20gb");
  EXPECT_THAT(plan->jobs[5].devices, ElementsAre(2));
  EXPECT_EQ(plan->jobs[1].params, (P{{"batch-size", "128"}}));
  EXPECT_EQ(plan->jobs[1].command[1], "../pytorch/cifar10_context.py");
}

TEST(RadtCsv, NameColumnDevicesAndRawParams) {
  absl::StatusOr<Plan> plan = parse_radt_csv(
      "Experiment,Workload,Name,Status,Run,Devices,Collocation,File,Listeners,Params\r\n"
      "7,1,a,,,0+1,-,t.py,nsys,--amp --lr 0.1\r\n"
      "7,2,,,,,-,t.py,,\"--lr=0.1 --bs 8\"\r\n"
      "\r\n"
      "7,1,a,,,3,-,t.py,free,\r\n",
      "x.csv");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 3u);
  EXPECT_THAT(plan->jobs[0].devices, ElementsAre(0, 1));
  // A flag without a value: the words go to the program as radT splits them.
  EXPECT_THAT(plan->jobs[0].command, ElementsAre("python", "t.py", "--amp", "--lr", "0.1"));
  EXPECT_TRUE(plan->jobs[0].params.empty());
  EXPECT_EQ(plan->jobs[1].params, (P{{"lr", "0.1"}, {"bs", "8"}}));
  EXPECT_TRUE(plan->jobs[1].devices.empty());
  EXPECT_EQ(plan->jobs[2].group, 0);  // same Experiment+Workload as the first row
  EXPECT_EQ(plan->jobs[0].id, "e7-w1-a");
  EXPECT_EQ(plan->jobs[2].id, "e7-w1-a-2");
  EXPECT_EQ(plan->jobs[2].source, "x.csv:5");
}

TEST(RadtCsv, OddParamsFoundByFuzzing) {
  absl::StatusOr<Plan> plan = parse_radt_csv(
      "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
      "0,1,,,0,-,t.py,smi,--\n",
      "x.csv");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->jobs[0].command, ElementsAre("python", "t.py", "--"));
}

TEST(RadtCsv, FinishedWorkloadsAreSkipped) {
  const char* text =
      "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
      "1,1,FINISHED run (0),abc,0,-,t.py,smi,\n"
      "1,1,FINISHED run (1),abd,0,-,t.py,smi,\n"
      "1,2,FINISHED x (0),abe,0,-,t.py,smi,\n"
      "1,2,,,0,-,t.py,smi,\n"
      "1,3,FAILED x (0),abf,0,-,t.py,smi,\n";
  absl::StatusOr<Plan> plan = parse_radt_csv(text, "x.csv");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 2u);
  EXPECT_EQ(plan->jobs[0].group, 1);
  EXPECT_EQ(plan->jobs[0].id, "e1-w2-r1");
  RadtReadOptions rerun;
  rerun.rerun = true;
  EXPECT_EQ(parse_radt_csv(text, "x.csv", rerun)->jobs.size(), 3u);
  RadtReadOptions all;
  all.include_done = true;
  EXPECT_EQ(parse_radt_csv(text, "x.csv", all)->jobs.size(), 5u);
}

TEST(RadtCsv, BadInputNamesFileAndLine) {
  auto error = [](const std::string& text) {
    absl::StatusOr<Plan> plan = parse_radt_csv(text, "bad.csv");
    EXPECT_FALSE(plan.ok());
    return std::string(plan.status().message());
  };
  const std::string header =
      "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n";
  EXPECT_THAT(error(header + "1,1,,,0,-,t.py,smi\n"), HasSubstr("bad.csv:2: 8 fields"));
  EXPECT_THAT(error(header + "1,1,,,0,-,t.py,smi,,x,y\n"), HasSubstr("bad.csv:2: 11 fields"));
  EXPECT_THAT(error("Experiment,Workload,Colour\n"),
              HasSubstr("bad.csv:1: unknown column 'Colour'"));
  EXPECT_THAT(error("Experiment,Workload\n"), HasSubstr("no 'Status' column"));
  EXPECT_THAT(error(header + "\n1,1,,,x,-,t.py,smi,\n"), HasSubstr("bad.csv:3: Devices 'x'"));
  EXPECT_THAT(error(header + "1,1,,,0,share,t.py,smi,\n"), HasSubstr("Collocation 'share'"));
  EXPECT_THAT(error(header + "1,1,,,0,-,t.py,smi+gpu,\n"), HasSubstr("unknown listener 'gpu'"));
  EXPECT_THAT(error(header + "1,1,,,0,-,,smi,\n"), HasSubstr("File is empty"));
  EXPECT_THAT(error(header + "1,1,\"open,,0,-,t.py,smi,\n"), HasSubstr("bad.csv:2: a quoted"));
  EXPECT_THAT(error(""), HasSubstr("empty"));
}

TEST(RadtCsv, WriteStatusKeepsEverythingElse) {
  testing::TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  testing::write_file(path, kOldReadme);
  absl::StatusOr<Plan> plan = read_radt_csv(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int line = *radt_line(plan->jobs[2]);
  ASSERT_TRUE(write_radt_status(path, line, "FINISHED run, x (2_3g.20gb)", "0af3").ok());
  std::string expected = kOldReadme;
  const std::string old_row =
      "         1,       2,      ,   ,      2,    3g.20gb,train.py,smi+top+dcgmi,batch-size=128\n";
  const std::string new_row =
      "         1,       2,      \"FINISHED run, x (2_3g.20gb)\",   0af3,      2,    3g.20gb,"
      "train.py,smi+top+dcgmi,batch-size=128\n";
  expected.replace(expected.find(old_row), old_row.size(), new_row);
  EXPECT_EQ(testing::read_file(path), expected);
  // Read back: the row's status is there, the file still parses.
  RadtReadOptions all;
  all.include_done = true;
  EXPECT_EQ(read_radt_csv(path, all)->jobs.size(), 5u);
  EXPECT_FALSE(write_radt_status(path, 1, "x", "y").ok());   // the header
  EXPECT_FALSE(write_radt_status(path, 99, "x", "y").ok());  // no such row
}

// Several rows in one rewrite; a line without a row is an error naming it,
// and the other rows are written all the same.
TEST(RadtCsv, WritesSeveralRowsAtOnce) {
  testing::TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  testing::write_file(path, kOldReadme);
  ASSERT_TRUE(write_radt_statuses(path, {{6, "FAILED", "r5"}, {2, "FINISHED", "r1"}}).ok());
  absl::Status missing = write_radt_statuses(path, {{9, "x", "y"}, {3, "FINISHED", "r2"}});
  EXPECT_THAT(std::string(missing.message()), HasSubstr("exp.csv:9: no radT row"));
  const std::vector<std::string> lines = testing::lines_of(testing::read_file(path));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[1],
            "         1,       1,      FINISHED,   r1,      0,          -,train.py,smi+top+dcgmi,"
            "batch-size=128");
  EXPECT_THAT(lines[2], ::testing::StartsWith("         1,       1,      FINISHED,   r2,"));
  EXPECT_THAT(lines[3], ::testing::StartsWith("         1,       2,      ,   ,"));
  EXPECT_THAT(lines[5], ::testing::StartsWith("         1,       3,      FAILED,   r5,"));
  EXPECT_TRUE(write_radt_statuses(path, {}).ok());
}

TEST(RadtCsv, WriteStatusOnNamedRowsAndCrlf) {
  testing::TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  const std::string text =
      "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\r\n"
      "0,1,no sharing,,,0,-,t.py,smi+top,--batch-size 128\r\n";
  testing::write_file(path, text);
  ASSERT_TRUE(write_radt_status(path, 2, "FINISHED", "r1").ok());
  EXPECT_EQ(testing::read_file(path),
            "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\r\n"
            "0,1,no sharing,FINISHED,r1,0,-,t.py,smi+top,--batch-size 128\r\n");
  EXPECT_TRUE(read_radt_csv(path)->jobs.empty());  // its only workload is finished
}

TEST(RadtCsv, ReadPlanByExtension) {
  testing::TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  testing::write_file(path, kOldReadme);
  EXPECT_EQ(read_plan(path, {})->jobs.size(), 5u);
  EXPECT_FALSE(read_plan(path, {"python"}).ok());
  EXPECT_FALSE(read_plan(tmp.file("x.txt"), {"python"}).ok());
}

}  // namespace
}  // namespace trainscope::sweep
