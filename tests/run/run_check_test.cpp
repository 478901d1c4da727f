// check_run: the damage every reader of a finished run must name (issue 25):
// region rows lost, a regions file cut short, a corrupt summary.
#include "trainscope/run/run_check.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/damaged_run.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using trainscope::testing::cut_regions;
using trainscope::testing::FinishedRun;
using trainscope::testing::RunPtr;
using trainscope::testing::write_finished_run;
using RunCheckTest = trainscope::testing::RunDirTest;

std::vector<RunProblem> check(const std::string& dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<RunProblem>> problems = check_run(*reader);
  EXPECT_TRUE(problems.ok()) << problems.status();
  return problems.value_or(std::vector<RunProblem>{});
}

TEST_F(RunCheckTest, AWholeRecordedRunHasNoProblemWarmUpRowsIncluded) {
  RunPtr run = start(options());
  TimerOptions timer_options;
  timer_options.warmup = 5;  // rows of the file, not in the summary's count
  Timer timer(timer_options);
  run->attach(timer);
  for (int i = 0; i < 900; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  run->add_summary(timer.summary());
  ASSERT_TRUE(run->end().ok());
  EXPECT_TRUE(check(run->dir()).empty());

  FinishedRun spec;
  spec.warmup = 7;
  EXPECT_TRUE(check(write_finished_run(root_ / "by-hand", spec).string()).empty());
}

TEST_F(RunCheckTest, ARegionsFileCutShortIsAWarningNamingFileKeyAndBothCounts) {
  RunPtr run = start(options());
  Timer timer;
  run->attach(timer);
  for (int i = 0; i < 900; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  ASSERT_TRUE(run->end().ok());
  const fs::path dir = run->dir();
  cut_regions(dir, 453);
  const std::vector<RunProblem> problems = check(dir.string());
  ASSERT_EQ(problems.size(), 1u);
  const RunProblem& p = problems[0];
  EXPECT_EQ(p.kind, RunProblemKind::kRegionsShort);
  EXPECT_FALSE(p.error);
  EXPECT_EQ(p.key, "BATCH");
  EXPECT_EQ(p.summary_rows, 900u);
  EXPECT_EQ(p.file_rows, 453u);
  EXPECT_EQ(p.path, (dir / "regions-0.csv").string());
  EXPECT_THAT(p.message, HasSubstr((dir / "regions-0.csv").string()));
  EXPECT_THAT(p.message, HasSubstr("holds 453 rows of BATCH on CPU"));
  EXPECT_THAT(p.message, HasSubstr("summary-0.json counts 900"));
  EXPECT_TRUE(run_problems_error(problems).ok());
  EXPECT_EQ(run_problem_warnings(problems), std::vector<std::string>{p.message});
}

TEST_F(RunCheckTest, AMissingOrEmptyRegionsFileOfARankThatRecordedIsAnErrorNamingIt) {
  const fs::path dir = write_finished_run(root_ / "r");
  const fs::path regions = dir / "regions-0.csv";
  const std::string whole = testing::read_file(regions);
  for (const std::string& left :
       {std::string("missing"), std::string(""), std::string(testing::kRegionsHeader)}) {
    SCOPED_TRACE(left);
    if (left == "missing") {
      fs::remove(regions);
    } else {
      testing::write_file(regions, left);
    }
    const std::vector<RunProblem> problems = check(dir.string());
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_TRUE(problems[0].error);
    EXPECT_EQ(problems[0].kind,
              left == "missing" ? RunProblemKind::kRegionsMissing : RunProblemKind::kRegionsEmpty);
    const absl::Status error = run_problems_error(problems);
    EXPECT_TRUE(absl::IsDataLoss(error)) << error;
    EXPECT_THAT(std::string(error.message()), HasSubstr(regions.string()));
    EXPECT_THAT(std::string(error.message()), HasSubstr("ended FINISHED"));
    EXPECT_THAT(std::string(error.message()), HasSubstr("summary-0.json counts 900 regions"));
  }
  // A rank that recorded no region (no summary entries) may have none.
  testing::write_file(regions, testing::kRegionsHeader);
  fs::remove(dir / "summary-0.json");
  EXPECT_TRUE(check(dir.string()).empty());
  testing::write_file(regions, whole);
}

TEST_F(RunCheckTest, ACorruptSummaryIsAWarningNamingItAndTheRunStaysReadable) {
  const fs::path dir = write_finished_run(root_ / "r");
  testing::write_file(dir / "summary-0.json", "{\"format\": \"trainscope.stats\", \"entr");
  const std::vector<RunProblem> problems = check(dir.string());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, RunProblemKind::kSummaryUnreadable);
  EXPECT_FALSE(problems[0].error);
  EXPECT_THAT(problems[0].message, HasSubstr((dir / "summary-0.json").string()));
  EXPECT_THAT(problems[0].message, HasSubstr("skipped"));
  EXPECT_EQ(unreadable_summaries(problems), std::vector<std::uint32_t>{0});
}

TEST_F(RunCheckTest, ARankStillRunningOrCrashedIsNotHeldToItsSummary) {
  const fs::path dir = write_finished_run(root_ / "r");
  cut_regions(dir, 10);
  testing::RankJson crashed;  // RUNNING on another host, silent for long: crashed
  testing::write_file(dir / "rank-0.json", crashed.text());
  EXPECT_TRUE(check(dir.string()).empty());
}

TEST(RunCheckRecordsTest, GpuRowsAreHeldToTheGpuEntryAndCountsAlreadyTakenAreUsed) {
  RankRecords r;
  r.state.status = RunStatus::kFinished;
  r.regions_path = "d/regions-0.csv";
  r.summary_path = "d/summary-0.json";
  r.regions_found = true;
  r.rows = {{"BATCH", Device::kCPU, 10}, {"BATCH", Device::kGPU, 4}};
  Summary summary;
  TimeStats ten;
  ten.count = 10;
  summary.entries = {{"BATCH", Device::kCPU, ten}, {"BATCH", Device::kGPU, ten}};
  r.summary = summary;
  const std::vector<RunProblem> problems = check_rank_records({r});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].device, Device::kGPU);
  EXPECT_THAT(problems[0].message, HasSubstr("holds 4 rows of BATCH on GPU"));

  // check_run takes a reader's own counts instead of reading the file again.
  testing::TempDir tmp;
  const fs::path dir = write_finished_run(tmp.path() / "r");
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const RegionCounts counted{{0, {{"BATCH", Device::kCPU, 3}}}};
  absl::StatusOr<std::vector<RunProblem>> from_counts = check_run(*reader, &counted);
  ASSERT_TRUE(from_counts.ok()) << from_counts.status();
  ASSERT_EQ(from_counts->size(), 1u);
  EXPECT_EQ((*from_counts)[0].file_rows, 3u);
}

TEST(RunCheckFilesTest, ADirectoryWithRunFilesButNoRunJsonHoldsARun) {
  testing::TempDir tmp;
  const fs::path dir = write_finished_run(tmp.path() / "r");
  EXPECT_TRUE(holds_run_files(dir.string()));
  fs::remove(dir / "run.json");
  EXPECT_TRUE(holds_run_files(dir.string()));
  fs::create_directories(tmp.path() / "other");
  testing::write_file(tmp.path() / "other" / "notes.txt", "x");
  EXPECT_FALSE(holds_run_files((tmp.path() / "other").string()));
  EXPECT_FALSE(holds_run_files((tmp.path() / "nothing").string()));
}

}  // namespace
}  // namespace trainscope
