// DcgmSource over a simulated libdcgm (tests/fake_dcgm.cpp, loaded with
// dlopen as the real one would be) and a simulated NVML for the job's
// devices: profiling ratios reach the NVML-style names in percent, only the
// GPUs and MIG instances the job uses are watched, standalone host engine
// first then embedded, what disables the source (with the sampler's one
// warning) and what only skips a value or leaves a device out.
#include "hardware/gpu/dcgm_source.hpp"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/recording_exporter.hpp"
#include "support/simulated_nvml.hpp"
#include "support/warnings.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/sampler.hpp"

namespace trainscope::dcgm {
namespace {

using nvml::Device;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::Not;
using ::testing::SizeIs;

using nvml::SimulatedNvml;

// --- the simulated DCGM --------------------------------------------------------

struct FakeDcgm {
  FakeDcgm() : handle(::dlopen(TRAINSCOPE_FAKE_DCGM, RTLD_NOW | RTLD_LOCAL)) {
    get(reset, "fake_dcgm_reset");
    get(fail, "fake_dcgm_fail");
    get(add_gpu, "fake_dcgm_add_gpu");
    get(add_instance, "fake_dcgm_add_instance");
    get(set_value, "fake_dcgm_set_value");
    get(fail_watch_for, "fake_dcgm_fail_watch_for");
    get(calls, "fake_dcgm_calls");
    get(watching, "fake_dcgm_watching");
    get(open_objects, "fake_dcgm_open_objects");
    get(mode, "fake_dcgm_mode");
    get(address, "fake_dcgm_address");
    get(update_us, "fake_dcgm_update_us");
  }
  template <typename Fn>
  void get(Fn& fn, const char* symbol) {
    fn = handle != nullptr ? reinterpret_cast<Fn>(::dlsym(handle, symbol)) : nullptr;
  }
  void* handle;
  void (*reset)() = nullptr;
  void (*fail)(const char*, int) = nullptr;
  void (*add_gpu)(unsigned, const char*, unsigned) = nullptr;
  void (*add_instance)(unsigned, unsigned, unsigned) = nullptr;
  void (*set_value)(unsigned, unsigned, unsigned, double, int) = nullptr;
  void (*fail_watch_for)(unsigned, unsigned, int) = nullptr;
  int (*calls)(const char*) = nullptr;
  int (*watching)(unsigned, unsigned) = nullptr;
  int (*open_objects)() = nullptr;
  const char* (*mode)() = nullptr;
  const char* (*address)() = nullptr;
  long long (*update_us)() = nullptr;
};

FakeDcgm& fake() {
  static FakeDcgm f;
  return f;
}

constexpr unsigned kGpu = abi::kEntityGpu;
constexpr unsigned kGpuI = abi::kEntityGpuInstance;
constexpr unsigned kSm = abi::kFieldSmActive;
constexpr unsigned kTensor = abi::kFieldTensorActive;
constexpr unsigned kDram = abi::kFieldDramActive;

class DcgmSourceTest : public ::testing::Test {
 protected:
  // First: it outlives every member, so it captures whatever they warn.
  trainscope::testing::CapturedWarnings warnings_;

  // Also called again in a test, for a fresh simulation.
  void SetUp() override {
    ASSERT_NE(fake().handle, nullptr) << ::dlerror();
    ASSERT_NE(fake().update_us, nullptr);
    fake().reset();
    warnings_.clear();
    nvml_ = std::make_unique<SimulatedNvml>(2);
    // DCGM numbers the job's GPUs its own way; UUIDs tie them to NVML's.
    fake().add_gpu(0, "GPU-aaaaaaaa-1111", 0);
    fake().add_gpu(1, "GPU-bbbbbbbb-1111", 1);
  }

  std::unique_ptr<DcgmSource> make(std::optional<std::string> visible = std::nullopt,
                                   DcgmOptions options = {}) {
    return std::make_unique<DcgmSource>(TRAINSCOPE_FAKE_DCGM,
                                        nvml_resolver(std::move(nvml_), std::move(visible)),
                                        std::move(options));
  }

  static std::map<std::string, double> sample(DcgmSource& source) {
    std::vector<HardwareReading> readings;
    const absl::Status status = source.sample(&readings);
    EXPECT_TRUE(status.ok()) << status;
    std::map<std::string, double> values;
    for (const HardwareReading& r : readings) {
      EXPECT_TRUE(values.emplace(r.name, r.value).second) << "duplicate " << r.name;
    }
    return values;
  }

  static void set_all(unsigned group, unsigned id, double sm, double tensor, double dram) {
    fake().set_value(group, id, kSm, sm, abi::kOk);
    fake().set_value(group, id, kTensor, tensor, abi::kOk);
    fake().set_value(group, id, kDram, dram, abi::kOk);
  }

  std::unique_ptr<SimulatedNvml> nvml_;
};

TEST_F(DcgmSourceTest, RatiosReachTheNvmlNamesInPercent) {
  set_all(kGpu, 0, 0.5, 0.25, 0.125);
  set_all(kGpu, 1, 0.875, 0.0, 1.0);
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  const auto v = sample(*source);
  EXPECT_THAT(v, SizeIs(6));
  EXPECT_DOUBLE_EQ(v.at("system/gpu.0.sm_active_pct"), 50);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.0.tensor_active_pct"), 25);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.0.dram_active_pct"), 12.5);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.1.sm_active_pct"), 87.5);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.1.tensor_active_pct"), 0);
  EXPECT_DOUBLE_EQ(v.at("system/gpu.1.dram_active_pct"), 100);
  EXPECT_THAT(warnings_.messages(), IsEmpty());
}

TEST_F(DcgmSourceTest, ConnectsToARunningHostEngineFirst) {
  DcgmOptions options;
  options.update_interval = absl::Milliseconds(100);
  auto source = make(std::nullopt, options);
  ASSERT_TRUE(source->open({}).ok());
  EXPECT_STREQ(fake().mode(), "standalone");
  EXPECT_STREQ(fake().address(), "127.0.0.1");
  EXPECT_EQ(fake().calls("dcgmStartEmbedded"), 0);
  EXPECT_EQ(fake().update_us(), 100000);
}

TEST_F(DcgmSourceTest, FallsBackToAnEmbeddedHostEngine) {
  fake().fail("dcgmConnect_v2", abi::kConnectionNotValid);
  set_all(kGpu, 1, 0.5, 0.5, 0.5);
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  EXPECT_STREQ(fake().mode(), "embedded");
  EXPECT_EQ(sample(*source).at("system/gpu.1.sm_active_pct"), 50);
  EXPECT_THAT(warnings_.messages(), IsEmpty());
  // Options can skip the host engine.
  SetUp();
  DcgmOptions options;
  options.host_engine = "";
  ASSERT_TRUE(make(std::nullopt, options)->open({}).ok());
  EXPECT_EQ(fake().calls("dcgmConnect_v2"), 0);
}

TEST_F(DcgmSourceTest, OnlyTheVisibleGpuIsWatchedUnderItsPhysicalIndex) {
  // DCGM's id 0 is NVML's GPU 1 here (e.g. a host engine that sees other GPUs).
  fake().reset();
  fake().add_gpu(0, "GPU-bbbbbbbb-1111", 5);
  fake().add_gpu(1, "GPU-aaaaaaaa-1111", 4);
  set_all(kGpu, 0, 0.5, 0.5, 0.5);
  set_all(kGpu, 1, 0.1, 0.1, 0.1);
  for (const char* visible : {"1", "GPU-bbbb"}) {
    nvml_ = std::make_unique<SimulatedNvml>(2);
    auto source = make(visible);
    ASSERT_TRUE(source->open({}).ok()) << visible;
    EXPECT_EQ(fake().watching(kGpu, 0), 1) << visible;
    EXPECT_EQ(fake().watching(kGpu, 1), 0) << visible;
    const auto v = sample(*source);
    EXPECT_THAT(v, SizeIs(3)) << visible;
    EXPECT_EQ(v.at("system/gpu.1.sm_active_pct"), 50) << visible;
  }
}

TEST_F(DcgmSourceTest, ContextDevicesOverrideTheEnvironment) {
  set_all(kGpu, 0, 0.5, 0.5, 0.5);
  auto source = make("1");
  HardwareContext context;
  context.gpu_devices = {0};
  ASSERT_TRUE(source->open(context).ok());
  const auto v = sample(*source);
  EXPECT_THAT(v, Contains(Key("system/gpu.0.sm_active_pct")));
  EXPECT_THAT(v, Not(Contains(Key("system/gpu.1.sm_active_pct"))));
}

TEST_F(DcgmSourceTest, AVisibleMigInstanceIsWatchedAndNamedByGpuInstance) {
  fake().add_instance(7, 0, 1);
  fake().add_instance(8, 0, 2);
  set_all(kGpuI, 8, 0.5, 0.25, 0.75);
  set_all(kGpuI, 7, 0.9, 0.9, 0.9);
  for (const char* visible : {"MIG-22222222-bbbb", "MIG-GPU-aaaaaaaa-1111/2/0"}) {
    nvml_ = std::make_unique<SimulatedNvml>(2);
    nvml_->add_mig(0, 1, "MIG-11111111-aaaa");
    nvml_->add_mig(0, 2, "MIG-22222222-bbbb");
    auto source = make(visible);
    ASSERT_TRUE(source->open({}).ok()) << visible;
    EXPECT_EQ(fake().watching(kGpuI, 8), 1);
    EXPECT_EQ(fake().watching(kGpuI, 7), 0);
    EXPECT_EQ(fake().watching(kGpu, 0), 0);
    const auto v = sample(*source);
    EXPECT_THAT(v, SizeIs(3)) << visible;
    EXPECT_EQ(v.at("system/gpu.0.mig2.sm_active_pct"), 50) << visible;
    EXPECT_EQ(v.at("system/gpu.0.mig2.tensor_active_pct"), 25) << visible;
    EXPECT_EQ(v.at("system/gpu.0.mig2.dram_active_pct"), 75) << visible;
  }
}

TEST_F(DcgmSourceTest, AWholeMigGpuBringsItsInstances) {
  nvml_->add_mig(1, 3, "MIG-33333333-cccc");
  fake().add_instance(9, 1, 3);
  set_all(kGpuI, 9, 0.5, 0.5, 0.5);
  set_all(kGpu, 1, 0.25, 0.25, 0.25);
  auto source = make("1");
  ASSERT_TRUE(source->open({}).ok());
  const auto v = sample(*source);
  EXPECT_EQ(v.at("system/gpu.1.sm_active_pct"), 25);
  EXPECT_EQ(v.at("system/gpu.1.mig3.sm_active_pct"), 50);
}

TEST_F(DcgmSourceTest, NoLibraryMeansNoSourceAndNoWarning) {
  DcgmOptions options;
  options.libraries = {"libdcgm-does-not-exist.so.4", "libdcgm-does-not-exist.so"};
  EXPECT_EQ(make_dcgm_source(std::nullopt, options), nullptr);
  options.libraries.push_back(TRAINSCOPE_FAKE_DCGM);
  auto source = make_dcgm_source(std::nullopt, options);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->name(), "dcgm");
  EXPECT_THAT(warnings_.messages(), IsEmpty());
  EXPECT_EQ(fake().calls("dcgmInit"), 0);  // nothing starts before open()
}

TEST_F(DcgmSourceTest, AMissingLibraryFailsOpenWithoutCrashing) {
  DcgmSource source("libdcgm-does-not-exist.so.4", nvml_resolver(std::move(nvml_), std::nullopt));
  const absl::Status status = source.open({});
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("libdcgm-does-not-exist.so.4 not found"));
}

// The sampler around the source: the run goes on with one warning.
class SamplerRun {
 public:
  explicit SamplerRun(std::unique_ptr<HardwareSource> source) {
    pipeline_.add_exporter(collector_);
    std::vector<std::unique_ptr<HardwareSource>> sources;
    sources.push_back(std::move(source));
    SamplerOptions options;
    options.interval = absl::Milliseconds(5);
    sampler_ = std::make_unique<Sampler>(options, std::move(sources), &pipeline_);
    sampler_->start();
    while (sampler_->ticks() < 3) std::this_thread::yield();
    sampler_->stop();
    pipeline_.flush();
  }
  std::size_t ticks() const { return sampler_->ticks(); }
  std::vector<MetricPoint> points() const { return collector_->received(); }

 private:
  using Collector = testing::MetricCollector;

  ExportPipeline pipeline_;
  std::shared_ptr<Collector> collector_ = std::make_shared<Collector>();
  std::unique_ptr<Sampler> sampler_;
};

TEST_F(DcgmSourceTest, InitFailureDisablesTheSourceWithOneWarning) {
  fake().fail("dcgmInit", abi::kInitError);
  SamplerRun run(make());
  EXPECT_GE(run.ticks(), 3u);  // the run went on
  EXPECT_THAT(run.points(), IsEmpty());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0],
              AllOf(HasSubstr("dcgm disabled (open failed)"), HasSubstr("dcgmInit"),
                    HasSubstr("DCGM_ST_INIT_ERROR")));
  EXPECT_EQ(fake().open_objects(), 0);
}

TEST_F(DcgmSourceTest, NoHostEngineAndNoEmbeddedEngineFailsOpenNamingBoth) {
  fake().fail("dcgmConnect_v2", abi::kConnectionNotValid);
  fake().fail("dcgmStartEmbedded", abi::kInitError);
  SamplerRun run(make());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(
      warnings_.messages()[0],
      AllOf(HasSubstr("no nv-hostengine at 127.0.0.1"), HasSubstr("DCGM_ST_CONNECTION_NOT_VALID"),
            HasSubstr("dcgmStartEmbedded"), HasSubstr("DCGM_ST_INIT_ERROR")));
  EXPECT_EQ(fake().open_objects(), 0);  // dcgmShutdown ran at the failed open
  EXPECT_EQ(fake().calls("dcgmShutdown"), 1);
}

TEST_F(DcgmSourceTest, ProfilingNotSupportedDisablesTheSourceWithOneWarningNamingIt) {
  fake().fail("dcgmWatchFields", abi::kProfilingNotSupported);
  SamplerRun run(make());
  EXPECT_GE(run.ticks(), 3u);
  EXPECT_THAT(run.points(), IsEmpty());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0],
              AllOf(HasSubstr("dcgm disabled (open failed)"), HasSubstr("gpu.0, gpu.1"),
                    HasSubstr("DCGM_ST_PROFILING_NOT_SUPPORTED"),
                    HasSubstr("profiling metrics are not supported on this GPU")));
  EXPECT_EQ(fake().open_objects(), 0);
}

TEST_F(DcgmSourceTest, AGpuThatCannotBeProfiledIsLeftOutWithOneWarning) {
  fake().fail_watch_for(kGpu, 1, abi::kProfilingNotSupported);
  set_all(kGpu, 0, 0.5, 0.5, 0.5);
  set_all(kGpu, 1, 0.5, 0.5, 0.5);
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0],
              AllOf(HasSubstr("gpu.1"), HasSubstr("DCGM_ST_PROFILING_NOT_SUPPORTED")));
  EXPECT_THAT(warnings_.messages()[0], Not(HasSubstr("gpu.0")));
  const auto v = sample(*source);
  EXPECT_THAT(v, SizeIs(3));
  EXPECT_THAT(v, Contains(Key("system/gpu.0.sm_active_pct")));
}

TEST_F(DcgmSourceTest, BlankOrFailedValuesAreSkippedForThatTick) {
  set_all(kGpu, 0, 0.5, 0.5, 0.5);
  fake().set_value(kGpu, 0, kTensor, abi::kFp64Blank + 2, abi::kOk);  // DCGM_FP64_NOT_SUPPORTED
  fake().set_value(kGpu, 0, kDram, 0.3, abi::kNoData);
  // gpu 1: nothing yet (DCGM_ST_NO_DATA before the first update)
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  auto v = sample(*source);
  EXPECT_THAT(v, ElementsAre(Key("system/gpu.0.sm_active_pct")));
  // They come back when DCGM has them.
  set_all(kGpu, 0, 0.5, 0.5, 0.5);
  set_all(kGpu, 1, 0.5, 0.5, 0.5);
  v = sample(*source);
  EXPECT_THAT(v, SizeIs(6));
  EXPECT_THAT(warnings_.messages(), IsEmpty());
}

TEST_F(DcgmSourceTest, ALostHostEngineFailsTheSample) {
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  fake().fail("dcgmEntitiesGetLatestValues", abi::kConnectionNotValid);
  std::vector<HardwareReading> readings;
  const absl::Status status = source->sample(&readings);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("DCGM_ST_CONNECTION_NOT_VALID"));
  EXPECT_THAT(readings, IsEmpty());
  EXPECT_THAT(warnings_.messages(), IsEmpty());  // the sampler warns, once
}

TEST_F(DcgmSourceTest, GpusUnknownToDcgmAreLeftOutOrFailOpen) {
  fake().reset();
  fake().add_gpu(0, "GPU-aaaaaaaa-1111", 0);
  auto source = make();
  ASSERT_TRUE(source->open({}).ok());
  ASSERT_THAT(warnings_.messages(), SizeIs(1));
  EXPECT_THAT(warnings_.messages()[0], HasSubstr("gpu.1 (unknown to DCGM)"));
  SetUp();
  fake().reset();
  const absl::Status status = make()->open({});
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("DCGM knows none of the job's GPUs"));
}

TEST_F(DcgmSourceTest, NoNvmlFailsOpenSayingWhy) {
  nvml_->init_status = absl::NotFoundError("libnvidia-ml.so.1 not found");
  const absl::Status status = make()->open({});
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("without NVML"));
  EXPECT_EQ(fake().open_objects(), 0);
}

TEST_F(DcgmSourceTest, EverythingIsReleasedAtTheEnd) {
  fake().fail("dcgmConnect_v2", abi::kConnectionNotValid);
  SimulatedNvml* nvml = nvml_.get();
  {
    auto source = make();
    ASSERT_TRUE(source->open({}).ok());
    EXPECT_GT(fake().open_objects(), 0);
    EXPECT_EQ(nvml->live_inits, 0);  // NVML was only needed to resolve the devices
  }
  EXPECT_EQ(fake().open_objects(), 0);
  EXPECT_EQ(fake().calls("dcgmUnwatchFields"), 1);
  EXPECT_EQ(fake().calls("dcgmStopEmbedded"), 1);
  EXPECT_EQ(fake().calls("dcgmShutdown"), 1);
}

TEST(DcgmJobDevices, FollowNvmlSourceRules) {
  SimulatedNvml nvml(3);
  nvml.add_mig(2, 4, "MIG-44444444-dddd");
  const auto gpu = [](unsigned i, const char* uuid) { return JobDevice{i, std::nullopt, uuid}; };
  EXPECT_THAT(*job_devices(nvml, {}, std::nullopt),
              ElementsAre(gpu(0, "GPU-aaaaaaaa-1111"), gpu(1, "GPU-bbbbbbbb-1111"),
                          gpu(2, "GPU-cccccccc-1111"), JobDevice{2, 4u, "GPU-cccccccc-1111"}));
  EXPECT_THAT(*job_devices(nvml, {}, "1,7,0"), ElementsAre(gpu(1, "GPU-bbbbbbbb-1111")));
  EXPECT_THAT(*job_devices(nvml, {}, "MIG-44444444-dddd,0"),
              ElementsAre(JobDevice{2, 4u, "GPU-cccccccc-1111"}, gpu(0, "GPU-aaaaaaaa-1111")));
  EXPECT_TRUE(absl::IsNotFound(job_devices(nvml, {}, "-1").status()));
  HardwareContext context;
  context.gpu_devices = {3};
  EXPECT_TRUE(absl::IsInvalidArgument(job_devices(nvml, context, std::nullopt).status()));
}

}  // namespace
}  // namespace trainscope::dcgm
