// radT's Collocation (MPS, MIG profiles) against a fake of the NVIDIA tools
// (FakeGpuTools): what is run to set a workload up and to clean up after it,
// what each job gets in its environment, and the errors that say what is
// missing (the MPS binary, root, MIG mode), each naming the job's row. Also
// through the scheduler on (simulated) GPU slots. The real nvidia-smi and
// nvidia-cuda-mps-control need a MIG-capable GPU: see the notes.
#include "sweep/collocation.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/sweep_jobs.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using trainscope::testing::quiet_options;
using trainscope::testing::shell_job;
using trainscope::testing::TempDir;

std::string line_of(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) out += (out.empty() ? "" : " ") + word;
  return out;
}

// A GPU box as nvidia-smi shows it: MIG mode per GPU, GPU instances (profile
// by id) with their compute instance's UUID, root or not, MPS installed or not.
class FakeGpuTools : public GpuTools {
 public:
  absl::StatusOr<ToolResult> run(const std::vector<std::string>& argv) override {
    calls.push_back(line_of(argv));
    const std::string line = calls.back();
    if (argv[0] == "env") return ToolResult{0, "", ""};  // MPS start and quit
    if (argv.size() >= 3 && argv[1] == "-i" && argv[3] == "--query-gpu=mig.mode.current") {
      return ToolResult{0, mig_mode[std::stoi(argv[2])] + "\n", ""};
    }
    if (argv[1] == "mig") {
      const int gpu = std::stoi(argv[3]);
      if (argv[4] == "-lgi") {
        std::string out =
            "+------+\n| GPU instances: |\n| GPU   Name  Profile  Instance   Placement |\n";
        for (const auto& [key, profile] : instances) {
          if (key.first == gpu) {
            out += fmt::format("|   {}  MIG {}  9  {}  0:4 |\n", gpu, profile, key.second);
          }
        }
        return ToolResult{instances.empty() ? 6 : 0, out, ""};
      }
      if (argv[4] == "-cgi") {
        if (create_fails) return ToolResult{2, "", "Insufficient resources"};
        const int gi = next_gi++;
        instances[{gpu, gi}] = argv[5];
        return ToolResult{0,
                          fmt::format("Successfully created GPU instance ID  {} on GPU  {} using "
                                      "profile MIG {} (ID  9)\nSuccessfully created compute "
                                      "instance ID  0 on GPU  {} GPU instance ID  {}\n",
                                      gi, gpu, argv[5], gpu, gi),
                          ""};
      }
      if (argv[4] == "-gi" && argv[6] == "-dgi") instances.erase({gpu, std::stoi(argv[5])});
      return ToolResult{0, "", ""};
    }
    return ToolResult{1, "", "unexpected call: " + line};
  }
  bool on_path(const std::string& tool) override {
    return tool != "nvidia-cuda-mps-control" || mps;
  }
  bool is_root() override { return root; }
  absl::StatusOr<std::map<int, std::string>> mig_uuids(int gpu) override {
    std::map<int, std::string> out;
    for (const auto& [key, profile] : instances) {
      if (key.first == gpu) out[key.second] = fmt::format("MIG-{}-{}", gpu, key.second);
    }
    return out;
  }

  std::vector<std::string> calls;
  std::map<int, std::string> mig_mode = {{0, "Enabled"}, {1, "Disabled"}, {2, "Enabled"}};
  std::map<std::pair<int, int>, std::string> instances;  // (gpu, gi) -> profile
  int next_gi = 5;
  bool root = true;
  bool mps = true;
  bool create_fails = false;
};

Job row(const std::string& id, int line, const std::string& collocation) {
  Job job = shell_job(id, "true", 0);
  job.collocation = collocation;
  job.source = "exp.csv:" + std::to_string(line);
  return job;
}

TEST(CollocationTest, MpsStartsOneDaemonPerWorkloadWithItsOwnDirectoriesAndStopsIt) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  detail::Collocation collocation(tmp.str(), tools);
  const Job a = row("a", 2, "mps");
  const Job b = row("b", 3, "mps");
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
      collocation.begin(3, {&a, &b}, {{0}, {1}});
  ASSERT_TRUE(env.ok()) << env.status();
  const std::string pipe = tmp.file("mps/group-3/pipe");
  const std::string log = tmp.file("mps/group-3/log");
  ASSERT_THAT(tools->calls,
              ElementsAre(fmt::format("env CUDA_MPS_PIPE_DIRECTORY={} CUDA_MPS_LOG_DIRECTORY={} "
                                      "CUDA_VISIBLE_DEVICES=0,1 nvidia-cuda-mps-control -d",
                                      pipe, log)));
  for (const auto& job_env : *env) {
    EXPECT_THAT(job_env, ElementsAre(Pair("CUDA_MPS_LOG_DIRECTORY", log),
                                     Pair("CUDA_MPS_PIPE_DIRECTORY", pipe)));
  }
  // A retried job of the workload joins the running daemon.
  ASSERT_TRUE(collocation.begin(3, {&a}, {{0}}).ok());
  EXPECT_EQ(tools->calls.size(), 1u);
  ASSERT_TRUE(collocation.end(3).ok());
  EXPECT_EQ(tools->calls.back(),
            fmt::format("env CUDA_MPS_PIPE_DIRECTORY={} CUDA_MPS_LOG_DIRECTORY={} sh -c echo quit "
                        "| nvidia-cuda-mps-control",
                        pipe, log));
  EXPECT_FALSE(collocation.active(3));
}

TEST(CollocationTest, MpsWithoutTheBinaryNamesTheRow) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  tools->mps = false;
  detail::Collocation collocation(tmp.str(), tools);
  const Job a = row("a", 4, "mps");
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
      collocation.begin(0, {&a}, {{0}});
  EXPECT_THAT(std::string(env.status().message()),
              HasSubstr("exp.csv:4: Collocation 'mps' needs nvidia-cuda-mps-control, which is "
                        "not on PATH"));
  EXPECT_TRUE(tools->calls.empty());
  EXPECT_FALSE(collocation.active(0));
}

TEST(CollocationTest, MigUsesAFreeInstanceCreatesTheRestAndDestroysOnlyThose) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  tools->instances[{2, 1}] = "3g.20gb";  // one exists already (someone else's setup)
  tools->instances[{2, 2}] = "1g.5gb";   // another profile: not ours
  detail::Collocation collocation(tmp.str(), tools);
  const Job a = row("a", 4, "3g.20gb");
  const Job b = row("b", 5, "3g.20gb");
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
      collocation.begin(1, {&a, &b}, {{2}, {2}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT((*env)[0], ElementsAre(Pair("CUDA_VISIBLE_DEVICES", "MIG-2-1")));
  EXPECT_THAT((*env)[1], ElementsAre(Pair("CUDA_VISIBLE_DEVICES", "MIG-2-5")));
  EXPECT_THAT(tools->calls, ::testing::Contains("nvidia-smi mig -i 2 -cgi 3g.20gb -C"));
  tools->calls.clear();
  collocation.release(1, a);
  collocation.release(1, b);
  ASSERT_TRUE(collocation.end(1).ok());
  EXPECT_THAT(tools->calls,
              ElementsAre("nvidia-smi mig -i 2 -gi 5 -dci", "nvidia-smi mig -i 2 -gi 5 -dgi"));
  EXPECT_EQ(tools->instances.count({2, 1}), 1u);  // the existing one stays
  EXPECT_EQ(tools->instances.count({2, 5}), 0u);
}

TEST(CollocationTest, MigSaysWhatIsMissing) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  detail::Collocation collocation(tmp.str(), tools);
  const Job a = row("a", 6, "3g.20gb");
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
      collocation.begin(0, {&a}, {{1}});
  EXPECT_THAT(std::string(env.status().message()),
              HasSubstr("exp.csv:6: Collocation '3g.20gb' needs MIG mode on GPU 1, which is "
                        "'Disabled' (enable it as root: nvidia-smi -i 1 -mig 1)"));

  tools->root = false;
  env = collocation.begin(0, {&a}, {{0}});
  EXPECT_THAT(std::string(env.status().message()),
              HasSubstr("exp.csv:6: Collocation '3g.20gb': no free MIG instance of 3g.20gb on "
                        "GPU 0, and creating one needs root"));
  EXPECT_THAT(std::string(env.status().message()),
              HasSubstr("nvidia-smi mig -i 0 -cgi 3g.20gb -C"));

  tools->root = true;
  tools->create_fails = true;
  env = collocation.begin(0, {&a}, {{0}});
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("Insufficient resources"));

  Job two_gpus = a;
  env = collocation.begin(0, {&two_gpus}, {{0, 2}});
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("one MIG instance of one GPU"));
  EXPECT_FALSE(collocation.active(0));
}

TEST(CollocationTest, AFailedSetupCleansUpWhatItCreated) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  detail::Collocation collocation(tmp.str(), tools);
  const Job a = row("a", 2, "3g.20gb");
  const Job b = row("b", 3, "3g.20gb");
  // a's instance is created on GPU 0; b's GPU 1 has MIG off.
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> env =
      collocation.begin(0, {&a, &b}, {{0}, {1}});
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("exp.csv:3"));
  EXPECT_EQ(tools->calls.back(), "nvidia-smi mig -i 0 -gi 5 -dgi");
  EXPECT_TRUE(tools->instances.empty());
}

TEST(CollocationTest, ParsesNvidiaSmi) {
  const std::vector<detail::MigInstance> instances = detail::parse_mig_instances(
      "+-------------------------------------------------------+\n"
      "| GPU instances:                                        |\n"
      "| GPU   Name             Profile  Instance   Placement  |\n"
      "|                          ID       ID       Start:Size |\n"
      "|=======================================================|\n"
      "|   0  MIG 3g.20gb          9        1          4:4     |\n"
      "+-------------------------------------------------------+\n"
      "|   0  MIG 1g.5gb          19       13          0:1     |\n");
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances[0].gpu_instance, 1);
  EXPECT_EQ(instances[0].profile, "3g.20gb");
  EXPECT_EQ(instances[1].gpu_instance, 13);
  EXPECT_TRUE(detail::parse_mig_instances("No GPU instances found: Not Found\n").empty());
  EXPECT_EQ(detail::parse_created_instance(
                "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.20gb (ID  "
                "9)\nSuccessfully created compute instance ID  0 on GPU  0 GPU instance ID  1 "
                "using profile MIG 3g.20gb (ID  2)\n"),
            1);
  EXPECT_EQ(detail::parse_created_instance("Unable to create a GPU instance"), -1);
}

TEST(CollocationTest, TheSchedulerSetsUpEachWorkloadOnGpuSlotsAndCleansUp) {
  TempDir tmp;
  auto tools = std::make_shared<FakeGpuTools>();
  SweepOptions options = quiet_options(tmp.file("sw"), 1);
  options.slots = *gpu_slots({0, 2}, 2, /*restrict_to_visible=*/false);
  options.gpu_tools = tools;
  const std::string out = tmp.file("env");
  Plan plan;
  plan.name = "radt";
  // Workload 0: two MIG rows on GPU 2 (instances created, then destroyed);
  // workload 1: MPS on GPU 0 (a daemon started, then stopped).
  for (const auto& [id, group, device, collocation] :
       std::vector<std::tuple<std::string, int, int, std::string>>{
           {"a", 0, 2, "3g.20gb"}, {"b", 0, 2, "3g.20gb"}, {"c", 1, 0, "mps"}}) {
    Job job = shell_job(
        id, "echo \"$0 ${CUDA_VISIBLE_DEVICES} ${CUDA_MPS_PIPE_DIRECTORY-none}\" >> " + out, group);
    job.command.push_back(id);
    job.devices = {device};
    job.collocation = collocation;
    job.source = "exp.csv:" + id;
    plan.jobs.push_back(job);
  }
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finished, 3);
  std::vector<std::string> lines =
      trainscope::testing::lines_of(trainscope::testing::read_file(out));
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "a MIG-2-5 none");
  EXPECT_EQ(lines[1], "b MIG-2-6 none");
  EXPECT_THAT(lines[2], HasSubstr("c 0 " + tmp.file("sw/mps/group-1/pipe")));
  EXPECT_TRUE(tools->instances.empty());  // both created instances destroyed
  EXPECT_THAT(tools->calls, ::testing::Contains(HasSubstr("echo quit | nvidia-cuda-mps-control")));

  // A workload whose setup fails: its rows fail naming the row and what is missing.
  tools->mig_mode[2] = "Disabled";
  Plan off = plan;
  off.jobs.resize(2);
  SweepOptions again = options;
  again.dir = tmp.file("sw2");
  result = run_sweep(off, again);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->failed, 2);
  EXPECT_THAT(result->jobs[0].error, HasSubstr("exp.csv:a: Collocation '3g.20gb' needs MIG mode"));
}

}  // namespace
}  // namespace trainscope::sweep
