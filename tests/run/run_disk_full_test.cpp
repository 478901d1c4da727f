// A disk that fills up mid-run: writes fail part-way (RLIMIT_FSIZE makes the
// kernel cut a write short, then fail it with EFBIG, as ENOSPC would), the run
// warns once and keeps the records buffered; once space is back they all land,
// whole and in order. Runs in a forked child so the limit stays there.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "support/run_dir_test.hpp"
#include "support/warnings.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

constexpr int kMetrics = 2000;    // ~50 KiB of CSV
constexpr rlim_t kLimit = 16384;  // bytes per file while the "disk is full"

// Exit codes: 0 ok, 10+ setup failures, 20 no warning, 21 too many warnings.
[[noreturn]] void child_main(const std::string& dir) {
  ::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of being killed
  const trainscope::testing::CapturedWarnings warnings;
  ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
  RunOptions options;
  options.flush_interval = absl::Milliseconds(10);
  options.mlflow_from_environment = false;
  options.handle_signals = false;
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) ::_exit(10);
  rlimit limit{};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  const rlimit full{kLimit, limit.rlim_max};
  if (::setrlimit(RLIMIT_FSIZE, &full) != 0) ::_exit(11);
  for (int i = 0; i < kMetrics; ++i) {
    if (!(*run)->log_metric("loss", 1.0 + i, i).ok()) ::_exit(12);
    if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(15));  // flushes fail
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::size_t warnings_while_full = warnings.count();
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(13);  // space is back
  if (!(*run)->end().ok()) ::_exit(14);
  if (warnings_while_full == 0) ::_exit(20);
  if (warnings_while_full > 2) ::_exit(21);  // once per failing file, not per flush
  ::_exit(0);
}

using RunDiskFullTest = trainscope::testing::RunDirTest;

TEST_F(RunDiskFullTest, RecordsWaitForSpaceAndLandWholeAndInOrder) {
  const fs::path dir = root_ / "run";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) child_main(dir.string());
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0) << "see child_main for the code";

  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().status, RunStatus::kFinished);
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();  // no garbled line anywhere
  EXPECT_FALSE(metrics->truncated);
  ASSERT_EQ(metrics->rows.size(), static_cast<std::size_t>(kMetrics));
  for (int i = 0; i < kMetrics; ++i) {
    ASSERT_EQ(metrics->rows[i].step, i);
    ASSERT_EQ(metrics->rows[i].value, 1.0 + i);
  }
  EXPECT_GT(fs::file_size(dir / "metrics-0.csv"), kLimit);  // it really hit the limit
}

}  // namespace
}  // namespace trainscope
