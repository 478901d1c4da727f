// A test fixture for code that writes runs: a fresh root directory per test
// under TRAINSCOPE_TEST_TMPDIR/<suite>/<test>, the rank variables a Run reads
// from the environment cleared before and after, and RunOptions that write
// there quickly without signal handlers or MLflow.
#ifndef TRAINSCOPE_TESTS_RUN_DIR_TEST_HPP_
#define TRAINSCOPE_TESTS_RUN_DIR_TEST_HPP_

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "trainscope/run/run.hpp"

namespace trainscope::testing {

// testing::Test::Run hides trainscope::Run inside test bodies.
using RunPtr = std::unique_ptr<trainscope::Run>;

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_rank_variables();
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::path(TRAINSCOPE_TEST_TMPDIR) / info->test_suite_name() / info->name();
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
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

  static void clear_rank_variables() {
    for (const char* variable :
         {"TRAINSCOPE_RUN_DIR", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
      ::unsetenv(variable);
    }
  }

  std::filesystem::path root_;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_RUN_DIR_TEST_HPP_
