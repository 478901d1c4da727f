// The sweep scheduler on CPU slots: state file, results, resume after a
// kill -9 of the scheduler, retries, timeouts, max failures, groups, and the
// launch hook that makes jobs die with their scheduler.
#include "trainscope/sweep/scheduler.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::HasSubstr;
using trainscope::testing::quiet_options;
using trainscope::testing::runs_by_job;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;
namespace fs = std::filesystem;

int finished_runs(const std::multimap<std::string, RunInfo>& runs, const std::string& job) {
  int n = 0;
  auto [begin, end] = runs.equal_range(job);
  for (auto it = begin; it != end; ++it) n += it->second.status == RunStatus::kFinished;
  return n;
}

// Alive and not a zombie.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

bool wait_until_dead(pid_t pid) {
  for (int i = 0; i < 500 && alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !alive(pid);
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

int count_status(const std::string& state_path, const std::string& status) {
  const std::string text = trainscope::testing::read_file(state_path);
  const nlohmann::json state = nlohmann::json::parse(text, nullptr, false);
  if (state.is_discarded()) return 0;
  int n = 0;
  for (const auto& job : state["jobs"]) n += job["status"] == status;
  return n;
}

TEST(SchedulerTest, RunsEveryJobOnceAndWritesStateAndResults) {
  TempDir tmp;
  Plan plan;
  plan.name = "grid";
  for (int i = 0; i < 6; ++i) {
    Job job = shell_job("lr=" + std::to_string(i), "exit 0");
    job.params = {{"lr", std::to_string(i)}, {"bs", "32"}};
    plan.jobs.push_back(job);
  }
  std::vector<Progress> seen;
  SweepOptions options = quiet_options(tmp.str(), 2);
  options.progress = [&seen](const Progress& p) { seen.push_back(p); };
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 6);
  EXPECT_EQ(result->failed, 0);
  const auto runs = runs_by_job(tmp.str());
  for (const Job& job : plan.jobs) {
    EXPECT_EQ(finished_runs(runs, job.id), 1) << job.id;
    auto it = runs.find(job.id);
    ASSERT_NE(it, runs.end());
    EXPECT_EQ(it->second.params.at("lr"), job.params[0].second);
    EXPECT_EQ(it->second.tags.at("trainscope.sweep"), "grid");
    EXPECT_EQ(it->second.tags.at("trainscope.sweep.job"), job.id);
  }
  EXPECT_EQ(count_status(tmp.file("sweep.json"), "FINISHED"), 6);
  const std::vector<std::string> rows =
      trainscope::testing::lines_of(trainscope::testing::read_file(tmp.file("results.csv")));
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_THAT(rows[0], HasSubstr("job,lr,bs,status,exit_code,attempts,duration_s,run_id"));
  EXPECT_THAT(rows[1], HasSubstr("lr=0,0,32,FINISHED,0,1,"));
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().done, 6);
  EXPECT_EQ(seen.back().queued, 0);
  EXPECT_THAT(format_progress(seen.back()), HasSubstr("6/6 done, 0 running, 0 failed, 0 queued"));
}

TEST(SchedulerTest, ParamsReachTheCommandAndConfigIsAFile) {
  TempDir tmp;
  Plan plan;
  Job job = shell_job("one", "echo \"$0 $1\" > \"$(dirname \"$TRAINSCOPE_SWEEP_CONFIG\")/argv\"");
  job.params = {{"lr", "0.1"}};
  job.config_json = R"({"lr": 0.1})";
  plan.jobs.push_back(job);
  absl::StatusOr<SweepResult> result = run_sweep(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->finished, 1) << result->jobs[0].error;
  EXPECT_EQ(trainscope::testing::read_file(tmp.file("configs/argv")), "--lr 0.1\n");
  EXPECT_EQ(trainscope::testing::read_file(tmp.file("configs/one.json")), R"({"lr": 0.1})");
}

// The config file's variable reaches the job through its environment: the
// run records the user's command and its --param arguments, nothing else.
TEST(SchedulerTest, TheRunRecordsTheJobsCommandWithoutTheVariablesItGets) {
  TempDir tmp;
  Plan plan;
  plan.name = "cfg";
  Job job = shell_job("one", "printf %s \"$TRAINSCOPE_SWEEP_CONFIG\"");
  job.params = {{"lr", "0.1"}};
  job.config_json = R"({"lr": 0.1})";
  plan.jobs.push_back(job);
  absl::StatusOr<SweepResult> result = run_sweep(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->finished, 1) << result->jobs[0].error;
  const std::string run_dir = result->jobs[0].run_dir;
  EXPECT_EQ(trainscope::testing::read_file(run_dir + "/stdout.log"), tmp.file("configs/one.json"));
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->launchers().size(), 1u);
  EXPECT_THAT(reader->launchers()[0].command,
              ::testing::ElementsAre("sh", "-c", job.command[2], "--lr", "0.1"));
  EXPECT_EQ(reader->info().tags.at("trainscope.command"),
            "sh -c 'printf %s \"$TRAINSCOPE_SWEEP_CONFIG\"' --lr 0.1");
  EXPECT_EQ(reader->info().tags.at("trainscope.sweep.job"), "one");
  const std::string run_json = trainscope::testing::read_file(run_dir + "/run.json");
  EXPECT_THAT(run_json, ::testing::Not(HasSubstr("env ")));
  EXPECT_THAT(run_json, ::testing::Not(HasSubstr("TRAINSCOPE_SWEEP_CONFIG=")));
}

TEST(SchedulerTest, LaunchDieWithParentKillsTheCommandWithItsLauncher) {
  TempDir tmp;
  const std::string pid_file = tmp.file("pid");
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    LaunchOptions options;
    options.command = {
        "sh", "-c",
        "echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file + "; exec sleep 60"};
    options.run.root = tmp.file("runs");
    options.sample_hardware = false;
    options.record_environment = false;
    options.tee = false;
    options.die_with_parent = true;
    (void)launch(options);
    ::_exit(0);
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < 1000 && pids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pids = read_pids(pid_file);
  }
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(alive(pids[0]));
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  EXPECT_TRUE(wait_until_dead(pids[0])) << "the command outlived its launcher";
}

TEST(SchedulerTest, ResumesAfterKill9WithoutOrphansOrDuplicates) {
  TempDir tmp;
  const std::string pids = tmp.file("pids");
  Plan plan;
  plan.name = "resume";
  for (int i = 0; i < 12; ++i) {
    plan.jobs.push_back(
        shell_job("job" + std::to_string(i), "echo $$ >> " + pids + "; exec sleep 0.3"));
  }
  const pid_t scheduler = ::fork();
  ASSERT_GE(scheduler, 0);
  if (scheduler == 0) {
    (void)run_sweep(plan, quiet_options(tmp.str(), 2));
    ::_exit(0);
  }
  for (int i = 0; i < 3000 && count_status(tmp.file("sweep.json"), "FINISHED") < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(scheduler, SIGKILL);
  ::waitpid(scheduler, nullptr, 0);
  const int finished_before = count_status(tmp.file("sweep.json"), "FINISHED");
  EXPECT_GE(finished_before, 3);
  EXPECT_LT(finished_before, 12) << "the sweep ended before the kill";
  for (pid_t pid : read_pids(pids)) EXPECT_TRUE(wait_until_dead(pid)) << "orphan job " << pid;

  absl::StatusOr<SweepResult> result = run_sweep(plan, quiet_options(tmp.str(), 2));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 12);
  const auto runs = runs_by_job(tmp.str());
  for (const Job& job : plan.jobs) EXPECT_EQ(finished_runs(runs, job.id), 1) << job.id;
  // Each job started once more than it finished at most once: the crashed one.
  EXPECT_LE(read_pids(pids).size(), 12u + 2u);
  EXPECT_EQ(
      trainscope::testing::lines_of(trainscope::testing::read_file(tmp.file("results.csv"))).size(),
      13u);
}

TEST(SchedulerTest, FailedJobsRerunOnlyWithRetryFailed) {
  TempDir tmp;
  Plan plan;
  plan.jobs.push_back(shell_job("flaky", "test -e " + tmp.file("ok")));
  plan.jobs.push_back(shell_job("fine", "exit 0"));
  absl::StatusOr<SweepResult> first = run_sweep(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->failed, 1);
  EXPECT_EQ(first->jobs[0].exit_code, 1);
  EXPECT_THAT(first->jobs[0].error, HasSubstr("exit code 1"));

  trainscope::testing::write_file(tmp.file("ok"), "");
  absl::StatusOr<SweepResult> again = run_sweep(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->failed, 1);
  EXPECT_EQ(runs_by_job(tmp.str()).size(), 2u) << "nothing ran again";

  SweepOptions retry = quiet_options(tmp.str(), 1);
  retry.retry_failed = true;
  absl::StatusOr<SweepResult> retried = run_sweep(plan, retry);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->finished, 2);
  const auto runs = runs_by_job(tmp.str());
  EXPECT_EQ(finished_runs(runs, "fine"), 1);
  EXPECT_EQ(runs.count("flaky"), 2u);
}

TEST(SchedulerTest, TimeoutKillsTheJobAndCountsAsAFailureWithRetries) {
  TempDir tmp;
  Plan plan;
  plan.jobs.push_back(shell_job("slow", "exec sleep 60"));
  SweepOptions options = quiet_options(tmp.str(), 1);
  options.timeout = absl::Milliseconds(300);
  options.retries = 1;
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->failed, 1);
  const JobRecord& job = result->jobs[0];
  EXPECT_EQ(job.attempts, 2);
  EXPECT_TRUE(job.timed_out);
  EXPECT_THAT(job.error, HasSubstr("timed out"));
  const auto runs = runs_by_job(tmp.str());
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& [name, info] : runs) EXPECT_EQ(info.status, RunStatus::kKilled);
}

TEST(SchedulerTest, MaxFailuresStopsTheSweep) {
  TempDir tmp;
  Plan plan;
  for (int i = 0; i < 5; ++i) plan.jobs.push_back(shell_job("bad" + std::to_string(i), "exit 3"));
  SweepOptions options = quiet_options(tmp.str(), 1);
  options.max_failures = 2;
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->max_failures_reached);
  EXPECT_EQ(result->failed, 2);
  EXPECT_EQ(result->unfinished, 3);
  EXPECT_EQ(runs_by_job(tmp.str()).size(), 2u);
}

TEST(SchedulerTest, GroupsStartTogetherAndRunInOrder) {
  TempDir tmp;
  // Each job of a group waits for its partner to have started: the group
  // only ends when both run at once (the timeout turns a wrong schedule into
  // a failure instead of a hang).
  const auto barrier = [&](const std::string& me, const std::string& other) {
    return "touch " + tmp.file(me) + "; while [ ! -e " + tmp.file(other) +
           " ]; do sleep 0.01; done";
  };
  Plan plan;
  plan.jobs.push_back(shell_job("g1a", barrier("g1a", "g1b"), 1));
  plan.jobs.push_back(shell_job("g0a", barrier("g0a", "g0b"), 0));
  plan.jobs.push_back(shell_job("free", "exit 0"));
  plan.jobs.push_back(shell_job("g0b", barrier("g0b", "g0a"), 0));
  plan.jobs.push_back(shell_job("g1b", barrier("g1b", "g1a"), 1));
  SweepOptions options = quiet_options(tmp.str(), 2);
  options.timeout = absl::Seconds(30);
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 5);
  const auto runs = runs_by_job(tmp.str());
  std::int64_t group0_end = 0;
  for (const char* id : {"g0a", "g0b"})
    group0_end = std::max(group0_end, runs.find(id)->second.end_time_ms);
  for (const char* id : {"g1a", "g1b"}) EXPECT_GE(runs.find(id)->second.start_time_ms, group0_end);

  Plan too_big;
  for (int i = 0; i < 3; ++i) too_big.jobs.push_back(shell_job("x" + std::to_string(i), "", 4));
  absl::StatusOr<SweepResult> refused = run_sweep(too_big, quiet_options(tmp.file("big"), 2));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("group 4 has 3 jobs"));
}

// A directory holds one sweep: a plan that would run another command there is
// refused before anything runs (its jobs match the stored ones by id and
// would be found done), naming both commands; the same plan continues it.
TEST(SchedulerTest, AnotherSweepInTheDirectoryIsRefusedBeforeAnythingRuns) {
  TempDir tmp;
  Plan plan;
  plan.name = "cfg";
  plan.jobs = {shell_job("lr=1", "exit 0"), shell_job("lr=2", "exit 0")};
  ASSERT_EQ(run_sweep(plan, quiet_options(tmp.str(), 1))->finished, 2);
  const std::string state = trainscope::testing::read_file(tmp.file("sweep.json"));

  Plan changed = plan;
  for (Job& job : changed.jobs) job.command[2] = "exit 1";
  absl::StatusOr<SweepResult> refused = run_sweep(changed, quiet_options(tmp.str(), 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("`sh -c 'exit 0'`"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("`sh -c 'exit 1'`"));
  Plan renamed = plan;
  renamed.name = "other";
  EXPECT_THAT(std::string(run_sweep(renamed, quiet_options(tmp.str(), 1)).status().message()),
              HasSubstr("holds sweep 'cfg'"));
  EXPECT_EQ(trainscope::testing::read_file(tmp.file("sweep.json")), state);
  EXPECT_EQ(runs_by_job(tmp.str()).size(), 2u);

  absl::StatusOr<SweepResult> same = run_sweep(plan, quiet_options(tmp.str(), 1));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->finished, 2);
  EXPECT_EQ(runs_by_job(tmp.str()).size(), 2u) << "nothing ran again";
}

// radT's workloads: the jobs of one group that pin the same device share one
// slot of it (as radT runs them together on that GPU), on stand-in CPU slots
// and on GPU slots alike, one job per slot otherwise.
TEST(SchedulerTest, AWorkloadsJobsOnOneDeviceShareItsSlot) {
  TempDir tmp;
  const auto barrier = [&](const std::string& me, const std::string& other) {
    return "touch " + tmp.file(me) + "; while [ ! -e " + tmp.file(other) +
           " ]; do sleep 0.01; done";
  };
  const auto pinned = [](Job job, std::vector<int> devices) {
    job.devices = std::move(devices);
    return job;
  };
  Plan plan;
  plan.name = "colloc";
  plan.jobs.push_back(pinned(shell_job("w0a", barrier("w0a", "w0b"), 0), {2}));
  plan.jobs.push_back(pinned(shell_job("w0b", barrier("w0b", "w0a"), 0), {2}));
  // Two on device 0 and one on devices 0+1, together: slots 0 and 1.
  plan.jobs.push_back(pinned(shell_job("w1a", barrier("w1a", "w1c"), 1), {0}));
  plan.jobs.push_back(pinned(shell_job("w1b", barrier("w1b", "w1a"), 1), {0}));
  plan.jobs.push_back(pinned(shell_job("w1c", barrier("w1c", "w1b"), 1), {0, 1}));
  SweepOptions options = quiet_options(tmp.file("stand-in"), 1);
  options.slots = *stand_in_slots(3);
  options.timeout = absl::Seconds(30);
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 5) << result->jobs[0].error;
  EXPECT_EQ(result->jobs[4].devices, (std::vector<int>{0, 1}));

  for (const char* mark : {"w0a", "w0b", "w1a", "w1b", "w1c"}) fs::remove(tmp.file(mark));
  SweepOptions gpus = quiet_options(tmp.file("gpus"), 1);
  gpus.slots = *gpu_slots({0, 1, 2}, 1, /*restrict_to_visible=*/false);
  gpus.timeout = absl::Seconds(30);
  absl::StatusOr<SweepResult> on_gpus = run_sweep(plan, gpus);
  ASSERT_TRUE(on_gpus.ok()) << on_gpus.status();
  EXPECT_EQ(on_gpus->finished, 5) << on_gpus->jobs[0].error;

  // A group needs a slot per device it pins, and CPU slots (no device) one per job.
  Plan wide;
  wide.jobs.push_back(pinned(shell_job("a", "true", 0), {0}));
  wide.jobs.push_back(pinned(shell_job("b", "true", 0), {1}));
  SweepOptions one = quiet_options(tmp.file("one"), 1);
  one.slots = *stand_in_slots(2);
  one.slots.resize(1);
  EXPECT_THAT(std::string(run_sweep(wide, one).status().message()), HasSubstr("device 1"));
  EXPECT_THAT(std::string(run_sweep(wide, quiet_options(tmp.file("cpu"), 1)).status().message()),
              HasSubstr("group 0 has 2 jobs, which start together, but the sweep has 1 slot(s) "
                        "(more CPU slots: --slots N"));
}

TEST(SchedulerTest, SlotsAndErrors) {
  EXPECT_FALSE(cpu_slots(0).ok());
  absl::StatusOr<std::vector<Slot>> gpus = gpu_slots({0, 1}, 2, /*restrict_to_visible=*/false);
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[2].devices, std::vector<int>{1});
  EXPECT_THAT(std::string(gpu_slots({}, 1, false).status().message()), HasSubstr("no GPU"));

  TempDir tmp;
  Plan plan;
  plan.jobs.push_back(shell_job("a", "exit 0"));
  plan.jobs.push_back(shell_job("a", "exit 0"));
  EXPECT_THAT(std::string(run_sweep(plan, quiet_options(tmp.str(), 1)).status().message()),
              HasSubstr("job id 'a' appears twice"));
  trainscope::testing::write_file(tmp.file("corrupt/sweep.json"), "{not json");
  plan.jobs.pop_back();
  EXPECT_THAT(
      std::string(run_sweep(plan, quiet_options(tmp.file("corrupt"), 1)).status().message()),
      HasSubstr("corrupt sweep state"));
}

}  // namespace
}  // namespace trainscope::sweep
