// trainscope::launch, the library side of `trainscope run`: exit codes,
// crashes, missing commands, signals, quoting, output capture.
#include "trainscope/launch/launch.hpp"

#include "common/files.hpp"
#include "trainscope/launch/dump.hpp"
#include "trainscope/run/run_reader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/recording_exporter.hpp"
#include "support/run_dir_test.hpp"
#include "support/simulated_nvml.hpp"
#include "support/warnings.hpp"

namespace trainscope {
namespace {

using ::trainscope::testing::lines_of;
using ::trainscope::testing::read_file;

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

// Emits one reading per tick, so the test can count what reached the disk.
class FakeSource final : public HardwareSource {
 public:
  std::string name() const override { return "fake"; }
  absl::Status open(const HardwareContext&) override { return absl::OkStatus(); }
  absl::Status sample(std::vector<HardwareReading>* out) override {
    out->push_back({"test/fake", 1.0});
    return absl::OkStatus();
  }
};

// Launches into root_, RunDirTest's per-test directory (run and MLflow
// variables cleared); options() here hides RunDirTest's RunOptions one.
class LaunchTest : public trainscope::testing::RunDirTest {
 protected:
  LaunchOptions options(std::vector<std::string> command) const {
    LaunchOptions o;
    o.command = std::move(command);
    o.run.root = root_.string();
    o.run.mlflow_from_environment = false;
    o.run.flush_interval = absl::Milliseconds(50);
    o.sample_hardware = false;
    o.record_environment = false;
    o.tee = false;
    return o;
  }

  LaunchResult launch_ok(LaunchOptions o) const {
    absl::StatusOr<LaunchResult> result = launch(std::move(o));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : LaunchResult{};
  }

  // Waits until the command has written `text` to its stdout.log.
  void wait_for_output(const std::string& text) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const fs::directory_entry& run : fs::directory_iterator(root_)) {
        if (read_file(run.path() / "stdout.log").find(text) != std::string::npos) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "the command never printed " << text;
  }
};

// The status the launcher recorded for its command (the launcher is no rank).
std::string launcher_status(const std::string& run_dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status().ToString();
  if (reader->launchers().size() != 1)
    return "launchers: " + std::to_string(reader->launchers().size());
  return std::string(run_status_name(reader->launchers()[0].status));
}

TEST_F(LaunchTest, TheLauncherIsNoRank) {
  const LaunchResult result = launch_ok(options({"/bin/sh", "-c", "exit 4"}));
  absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(reader->ranks().empty());
  EXPECT_EQ(reader->world_size(), 0u);
  EXPECT_FALSE(fs::exists(fs::path(result.run_dir) / "rank-0.json"));
  ASSERT_EQ(reader->launchers().size(), 1u);
  const LauncherState& launcher = reader->launchers()[0];
  EXPECT_EQ(launcher.pid, ::getpid());
  EXPECT_EQ(launcher.host, detail::this_host());
  EXPECT_EQ(launcher.exit_code, 4);
  EXPECT_EQ(launcher.status, RunStatus::kFailed);
  EXPECT_THAT(launcher.command, ElementsAre("/bin/sh", "-c", "exit 4"));
  EXPECT_EQ(reader->hosts(), std::vector<std::string>{detail::this_host()});
  EXPECT_EQ(reader->info().status, RunStatus::kFailed);
}

TEST_F(LaunchTest, ExitZeroFinishes) {
  const LaunchResult result = launch_ok(options({"true"}));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.term_signal, 0);
  EXPECT_EQ(result.status, RunStatus::kFinished);
  EXPECT_EQ(launcher_status(result.run_dir), "FINISHED");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr("\"trainscope.exit_code\": \"0\""));
}

TEST_F(LaunchTest, NonZeroExitFails) {
  const LaunchResult result = launch_ok(options({"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.status, RunStatus::kFailed);
  EXPECT_EQ(launcher_status(result.run_dir), "FAILED");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr("\"trainscope.exit_code\": \"3\""));
}

TEST_F(LaunchTest, CrashFailsWithTheSignalRecorded) {
  const LaunchResult result = launch_ok(options({"/bin/sh", "-c", "kill -SEGV $$"}));
  EXPECT_EQ(result.term_signal, SIGSEGV);
  EXPECT_EQ(result.exit_code, 128 + SIGSEGV);
  EXPECT_EQ(result.status, RunStatus::kFailed);
  EXPECT_EQ(launcher_status(result.run_dir), "FAILED");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr("\"trainscope.signal\": \"" + std::to_string(SIGSEGV) + "\""));
}

TEST_F(LaunchTest, MissingCommandFailsWith127) {
  const LaunchResult result = launch_ok(options({"trainscope-no-such-command", "--x"}));
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.status, RunStatus::kFailed);
  EXPECT_TRUE(absl::IsNotFound(result.spawn_error)) << result.spawn_error;
  EXPECT_THAT(std::string(result.spawn_error.message()), HasSubstr("trainscope-no-such-command"));
  EXPECT_EQ(launcher_status(result.run_dir), "FAILED");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "stderr.log"),
              HasSubstr("command not found: 'trainscope-no-such-command'"));
}

TEST_F(LaunchTest, ArgumentsKeepSpacesAndQuotes) {
  const LaunchResult result =
      launch_ok(options({"printf", "%s\\n", "a b", "c\"d", "it's", "$HOME", "--name=x y"}));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stdout.log"),
            "a b\nc\"d\nit's\n$HOME\n--name=x y\n");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"), HasSubstr("\"name\": \"x y\""));
}

TEST_F(LaunchTest, ParamsComeFromTheCommandsOptions) {
  EXPECT_THAT(params_from_arguments({"train.py", "--lr", "0.1", "--name=x y", "--offset", "-1",
                                     "--verbose", "-v", "--quote", "a\"b", "--last"}),
              ElementsAre(Pair("last", "true"), Pair("lr", "0.1"), Pair("name", "x y"),
                          Pair("offset", "-1"), Pair("quote", "a\"b"), Pair("verbose", "true")));
}

TEST_F(LaunchTest, OutputIsCapturedAndTheCommandJoinsTheRun) {
  LaunchOptions o = options({"/bin/sh", "-c",
                             "echo \"$TRAINSCOPE_RUN_DIR\"; echo \"$CUDA_VISIBLE_DEVICES\"; "
                             "echo oops >&2"});
  nvml::SimulatedNvml three_gpus(3);
  o.devices = {0, 2};
  o.nvml = &three_gpus;
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stdout.log"), result.run_dir + "\n0,2\n");
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stderr.log"), "oops\n");
  // The launch's own run does not leak into this process's environment.
  EXPECT_EQ(std::getenv("TRAINSCOPE_RUN_DIR"), nullptr);
}

// --devices names GPUs the machine has, or nothing runs (issue 26: `--devices 7`
// on a machine without that GPU ran the job on no GPU).
TEST_F(LaunchTest, DevicesTheMachineLacksAreAnErrorBeforeAnythingRuns) {
  nvml::SimulatedNvml two_gpus(2);
  LaunchOptions o = options({"/bin/sh", "-c", "echo ran"});
  o.devices = {7};
  o.nvml = &two_gpus;
  absl::StatusOr<LaunchResult> result = launch(o);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("--devices: GPU 7 does not exist (this machine has 2 GPU(s): 0-1)"));
  nvml::SimulatedNvml none(0);
  o.nvml = &none;
  result = launch(o);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("--devices 7: this machine has no GPU (NVML lists no GPU)"));
  EXPECT_TRUE(fs::is_empty(root_)) << "a run directory was made";
}

TEST_F(LaunchTest, EnvironmentReachesOnlyTheCommandAndNotTheRecordedCommand) {
  LaunchOptions o = options({"/bin/sh", "-c", "echo \"$TS_TEST_A|$TS_TEST_B\""});
  o.environment = {{"TS_TEST_A", "1 2"}, {"TS_TEST_B", "x=y"}};
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stdout.log"), "1 2|x=y\n");
  EXPECT_EQ(std::getenv("TS_TEST_A"), nullptr);
  // The recorded command is the user's argv, with no `env NAME=value` in front.
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr(R"("trainscope.command": "/bin/sh -c 'echo \"$TS_TEST_A|$TS_TEST_B\"'")"));
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"), Not(HasSubstr("1 2")));
}

TEST_F(LaunchTest, TheRunDirectoryVariableCannotBeOverridden) {
  LaunchOptions o = options({"/bin/sh", "-c", "echo \"$TRAINSCOPE_RUN_DIR\""});
  o.environment = {{"TRAINSCOPE_RUN_DIR", "/elsewhere"}};
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stdout.log"), result.run_dir + "\n");
}

TEST_F(LaunchTest, AnInvalidEnvironmentNameIsAnErrorBeforeAnyRun) {
  LaunchOptions o = options({"true"});
  o.environment = {{"A=B", "1"}};
  const absl::StatusOr<LaunchResult> result = launch(std::move(o));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("'A=B'"));
  EXPECT_TRUE(fs::is_empty(root_));
}

TEST_F(LaunchTest, CancelMidRunEndsKilledWithEverythingOnDisk) {
  LaunchOptions o = options({"/bin/sh", "-c", "echo started; exec sleep 30"});
  o.sample_hardware = true;
  o.sample_interval = absl::Milliseconds(10);
  o.make_sources = [] {
    std::vector<std::unique_ptr<HardwareSource>> sources;
    sources.push_back(std::make_unique<FakeSource>());
    return sources;
  };
  o.cancel = std::make_shared<LaunchCancel>();
  std::shared_ptr<LaunchCancel> cancel = o.cancel;
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    wait_for_output("started");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a few samples
    cancel->request(SIGTERM);
  });
  const LaunchResult result = launch_ok(std::move(o));
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(result.status, RunStatus::kKilled);
  EXPECT_EQ(result.term_signal, SIGTERM);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(launcher_status(result.run_dir), "KILLED");
  EXPECT_EQ(read_file(fs::path(result.run_dir) / "stdout.log"), "started\n");
  // Hardware readings are the host's (format 2), with no rank: the launcher is none.
  absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<RunFile> host_files;
  for (const RunFile& file : reader->files()) {
    if (file.kind == RunFileKind::kHostMetrics) host_files.push_back(file);
  }
  ASSERT_EQ(host_files.size(), 1u);
  EXPECT_EQ(host_files[0].host, detail::this_host());
  const fs::path host_file = host_files[0].path;
  EXPECT_THAT(read_file(host_file), HasSubstr("test/fake,1,"));
  EXPECT_THAT(read_file(host_file), HasSubstr(",\n"));
}

TEST_F(LaunchTest, SigtermToThisProcessIsForwarded) {
  absl::StatusOr<LaunchResult> result;
  std::thread runner([&] {
    result = launch(options({"/bin/sh", "-c", "echo started; exec sleep 30"}));
  });
  wait_for_output("started");
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  runner.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->status, RunStatus::kKilled);
  EXPECT_EQ(result->exit_code, 128 + SIGTERM);
  EXPECT_EQ(launcher_status(result->run_dir), "KILLED");
}

// Whether process `pid` is gone (or a zombie: it exited).
bool gone(pid_t pid) {
  const std::string stat = read_file(fs::path("/proc") / std::to_string(pid) / "stat");
  const std::size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.compare(paren, 3, ") Z") == 0;
}

// A stop ends the whole job: the signal also reaches a process in a session
// of its own (as torchrun starts its ranks), and the launch waits for it
// rather than returning when its own child exits.
TEST_F(LaunchTest, CancelReachesTheJobOutsideTheCommandsGroup) {
  LaunchOptions o =
      options({"/bin/sh", "-c", "setsid sleep 300 & echo started $!; wait; sleep 300"});
  o.cancel = std::make_shared<LaunchCancel>();
  std::shared_ptr<LaunchCancel> cancel = o.cancel;
  std::thread stopper([&] {
    wait_for_output("started");
    cancel->request(SIGTERM);
  });
  const LaunchResult result = launch_ok(std::move(o));
  stopper.join();
  const std::string out = read_file(fs::path(result.run_dir) / "stdout.log");
  const pid_t other_session = std::atoi(out.substr(out.find(' ') + 1).c_str());
  ASSERT_GT(other_session, 0) << out;
  const bool was_gone = gone(other_session);
  if (!was_gone) ::kill(other_session, SIGKILL);
  EXPECT_TRUE(was_gone);
  EXPECT_EQ(result.sigkilled, 0);
  EXPECT_EQ(result.status, RunStatus::kKilled);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
}

// What ignores the signal is killed with SIGKILL kill_after later, and said.
TEST_F(LaunchTest, WhatIgnoresTheStopIsKilledAfterKillAfter) {
  LaunchOptions o =
      options({"/bin/sh", "-c", "trap '' TERM; setsid sleep 300 & echo started $!; wait"});
  o.kill_after = absl::Milliseconds(300);
  o.cancel = std::make_shared<LaunchCancel>();
  std::shared_ptr<LaunchCancel> cancel = o.cancel;
  std::thread stopper([&] {
    wait_for_output("started");
    cancel->request(SIGTERM);
  });
  const LaunchResult result = launch_ok(std::move(o));
  stopper.join();
  EXPECT_EQ(result.sigkilled, 2);  // the shell and its sleep, which ignore SIGTERM
  EXPECT_EQ(result.status, RunStatus::kKilled);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.term_signal, SIGTERM);
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "stderr.log"),
              HasSubstr("2 processes of the command still ran 0.3 s after signal 15"));
  absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_THAT(reader->info().tags, Contains(Pair("trainscope.sigkill", "2")));
}

// A stop signal passed on is how the job ended, whatever the command made of
// it: a shell script that exits 0 after its program did.
TEST_F(LaunchTest, AStopSignalPassedOnIsTheExitStatus) {
  LaunchOptions o =
      options({"/bin/sh", "-c", "trap 'exit 0' TERM; echo started; sleep 300 & wait"});
  o.cancel = std::make_shared<LaunchCancel>();
  std::shared_ptr<LaunchCancel> cancel = o.cancel;
  std::thread stopper([&] {
    wait_for_output("started");
    cancel->request(SIGTERM);
  });
  const LaunchResult result = launch_ok(std::move(o));
  stopper.join();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.term_signal, SIGTERM);
  EXPECT_EQ(result.status, RunStatus::kKilled);
}

// The disposition of `signal` in this process.
void (*disposition(int signal))(int) {
  struct sigaction current = {};
  ::sigaction(signal, nullptr, &current);
  return current.sa_handler;
}

// A closed terminal or ssh session: handled like SIGTERM, not a launcher
// killed with its file left RUNNING and the command orphaned.
TEST_F(LaunchTest, SighupToThisProcessIsForwarded) {
  ASSERT_EQ(disposition(SIGHUP), SIG_DFL);
  absl::StatusOr<LaunchResult> result;
  std::thread runner([&] {
    result = launch(options({"/bin/sh", "-c", "echo started; exec sleep 30"}));
  });
  wait_for_output("started");
  ASSERT_EQ(::kill(::getpid(), SIGHUP), 0);
  runner.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->status, RunStatus::kKilled);
  EXPECT_EQ(result->term_signal, SIGHUP);
  EXPECT_EQ(result->exit_code, 128 + SIGHUP);
  EXPECT_EQ(launcher_status(result->run_dir), "KILLED");
  EXPECT_EQ(disposition(SIGHUP), SIG_DFL);  // restored once no launch is running
}

// nohup: SIGHUP ignored before the launch stays ignored, here and in the
// command (an ignored signal survives exec), and the run goes on.
TEST_F(LaunchTest, AnIgnoredSighupStaysIgnoredAndTheRunGoesOn) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction previous = {};
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &previous), 0);
  absl::StatusOr<LaunchResult> result;
  void (*during)(int) = nullptr;
  std::thread runner([&] {
    // SigIgn's last hex digit holds signals 1-4: bit 0 is SIGHUP.
    result = launch(options({"/bin/sh", "-c",
                             "echo started; sleep 0.5; "
                             "grep '^SigIgn:' /proc/self/status | cut -c 8-; echo done"}));
  });
  wait_for_output("started");
  during = disposition(SIGHUP);
  ASSERT_EQ(::kill(::getpid(), SIGHUP), 0);
  runner.join();
  ::sigaction(SIGHUP, &previous, nullptr);
  EXPECT_EQ(during, SIG_IGN);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->status, RunStatus::kFinished);
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(launcher_status(result->run_dir), "FINISHED");
  const std::vector<std::string> out =
      lines_of(read_file(fs::path(result->run_dir) / "stdout.log"));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2], "done");
  ASSERT_FALSE(out[1].empty());
  EXPECT_EQ(std::stoul(out[1].substr(out[1].size() - 1), nullptr, 16) & 1u, 1u) << out[1];
}

TEST_F(LaunchTest, EnvironmentIsRecorded) {
  LaunchOptions o = options({"true", "--lr", "0.5"});
  o.record_environment = true;
  const LaunchResult result = launch_ok(std::move(o));
  const std::string env = read_file(fs::path(result.run_dir) / "environment.json");
  EXPECT_THAT(env,
              HasSubstr("\"command_line\": [\n    \"true\",\n    \"--lr\",\n    \"0.5\"\n  ]"));
  for (const char* field :
       {"\"hostname\"", "\"os\"", "\"cpu_model\"", "\"cores\"", "\"memory_mb\"", "\"cwd\""}) {
    EXPECT_THAT(env, HasSubstr(field));
  }
}

TEST_F(LaunchTest, ProfilersWrapTheCommand) {
  EXPECT_THAT(profiled_command(Profiler::kNsys, "BATCH@trainscope", "/r/artifacts/profile",
                               {"python", "t.py"}),
              ElementsAre("nsys", "profile", "-o", "/r/artifacts/profile", "--force-overwrite",
                          "true", "--capture-range=nvtx", "--nvtx-capture=BATCH@trainscope", "--",
                          "python", "t.py"));
  EXPECT_THAT(profiled_command(Profiler::kNcu, "", "/r/p", {"./train"}),
              ElementsAre("ncu", "-o", "/r/p", "./train"));
  EXPECT_THAT(profiled_command(Profiler::kNcu, "step", "/r/p", {"./train"}),
              ElementsAre("ncu", "-o", "/r/p", "--nvtx", "--nvtx-include", "step", "./train"));
  EXPECT_THAT(profiled_command(Profiler::kNone, "", "/r/p", {"./train", "a b"}),
              ElementsAre("./train", "a b"));
  // trainscope's start/end ranges with '/' in their names: escaped for ncu.
  EXPECT_THAT(profiled_command(Profiler::kNcu, "trainscope@layer/3", "/r/p", {"./train"}),
              ElementsAre("ncu", "-o", "/r/p", "--nvtx", "--nvtx-include", "trainscope@layer\\/3",
                          "./train"));
}

TEST_F(LaunchTest, NcuRangesOfTrainscopeEscapeTheirSlashesOnce) {
  EXPECT_EQ(ncu_range("trainscope@FORWARD"), "trainscope@FORWARD");
  EXPECT_EQ(ncu_range("trainscope@layer/3/backward"), "trainscope@layer\\/3\\/backward");
  EXPECT_EQ(ncu_range("trainscope@layer\\/3"), "trainscope@layer\\/3");    // as given
  EXPECT_EQ(ncu_range("mydomain@outer/inner/"), "mydomain@outer/inner/");  // push/pop: kept
  EXPECT_EQ(ncu_range("step"), "step");
}

TEST_F(LaunchTest, MissingProfilerIsAnErrorBeforeAnyRun) {
  const std::string path = std::getenv("PATH") == nullptr ? "" : std::getenv("PATH");
  ::setenv("PATH", root_.c_str(), 1);  // an empty directory: no nsys
  LaunchOptions o = options({"/bin/true"});
  o.profiler = Profiler::kNsys;
  const absl::StatusOr<LaunchResult> result = launch(std::move(o));
  ::setenv("PATH", path.c_str(), 1);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(result.status())) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("nsys is not installed"));
  EXPECT_TRUE(fs::is_empty(root_));
}

// ---- End-of-run tags (LaunchOptions::end_record: `trainscope run`'s diagnosis) ----

TEST_F(LaunchTest, EndTagsAreSetBeforeTheRunEndsAndReachEveryExporter) {
  auto recording = std::make_shared<trainscope::testing::RecordingExporter>();
  LaunchOptions o = options({"/bin/sh", "-c", "exit 3"});
  o.exporters.push_back(recording);
  int calls = 0;
  LaunchResult seen;
  std::string launcher_while_hooked;
  o.end_record = [&](const LaunchResult& result) {
    ++calls;
    seen = result;
    launcher_while_hooked = launcher_status(result.run_dir);
    EndRecord record;
    record.tags = {{"trainscope.diagnosis", "INPUT-BOUND"},
                   {"trainscope.diagnosis.labels", "INPUT-BOUND"}};
    record.metrics = {{"ledger/tokens_per_s", 1234.5, 7}};
    return record;
  };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(calls, 1);
  // The hook saw the outcome while the run was still going (the launcher RUNNING).
  EXPECT_EQ(seen.run_dir, result.run_dir);
  EXPECT_EQ(seen.exit_code, 3);
  EXPECT_EQ(seen.status, RunStatus::kFailed);
  EXPECT_EQ(launcher_while_hooked, "RUNNING");
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(launcher_status(result.run_dir), "FAILED");
  absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().tags.at("trainscope.diagnosis"), "INPUT-BOUND");
  EXPECT_EQ(reader->info().tags.at("trainscope.diagnosis.labels"), "INPUT-BOUND");
  EXPECT_EQ(reader->info().tags.at("trainscope.exit_code"), "3");
  // The run's final record (FAILED) carries them, as MLflow's and W&B's exporters get it.
  const std::vector<RunInfo> infos = recording->run_infos();
  ASSERT_FALSE(infos.empty());
  EXPECT_EQ(infos.back().status, RunStatus::kFailed);
  EXPECT_EQ(infos.back().tags.at("trainscope.diagnosis"), "INPUT-BOUND");
  // The end record's metric reached the run and the exporters, at its step.
  bool exported = false;
  for (const MetricPoint& m : recording->received()) {
    if (m.key == "ledger/tokens_per_s" && m.step == 7 && m.value == 1234.5) exported = true;
  }
  EXPECT_TRUE(exported);
}

// LaunchOptions::run_started (`trainscope run --prometheus` follows the run from there).
TEST_F(LaunchTest, RunStartedSeesTheRunDirectoryBeforeTheCommandStarts) {
  LaunchOptions o = options({"/bin/sh", "-c", "touch \"$TRAINSCOPE_RUN_DIR/command-ran\""});
  int calls = 0;
  std::string dir;
  bool command_ran_before = true;
  o.run_started = [&](const std::string& run_dir) {
    ++calls;
    dir = run_dir;
    command_ran_before = fs::exists(fs::path(run_dir) / "command-ran");
  };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(dir, result.run_dir);
  EXPECT_FALSE(command_ran_before);
  EXPECT_TRUE(fs::exists(fs::path(result.run_dir) / "command-ran"));
}

TEST_F(LaunchTest, AThrowingRunStartedHookCostsAWarningNotTheRun) {
  trainscope::testing::CapturedWarnings warnings;
  LaunchOptions o = options({"/bin/sh", "-c", "exit 0"});
  o.run_started = [](const std::string&) { throw std::runtime_error("no follower"); };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.status, RunStatus::kFinished);
  ASSERT_EQ(warnings.count(), 1u) << warnings.joined();
  EXPECT_THAT(warnings.messages()[0], HasSubstr("no follower"));
}

TEST_F(LaunchTest, AThrowingEndTagsHookCostsAWarningNotTheRunOrTheExitCode) {
  trainscope::testing::CapturedWarnings warnings;
  LaunchOptions o = options({"/bin/sh", "-c", "exit 5"});
  o.end_record = [](const LaunchResult&) -> EndRecord {
    throw std::runtime_error("the run directory vanished");
  };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.status, RunStatus::kFailed);
  EXPECT_EQ(launcher_status(result.run_dir), "FAILED");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr("\"trainscope.exit_code\": \"5\""));
  ASSERT_EQ(warnings.count(), 1u) << warnings.joined();
  EXPECT_THAT(warnings.messages()[0], HasSubstr("the run directory vanished"));
  EXPECT_THAT(warnings.messages()[0], HasSubstr(result.run_dir));
}

TEST_F(LaunchTest, AnEndTagTheRunRefusesIsAWarningAndTheOthersAreSet) {
  trainscope::testing::CapturedWarnings warnings;
  LaunchOptions o = options({"true"});
  o.end_record = [](const LaunchResult&) {
    EndRecord record;
    record.tags = {{"bad key!", "x"}, {"trainscope.diagnosis", "OK"}};
    return record;
  };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(launcher_status(result.run_dir), "FINISHED");
  const std::string run_json = read_file(fs::path(result.run_dir) / "run.json");
  EXPECT_THAT(run_json, HasSubstr("\"trainscope.diagnosis\": \"OK\""));
  EXPECT_THAT(run_json, Not(HasSubstr("bad key!")));
  ASSERT_EQ(warnings.count(), 1u) << warnings.joined();
  EXPECT_THAT(warnings.messages()[0], HasSubstr("bad key!"));
}

TEST_F(LaunchTest, EndTagsAreNotAskedWhenTheCommandNeverStarted) {
  int calls = 0;
  LaunchOptions o = options({"trainscope-no-such-command"});
  o.end_record = [&](const LaunchResult&) {
    ++calls;
    return EndRecord{};
  };
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(calls, 0);
}

// A second launcher joining a run (--run-dir, a second task of the job) with
// another --name: the run keeps the first name, and the second is said (issue
// 36: it was dropped without a word), naming both.
TEST_F(LaunchTest, ASecondLaunchersOtherNameIsWarnedNamingBoth) {
  LaunchOptions first = options({"true"});
  first.run.name = "first-name";
  const LaunchResult one = launch_ok(first);
  LaunchOptions second = options({"true"});
  second.run.dir = one.run_dir;
  second.run.name = "second-name";
  trainscope::testing::CapturedWarnings warned;
  const LaunchResult two = launch_ok(second);
  EXPECT_EQ(two.run_dir, one.run_dir);
  EXPECT_TRUE(
      warned.contains("--name 'second-name' not applied: the run is already named "
                      "'first-name'"));
  EXPECT_EQ(open_run(one.run_dir).info().name, "first-name");
  // The same name, or none: nothing to say.
  LaunchOptions same = options({"true"});
  same.run.dir = one.run_dir;
  same.run.name = "first-name";
  trainscope::testing::CapturedWarnings quiet;
  launch_ok(same);
  EXPECT_FALSE(quiet.contains("not applied"));
}

TEST_F(LaunchTest, EmptyCommandIsInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(launch(options({})).status()));
}

// `trainscope run --auto`: the mode, which commands are Python, and the
// bootstrap the command's processes get (its Python side: tests/python/test_auto.py).
TEST(AutoInstrument, ModesAndTheirErrors) {
  EXPECT_EQ(*parse_auto_mode(""), "on");
  EXPECT_EQ(*parse_auto_mode("on"), "on");
  EXPECT_EQ(*parse_auto_mode("layers"), "layers");
  EXPECT_EQ(*parse_auto_mode("layers=3"), "layers=3");
  EXPECT_EQ(*parse_auto_mode("memory"), "memory");  // + the CUDA allocation history
  for (const char* bad : {"layers=0", "layers=", "layers=x", "layers=2x", "deep", "1"}) {
    const absl::StatusOr<std::string> mode = parse_auto_mode(bad);
    ASSERT_FALSE(mode.ok()) << bad;
    EXPECT_THAT(std::string(mode.status().message()), HasSubstr(std::string("'") + bad + "'"));
  }
}

TEST_F(LaunchTest, PythonCommandsByNameOrShebang) {
  EXPECT_TRUE(is_python_command({"python"}));
  EXPECT_TRUE(is_python_command({"/usr/bin/python3.11", "-c", "pass"}));
  EXPECT_TRUE(is_python_command({"pypy3"}));
  EXPECT_FALSE(is_python_command({"/bin/sh", "-c", "python x.py"}));
  EXPECT_FALSE(is_python_command({"pythonista"}));
  EXPECT_FALSE(is_python_command({}));
  EXPECT_FALSE(is_python_command({"no-such-program-here"}));
  const fs::path env_script = root_ / "train-env";
  const fs::path direct = root_ / "train-direct";
  const fs::path shell = root_ / "train.sh";
  std::ofstream(env_script) << "#!/usr/bin/env python3\nprint(1)\n";
  std::ofstream(direct) << "#!/usr/bin/python3 -u\n";
  std::ofstream(shell) << "#!/bin/sh\npython3 x.py\n";
  EXPECT_TRUE(is_python_command({env_script.string()}));
  EXPECT_TRUE(is_python_command({direct.string()}));
  EXPECT_FALSE(is_python_command({shell.string()}));
}

TEST_F(LaunchTest, AutoPutsTheBootstrapFirstOnPythonPathAndRemovesItAfter) {
  testing::CapturedWarnings warnings;
  LaunchOptions o = options({"/bin/sh", "-c",
                             "echo \"$TRAINSCOPE_AUTO|$PYTHONPATH\"; "
                             "ls \"${PYTHONPATH%%:*}\""});
  o.environment["PYTHONPATH"] = "/given/path";
  o.auto_instrument = "layers=2";
  const LaunchResult result = launch_ok(std::move(o));
  ASSERT_EQ(result.exit_code, 0);
  const std::vector<std::string> out = lines_of(read_file(fs::path(result.run_dir) / "stdout.log"));
  ASSERT_GE(out.size(), 3u);
  const std::size_t bar = out[0].find('|');
  EXPECT_EQ(out[0].substr(0, bar), "layers=2");
  const std::string path = out[0].substr(bar + 1);
  const std::string dir = path.substr(0, path.find(':'));
  EXPECT_EQ(path.substr(path.find(':') + 1), "/given/path");
  EXPECT_THAT(std::vector<std::string>(out.begin() + 1, out.end()),
              ::testing::UnorderedElementsAre("_trainscope_auto_hooks.py", "sitecustomize.py"));
  EXPECT_FALSE(fs::exists(dir)) << "the bootstrap directory outlived the command";
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "run.json"),
              HasSubstr("\"trainscope.auto\": \"layers=2\""));
  // /bin/sh is no Python program: one warning says so, the command ran as it was.
  EXPECT_TRUE(warnings.contains("is not a Python program")) << warnings.joined();
  // A bad mode is an error before anything runs.
  LaunchOptions bad = options({"true"});
  bad.auto_instrument = "layers=0";
  EXPECT_FALSE(launch(std::move(bad)).ok());
}

}  // namespace
}  // namespace trainscope

// ---- LaunchOptions::watch (`trainscope run --on-hang`) ------------------------

namespace trainscope {
namespace {

TEST_F(LaunchTest, AWatchThatAsksToStopEndsTheJobKilledWithItsReason) {
  LaunchOptions o = options({"/bin/sh", "-c", "echo started; exec sleep 60"});
  o.watch_interval = absl::Milliseconds(20);
  o.watch = [this](const std::string& run_dir) {
    WatchVerdict v;
    if (read_file(fs::path(run_dir) / "stdout.log").find("started") == std::string::npos) return v;
    v.action = WatchVerdict::Action::kStop;
    v.reason = "hang";
    v.message = "trainscope run: HANG: test";
    return v;
  };
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = launch_ok(std::move(o));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
  EXPECT_EQ(result.status, RunStatus::kKilled);
  EXPECT_EQ(result.term_signal, SIGTERM);
  absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().status, RunStatus::kKilled);
  EXPECT_EQ(reader->info().tags.at("trainscope.end_reason"), "hang");
  EXPECT_THAT(read_file(fs::path(result.run_dir) / "stderr.log"),
              HasSubstr("trainscope run: HANG: test\n"));
}

TEST_F(LaunchTest, AWatchThatContinuesOrThrowsLeavesTheJobAlone) {
  for (bool throws : {false, true}) {
    // The command ends once the watch was called 3 times (or, throwing, once).
    const fs::path called = root_ / (throws ? "called-throws" : "called");
    LaunchOptions o = options({"/bin/sh", "-c",
                               "i=0; while [ ! -e '" + called.string() +
                                   "' ] && [ $i -lt 3000 ]; do sleep 0.01; "
                                   "i=$((i+1)); done; exit 3"});
    o.watch_interval = absl::Milliseconds(10);
    int calls = 0;
    o.watch = [&calls, throws, called](const std::string&) -> WatchVerdict {
      ++calls;
      if (calls == (throws ? 1 : 3)) std::ofstream(called.string()) << "x";
      if (throws) throw std::runtime_error("boom");
      return WatchVerdict{};
    };
    testing::CapturedWarnings warnings;
    const LaunchResult result = launch_ok(std::move(o));
    EXPECT_EQ(result.exit_code, 3);
    EXPECT_EQ(result.status, RunStatus::kFailed);
    absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader->info().tags.count("trainscope.end_reason"), 0u);
    if (throws) {
      EXPECT_EQ(calls, 1);  // not called again
      EXPECT_THAT(warnings.messages(), Contains(HasSubstr("boom")));
    } else {
      EXPECT_GE(calls, 3);
    }
  }
}

TEST(DumpSignal, CatchesSignalReadsTheProcessMask) {
  const int sig = dump_signal();
  EXPECT_GT(sig, SIGRTMIN);
  EXPECT_LE(sig, SIGRTMAX);
  struct sigaction previous = {};
  ASSERT_EQ(::sigaction(sig, nullptr, &previous), 0);
  EXPECT_FALSE(catches_signal(::getpid(), sig));
  struct sigaction handler = {};
  handler.sa_handler = [](int) {};
  ASSERT_EQ(::sigaction(sig, &handler, nullptr), 0);
  EXPECT_TRUE(catches_signal(::getpid(), sig));
  ASSERT_EQ(::sigaction(sig, &previous, nullptr), 0);
  EXPECT_FALSE(catches_signal(0, sig));
}

}  // namespace
}  // namespace trainscope
