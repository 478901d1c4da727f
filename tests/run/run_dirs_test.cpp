// find_run_dirs: a run, a directory of runs, or a directory whose runs/ holds
// them (a sweep, a stalls analysis); a path that holds no run says why.
#include "trainscope/run/run_dirs.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/run_dir_test.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/run/run.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using RunDirsTest = trainscope::testing::RunDirTest;

std::string error_of(const absl::StatusOr<std::vector<std::string>>& found) {
  return found.ok() ? std::string("(ok)") : std::string(found.status().message());
}

TEST_F(RunDirsTest, ARunIsItself) {
  const std::string run = write_run_dir("one").string();
  absl::StatusOr<std::vector<std::string>> found = find_run_dirs({run});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(run));
}

TEST_F(RunDirsTest, ADirectoryOfRunsGivesThemSortedAndSkipsOtherFolders) {
  const std::string b = write_run_dir("runs-here/b").string();
  const std::string a = write_run_dir("runs-here/a").string();
  fs::create_directories(root_ / "runs-here" / "notes");
  trainscope::testing::write_file(root_ / "runs-here" / "README", "x");
  absl::StatusOr<std::vector<std::string>> found = find_run_dirs({(root_ / "runs-here").string()});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(a, b));
}

TEST_F(RunDirsTest, ASweepOrAStallsAnalysisGivesTheRunsInItsRunsFolder) {
  // A sweep directory: sweep.json beside runs/ (the run room recognises
  // runs/ itself, not the sweep's file), and a stalls analysis.
  for (const char* kind : {"sweep", "analysis"}) {
    const fs::path dir = root_ / kind;
    trainscope::testing::write_file(
        dir / (std::string(kind) == "sweep" ? "sweep.json" : "stalls.json"), "{}");
    const std::string second = write_run_dir(std::string(kind) + "/runs/job-2").string();
    const std::string first = write_run_dir(std::string(kind) + "/runs/job-1").string();
    absl::StatusOr<std::vector<std::string>> found = find_run_dirs({dir.string()});
    ASSERT_TRUE(found.ok()) << kind << ": " << found.status();
    EXPECT_THAT(*found, ElementsAre(first, second)) << kind;
  }
}

TEST_F(RunDirsTest, SeveralPathsKeepTheirOrder) {
  const std::string run = write_run_dir("solo").string();
  const std::string job = write_run_dir("sweep/runs/job").string();
  absl::StatusOr<std::vector<std::string>> found = find_run_dirs({(root_ / "sweep").string(), run});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(job, run));
}

TEST_F(RunDirsTest, WhatIsLeftOfARunWithoutItsRunJsonIsTaken) {
  // A reader then skips it by name rather than leaving it out silently.
  trainscope::testing::write_file(root_ / "runs" / "damaged" / "rank-0.json", "{}");
  absl::StatusOr<std::vector<std::string>> found = find_run_dirs({root_.string()});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre((root_ / "runs" / "damaged").string()));
}

TEST_F(RunDirsTest, APathThatHoldsNoRunSaysWhy) {
  const std::string empty = (root_ / "empty").string();
  fs::create_directories(empty);
  EXPECT_EQ(error_of(find_run_dirs({empty})), empty + ": not a run (no run.json), and neither " +
                                                  empty + " nor " + empty +
                                                  "/runs has a run directory");
  EXPECT_TRUE(absl::IsNotFound(find_run_dirs({empty}).status()));
  // A sweep with no run yet: its runs/ is empty.
  fs::create_directories(root_ / "fresh" / "runs");
  trainscope::testing::write_file(root_ / "fresh" / "sweep.json", "{}");
  EXPECT_THAT(error_of(find_run_dirs({(root_ / "fresh").string()})),
              ::testing::HasSubstr("fresh/runs has a run directory"));

  const std::string missing = (root_ / "missing").string();
  EXPECT_EQ(error_of(find_run_dirs({missing})), missing + ": no such run directory");
  EXPECT_TRUE(absl::IsNotFound(find_run_dirs({missing}).status()));
  trainscope::testing::write_file(root_ / "file.txt", "x");
  EXPECT_EQ(error_of(find_run_dirs({(root_ / "file.txt").string()})),
            (root_ / "file.txt").string() + ": not a directory");
  EXPECT_EQ(error_of(find_run_dirs({})), "no run directories given");
}

// The one rule for where runs are when no directory is named (Run's root,
// `trainscope top` without an argument): TRAINSCOPE_RUNS_ROOT, else ./trainscope-runs.
TEST(DefaultRunsRoot, TheVariableWhenSetElseTrainscopeRuns) {
  const char* before = std::getenv("TRAINSCOPE_RUNS_ROOT");
  const std::string saved = before != nullptr ? before : "";
  ::unsetenv("TRAINSCOPE_RUNS_ROOT");
  EXPECT_EQ(default_runs_root(), "trainscope-runs");
  ::setenv("TRAINSCOPE_RUNS_ROOT", "", 1);
  EXPECT_EQ(default_runs_root(), "trainscope-runs");
  ::setenv("TRAINSCOPE_RUNS_ROOT", "/data/runs", 1);
  EXPECT_EQ(default_runs_root(), "/data/runs");
  EXPECT_EQ(RunOptions{}.root, kDefaultRunsRoot);  // Run::Start replaces it by the rule
  if (before != nullptr) {
    ::setenv("TRAINSCOPE_RUNS_ROOT", saved.c_str(), 1);
  } else {
    ::unsetenv("TRAINSCOPE_RUNS_ROOT");
  }
}

}  // namespace
}  // namespace trainscope
