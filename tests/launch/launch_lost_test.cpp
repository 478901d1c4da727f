// The command outlives its launcher: it writes straight into the run's log
// files, so a launcher killed with -9 (the OOM killer, a wrong pid) no longer
// kills it with a broken pipe at its next line. Two launchers of one run keep
// their own logs and environment. Launchers run in forked children here, so
// that they can be killed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/files.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::trainscope::testing::lines_of;
using ::trainscope::testing::read_file;

// Generous: waits end as soon as their condition holds; only a hang reaches this.
constexpr auto kDeadline = std::chrono::seconds(60);

bool wait_until(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class LaunchLostTest : public trainscope::testing::RunDirTest {
 protected:
  LaunchOptions options(std::vector<std::string> command) const {
    LaunchOptions o;
    o.command = std::move(command);
    o.run.dir = (root_ / "run").string();
    o.run.mlflow_from_environment = false;
    o.run.flush_interval = absl::Milliseconds(50);
    o.sample_hardware = false;
    o.record_environment = false;
    o.tee = false;
    o.join_job_from_environment = false;
    return o;
  }

  // launch(o) in a forked child, its stdout/stderr into `terminal` (or kept).
  static pid_t launch_in_child(LaunchOptions o, const std::string& terminal = "") {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
      if (!terminal.empty()) {
        std::FILE* out = std::freopen(terminal.c_str(), "w", stdout);
        if (out == nullptr || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) ::_exit(99);
      }
      absl::StatusOr<LaunchResult> result = launch(std::move(o));
      std::fflush(nullptr);
      ::_exit(result.ok() ? result->exit_code : 98);
    }
    return child;
  }
  static int exit_code(pid_t child) {
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  fs::path run_dir() const { return root_ / "run"; }
};

TEST_F(LaunchLostTest, TheCommandOutlivesALauncherKilledWithSigkill) {
  const std::string killed = (root_ / "killed").string();
  const std::string done = (root_ / "done").string();
  // Prints every 50 ms until told that its launcher is dead, then 20 lines
  // more: before the fix, the first of them died of SIGPIPE.
  const pid_t launcher = launch_in_child(options(
      {"/bin/sh", "-c",
       "while [ ! -e \"$0\" ]; do echo before; sleep 0.05; done; "
       "i=0; while [ $i -lt 20 ]; do echo after $i; echo err $i >&2; i=$((i+1)); sleep 0.05; "
       "done; echo $? > \"$1\"",
       killed, done}));
  ASSERT_TRUE(wait_until([&] {
    return read_file(run_dir() / "stdout.log").find("before\nbefore\n") != std::string::npos;
  })) << "the command never printed";
  ::kill(launcher, SIGKILL);
  EXPECT_EQ(exit_code(launcher), 128 + SIGKILL);
  trainscope::testing::write_file(killed, "");
  ASSERT_TRUE(wait_until([&] { return fs::exists(done); })) << "the command never ended";

  const std::vector<std::string> out = lines_of(read_file(run_dir() / "stdout.log"));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), "after 19");
  EXPECT_THAT(read_file(run_dir() / "stderr.log"), HasSubstr("err 19\n"));
  // Its own names and the plain ones are one file.
  const std::string host = detail::this_host();
  EXPECT_EQ(read_file(run_log_path(run_dir().string(), RunLog::kStdout, host, launcher)),
            read_file(run_dir() / "stdout.log"));

  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir().string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->launchers().size(), 1u);
  EXPECT_TRUE(reader->launchers()[0].lost);
  // No rank recorded: nothing but the launcher tells how the command went.
  EXPECT_EQ(reader->info().status, RunStatus::kFailed);
}

TEST_F(LaunchLostTest, TeeFollowsTheLogsToTheTerminal) {
  LaunchOptions o = options({"/bin/sh", "-c",
                             "i=0; while [ $i -lt 30 ]; do echo line $i; i=$((i+1)); done; "
                             "echo oops >&2"});
  o.tee = true;
  const std::string terminal = (root_ / "terminal").string();
  EXPECT_EQ(exit_code(launch_in_child(o, terminal)), 0);
  const std::string shown = read_file(terminal);
  for (int i = 0; i < 30; ++i) EXPECT_THAT(shown, HasSubstr("line " + std::to_string(i) + "\n"));
  EXPECT_THAT(shown, HasSubstr("oops\n"));
  EXPECT_EQ(read_file(run_dir() / "stderr.log"), "oops\n");
}

TEST_F(LaunchLostTest, TwoLaunchersOfOneRunKeepTheirOwnRecords) {
  const std::string go = (root_ / "go").string();
  const auto command = [&](const std::string& name) {
    LaunchOptions o = options({"/bin/sh", "-c",
                               "while [ ! -e \"$0\" ]; do sleep 0.02; done; "
                               "echo $1 1; echo $1 2; echo $1 3",
                               go, name});
    o.record_environment = true;
    return o;
  };
  const pid_t a = launch_in_child(command("a"));
  const pid_t b = launch_in_child(command("b"));
  ASSERT_TRUE(wait_until([&] {
    absl::StatusOr<RunReader> reader = RunReader::Open(run_dir().string());
    return reader.ok() && reader->launchers().size() == 2;
  }));
  trainscope::testing::write_file(go, "");
  EXPECT_EQ(exit_code(a), 0);
  EXPECT_EQ(exit_code(b), 0);

  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir().string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().status, RunStatus::kFinished);
  std::vector<std::string> own;
  for (const LauncherState& l : reader->launchers()) {
    const std::string name = l.pid == a ? "a" : "b";
    own.push_back(reader->log_tail(RunLog::kStdout, 1000, l).value_or("?"));
    EXPECT_EQ(own.back(), name + " 1\n" + name + " 2\n" + name + " 3\n");
    absl::StatusOr<std::string> env = reader->environment(l);
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_THAT(*env, HasSubstr("\"launcher\": \"" + l.id() + "\""));
  }
  // The plain names are one launcher's whole records, not a mix.
  EXPECT_THAT(own, ::testing::Contains(reader->log_tail(RunLog::kStdout, 1000).value_or("?")));
  absl::StatusOr<std::string> first = reader->environment();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first == reader->environment(reader->launchers()[0]).value_or("") ||
              *first == reader->environment(reader->launchers()[1]).value_or(""));
}

}  // namespace
}  // namespace trainscope
