#include "trainscope/export/perfetto_exporter.hpp"

#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

using ::trainscope::testing::lines_of;
using ::trainscope::testing::read_file;

using nlohmann::json;

// The trace goes to a fresh directory per test.
class PerfettoExporterTest : public ::testing::Test {
 protected:
  std::vector<RegionSample> samples() const {
    const KeyId batch = Key("BATCH").id();
    const KeyId data = Key("data \"aug\"").id();  // needs JSON escaping
    return {
        {batch, Device::kCPU, 0, 1700000000123456789, 2500123},
        {data, Device::kCPU, 0, 1700000000125000000, 999},
        {batch, Device::kGPU, 0, 1700000000123456789, 2400001},
        {batch, Device::kCPU, 3, 1700000000200000000, 1},
        {batch, Device::kGPU, 3, 1700000000200000000, 123456789012},
    };
  }

  trainscope::testing::TempDir tmp_;
  const std::string path_ = tmp_.file("trace.json");
};

TEST_F(PerfettoExporterTest, ClosedTraceHasTracksAndExactDurations) {
  auto exporter = PerfettoExporter::Create(path_, /*rank=*/2);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const std::vector<RegionSample> input = samples();
  ASSERT_TRUE((*exporter)->write_samples(input).ok());
  ASSERT_TRUE((*exporter)->write_samples(input).ok());  // tracks are named once
  ASSERT_TRUE((*exporter)->close().ok());

  const json trace = json::parse(read_file(path_));
  ASSERT_TRUE(trace.is_array());
  std::map<std::string, int> process_names;
  std::map<int, std::string> thread_names;
  std::vector<json> slices;
  for (const json& event : trace) {
    EXPECT_EQ(event.at("pid"), 2);
    if (event.at("ph") == "M" && event.at("name") == "process_name") {
      ++process_names[event.at("args").at("name").get<std::string>()];
    } else if (event.at("ph") == "M" && event.at("name") == "thread_name") {
      const int tid = event.at("tid");
      EXPECT_EQ(thread_names.count(tid), 0u) << "track " << tid << " named twice";
      thread_names[tid] = event.at("args").at("name");
    } else {
      EXPECT_EQ(event.at("ph"), "X");
      slices.push_back(event);
    }
  }
  EXPECT_EQ(process_names, (std::map<std::string, int>{{"rank 2", 1}}));
  EXPECT_EQ(thread_names, (std::map<int, std::string>{{0, "CPU thread 0"},
                                                      {3, "CPU thread 3"},
                                                      {1000000, "GPU (thread 0)"},
                                                      {1000003, "GPU (thread 3)"}}));
  ASSERT_EQ(slices.size(), 2 * input.size());
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const RegionSample& s = input[i % input.size()];
    const json& e = slices[i];
    EXPECT_EQ(e.at("name"), std::string(Key::FromId(s.key).name()));
    EXPECT_EQ(e.at("cat"), std::string(device_name(s.device)));
    EXPECT_EQ(e.at("tid"), (s.device == Device::kGPU ? kPerfettoGpuTidBase : 0) + s.thread);
    // Exactly the nearest double to duration_ns / 1000 (the text is exact).
    EXPECT_EQ(e.at("dur").get<double>(), static_cast<double>(s.duration_ns) / 1000.0);
    EXPECT_NEAR(e.at("ts").get<double>(), static_cast<double>(s.start_unix_ns) / 1000.0, 1.0);
  }
  // The text keeps every nanosecond, even where a double cannot.
  EXPECT_NE(read_file(path_).find("\"ts\":1700000000123456.789"), std::string::npos);
}

TEST_F(PerfettoExporterTest, UnclosedTraceParsesAfterAppendingBracket) {
  auto exporter = PerfettoExporter::Create(path_);
  ASSERT_TRUE(exporter.ok());
  ASSERT_TRUE((*exporter)->write_samples(samples()).ok());
  ASSERT_TRUE((*exporter)->flush().ok());
  // As a crash would leave it: no closing bracket yet.
  const std::string partial = read_file(path_);
  EXPECT_TRUE(json::accept(partial + "]"));
  EXPECT_FALSE(json::accept(partial));
  EXPECT_EQ(json::parse(partial + "]").size(), 1 + 4 + samples().size());
}

TEST_F(PerfettoExporterTest, EmptyTraceIsAnEmptyArray) {
  {
    auto exporter = PerfettoExporter::Create(path_);
    ASSERT_TRUE(exporter.ok());
  }  // the destructor closes
  EXPECT_EQ(json::parse(read_file(path_)), json::array());
}

TEST_F(PerfettoExporterTest, MetricsAreCountersAndFinalStatusCloses) {
  auto exporter = PerfettoExporter::Create(path_, 1);
  ASSERT_TRUE(exporter.ok());
  const std::vector<MetricPoint> metrics = {{"loss", 0.25, 3, 1700000000500, 1},
                                            {"loss", std::nan(""), 4, 1700000000600, 1}};
  ASSERT_TRUE((*exporter)->write_metrics(metrics).ok());
  RunInfo info;
  ASSERT_TRUE((*exporter)->write_run_info(info).ok());  // running: stays open
  info.status = RunStatus::kFailed;
  ASSERT_TRUE((*exporter)->write_run_info(info).ok());
  EXPECT_FALSE((*exporter)->write_metrics(metrics).ok());

  const json trace = json::parse(read_file(path_));
  ASSERT_EQ(trace.size(), 2u);  // process name + the finite point
  EXPECT_EQ(trace[0].at("args").at("name"), "rank 1");
  const json& counter = trace[1];
  EXPECT_EQ(counter.at("ph"), "C");
  EXPECT_EQ(counter.at("name"), "loss");
  EXPECT_EQ(counter.at("pid"), 1);
  EXPECT_EQ(counter.at("ts").get<double>(), 1700000000500000.0);
  EXPECT_EQ(counter.at("args").at("value").get<double>(), 0.25);
}

TEST_F(PerfettoExporterTest, UncreatableFileIsAnError) {
  EXPECT_FALSE(PerfettoExporter::Create(path_ + ".missing/trace.json").ok());
}

}  // namespace
}  // namespace trainscope
