// `trainscope sweep --slurm` against a fake Slurm (FakeSlurm below): what is
// submitted (one array, indices = plan indices, only what is not FINISHED on
// a resume), how the array is followed (squeue states, the runs' own status,
// scontrol for tasks that left no run), scancel on stop, retries as new
// arrays, and a resume that follows an array still running instead of
// submitting again. The array tasks are real: FakeSlurm runs each one
// through run_slurm_task (launch()) in this process when it "starts".
// Parsers of the real commands' output are tested on text Slurm printed.
#include "trainscope/sweep/slurm.hpp"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "sweep/slurm_parsers.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using trainscope::testing::quiet_options;
using trainscope::testing::runs_by_job;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;

// A Slurm that keeps its arrays in memory. Each queue() call moves every
// task of the array one step: PENDING -> RUNNING -> (the task runs) its end
// state. `parallel` tasks of an array at most run per step.
class FakeSlurm : public SlurmApi {
 public:
  struct Task {
    std::string state = "PENDING";
    int exit_code = 0;
    bool forgotten = false;  // scontrol no longer knows it
  };
  struct Array {
    std::vector<std::string> args;
    std::string submit_file;
    std::map<int, Task> tasks;
  };

  absl::StatusOr<std::string> submit(const std::vector<std::string>& args) override {
    if (!submit_error.ok()) return submit_error;
    const std::string id = std::to_string(next_id++);
    Array array;
    array.args = args;
    array.submit_file = args.back().substr(0, args.back().size() - 3) + ".json";  // .sh -> .json
    for (const std::string& arg : args) {
      if (arg.rfind("--array=", 0) != 0) continue;
      std::string spec = arg.substr(8);
      spec = spec.substr(0, spec.find('%'));
      for (absl::string_view part : absl::StrSplit(spec, ',')) {
        std::vector<absl::string_view> range = absl::StrSplit(part, '-');
        int first = 0;
        int last = 0;
        EXPECT_TRUE(absl::SimpleAtoi(range[0], &first)) << arg;
        EXPECT_TRUE(absl::SimpleAtoi(range.back(), &last)) << arg;
        for (int i = first; i <= last; ++i) array.tasks[i];
      }
    }
    arrays[id] = std::move(array);
    order.push_back(id);
    return id;
  }

  absl::StatusOr<std::map<int, std::string>> queue(const std::string& job_id) override {
    ++queue_calls;
    if (!queue_error.ok()) return queue_error;
    auto it = arrays.find(job_id);
    if (it == arrays.end()) return std::map<int, std::string>{};
    if (advance) step(job_id, &it->second);
    std::map<int, std::string> states;
    for (const auto& [index, task] : it->second.tasks) {
      if (!task.forgotten) states[index] = task.state;
    }
    return states;
  }

  absl::StatusOr<std::optional<SlurmTaskEnd>> task_end(const std::string& job_id,
                                                       int index) override {
    auto it = arrays.find(job_id);
    if (it == arrays.end() || it->second.tasks.count(index) == 0) return std::nullopt;
    const Task& task = it->second.tasks.at(index);
    if (task.forgotten) return std::nullopt;
    return SlurmTaskEnd{task.state, task.exit_code, 0};
  }

  absl::Status cancel(const std::string& job_id) override {
    cancelled.push_back(job_id);
    for (auto& [index, task] : arrays[job_id].tasks) {
      if (task.state == "PENDING" || task.state == "RUNNING") task.state = "CANCELLED";
    }
    return absl::OkStatus();
  }

  // Runs one task as sbatch would: its environment, then the task itself.
  void run_task(const std::string& job_id, int index, Task* task) {
    const std::string index_text = std::to_string(index);
    ::setenv("SLURM_ARRAY_JOB_ID", job_id.c_str(), 1);
    ::setenv("SLURM_ARRAY_TASK_ID", index_text.c_str(), 1);
    ::setenv("SLURM_JOB_ID", (job_id + "0" + index_text).c_str(), 1);
    absl::StatusOr<LaunchResult> result = run_slurm_task(arrays[job_id].submit_file);
    ::unsetenv("SLURM_ARRAY_JOB_ID");
    ::unsetenv("SLURM_ARRAY_TASK_ID");
    ::unsetenv("SLURM_JOB_ID");
    ASSERT_TRUE(result.ok()) << result.status();
    task->exit_code = result->exit_code;
    task->state = result->exit_code == 0 ? "COMPLETED" : "FAILED";
  }

  void step(const std::string& job_id, Array* array) {
    int running = 0;
    for (auto& [index, task] : array->tasks) {
      if (task.state == "RUNNING") {
        if (before_run) before_run(job_id, index, &task);
        if (task.state == "RUNNING") run_task(job_id, index, &task);
      } else if (task.state == "PENDING" && running < parallel) {
        task.state = "RUNNING";
        ++running;
      }
    }
  }

  std::map<std::string, Array> arrays;
  std::vector<std::string> order;  // job ids in submission order
  std::vector<std::string> cancelled;
  absl::Status submit_error;
  absl::Status queue_error;
  int next_id = 100;
  int parallel = 1000;
  int queue_calls = 0;
  bool advance = true;
  // Called for a RUNNING task before it runs; may end it another way.
  std::function<void(const std::string&, int, Task*)> before_run;
};

Plan shell_plan(int n, const std::string& fail_at = "") {
  Plan plan;
  plan.name = "grid";
  for (int i = 0; i < n; ++i) {
    Job job = shell_job("j" + std::to_string(i), fail_at == std::to_string(i) ? "exit 3" : "true");
    job.params = {{"lr", std::to_string(i)}};
    plan.jobs.push_back(job);
  }
  return plan;
}

SlurmOptions fake_options(const std::shared_ptr<FakeSlurm>& fake) {
  SlurmOptions slurm;
  slurm.api = fake;
  slurm.poll_interval = absl::ZeroDuration();
  slurm.trainscope = "/opt/trainscope";
  return slurm;
}

absl::StatusOr<SweepResult> run_slurm(const Plan& plan, SweepOptions options,
                                      const std::shared_ptr<FakeSlurm>& fake) {
  absl::StatusOr<std::unique_ptr<SlurmSweep>> sweep =
      SlurmSweep::Open(plan, std::move(options), fake_options(fake));
  if (!sweep.ok()) return sweep.status();
  return (*sweep)->run();
}

std::string arg_of(const std::vector<std::string>& args, const std::string& prefix) {
  for (const std::string& arg : args) {
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return "";
}

TEST(SlurmTest, SubmitsThePlanAsOneArrayAndEveryJobFinishesInItsOwnTaggedRun) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  fake->parallel = 2;
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  absl::StatusOr<std::unique_ptr<SlurmSweep>> sweep = [&] {
    SlurmOptions slurm = fake_options(fake);
    slurm.array_parallel = 2;
    slurm.partition = "gpu";
    slurm.gpus_per_job = 1;
    slurm.cpus_per_job = 4;
    slurm.time = "1:00:00";
    return SlurmSweep::Open(shell_plan(6), options, slurm);
  }();
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<SweepResult> result = (*sweep)->run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 6);
  ASSERT_THAT(fake->order, ElementsAre("100"));
  const std::vector<std::string>& args = fake->arrays["100"].args;
  EXPECT_EQ(arg_of(args, "--array="), "0-5%2");
  EXPECT_EQ(arg_of(args, "--partition="), "gpu");
  EXPECT_EQ(arg_of(args, "--gres="), "gpu:1");
  EXPECT_EQ(arg_of(args, "--cpus-per-task="), "4");
  EXPECT_EQ(arg_of(args, "--time="), "1:00:00");
  const std::string script = trainscope::testing::read_file(args.back());
  EXPECT_THAT(script, HasSubstr("exec '/opt/trainscope' sweep --slurm-task '"));
  const auto runs = runs_by_job(tmp.file("sw"));
  ASSERT_EQ(runs.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    const std::string job = "j" + std::to_string(i);
    ASSERT_EQ(runs.count(job), 1u) << job;
    const RunInfo& info = runs.find(job)->second;
    EXPECT_EQ(info.status, RunStatus::kFinished);
    EXPECT_EQ(info.params.at("lr"), std::to_string(i));
    EXPECT_EQ(info.tags.at("slurm.job_id"), "100");
    EXPECT_EQ(info.tags.at("slurm.array_index"), std::to_string(i));
    EXPECT_EQ(info.tags.at("trainscope.sweep.job"), job);
    EXPECT_EQ(info.id, detail::slurm_task_run_id("100", i, 0));
  }
  for (const JobRecord& record : result->jobs) {
    EXPECT_EQ(record.slurm_job_id, "100");
    EXPECT_EQ(record.attempts, 1);
  }
}

// A job's config reaches it in the array task as it does locally: a file named
// by TRAINSCOPE_SWEEP_CONFIG in its environment (the submission file carries
// the config, the task writes it on the shared filesystem); its run records
// the job's command and params only.
TEST(SlurmTest, TheTaskGivesTheJobItsConfigVariableAndRecordsOnlyItsCommand) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  Plan plan = shell_plan(1);
  plan.jobs[0].command = {"sh", "-c", "printf %s \"$TRAINSCOPE_SWEEP_CONFIG\""};
  plan.jobs[0].config_json = R"({"lr": 0})";
  absl::StatusOr<SweepResult> result = run_slurm(plan, quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->finished, 1) << result->jobs[0].error;
  const std::string sweep_dir = std::filesystem::absolute(tmp.file("sw")).string();
  const std::string config = sweep_dir + "/configs/j0.json";
  EXPECT_THAT(trainscope::testing::read_file(fake->arrays["100"].submit_file),
              HasSubstr(R"({\"lr\": 0})"));
  EXPECT_EQ(trainscope::testing::read_file(config), R"({"lr": 0})");
  const std::string run_dir = result->jobs[0].run_dir;
  EXPECT_EQ(trainscope::testing::read_file(run_dir + "/stdout.log"), config);
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->launchers().size(), 1u);
  EXPECT_THAT(reader->launchers()[0].command,
              ElementsAre("sh", "-c", plan.jobs[0].command[2], "--lr", "0"));
  EXPECT_EQ(reader->info().tags.at("trainscope.command"),
            "sh -c 'printf %s \"$TRAINSCOPE_SWEEP_CONFIG\"' --lr 0");
}

TEST(SlurmTest, AResumeSubmitsOnlyWhatDidNotFinish) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  absl::StatusOr<SweepResult> first =
      run_slurm(shell_plan(6, "3"), quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->finished, 5);
  ASSERT_EQ(first->failed, 1);
  EXPECT_THAT(first->jobs[3].error, HasSubstr("exit code 3"));

  // Without --retry-failed nothing is left to run.
  absl::StatusOr<SweepResult> again =
      run_slurm(shell_plan(6, "3"), quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(fake->order.size(), 1u);

  SweepOptions retry = quiet_options(tmp.file("sw"), 1);
  retry.retry_failed = true;
  absl::StatusOr<SweepResult> fixed = run_slurm(shell_plan(6), retry, fake);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->finished, 6);
  ASSERT_EQ(fake->order.size(), 2u);
  EXPECT_EQ(arg_of(fake->arrays[fake->order[1]].args, "--array="), "3");
  const auto runs = runs_by_job(tmp.file("sw"));
  EXPECT_EQ(runs.size(), 7u);  // j3 twice, every other job once
  EXPECT_EQ(runs.count("j3"), 2u);
  EXPECT_EQ(runs.count("j0"), 1u);
}

TEST(SlurmTest, RetriesGoOutAsANewArray) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.retries = 1;
  absl::StatusOr<SweepResult> result = run_slurm(shell_plan(3, "1"), options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->failed, 1);
  EXPECT_EQ(result->jobs[1].attempts, 2);
  ASSERT_EQ(fake->order.size(), 2u);
  EXPECT_EQ(arg_of(fake->arrays[fake->order[1]].args, "--array="), "1");
}

TEST(SlurmTest, StopCancelsTheArrayAndTheSweepResumesWithWhatIsLeft) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  fake->parallel = 2;
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.stop = std::make_shared<LaunchCancel>();
  // Two tasks finish; then Ctrl-C arrives while the next two run.
  int started = 0;
  fake->before_run = [&](const std::string&, int, FakeSlurm::Task*) {
    if (++started == 3) options.stop->request(SIGINT);
  };
  std::shared_ptr<LaunchCancel> stop = options.stop;
  absl::StatusOr<SweepResult> stopped = run_slurm(shell_plan(6), options, fake);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(stopped->stopped);
  EXPECT_THAT(fake->cancelled, ElementsAre("100"));
  const int done = stopped->finished;
  EXPECT_GE(done, 2);
  EXPECT_LT(done, 6);
  EXPECT_EQ(stopped->unfinished, 6 - done);

  fake->before_run = nullptr;
  absl::StatusOr<SweepResult> resumed =
      run_slurm(shell_plan(6), quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->finished, 6);
  ASSERT_EQ(fake->order.size(), 2u);
  const std::string spec = arg_of(fake->arrays[fake->order[1]].args, "--array=");
  EXPECT_EQ(spec.find('0'), std::string::npos) << spec;  // job 0 finished before the stop
  const auto runs = runs_by_job(tmp.file("sw"));
  for (int i = 0; i < 6; ++i) {
    const std::string job = "j" + std::to_string(i);
    int finished = 0;
    auto [begin, end] = runs.equal_range(job);
    for (auto it = begin; it != end; ++it) finished += it->second.status == RunStatus::kFinished;
    EXPECT_EQ(finished, 1) << job;
  }
}

TEST(SlurmTest, AResumeFollowsTheArrayStillInTheQueueInsteadOfSubmittingAgain) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  // The submitter loses Slurm right after submitting (as if it had been
  // killed): the array stays in the queue, the sweep's state records it.
  fake->queue_error = absl::UnavailableError("squeue: cannot reach slurmctld");
  absl::StatusOr<SweepResult> lost =
      run_slurm(shell_plan(4), quiet_options(tmp.file("sw"), 1), fake);
  EXPECT_THAT(lost.status().message(), HasSubstr("slurmctld"));
  ASSERT_EQ(fake->order.size(), 1u);

  fake->queue_error = absl::OkStatus();
  absl::StatusOr<SweepResult> resumed =
      run_slurm(shell_plan(4), quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->finished, 4);
  EXPECT_EQ(fake->order.size(), 1u);  // followed, not submitted again
  EXPECT_EQ(runs_by_job(tmp.file("sw")).size(), 4u);
}

TEST(SlurmTest, ATaskThatLeftNoRunFailsWithSlurmsReason) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  fake->before_run = [](const std::string&, int index, FakeSlurm::Task* task) {
    if (index == 1) {
      task->state = "FAILED";  // e.g. the node could not start it
      task->exit_code = 1;
    }
  };
  absl::StatusOr<SweepResult> result =
      run_slurm(shell_plan(2), quiet_options(tmp.file("sw"), 1), fake);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 1);
  ASSERT_EQ(result->failed, 1);
  EXPECT_THAT(result->jobs[1].error, HasSubstr("Slurm task 100_1 ended FAILED (exit code 1)"));
  EXPECT_THAT(result->jobs[1].error, HasSubstr("slurm/100_1.out"));
}

TEST(SlurmTest, APlanForOneMachineIsRefused) {
  TempDir tmp;
  auto fake = std::make_shared<FakeSlurm>();
  Plan together = shell_plan(2);
  together.jobs[0].group = together.jobs[1].group = 0;
  together.jobs[1].source = "exp.csv:3";
  absl::StatusOr<SweepResult> result = run_slurm(together, quiet_options(tmp.file("a"), 1), fake);
  EXPECT_THAT(result.status().message(), HasSubstr("exp.csv:3"));
  EXPECT_THAT(result.status().message(), HasSubstr("collocated"));
  Plan mps = shell_plan(1);
  mps.jobs[0].collocation = "mps";
  result = run_slurm(mps, quiet_options(tmp.file("b"), 1), fake);
  EXPECT_THAT(result.status().message(), HasSubstr("Collocation 'mps'"));
  Plan pinned = shell_plan(1);
  pinned.jobs[0].devices = {1};
  result = run_slurm(pinned, quiet_options(tmp.file("c"), 1), fake);
  EXPECT_THAT(result.status().message(), HasSubstr("--gpus-per-job"));
  EXPECT_TRUE(fake->order.empty());
}

TEST(SlurmTest, ParsesWhatSlurmPrints) {
  // squeue --noheader --array --states=all --jobs=1 --format=%F|%K|%T
  EXPECT_EQ(detail::parse_squeue_tasks("1|1|COMPLETED\n1|0|COMPLETED\n1|3|RUNNING\n1|2|RUNNING\n"
                                       "7|0|PENDING\n1|[4-9%2]|PENDING\n",
                                       "1"),
            (std::map<int, std::string>{
                {0, "COMPLETED"}, {1, "COMPLETED"}, {2, "RUNNING"}, {3, "RUNNING"}}));
  EXPECT_TRUE(detail::parse_squeue_tasks("", "1").empty());
  const std::optional<SlurmTaskEnd> end = detail::parse_scontrol_job(
      "JobId=4 ArrayJobId=1 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=s.sh\n"
      "   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)\n"
      "   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=3:0\n");
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, "FAILED");
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->restarts, 1);
  EXPECT_EQ(detail::parse_scontrol_job("   JobState=CANCELLED ExitCode=0:15\n")->exit_code, 143);
  EXPECT_FALSE(detail::parse_scontrol_job("").has_value());
  EXPECT_EQ(detail::slurm_array_spec({5, 0, 1, 2, 9, 10, 2}, 0), "0-2,5,9-10");
  EXPECT_EQ(detail::slurm_array_spec({3}, 4), "3%4");
  EXPECT_EQ(detail::slurm_task_run_id("1", 2, 0).size(), 32u);
  EXPECT_NE(detail::slurm_task_run_id("1", 2, 0), detail::slurm_task_run_id("1", 2, 1));
}

}  // namespace
}  // namespace trainscope::sweep
