// Claiming a rank: processes started with the same RANK do not merge into one
// rank (the first records it, the others warn by name and record nothing), a
// descendant of the owner still shares it, a rank killed with kill -9 is
// claimed again, and a rank renewed by another host is refused.
#include "run/rank_claim.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/files.hpp"
#include "run/run_format.hpp"
#include "support/run_dir_test.hpp"
#include "support/warnings.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

using run::detail::RankClaimKind;
using ::testing::HasSubstr;
using trainscope::testing::CapturedWarnings;
using trainscope::testing::RunPtr;
using RankClaimTest = trainscope::testing::RunDirTest;

constexpr int kRegions = 500;

// What a child process reports to the test: its pid and every warning it got.
void report(int fd, const std::string& text) {
  const std::uint32_t size = static_cast<std::uint32_t>(text.size());
  if (::write(fd, &size, sizeof(size)) != sizeof(size) ||
      ::write(fd, text.data(), size) != static_cast<ssize_t>(size)) {
    ::_exit(5);
  }
}

// Every report until the child closes its end, or the first `count`.
std::vector<std::string> read_reports_until(int fd, std::size_t count) {
  std::vector<std::string> out;
  std::uint32_t size;
  while (out.size() < count && ::read(fd, &size, sizeof(size)) == sizeof(size)) {
    std::string text(size, '\0');
    if (size > 0 && ::read(fd, text.data(), size) != static_cast<ssize_t>(size)) break;
    out.push_back(std::move(text));
  }
  return out;
}
std::vector<std::string> read_reports(int fd) { return read_reports_until(fd, SIZE_MAX); }

// A training process with RANK=0: starts its run, says it started, waits until
// every sibling has started too (so all of them live at once), then times
// kRegions regions, logs as many metrics, ends and reports its warnings.
[[noreturn]] void rank_zero_main(RunOptions options, int report_fd, int go_fd) {
  int status = 0;
  {
    CapturedWarnings warnings;
    // Params differ per process: a second claimant's would conflict (write-once).
    options.params = {{"pid", std::to_string(::getpid())}};
    absl::StatusOr<RunPtr> run = trainscope::Run::Start(options);
    if (!run.ok()) ::_exit(3);
    if (!(*run)->log_param("pid again", std::to_string(::getpid())).ok()) ::_exit(8);
    report(report_fd, "started");
    char go;
    if (::read(go_fd, &go, 1) != 0) status = 4;  // EOF once the test closed it
    Timer timer;
    (*run)->attach(timer);
    for (int i = 0; i < kRegions; ++i) {
      timer.start(TimeType::BATCH);
      timer.end(TimeType::BATCH);
      if (!(*run)->log_metric("loss", 1.0 / (i + 1), i).ok()) status = 6;
    }
    if (!(*run)->end().ok()) status = 7;
    for (const std::string& message : warnings.messages()) report(report_fd, message);
  }
  ::_exit(status);
}

TEST_F(RankClaimTest, FourProcessesWithOneRankRecordOneRankAndTheOthersWarnByName) {
  const std::string dir = (root_ / "job").string();
  ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
  ::setenv("RANK", "0", 1);
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> pids;
  std::vector<int> reports;
  for (int i = 0; i < 4; ++i) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::close(go[1]);
      rank_zero_main(options(), fds[1], go[0]);
    }
    ::close(fds[1]);
    pids.push_back(pid);
    reports.push_back(fds[0]);
  }
  ::close(go[0]);
  // Each child's first report is "started"; then all may go on.
  for (int fd : reports) {
    std::uint32_t size;
    char text[7];
    ASSERT_EQ(::read(fd, &size, sizeof(size)), static_cast<ssize_t>(sizeof(size)));
    ASSERT_EQ(size, 7u);
    ASSERT_EQ(::read(fd, text, 7), 7);
  }
  ::close(go[1]);
  std::vector<std::vector<std::string>> warnings;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    warnings.push_back(read_reports(reports[i]));
    ::close(reports[i]);
    int status = 0;
    ASSERT_EQ(::waitpid(pids[i], &status, 0), pids[i]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

  RunReader reader = open_run(dir);
  ASSERT_EQ(reader.ranks().size(), 1u);
  const std::int64_t owner = reader.ranks()[0].pid;
  EXPECT_EQ(reader.ranks()[0].status, RunStatus::kFinished);
  int refused = 0;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] == owner) {
      EXPECT_TRUE(warnings[i].empty()) << warnings[i][0];
      continue;
    }
    ++refused;
    ASSERT_EQ(warnings[i].size(), 1u) << "pid " << pids[i];
    EXPECT_THAT(warnings[i][0], HasSubstr("rank 0 of run " + dir + " is already recorded by pid " +
                                          std::to_string(owner) + " on host"));
    EXPECT_THAT(warnings[i][0],
                HasSubstr("this process (pid " + std::to_string(pids[i]) + " on host"));
    EXPECT_THAT(warnings[i][0], HasSubstr("records nothing"));
  }
  EXPECT_EQ(refused, 3);
  // Params of the owner alone: the others record none.
  const std::map<std::string, std::string> params = {{"pid", std::to_string(owner)},
                                                     {"pid again", std::to_string(owner)}};
  EXPECT_EQ(reader.info().params, params);
  // One process's records, as its summary says.
  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_EQ(regions->rows.size(), static_cast<std::size_t>(kRegions));
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->rows.size(), static_cast<std::size_t>(kRegions));
  absl::StatusOr<Summary> summary = reader.read_summary(0);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->entries.size(), 1u);
  EXPECT_EQ(summary->entries[0].stats.count, static_cast<std::uint64_t>(kRegions));
}

TEST_F(RankClaimTest, ARankKilledWithKill9IsClaimedAgain) {
  const std::string dir = (root_ / "job").string();
  ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    absl::StatusOr<RunPtr> run = trainscope::Run::Start(options());
    if (!run.ok()) ::_exit(3);
    report(fds[1], "started");
    for (;;) ::pause();
  }
  ::close(fds[1]);
  ASSERT_EQ(read_reports_until(fds[0], 1).size(), 1u) << "the child did not start its run";
  ::close(fds[0]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(open_run(dir).ranks()[0].pid, pid);  // RUNNING, its holder dead

  CapturedWarnings warnings;
  RunPtr run = start(options());
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(run->log_metric("loss", 1.0).ok());
  ASSERT_TRUE(run->end().ok());
  EXPECT_EQ(warnings.count(), 0u) << warnings.messages()[0];
  RunReader reader = open_run(dir);
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].pid, ::getpid());
  EXPECT_EQ(reader.ranks()[0].status, RunStatus::kFinished);
}

TEST_F(RankClaimTest, ADescendantOfTheOwnerSharesTheRank) {
  const std::string dir = (root_ / "job").string();
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  absl::StatusOr<run::detail::RankClaim> owner = run::detail::claim_rank(dir, 0);
  ASSERT_TRUE(owner.ok()) << owner.status();
  ASSERT_EQ(owner->kind, RankClaimKind::kOwner);
  ASSERT_GE(owner->lock_fd, 0);
  const pid_t test_pid = ::getpid();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A grandchild, as a data-loader worker started by a worker pool.
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 0);
      if (!claim.ok()) ::_exit(3);
      if (claim->kind != RankClaimKind::kShared) ::_exit(4);
      ::_exit(claim->holder.pid == test_pid ? 0 : 5);
    }
    int status = 0;
    if (::waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status)) ::_exit(6);
    ::_exit(WEXITSTATUS(status));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(RankClaimTest, AnUnrelatedProcessIsRefusedAndNamesTheHolder) {
  const std::string dir = (root_ / "job").string();
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // The holder is a child; the test process is its parent, not its descendant.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 3);
    if (!claim.ok() || claim->kind != RankClaimKind::kOwner) ::_exit(3);
    report(fds[1], "claimed");
    for (;;) ::pause();
  }
  ::close(fds[1]);
  ASSERT_EQ(read_reports_until(fds[0], 1).size(), 1u);
  ::close(fds[0]);
  absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 3);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->kind, RankClaimKind::kRefused);
  EXPECT_EQ(claim->holder.pid, pid);
  EXPECT_EQ(claim->holder.host, trainscope::detail::this_host());
  EXPECT_THAT(claim->message, HasSubstr("rank 3 of run " + dir + " is already recorded by pid " +
                                        std::to_string(pid)));
  // Its holder gone (kill -9), the rank is free again.
  claim = run::detail::claim_rank(dir, 3);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->kind, RankClaimKind::kOwner);
}

TEST_F(RankClaimTest, ThisHostsKernelNamesAHolderWhoseLockFileSaysNothing) {
  const std::string dir = (root_ / "job").string();
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 0);
    if (!claim.ok() || claim->kind != RankClaimKind::kOwner) ::_exit(3);
    // As a holder that never said who it is (an older version, a full disk).
    if (::ftruncate(claim->lock_fd, 0) != 0) ::_exit(4);
    report(fds[1], "claimed");
    for (;;) ::pause();
  }
  ::close(fds[1]);
  ASSERT_EQ(read_reports_until(fds[0], 1).size(), 1u);
  ::close(fds[0]);
  run::detail::RankClaimOptions options;
  options.holder_wait = absl::ZeroDuration();
  absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 0, options);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->kind, RankClaimKind::kRefused);
  EXPECT_EQ(claim->holder.pid, pid);
  EXPECT_THAT(claim->message, HasSubstr("already recorded by pid " + std::to_string(pid)));
}

// A rank file of another host, renewed every 20 ms (or not) while it runs.
class OtherHostRank {
 public:
  OtherHostRank(std::string dir, bool renew) : dir_(std::move(dir)) {
    write(trainscope::detail::unix_now_ms());
    if (renew) {
      thread_ = std::thread([this] {
        while (!stop_.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          write(trainscope::detail::unix_now_ms());
        }
      });
    }
  }
  ~OtherHostRank() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  void write(std::int64_t heartbeat_ms) {
    RankState state;
    state.host = "elsewhere-node";
    state.pid = 4242;
    state.start_time_ms = heartbeat_ms;
    state.heartbeat_ms = heartbeat_ms;
    state.flush_interval_ms = 20;
    ASSERT_TRUE(trainscope::detail::write_file_atomically(
                    run::detail::join_path(dir_, run::detail::rank_file_name(0)),
                    run::detail::format_rank_file(state))
                    .ok());
  }

 private:
  std::string dir_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(RankClaimTest, ARankRenewedByAnotherHostIsRefusedAndASilentOneTakenOver) {
  const std::string dir = (root_ / "job").string();
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  run::detail::RankClaimOptions options;
  options.other_host_wait = absl::Seconds(2);
  {
    OtherHostRank other(dir, /*renew=*/true);
    absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 0, options);
    ASSERT_TRUE(claim.ok()) << claim.status();
    EXPECT_EQ(claim->kind, RankClaimKind::kRefused);
    EXPECT_THAT(claim->message, HasSubstr("already recorded by pid 4242 on host elsewhere-node"));
    EXPECT_EQ(claim->lock_fd, -1);
  }
  {
    // Not renewed (its host died a moment ago): taken over once the wait is over.
    OtherHostRank other(dir, /*renew=*/false);
    options.other_host_wait = absl::Milliseconds(200);
    absl::StatusOr<run::detail::RankClaim> claim = run::detail::claim_rank(dir, 0, options);
    ASSERT_TRUE(claim.ok()) << claim.status();
    EXPECT_EQ(claim->kind, RankClaimKind::kOwner);
  }
}

TEST(RankHolderTest, OnlyAWholeHolderLineIsRead) {
  using run::detail::parse_rank_holder;
  const std::string line = R"({"format":"trainscope.rank_claim","host":"h","pid":12})";
  const std::optional<run::detail::RankHolder> holder = parse_rank_holder(line + "\n");
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->host, "h");
  EXPECT_EQ(holder->pid, 12);
  EXPECT_FALSE(parse_rank_holder("").has_value());
  EXPECT_FALSE(parse_rank_holder(line).has_value());  // no newline: still being written
  EXPECT_FALSE(parse_rank_holder(line.substr(0, 20) + "\n").has_value());
  EXPECT_FALSE(parse_rank_holder("{\"host\":\"h\",\"pid\":12}\n").has_value());
}

TEST(RankHolderTest, AncestorsAreFoundThroughProc) {
  EXPECT_TRUE(run::detail::is_self_or_ancestor(::getpid()));
  EXPECT_TRUE(run::detail::is_self_or_ancestor(::getppid()));
  EXPECT_FALSE(run::detail::is_self_or_ancestor(0));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  EXPECT_FALSE(run::detail::is_self_or_ancestor(pid));  // a child is no ancestor
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace
}  // namespace trainscope
