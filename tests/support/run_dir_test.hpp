// The test fixture for code that writes or reads runs: a fresh root directory
// per test (a TempDir: removed afterwards unless the test failed), the
// variables a Run reads from the environment cleared before and after, and
// RunOptions that write there quickly without signal handlers or MLflow.
// Runs written by hand in the documented format come from write_run_dir
// (support/run_files.hpp); open_run reads one back.
//
//   using RunTest = trainscope::testing::RunDirTest;       // same suite name
//   class LaunchTest : public trainscope::testing::RunDirTest { ... };  // more helpers
#ifndef TRAINSCOPE_TESTS_SUPPORT_RUN_DIR_TEST_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_RUN_DIR_TEST_HPP_

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::testing {

// testing::Test::Run hides trainscope::Run inside test bodies.
using RunPtr = std::unique_ptr<trainscope::Run>;

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_rank_variables();
    root_ = tmp_.path();
  }
  void TearDown() override { clear_rank_variables(); }

  RunOptions options() const {
    RunOptions o;
    o.root = root_.string();
    o.handle_signals = false;
    o.mlflow_from_environment = false;
    o.flush_interval = absl::Milliseconds(50);
    return o;
  }

  static RunPtr start(const RunOptions& options) {
    absl::StatusOr<RunPtr> run = trainscope::Run::Start(options);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *std::move(run) : nullptr;
  }

  // A run directory root_/<name> written by hand: see write_run_dir in
  // support/run_files.hpp (run.json, and per rank its file and empty records).
  std::filesystem::path write_run_dir(const std::string& name, const RunJson& run = {},
                                      const std::vector<RankJson>& ranks = {}) const {
    return trainscope::testing::write_run_dir(root_ / name, run, ranks);
  }

  // RunReader::Open(dir), which must succeed: a failure is reported and the
  // test ends with an exception (absl::BadStatusOrAccess).
  static RunReader open_run(const std::string& dir) {
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return std::move(reader).value();
  }

  // What a Run, a launch or an MLflow export reads from the environment: the
  // run directory, the launcher's rank variables and MLflow's tracking URI.
  static void clear_rank_variables() {
    for (const char* variable : {"TRAINSCOPE_RUN_DIR", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                 "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "MLFLOW_TRACKING_URI"}) {
      ::unsetenv(variable);
    }
  }

  TempDir tmp_;
  std::filesystem::path root_;  // tmp_.path()
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_RUN_DIR_TEST_HPP_
