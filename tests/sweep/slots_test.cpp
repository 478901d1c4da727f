// Where a sweep's jobs run and what they run: slots from NVML (a simulated
// one here) or --slots stand-ins, a device that does not exist, the --slots
// test mode placing radT's Devices on stand-in slots, the pre-flight check of
// each job's command, radT's Listeners as launch options, and a resume from
// the stored plan alone (queued jobs kept).
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/simulated_nvml.hpp"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "sweep/job_launch.hpp"
#include "sweep/slots.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using trainscope::testing::quiet_options;
using trainscope::testing::runs_by_job;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;

std::vector<std::vector<int>> devices_of(const std::vector<Slot>& slots) {
  std::vector<std::vector<int>> out;
  for (const Slot& slot : slots) out.push_back(slot.devices);
  return out;
}

class SlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) saved_ = visible;
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
  void TearDown() override {
    if (saved_) ::setenv("CUDA_VISIBLE_DEVICES", saved_->c_str(), 1);
  }
  std::optional<std::string> saved_;
};

TEST_F(SlotsTest, EveryGpuNvmlListsIsASlotAndPerGpuCollocates) {
  nvml::SimulatedNvml nvml(2);
  std::string note;
  absl::StatusOr<std::vector<Slot>> slots = detail::choose_slots({}, &nvml, &note);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(devices_of(*slots), ElementsAre(ElementsAre(0), ElementsAre(1)));
  EXPECT_FALSE((*slots)[0].stand_in);
  EXPECT_THAT(note, HasSubstr("GPU(s) 0,1"));
  EXPECT_EQ(nvml.live_inits, 0);  // shut down again

  SlotRequest two_each;
  two_each.per_gpu = 2;
  two_each.devices = {1};
  slots = detail::choose_slots(two_each, &nvml, &note);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(devices_of(*slots), ElementsAre(ElementsAre(1), ElementsAre(1)));

  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  slots = detail::choose_slots({}, &nvml, &note);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(devices_of(*slots), ElementsAre(ElementsAre(1)));
}

TEST_F(SlotsTest, ADeviceThatDoesNotExistIsAnErrorNamingIt) {
  nvml::SimulatedNvml nvml(2);
  SlotRequest request;
  request.devices = {0, 5};
  absl::StatusOr<std::vector<Slot>> slots = detail::choose_slots(request, &nvml, nullptr);
  EXPECT_THAT(std::string(slots.status().message()),
              HasSubstr("GPU 5 does not exist (this machine has 2 GPU(s): 0-1)"));
}

TEST_F(SlotsTest, WithoutAGpuOneCpuSlotAndANoteSayingWhy) {
  nvml::SimulatedNvml nvml(1);
  nvml.init_status = absl::NotFoundError("libnvidia-ml.so.1: cannot open shared object file");
  std::string note;
  absl::StatusOr<std::vector<Slot>> slots = detail::choose_slots({}, &nvml, &note);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(devices_of(*slots), ElementsAre(ElementsAre()));
  EXPECT_THAT(note, HasSubstr("no GPU (no NVIDIA GPU/driver found)"));
  EXPECT_THAT(note, HasSubstr("--slots N"));

  SlotRequest pinned;
  pinned.devices = {0};
  slots = detail::choose_slots(pinned, &nvml, nullptr);
  EXPECT_THAT(std::string(slots.status().message()),
              HasSubstr("--devices 0: this machine has no GPU"));
  slots = detail::choose_slots(pinned, nullptr, nullptr);
  EXPECT_THAT(std::string(slots.status().message()), HasSubstr("no NVML"));
}

TEST_F(SlotsTest, SlotsAreCpuStandInsForDevices) {
  SlotRequest request;
  request.cpu_slots = 3;
  absl::StatusOr<std::vector<Slot>> slots = detail::choose_slots(request, nullptr, nullptr);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(devices_of(*slots), ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
  EXPECT_TRUE((*slots)[0].stand_in);
  request.devices = {0};
  EXPECT_THAT(std::string(detail::choose_slots(request, nullptr, nullptr).status().message()),
              HasSubstr("exclude each other"));
}

TEST_F(SlotsTest, StandInSlotsPlaceRadtDevicesAndSetNoCudaVisibleDevices) {
  TempDir tmp;
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.slots = *stand_in_slots(2);
  Plan plan;
  plan.name = "radt";
  // One workload on devices 1 and 0 (collocated: each waits for the other to
  // have started, so they fail unless they run together), then one on 1 (it
  // fails unless both have ended). Each records its CUDA_VISIBLE_DEVICES.
  const std::string d = tmp.str();
  const std::string wait_for_other =
      "touch {d}/$0.started; i=0; until [ -e {d}/$1.started ] || [ $i -ge 3000 ]; do sleep "
      "0.01; i=$((i+1)); done; [ -e {d}/$1.started ] || exit 1; echo "
      "\"${{CUDA_VISIBLE_DEVICES-unset}}\" > {d}/$0.env; touch {d}/$0.ended";
  const std::string after_both =
      "[ -e {d}/a.ended ] && [ -e {d}/b.ended ] || exit 1; echo "
      "\"${{CUDA_VISIBLE_DEVICES-unset}}\" > {d}/$0.env";
  const auto job = [&](const std::string& id, const std::string& other, int device, int group,
                       const std::string& script) {
    Job out = shell_job(id, fmt::format(fmt::runtime(script), fmt::arg("d", d)), group);
    out.command.push_back(id);     // $0
    out.command.push_back(other);  // $1
    out.devices = {device};
    out.source = "exp.csv:" + std::to_string(2 + (id[0] - 'a'));
    return out;
  };
  plan.jobs = {job("a", "b", 1, 0, wait_for_other), job("b", "a", 0, 0, wait_for_other),
               job("c", "-", 1, 1, after_both)};
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 3);
  EXPECT_THAT(result->jobs[0].devices, ElementsAre(1));
  EXPECT_THAT(result->jobs[1].devices, ElementsAre(0));
  EXPECT_THAT(result->jobs[2].devices, ElementsAre(1));
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(trainscope::testing::read_file(tmp.file(std::string(id) + ".env")), "unset\n") << id;
  }

  Plan missing = plan;
  missing.jobs[2].devices = {4};
  SweepOptions again = quiet_options(tmp.file("sw2"), 1);
  again.slots = *stand_in_slots(2);
  absl::StatusOr<SweepResult> refused = run_sweep(missing, again);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("exp.csv:4: job 'c' pins device 4, which does not exist"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("devices 0-1"));
}

TEST(CheckCommandTest, AProgramOrScriptThatDoesNotExistIsNamedWithItsSource) {
  TempDir tmp;
  Job job = shell_job("a", "true");
  EXPECT_TRUE(detail::check_command(job).ok());
  job.command = {"no-such-program-trainscope"};
  job.source = "exp.csv:7";
  EXPECT_THAT(
      std::string(detail::check_command(job).message()),
      HasSubstr("exp.csv:7: job 'a': command 'no-such-program-trainscope' not found on PATH"));
  job.command = {tmp.file("missing")};
  EXPECT_THAT(std::string(detail::check_command(job).message()), HasSubstr("not found"));
  job.command = {"sh", tmp.file("train.py")};
  EXPECT_TRUE(detail::check_command(job).ok());  // not a Python interpreter: its business
  job.command = {"python3", tmp.file("train.py")};
  EXPECT_THAT(std::string(detail::check_command(job).message()),
              HasSubstr("script '" + tmp.file("train.py") + "' does not exist"));
  tmp.write("train.py", "");
  EXPECT_TRUE(detail::check_command(job).ok());

  // The scheduler refuses the plan before anything runs or is recorded.
  Plan plan;
  plan.jobs = {shell_job("ok", "true"), job};
  plan.jobs[1].command = {"no-such-program-trainscope"};
  absl::StatusOr<SweepResult> result = run_sweep(plan, quiet_options(tmp.file("sw"), 1));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("exp.csv:7"));
  EXPECT_TRUE(std::filesystem::is_empty(tmp.file("sw/runs")));
}

TEST(ListenersTest, RadtListenersBecomeSourcesAndAProfiler) {
  Job job = shell_job("a", "true");
  job.params = {{"lr", "0.1"}};
  job.listeners = {"smi", "iostat", "nsys"};
  detail::JobLaunchSettings settings;
  settings.sweep_name = "exp";
  settings.runs_dir = "/tmp/runs";
  absl::StatusOr<LaunchOptions> options = detail::job_launch_options(
      job, "0123", "/tmp/cfg.json", settings, {{"k", "v"}}, {{"CUDA_VISIBLE_DEVICES", "MIG-1"}});
  ASSERT_TRUE(options.ok()) << options.status();
  // The command is the job's, then its params; the variables go to the job's
  // environment only (never an `env` prefix the run would record).
  EXPECT_THAT(options->command, ElementsAre("sh", "-c", "true", "--lr", "0.1"));
  EXPECT_THAT(options->environment, ElementsAre(Pair("CUDA_VISIBLE_DEVICES", "MIG-1"),
                                                Pair("TRAINSCOPE_SWEEP_CONFIG", "/tmp/cfg.json")));
  EXPECT_EQ(options->profiler, Profiler::kNsys);
  EXPECT_EQ(options->run.tags.at("trainscope.sweep"), "exp");
  EXPECT_EQ(options->run.tags.at("k"), "v");
  EXPECT_EQ(options->run.params.at("lr"), "0.1");
  ASSERT_TRUE(options->make_sources);
  EXPECT_TRUE(options->sample_hardware);

  absl::StatusOr<detail::ListenerPlan> plan = detail::plan_listeners(job.listeners, "x");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->sources, ElementsAre("host.disk", "nvml"));
  plan = detail::plan_listeners({"top", "free", "dcgmi"}, "x");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->sources, ElementsAre("dcgm", "host.cpu", "host.memory", "host.proc", "nvml"));
  EXPECT_EQ(plan->profiler, Profiler::kNone);
  plan = detail::plan_listeners({"ncuraw"}, "x");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->profiler, Profiler::kNcu);
  EXPECT_TRUE(plan->sources.empty());
  EXPECT_FALSE(plan->all_sources);
  EXPECT_THAT(std::string(detail::plan_listeners({"nsys", "ncu"}, "exp.csv:3").status().message()),
              HasSubstr("exp.csv:3: listeners nsys and ncu"));
  EXPECT_THAT(std::string(detail::plan_listeners({"gpustat"}, "exp.csv:3").status().message()),
              HasSubstr("unknown listener 'gpustat'"));

  // Only the listeners' sources are sampled; none: every source, the launch's default.
  for (const auto& source : options->make_sources()) {
    EXPECT_TRUE(source->name() == "host.disk" || source->name() == "nvml") << source->name();
  }
  job.listeners.clear();
  options = detail::job_launch_options(job, "0123", "", settings);
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->make_sources);
  EXPECT_EQ(options->profiler, Profiler::kNone);
  EXPECT_THAT(options->command, ElementsAre("sh", "-c", "true", "--lr", "0.1"));
  EXPECT_TRUE(options->environment.empty());
}

TEST(SavedPlanTest, AResumeFromTheStoredPlanKeepsTheQueuedJobs) {
  TempDir tmp;
  Plan plan;
  plan.name = "grid";
  plan.jobs = {shell_job("a", "true"), shell_job("b", "true"), shell_job("c", "true")};
  {
    absl::StatusOr<std::unique_ptr<Scheduler>> opened =
        Scheduler::Open(plan, quiet_options(tmp.file("sw"), 1));
    ASSERT_TRUE(opened.ok()) << opened.status();  // stored, nothing run
  }
  absl::StatusOr<Plan> saved = saved_plan(tmp.file("sw"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->name, "grid");
  ASSERT_EQ(saved->jobs.size(), 3u);
  EXPECT_EQ(saved->jobs[2].command, plan.jobs[2].command);
  absl::StatusOr<SweepResult> result = run_sweep(*saved, quiet_options(tmp.file("sw"), 1));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 3);
  EXPECT_EQ(runs_by_job(tmp.file("sw")).size(), 3u);

  // A plan with fewer jobs is an update: its missing queued jobs go.
  TempDir other;
  { ASSERT_TRUE(Scheduler::Open(plan, quiet_options(other.file("sw"), 1)).ok()); }
  Plan one = plan;
  one.jobs.resize(1);
  result = run_sweep(one, quiet_options(other.file("sw"), 1));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->jobs.size(), 1u);

  EXPECT_THAT(std::string(saved_plan(tmp.file("nothing")).status().message()),
              HasSubstr("holds no sweep"));
}

}  // namespace
}  // namespace trainscope::sweep
