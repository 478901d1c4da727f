// A launcher that vanished (kill -9 of `trainscope run`) is lost: its ranks
// tell the run's status. Each launcher's own records (environment, logs),
// and the plain names of older runs.
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/files.hpp"
#include "run/run_format.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A pid that no process has now: a child's, once reaped.
std::int64_t gone_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

class LauncherRecordsTest : public trainscope::testing::RunDirTest {
 protected:
  void SetUp() override {
    RunDirTest::SetUp();
    dir_ = write_run_dir("run");
  }
  void write(const std::string& name, const std::string& contents) const {
    trainscope::testing::write_file(dir_ / name, contents);
  }
  // A launcher of this host left RUNNING by a process that is gone.
  LauncherState lost_launcher() const {
    LauncherState launcher;
    launcher.host = detail::this_host();
    launcher.pid = gone_pid();
    launcher.status = RunStatus::kRunning;
    launcher.start_time_ms = detail::unix_now_ms() - 1000;
    launcher.heartbeat_ms = detail::unix_now_ms();
    launcher.flush_interval_ms = 1000;
    launcher.command = {"python", "train.py"};
    write(run::detail::launcher_file_name(launcher.host, launcher.pid),
          run::detail::format_launcher_file(launcher));
    return launcher;
  }
  void write_rank(RunStatus status, const std::string& launcher, std::int64_t pid) const {
    RankState rank;
    rank.host = detail::this_host();
    rank.pid = pid;
    rank.status = status;
    rank.start_time_ms = detail::unix_now_ms() - 900;
    rank.end_time_ms = status == RunStatus::kRunning ? 0 : detail::unix_now_ms();
    rank.heartbeat_ms = detail::unix_now_ms();
    rank.flush_interval_ms = 1000;
    rank.launcher = launcher;
    write(run::detail::rank_file_name(0), run::detail::format_rank_file(rank));
  }
  RunReader open() const { return open_run(dir_.string()); }

  fs::path dir_;
};

TEST_F(LauncherRecordsTest, ALostLauncherLeavesTheStatusToItsRanks) {
  const LauncherState launcher = lost_launcher();
  write_rank(RunStatus::kFinished, launcher.id(), ::getpid());
  RunReader finished = open();
  ASSERT_EQ(finished.launchers().size(), 1u);
  EXPECT_TRUE(finished.launchers()[0].lost);
  EXPECT_FALSE(finished.launchers()[0].crashed);
  EXPECT_EQ(finished.launchers()[0].status, RunStatus::kRunning);  // as its file was left
  EXPECT_EQ(finished.info().status, RunStatus::kFinished);         // not FAILED
  EXPECT_FALSE(finished.crashed());
  EXPECT_FALSE(finished.in_progress());
  EXPECT_GT(finished.info().end_time_ms, 0);

  // Its rank still runs (this process): so does the run.
  write_rank(RunStatus::kRunning, launcher.id(), ::getpid());
  RunReader running = open();
  EXPECT_EQ(running.info().status, RunStatus::kRunning);
  EXPECT_TRUE(running.in_progress());
  EXPECT_EQ(running.info().end_time_ms, 0);

  // A rank that failed or crashed fails the run, as ever.
  write_rank(RunStatus::kFailed, launcher.id(), ::getpid());
  EXPECT_EQ(open().info().status, RunStatus::kFailed);
  write_rank(RunStatus::kRunning, launcher.id(), gone_pid());
  EXPECT_EQ(open().info().status, RunStatus::kFailed);
  EXPECT_TRUE(open().crashed());
}

TEST_F(LauncherRecordsTest, ALostLauncherWithoutRanksIsACrash) {
  // Nothing else tells how its command went.
  lost_launcher();
  RunReader reader = open();
  ASSERT_EQ(reader.launchers().size(), 1u);
  EXPECT_TRUE(reader.launchers()[0].lost);
  EXPECT_TRUE(reader.launchers()[0].crashed);
  EXPECT_EQ(reader.info().status, RunStatus::kFailed);
  EXPECT_TRUE(reader.crashed());

  // A rank of another launcher does not vouch for this one.
  write_rank(RunStatus::kFinished, "elsewhere:1", ::getpid());
  EXPECT_EQ(open().info().status, RunStatus::kFailed);
}

TEST_F(LauncherRecordsTest, ALiveOrEndedLauncherIsNotLost) {
  LauncherState launcher = lost_launcher();
  launcher.status = RunStatus::kFinished;
  launcher.exit_code = 0;
  launcher.end_time_ms = detail::unix_now_ms();
  write(run::detail::launcher_file_name(launcher.host, launcher.pid),
        run::detail::format_launcher_file(launcher));
  RunReader reader = open();
  EXPECT_FALSE(reader.launchers()[0].lost);
  EXPECT_EQ(reader.info().status, RunStatus::kFinished);
}

TEST_F(LauncherRecordsTest, EachLauncherNamesItsOwnRecordsByHostAndPid) {
  EXPECT_EQ(launcher_variant_name("stdout.log", "node17", 4200), "stdout-node17-4200.log");
  EXPECT_EQ(launcher_variant_name("pip-freeze.txt", "a b/c", 7), "pip-freeze-a_b_c-7.txt");
  EXPECT_EQ(launcher_variant_name("environment.json", "n", 1), "environment-n-1.json");
  EXPECT_EQ(run_log_path(dir_.string(), RunLog::kStderr, "n", 1),
            (dir_ / "stderr-n-1.log").string());
  EXPECT_EQ(run_environment_path(dir_.string(), "n", 1), (dir_ / "environment-n-1.json").string());

  LauncherState a;
  a.host = "a";
  a.pid = 1;
  a.status = RunStatus::kFinished;
  LauncherState b = a;
  b.host = "b";
  for (const LauncherState* l : {&a, &b}) {
    write(run::detail::launcher_file_name(l->host, l->pid), run::detail::format_launcher_file(*l));
  }
  write("environment-a-1.json", R"({"hostname": "a"})");
  write("environment-b-1.json", R"({"hostname": "b"})");
  write("stdout-a-1.log", "from a\n");
  write("stdout-b-1.log", "from b\n");
  write("environment.json", R"({"hostname": "a"})");  // the first's, under the plain name
  write("stdout.log", "from a\n");
  RunReader reader = open();
  EXPECT_EQ(reader.environment(a).value_or(""), R"({"hostname": "a"})");
  EXPECT_EQ(reader.environment(b).value_or(""), R"({"hostname": "b"})");
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 100, a).value_or(""), "from a\n");
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 100, b).value_or(""), "from b\n");
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 100).value_or(""), "from a\n");
  EXPECT_TRUE(absl::IsNotFound(reader.log_tail(RunLog::kStderr, 100, b).status()));
  write("environment-b-1.json", "[1]");
  EXPECT_THAT(std::string(reader.environment(b).status().message()),
              HasSubstr("environment-b-1.json"));
}

TEST_F(LauncherRecordsTest, AnOlderRunKeepsItsPlainRecordsReadable) {
  // Written before each launcher had its own: one environment.json and log.
  LauncherState old;
  old.host = "a";
  old.pid = 1;
  old.status = RunStatus::kFinished;
  write(run::detail::launcher_file_name(old.host, old.pid), run::detail::format_launcher_file(old));
  write("environment.json", R"({"hostname": "a"})");
  write("stdout.log", "line\n");
  RunReader reader = open();
  EXPECT_EQ(reader.environment().value_or(""), R"({"hostname": "a"})");
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 100).value_or(""), "line\n");
  EXPECT_TRUE(absl::IsNotFound(reader.environment(old).status()));
  EXPECT_TRUE(absl::IsNotFound(reader.log_tail(RunLog::kStdout, 100, old).status()));
}

}  // namespace
}  // namespace trainscope
