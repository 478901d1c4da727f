// The sweep's input while the sweep runs (sweep/input_watch.hpp and
// SweepOptions::input): read again when it changes, radT's CSV given its
// rows' Status and Run back when the sweep ends. The watch is driven by the
// file's modification time, set explicitly here (no waiting on the clock).
#include "sweep/input_watch.hpp"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/sweep/inputs.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using trainscope::testing::quiet_options;
using trainscope::testing::read_file;
using trainscope::testing::TempDir;

std::vector<std::string> ids(const Plan& plan) {
  std::vector<std::string> out;
  for (const Job& job : plan.jobs) out.push_back(job.id);
  return out;
}

// Rewrites `path` and moves its modification time on by `seconds` from what it was.
void rewrite(const std::string& path, const std::string& text, int seconds = 10) {
  const fs::file_time_type before = fs::last_write_time(path);
  trainscope::testing::write_file(path, text);
  fs::last_write_time(path, before + std::chrono::seconds(seconds));
}

TEST(InputWatchTest, ReadsTheInputAgainOnlyWhenItsModificationTimeChanges) {
  TempDir tmp;
  const std::string path = tmp.file("grid.json");
  trainscope::testing::write_file(path, R"({"lr": [1, 2]})");
  detail::InputWatch watch(path, {"train"});
  EXPECT_EQ(watch.poll(), std::nullopt);

  rewrite(path, R"({"lr": [1, 2, 3]})");
  std::optional<absl::StatusOr<Plan>> changed = watch.poll();
  ASSERT_TRUE(changed.has_value());
  ASSERT_TRUE(changed->ok()) << changed->status();
  EXPECT_EQ((*changed)->jobs.size(), 3u);
  EXPECT_THAT((*changed)->jobs[0].command, ElementsAre("train"));
  EXPECT_EQ(watch.poll(), std::nullopt);  // seen

  // Bad input: the error names the file; the caller keeps its plan.
  rewrite(path, R"({"lr": [1, 2)");
  changed = watch.poll();
  ASSERT_TRUE(changed.has_value());
  ASSERT_FALSE(changed->ok());
  EXPECT_THAT(std::string(changed->status().message()), HasSubstr(path));
  EXPECT_EQ(watch.poll(), std::nullopt);

  // Gone: an error once; back: read again.
  fs::remove(path);
  changed = watch.poll();
  ASSERT_TRUE(changed.has_value());
  EXPECT_FALSE(changed->ok());
  EXPECT_EQ(watch.poll(), std::nullopt);
  trainscope::testing::write_file(path, R"({"lr": [7]})");
  changed = watch.poll();
  ASSERT_TRUE(changed.has_value());
  ASSERT_TRUE(changed->ok()) << changed->status();
  EXPECT_EQ((*changed)->jobs.size(), 1u);
}

constexpr char kRadt[] =
    "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
    "1,1,,,0,-,train.py,top,--lr=1\n"
    "1,2,,,0,-,train.py,top,--lr=2\n"
    "1,3,,,0,-,train.py,top,--lr=3\n";

TEST(InputWatchTest, RadtProgressWritesStatusAndRunOfEveryStartedRowOnly) {
  TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  trainscope::testing::write_file(path, kRadt);
  absl::StatusOr<Plan> plan = read_radt_csv(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 3u);
  std::vector<JobRecord> jobs(3);
  for (std::size_t i = 0; i < 3; ++i) jobs[i].job = plan->jobs[i];
  jobs[0].status = JobStatus::kFinished;
  jobs[0].run_id = "r0";
  jobs[1].status = JobStatus::kFailed;
  jobs[1].run_id = "r1";
  jobs[2].status = JobStatus::kQueued;  // never started: its row stays as it is
  ASSERT_TRUE(detail::write_radt_progress(path, jobs).ok());
  EXPECT_EQ(read_file(path),
            "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
            "1,1,FINISHED,r0,0,-,train.py,top,--lr=1\n"
            "1,2,FAILED,r1,0,-,train.py,top,--lr=2\n"
            "1,3,,,0,-,train.py,top,--lr=3\n");

  // Not a CSV, or jobs without a radT row: nothing is written.
  const std::string json = tmp.file("grid.json");
  trainscope::testing::write_file(json, R"({"lr": [1]})");
  EXPECT_TRUE(detail::write_radt_progress(json, jobs).ok());
  EXPECT_EQ(read_file(json), R"({"lr": [1]})");
  std::vector<JobRecord> grid(1);
  grid[0].job = trainscope::testing::shell_job("lr=1", "true");
  grid[0].status = JobStatus::kFinished;
  const std::string before = read_file(path);
  EXPECT_TRUE(detail::write_radt_progress(path, grid).ok());
  EXPECT_EQ(read_file(path), before);

  // A row that cannot be written: the error names the file and line.
  jobs[0].job.source = path + ":9";
  const absl::Status error = detail::write_radt_progress(path, jobs);
  EXPECT_THAT(std::string(error.message()), HasSubstr(path + ":9"));
}

// The scheduler writes radT's CSV back itself (SweepOptions::input).
TEST(InputWatchTest, TheSchedulerWritesTheRadtCsvBackWhenItEnds) {
  TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  trainscope::testing::write_file(path, kRadt);
  absl::StatusOr<Plan> plan = read_radt_csv(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (Job& job : plan->jobs) {  // the rows' own sources, a shell command each
    job.command = {"sh", "-c", job.id == "e1-w2-r1" ? "exit 4" : "true"};
  }
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.slots = *stand_in_slots(1);  // the rows pin GPU 0 (Devices)
  options.input = path;
  absl::StatusOr<SweepResult> result = run_sweep(*plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->jobs.size(), 3u);
  EXPECT_EQ(result->failed, 1);
  const std::vector<std::string> rows = trainscope::testing::lines_of(read_file(path));
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) {
    const JobRecord& record = result->jobs[i];
    EXPECT_EQ(rows[i + 1], fmt::format("1,{},{},{},0,-,train.py,top,--lr={}", i + 1,
                                       record.job.id == "e1-w2-r1" ? "FAILED" : "FINISHED",
                                       record.run_id, i + 1));
  }
}

// The rows of the jobs that ended, each once per status and run, as they end.
TEST(InputWatchTest, RadtProgressGivesTheRowsOfJobsThatEndedOnce) {
  TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  trainscope::testing::write_file(path, kRadt);
  absl::StatusOr<Plan> plan = read_radt_csv(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<JobRecord> jobs(3);
  for (std::size_t i = 0; i < 3; ++i) jobs[i].job = plan->jobs[i];
  jobs[0].status = JobStatus::kRunning;
  detail::RadtProgress progress(path);
  EXPECT_TRUE(progress.pending(jobs).empty());
  jobs[0].status = JobStatus::kFinished;
  jobs[0].run_id = "r0";
  jobs[1].status = JobStatus::kFailed;
  jobs[1].run_id = "r1";
  std::vector<RadtRowStatus> rows = progress.pending(jobs);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].status, "FINISHED");
  EXPECT_EQ(rows[1].run_id, "r1");
  EXPECT_TRUE(progress.pending(jobs).empty()) << "given already";
  jobs[1].status = JobStatus::kFinished;  // retried: another run
  jobs[1].run_id = "r1b";
  rows = progress.pending(jobs);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].run_id, "r1b");
  EXPECT_TRUE(detail::RadtProgress(tmp.file("grid.yaml")).pending(jobs).empty());
}

// The scheduler writes each row back as its job ends, while the sweep runs:
// the second workload's job finds the first's row FINISHED in the file (and
// fails otherwise); the watch does not take the write-back for an edit.
TEST(InputWatchTest, TheSchedulerWritesEachRowBackAsItsJobEnds) {
  TempDir tmp;
  const std::string path = tmp.file("exp.csv");
  trainscope::testing::write_file(path, kRadt);
  absl::StatusOr<Plan> plan = read_radt_csv(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (Job& job : plan->jobs) {
    job.command = {"sh", "-c",
                   job.id == "e1-w1-r1"
                       ? "true"
                       : fmt::format("grep -q '^1,{},FINISHED,' {}", job.group, path)};
  }
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.slots = *stand_in_slots(1);
  options.input = path;
  absl::StatusOr<SweepResult> result = run_sweep(*plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::string> order;
  for (const JobRecord& record : result->jobs) {
    EXPECT_EQ(record.status, JobStatus::kFinished) << record.job.id << ": " << record.error;
    order.push_back(record.job.id);
  }
  // Read again as an edit, the file would have dropped the workloads it marks
  // done from the plan, and their jobs would come last.
  EXPECT_THAT(order, ElementsAre("e1-w1-r1", "e1-w2-r1", "e1-w3-r1"));
}

// Live update: the first job changes the input while the sweep runs and
// waits until the scheduler has the new plan (sweep.json lists the added
// job); the added job runs, the dropped queued one never does.
TEST(InputWatchTest, TheSchedulerMergesTheInputWhenItChanges) {
  TempDir tmp;
  // A W&B-style YAML grid: its job ids come from the params ("lr=1"), so they
  // stay the same when the file changes.
  const std::string path = tmp.file("grid.yaml");
  const std::string next = tmp.file("next.yaml");
  trainscope::testing::write_file(path, "method: grid\nparameters:\n  lr:\n    values: [1, 2]\n");
  trainscope::testing::write_file(next, "method: grid\nparameters:\n  lr:\n    values: [1, 3]\n");
  const std::string state = tmp.file("sw/sweep.json");
  // $0 is the first param word (--lr), $1 its value. The pattern is spelled
  // so that sweep.json, which holds this script, matches only once it lists lr=3.
  const std::string script = fmt::format(
      "if [ \"$1\" = 1 ]; then cp {next} {path}.tmp && touch -d '+1 hour' {path}.tmp && "
      "mv {path}.tmp {path}; i=0; until grep -q \"lr=$((1 + 2))\" {state}; do i=$((i+1)); "
      "[ $i -gt 6000 ] && exit 9; sleep 0.01; done; fi",
      fmt::arg("next", next), fmt::arg("path", path), fmt::arg("state", state));
  const std::vector<std::string> program = {"sh", "-c", script};
  absl::StatusOr<Plan> plan = read_plan(path, program);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->jobs.size(), 2u);
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.input = path;
  options.input_program = program;
  absl::StatusOr<SweepResult> result = run_sweep(*plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(ids(*plan), ElementsAre("lr=1", "lr=2"));
  std::vector<std::string> finished;
  for (const JobRecord& record : result->jobs) {
    EXPECT_EQ(record.status, JobStatus::kFinished) << record.job.id << ": " << record.error;
    finished.push_back(record.job.id);
  }
  EXPECT_THAT(finished, ElementsAre("lr=1", "lr=3"));
  EXPECT_EQ(trainscope::testing::runs_by_job(tmp.file("sw")).count("lr=2"), 0u);
}

}  // namespace
}  // namespace trainscope::sweep
