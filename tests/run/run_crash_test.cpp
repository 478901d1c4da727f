// A run whose process is killed: kill -9 loses at most one flush interval and
// the reader calls the run crashed; SIGTERM/SIGINT lose nothing and leave
// KILLED; a record cut short is skipped by readers and repaired by writers.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/run_dir_test.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

using trainscope::testing::RunPtr;
constexpr auto kFlushInterval = absl::Milliseconds(100);

// What the child reports after each metric it logged.
struct Logged {
  std::int64_t count;     // metrics logged so far
  std::int64_t after_ms;  // Unix ms once log_metric returned
};

// Logs metric i = 0, 1, ... every millisecond until killed.
[[noreturn]] void child_main(const std::string& dir, int report_fd) {
  ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
  RunOptions options;
  options.flush_interval = kFlushInterval;
  options.mlflow_from_environment = false;
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) ::_exit(3);
  for (std::int64_t i = 0;; ++i) {
    // Once a signal ended the run, wait for its re-raise to end the process.
    if (!(*run)->log_metric("m", static_cast<double>(i), i).ok()) {
      for (;;) ::pause();
    }
    const Logged logged{i + 1, trainscope::detail::unix_now_ms()};
    if (::write(report_fd, &logged, sizeof(logged)) != sizeof(logged)) ::_exit(5);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// dir_: where the run goes (not created yet), inside the fixture's root_.
class RunCrashTest : public trainscope::testing::RunDirTest {
 protected:
  void SetUp() override {
    RunDirTest::SetUp();
    dir_ = (root_ / "run").string();
  }

  // Starts the child, waits until it logged `count` metrics, sends `signal`,
  // reaps it and returns every report it made.
  std::vector<Logged> run_child_until(std::int64_t count, int signal, int* wait_status) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      child_main(dir_, fds[1]);
    }
    ::close(fds[1]);
    std::vector<Logged> reports;
    Logged logged;
    bool signalled = false;
    while (::read(fds[0], &logged, sizeof(logged)) == sizeof(logged)) {
      reports.push_back(logged);
      if (!signalled && logged.count >= count) {
        ::kill(pid, signal);
        signalled = true;
      }
    }
    ::close(fds[0]);
    // A zombie still answers kill(pid, 0): reap it before reading the run.
    EXPECT_EQ(::waitpid(pid, wait_status, 0), pid);
    return reports;
  }

  std::string dir_;
};

// The rows must be exactly metrics 0, 1, ..., n-1 (no gap, no junk).
void expect_prefix(const std::vector<MetricPoint>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].step, static_cast<std::int64_t>(i));
    ASSERT_EQ(rows[i].value, static_cast<double>(i));
  }
}

TEST_F(RunCrashTest, KillNineLosesAtMostOneFlushInterval) {
  int wait_status = 0;
  const std::vector<Logged> reports = run_child_until(1000, SIGKILL, &wait_status);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) << wait_status;

  absl::StatusOr<RunReader> reader = RunReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->ranks().size(), 1u);
  const RankState& rank = reader->ranks()[0];
  EXPECT_EQ(rank.status, RunStatus::kRunning);  // as the child left it
  EXPECT_TRUE(rank.crashed);
  EXPECT_TRUE(reader->crashed());
  EXPECT_EQ(reader->info().status, RunStatus::kFailed);

  absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  expect_prefix(metrics->rows);
  // The child's last heartbeat came after a flush that started at most one
  // interval before it; everything logged before that start is on disk.
  const std::int64_t flushed_before = rank.heartbeat_ms - absl::ToInt64Milliseconds(kFlushInterval);
  std::int64_t must_have = 0;
  for (const Logged& logged : reports) {
    if (logged.after_ms < flushed_before) must_have = logged.count;
  }
  EXPECT_GE(static_cast<std::int64_t>(metrics->rows.size()), must_have);
  EXPECT_GT(metrics->rows.size(), 0u);
}

TEST_F(RunCrashTest, TerminatingSignalsLoseNothingAndLeaveKilled) {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(signal);
    fs::remove_all(dir_);
    int wait_status = 0;
    const std::vector<Logged> reports = run_child_until(300, signal, &wait_status);
    // The handler flushed, then the signal did what it does by default.
    ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal) << wait_status;

    absl::StatusOr<RunReader> reader = RunReader::Open(dir_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_EQ(reader->ranks().size(), 1u);
    EXPECT_EQ(reader->ranks()[0].status, RunStatus::kKilled);
    EXPECT_FALSE(reader->crashed());
    EXPECT_EQ(reader->info().status, RunStatus::kKilled);
    EXPECT_GT(reader->info().end_time_ms, 0);

    absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_FALSE(metrics->truncated);
    expect_prefix(metrics->rows);
    ASSERT_FALSE(reports.empty());
    EXPECT_GE(static_cast<std::int64_t>(metrics->rows.size()), reports.back().count);
  }
}

// A host's own SIGTERM handler (Python's only notes the signal; the main
// thread runs the Python one once back in the interpreter), backed up by the
// run: when the main thread never gets there, the run still ends KILLED and
// the process dies of the signal; when it does, the run is the host's to end.
std::atomic<int> g_host_signal{0};
extern "C" void note_host_signal(int signal) { g_host_signal.store(signal); }

// In a forked test process: the host's SIGTERM handler, then a run in `dir`
// that backs it up (exits 3 or 4 where either fails).
std::unique_ptr<Run> start_backed_up_run(const std::string& dir, absl::Duration grace,
                                         Run::ForkedChild child) {
  ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
  struct sigaction host = {};
  host.sa_handler = note_host_signal;
  sigemptyset(&host.sa_mask);
  ::sigaction(SIGTERM, &host, nullptr);
  RunOptions options;
  options.handle_signals = false;  // the host's
  options.flush_interval = kFlushInterval;
  options.mlflow_from_environment = false;
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) ::_exit(3);
  if (!(*run)->back_up_signal_handlers({SIGTERM}, grace, child)) ::_exit(4);
  return *std::move(run);
}

[[noreturn]] void backed_up_child(const std::string& dir, int ready_fd, bool blocked,
                                  absl::Duration grace) {
  const std::unique_ptr<Run> run = start_backed_up_run(dir, grace, Run::ForkedChild::kHostHandler);
  if (!run->log_metric("m", 1.0, 0).ok()) ::_exit(5);
  if (::write(ready_fd, "r", 1) != 1) ::_exit(6);
  if (blocked) {
    for (;;) ::pause();  // never looks at what the host's handler noted
  }
  while (g_host_signal.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (void)run->end(RunStatus::kKilled);
  ::_exit(7);
}

int run_backed_up_child(const std::string& dir, bool blocked, absl::Duration grace) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    backed_up_child(dir, fds[1], blocked, grace);
  }
  ::close(fds[1]);
  char ready = 0;
  EXPECT_EQ(::read(fds[0], &ready, 1), 1);
  ::close(fds[0]);
  ::kill(pid, SIGTERM);
  int wait_status = 0;
  EXPECT_EQ(::waitpid(pid, &wait_status, 0), pid);
  return wait_status;
}

void expect_killed_with_everything(const std::string& dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->ranks().size(), 1u);
  EXPECT_EQ(reader->ranks()[0].status, RunStatus::kKilled);
  EXPECT_FALSE(reader->crashed());
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->rows.size(), 1u);
}

TEST_F(RunCrashTest, ABackedUpHandlerThatNeverRunsStillEndsTheRunKilled) {
  const int wait_status = run_backed_up_child(dir_, true, absl::Milliseconds(300));
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGTERM) << wait_status;
  expect_killed_with_everything(dir_);
}

TEST_F(RunCrashTest, ABackedUpHandlerThatRunsEndsTheRunItself) {
  // A grace far beyond the host's ~1 ms: the backup never acts.
  const int wait_status = run_backed_up_child(dir_, false, absl::Seconds(60));
  ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 7) << wait_status;
  expect_killed_with_everything(dir_);
}

// A process forked from the run's and signalled before it reset anything (a
// fork-context Pool worker terminate()d before it first ran): with
// kDefaultAction it dies of the signal; with kHostHandler it runs the host's.
// What the run's process exits with: 10 the child died of SIGTERM, 8 the host's
// handler ran in it.
int signal_a_child_of_a_backed_up_run(const std::string& dir, Run::ForkedChild child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::unique_ptr<Run> run = start_backed_up_run(dir, absl::Seconds(60), child);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::raise(SIGTERM);
      ::_exit(g_host_signal.load() == SIGTERM ? 8 : 9);
    }
    int status = 0;
    if (::waitpid(grandchild, &status, 0) != grandchild) ::_exit(5);
    if (!run->end().ok()) ::_exit(6);
    if (WIFSIGNALED(status)) ::_exit(WTERMSIG(status) == SIGTERM ? 10 : 11);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 12);
  }
  int wait_status = 0;
  EXPECT_EQ(::waitpid(pid, &wait_status, 0), pid);
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

TEST_F(RunCrashTest, AForkedChildDiesOfTheSignalWhenTheHostHandlerIsTrainscopes) {
  EXPECT_EQ(signal_a_child_of_a_backed_up_run(dir_, Run::ForkedChild::kDefaultAction), 10);
}

TEST_F(RunCrashTest, AForkedChildRunsTheHostsOwnHandler) {
  EXPECT_EQ(signal_a_child_of_a_backed_up_run(dir_, Run::ForkedChild::kHostHandler), 8);
}

TEST_F(RunCrashTest, ACutRecordIsSkippedThenRepairedByTheNextWriter) {
  ::setenv("TRAINSCOPE_RUN_DIR", dir_.c_str(), 1);
  RunOptions options;
  options.handle_signals = false;
  options.mlflow_from_environment = false;
  {
    absl::StatusOr<RunPtr> run = trainscope::Run::Start(options);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE((*run)->log_metric("m", 0.0).ok());
  }
  const std::string path = dir_ + "/metrics-0.csv";
  trainscope::testing::write_file(path, "m,1,1,17000", /*append=*/true);  // a crash mid-write
  absl::StatusOr<RunReader> reader = RunReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(metrics->truncated);
  EXPECT_EQ(metrics->rows.size(), 1u);
  EXPECT_LT(metrics->next_offset, fs::file_size(path));

  {
    absl::StatusOr<RunPtr> run = trainscope::Run::Start(options);  // same rank: the owner
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE((*run)->log_metric("m", 1.0, 1).ok());
  }
  ::unsetenv("TRAINSCOPE_RUN_DIR");
  metrics = reader->read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_FALSE(metrics->truncated);
  expect_prefix(metrics->rows);
  EXPECT_EQ(metrics->rows.size(), 2u);
}

}  // namespace
}  // namespace trainscope
