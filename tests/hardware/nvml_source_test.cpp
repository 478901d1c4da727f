// NvmlSource over a simulated NVML: metric names and units, which GPUs
// CUDA_VISIBLE_DEVICES selects (indices, GPU and MIG UUIDs), per-process sums
// over the monitored tree (on a fake /proc; the tree itself, host::ProcessTree,
// is tested in process_tree_test.cpp), what an error disables, MIG naming.
#include "hardware/gpu/nvml_source.hpp"

#include "support/simulated_nvml.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/gpu/nvml_library.hpp"
#include "hardware/gpu/visible_devices.hpp"
#include "support/fake_proc.hpp"
#include "support/warnings.hpp"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/sampler.hpp"

namespace trainscope::nvml {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::Not;
using ::testing::SizeIs;
using trainscope::testing::FakeProc;

class NvmlSourceTest : public ::testing::Test {
 protected:
  // Also called again in a test, for a fresh simulation.
  void SetUp() override {
    warnings_.clear();
    auto sim = std::make_unique<SimulatedNvml>(2);
    sim_ = sim.get();
    sim_owned_ = std::move(sim);
  }

  // The source over the simulated NVML; `visible` is CUDA_VISIBLE_DEVICES.
  std::unique_ptr<NvmlSource> make(std::optional<std::string> visible = std::nullopt,
                                   std::string proc_root = "/proc") {
    return std::make_unique<NvmlSource>(std::move(sim_owned_), std::move(visible),
                                        std::move(proc_root));
  }

  static std::map<std::string, double> sample(NvmlSource& source) {
    std::vector<HardwareReading> readings;
    EXPECT_TRUE(source.sample(&readings).ok());
    std::map<std::string, double> values;
    for (const HardwareReading& r : readings) {
      EXPECT_TRUE(values.emplace(r.name, r.value).second) << "duplicate " << r.name;
    }
    return values;
  }

  trainscope::testing::CapturedWarnings warnings_;
  SimulatedNvml* sim_ = nullptr;
  std::unique_ptr<SimulatedNvml> sim_owned_;
};

TEST_F(NvmlSourceTest, NamesAndUnitsForTwoDevices) {
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  EXPECT_THAT(warnings_.messages(), IsEmpty());
  sim_->device(1).energy_mj += 2500;  // 2.5 J since open
  sim_->device(1).power_mw = 250000;
  const std::map<std::string, double> v = sample(*source);
  EXPECT_THAT(v, SizeIs(2 * 14));
  EXPECT_EQ(v.at("system/gpu.0.util_pct"), 50);
  EXPECT_EQ(v.at("system/gpu.0.mem_util_pct"), 20);
  EXPECT_EQ(v.at("system/gpu.0.mem_used_mb"), 4096);
  EXPECT_EQ(v.at("system/gpu.0.mem_total_mb"), 16384);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.0.power_w"), 120.5);
  EXPECT_EQ(v.at("system/gpu.0.energy_j"), 0);
  EXPECT_EQ(v.at("system/gpu.0.temp_c"), 61);
  EXPECT_EQ(v.at("system/gpu.0.sm_clock_mhz"), 1410);
  EXPECT_EQ(v.at("system/gpu.0.mem_clock_mhz"), 1215);
  EXPECT_EQ(v.at("system/gpu.0.pcie_tx_mb_s"), 2);
  EXPECT_EQ(v.at("system/gpu.0.pcie_rx_mb_s"), 4);
  EXPECT_EQ(v.at("system/gpu.0.throttle_reasons"), 4);
  EXPECT_EQ(v.at("system/gpu.0.proc.mem_used_mb"), 0);
  EXPECT_EQ(v.at("system/gpu.0.proc.util_pct"), 0);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.1.energy_j"), 2.5);
  EXPECT_EQ(v.at("system/gpu.1.power_w"), 250);
}

TEST_F(NvmlSourceTest, VisibleIndexSelectsThatPhysicalGpu) {
  auto source = make("1");
  ASSERT_TRUE(source->open({}).ok());
  const auto v = sample(*source);
  EXPECT_THAT(v, Contains(Key("system/gpu.1.util_pct")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.0.util_pct"))));
}

TEST_F(NvmlSourceTest, VisibleUuidOrUniquePrefixSelectsThatGpu) {
  for (const char* visible : {"GPU-bbbbbbbb-1111", " GPU-bbbb ", "GPU-bbbb,0"}) {
    SetUp();
    auto source = make(visible);
    ASSERT_TRUE(source->open({}).ok()) << visible;
    const auto v = sample(*source);
    EXPECT_THAT(v, Contains(Key("system/gpu.1.util_pct"))) << visible;
    EXPECT_EQ(v.count("system/gpu.0.util_pct"), std::string(visible) == "GPU-bbbb,0" ? 1u : 0u)
        << visible;
  }
}

TEST_F(NvmlSourceTest, ListEndsAtTheFirstUnknownDevice) {
  auto source = make("1,GPU-zzzz,0");
  ASSERT_TRUE(source->open({}).ok());
  const auto v = sample(*source);
  EXPECT_THAT(v, Contains(Key("system/gpu.1.util_pct")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.0.util_pct"))));
}

TEST_F(NvmlSourceTest, NoVisibleGpuFailsOpen) {
  for (const char* visible : {"", "-1", "7", "GPU-", "GPU-c"}) {
    SetUp();
    absl::Status status = make(visible)->open({});
    EXPECT_TRUE(absl::IsNotFound(status)) << visible << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("selects no GPU")) << visible;
  }
}

TEST_F(NvmlSourceTest, ContextDevicesOverrideTheEnvironment) {
  auto source = make("0");
  HardwareContext context;
  context.gpu_devices = {1};
  ASSERT_TRUE(source->open(context).ok());
  const auto v = sample(*source);
  EXPECT_THAT(v, Contains(Key("system/gpu.1.util_pct")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.0.util_pct"))));
  SetUp();
  context.gpu_devices = {2};
  EXPECT_TRUE(absl::IsInvalidArgument(make()->open(context)));
}

TEST_F(NvmlSourceTest, FailedInitFailsOpen) {
  sim_->init_status = absl::NotFoundError("libnvidia-ml.so.1 not found");
  absl::Status status = make()->open({});
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(std::string(status.message()), HasSubstr("libnvidia-ml.so.1 not found"));
}

TEST_F(NvmlSourceTest, SumsTheMonitoredTreeOnly) {
  FakeProc proc;
  proc.add_job();  // 100 the job, 101 its child, 102 a stranger
  SimDevice& gpu = sim_->device(0);
  gpu.processes = {{100, 1024 * kMiB}, {101, 512 * kMiB}, {102, 4096 * kMiB}, {101, std::nullopt}};
  gpu.process_samples = {{100, 10, 30}, {101, 11, 20}, {100, 12, 40}, {102, 12, 90}};
  auto source = make(std::nullopt, proc.root());
  HardwareContext context;
  context.root_pid = 100;
  ASSERT_TRUE(source->open(context).ok());
  // open() probed the samples up to t=12; these are the next period's.
  gpu.process_samples.push_back({100, 20, 35});
  gpu.process_samples.push_back({101, 21, 25});
  gpu.process_samples.push_back({102, 22, 90});
  auto v = sample(*source);
  EXPECT_EQ(v.at("system/gpu.0.proc.mem_used_mb"), 1536);
  EXPECT_EQ(v.at("system/gpu.0.proc.util_pct"), 60);
  EXPECT_EQ(v.at("system/gpu.1.proc.mem_used_mb"), 0);
  // No new sample: the tree was idle.
  v = sample(*source);
  EXPECT_EQ(v.at("system/gpu.0.proc.util_pct"), 0);
}

TEST_F(NvmlSourceTest, TheTreeIsTheRootAloneWhereProcCannotTell) {
  SimDevice& gpu = sim_->device(0);
  gpu.processes = {{100, 1024 * kMiB}, {101, 512 * kMiB}};
  auto source = make("0", "/nonexistent");
  HardwareContext context;
  context.root_pid = 100;
  ASSERT_TRUE(source->open(context).ok());
  EXPECT_EQ(sample(*source).at("system/gpu.0.proc.mem_used_mb"), 1024);
}

TEST_F(NvmlSourceTest, ProcessUtilizationIsCappedAt100) {
  FakeProc proc;
  proc.add_job();
  auto source = make("0", proc.root());
  HardwareContext context;
  context.root_pid = 100;
  ASSERT_TRUE(source->open(context).ok());
  sim_->device(0).process_samples = {{100, 5, 80}, {101, 5, 70}};
  EXPECT_EQ(sample(*source).at("system/gpu.0.proc.util_pct"), 100);
}

TEST_F(NvmlSourceTest, UnsupportedAtOpenIsLeftOutWithOneWarning) {
  sim_->device(0).failures["power_mw"] = absl::UnimplementedError("Not Supported");
  sim_->device(1).failures["energy_mj"] = absl::UnimplementedError("Not Supported");
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0], HasSubstr("gpu.0 power_w (Not Supported)"));
  EXPECT_THAT(warnings_.messages()[0], HasSubstr("gpu.1 energy_j (Not Supported)"));
  const auto v = sample(*source);
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.0.power_w"))));
  EXPECT_THAT(v, Contains(Key("system/gpu.1.power_w")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.1.energy_j"))));
  EXPECT_THAT(v, Contains(Key("system/gpu.0.energy_j")));
}

TEST_F(NvmlSourceTest, ACallThatStartsFailingIsDroppedWithOneWarning) {
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  sim_->device(1).failures["temperature_c"] = absl::PermissionDeniedError("No permission");
  auto v = sample(*source);
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.1.temp_c"))));
  EXPECT_THAT(v, Contains(Key("system/gpu.0.temp_c")));
  EXPECT_THAT(v, Contains(Key("system/gpu.1.power_w")));
  v = sample(*source);
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.1.temp_c"))));
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0], HasSubstr("gpu.1 temp_c failed"));
  // It stays dropped even when the device answers again.
  sim_->device(1).failures.clear();
  EXPECT_THAT(sample(*source), Not(Contains(Key("system/gpu.1.temp_c"))));
}

TEST_F(NvmlSourceTest, ALostGpuFailsTheSource) {
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  sim_->device(0).failures["memory"] = absl::UnavailableError("GPU is lost");
  std::vector<HardwareReading> readings;
  EXPECT_TRUE(absl::IsUnavailable(source->sample(&readings)));
  EXPECT_THAT(warnings_.messages(), IsEmpty());  // the sampler warns, once
}

TEST_F(NvmlSourceTest, MigInstancesAreNamedByGpuInstance) {
  SimDevice& mig1 = sim_->add_mig(0, 1, "MIG-11111111-aaaa");
  sim_->add_mig(0, 2, "MIG-22222222-bbbb");
  mig1.memory = {10240 * kMiB, 2048 * kMiB};
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  const auto v = sample(*source);
  EXPECT_EQ(v.at("system/gpu.0.mig1.mem_used_mb"), 2048);
  EXPECT_EQ(v.at("system/gpu.0.mig1.mem_total_mb"), 10240);
  EXPECT_THAT(v, Contains(Key("system/gpu.0.mig2.mem_used_mb")));
  EXPECT_THAT(v, Contains(Key("system/gpu.0.mig2.proc.mem_used_mb")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.0.mig1.util_pct"))));
  EXPECT_THAT(v, Contains(Key("system/gpu.0.power_w")));   // the whole GPU still answers
  EXPECT_THAT(v, Contains(Key("system/gpu.1.util_pct")));  // a GPU without MIG
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0], HasSubstr("gpu.0.mig1 util_pct/mem_util_pct"));
}

TEST_F(NvmlSourceTest, VisibleMigUuidSelectsThatInstanceOnly) {
  for (const char* visible : {"MIG-22222222-bbbb", "MIG-GPU-aaaaaaaa-1111/2/0"}) {
    SetUp();
    sim_->add_mig(0, 1, "MIG-11111111-aaaa");
    sim_->add_mig(0, 2, "MIG-22222222-bbbb");
    auto source = make(visible);
    ASSERT_TRUE(source->open({}).ok()) << visible;
    const auto v = sample(*source);
    for (const auto& [name, value] : v) {
      EXPECT_THAT(name, HasSubstr("system/gpu.0.mig2.")) << visible;
    }
    EXPECT_THAT(v, Contains(Key("system/gpu.0.mig2.mem_used_mb"))) << visible;
  }
}

TEST(ParseVisibleDevices, FollowsCudaRules) {
  using Kind = VisibleDevice::Kind;
  const auto index = [](unsigned i) {
    VisibleDevice d;
    d.index = i;
    return d;
  };
  const auto uuid = [](Kind kind, std::string u, unsigned gi = 0) {
    VisibleDevice d;
    d.kind = kind;
    d.uuid = std::move(u);
    d.gpu_instance = gi;
    return d;
  };
  EXPECT_THAT(parse_visible_devices("0,2"), ElementsAre(index(0), index(2)));
  EXPECT_THAT(parse_visible_devices(" 1 , 0 "), ElementsAre(index(1), index(0)));
  EXPECT_THAT(parse_visible_devices(""), IsEmpty());
  EXPECT_THAT(parse_visible_devices("-1"), IsEmpty());
  EXPECT_THAT(parse_visible_devices("0,-1,1"), ElementsAre(index(0)));
  EXPECT_THAT(parse_visible_devices("1,x,0"), ElementsAre(index(1)));
  EXPECT_THAT(parse_visible_devices("0,"), ElementsAre(index(0)));
  EXPECT_THAT(parse_visible_devices("99999999999"), IsEmpty());
  EXPECT_THAT(parse_visible_devices("GPU-8932f937-d72c"),
              ElementsAre(uuid(Kind::kGpuUuid, "GPU-8932f937-d72c")));
  EXPECT_THAT(parse_visible_devices("MIG-c6d4f1ef-42e4"),
              ElementsAre(uuid(Kind::kMigUuid, "MIG-c6d4f1ef-42e4")));
  EXPECT_THAT(parse_visible_devices("MIG-GPU-8932f937/3/0,1"),
              ElementsAre(uuid(Kind::kMigLegacy, "GPU-8932f937", 3), index(1)));
  EXPECT_THAT(parse_visible_devices("MIG-GPU-8932f937/x/0"), IsEmpty());
  EXPECT_THAT(parse_visible_devices("GPU-"), IsEmpty());
}

TEST(DlopenNvml, AMissingLibraryIsAnErrorNotACrash) {
  DlopenNvml api("libnvidia-ml-does-not-exist.so.1");
  absl::Status status = api.init();
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("no NVIDIA GPU/driver found (libnvidia-ml-does-not-exist.so.1 is not installed"));
}

// The public factory (trainscope/hardware/gpu/nvml_api.hpp) is the same dlopen path.
TEST(LoadNvml, LoadsNothingBeforeInitAndAMissingLibraryIsNotFound) {
  std::unique_ptr<NvmlApi> api = load_nvml("libnvidia-ml-does-not-exist.so.1");
  ASSERT_NE(api, nullptr);
  absl::Status status = api->init();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("no NVIDIA GPU/driver found (libnvidia-ml-does-not-exist.so.1 is not installed"));
  api->shutdown();  // harmless without a successful init
}

TEST(GpuSources, NvmlComesFirst) {
  const auto sources = gpu_sources();
  ASSERT_THAT(sources, Not(IsEmpty()));
  EXPECT_EQ(sources[0]->name(), "nvml");
}

}  // namespace
}  // namespace trainscope::nvml
