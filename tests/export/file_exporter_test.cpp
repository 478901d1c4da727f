#include "trainscope/export/file_exporter.hpp"
#include "common/files.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/export/stdout_exporter.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

// Files next to `path` named as its temporary files ("<path>.tmp-...").
int temporaries_of(const std::string& path) {
  const std::filesystem::path p(path);
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(p.parent_path())) {
    count += entry.path().filename().string().rfind(p.filename().string() + ".tmp", 0) == 0;
  }
  return count;
}

using ::trainscope::testing::lines_of;
using ::trainscope::testing::read_file;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Summary epoch_summary(double median) {
  TimeStats stats;
  stats.count = 1;
  stats.total = stats.min = stats.mean = stats.median = stats.max = median;
  stats.stdev = 0.0;
  Summary summary;
  summary.entries.push_back({"EPOCH", Device::kCPU, stats});
  return summary;
}

RegionSample sample(Key key, Device device, std::uint32_t thread, std::int64_t start,
                    std::int64_t duration) {
  RegionSample s;
  s.key = key.id();
  s.device = device;
  s.thread = thread;
  s.start_unix_ns = start;
  s.duration_ns = duration;
  return s;
}

std::shared_ptr<FileExporter> create_or_die(const std::string& summary_path,
                                            const std::string& samples_path = "") {
  absl::StatusOr<std::shared_ptr<FileExporter>> exporter =
      FileExporter::Create(summary_path, samples_path);
  EXPECT_TRUE(exporter.ok()) << exporter.status();
  return exporter.ok() ? *exporter : nullptr;
}

// Files go to a fresh directory per test (ctest runs tests as parallel processes).
class FileExporterTest : public ::testing::Test {
 protected:
  trainscope::testing::TempDir tmp_;
};

TEST_F(FileExporterTest, RejectsUnknownSummaryExtension) {
  const absl::StatusOr<std::shared_ptr<FileExporter>> exporter = FileExporter::Create("run.xlsx");
  ASSERT_FALSE(exporter.ok());
  EXPECT_EQ(exporter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(exporter.status().message()), HasSubstr("\"run.xlsx\""));
  EXPECT_THAT(std::string(exporter.status().message()), HasSubstr(".txt, .json or .csv"));
}

TEST_F(FileExporterTest, UnopenableSamplesFileErrorNamesPath) {
  const std::string samples = tmp_.file("missing_dir") + "/samples.csv";
  const absl::StatusOr<std::shared_ptr<FileExporter>> exporter =
      FileExporter::Create(tmp_.file("unused.json"), samples);
  ASSERT_FALSE(exporter.ok());
  EXPECT_EQ(exporter.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(exporter.status().message()), HasSubstr(samples));
}

TEST_F(FileExporterTest, NameIncludesSummaryPath) {
  const std::string path = tmp_.file("named.json");
  EXPECT_EQ(create_or_die(path)->name(), "file:" + path);
}

TEST_F(FileExporterTest, WritesSamplesAsCsvWithQuotedKeys) {
  const std::string samples_path = tmp_.file("samples.csv");
  std::shared_ptr<FileExporter> exporter = create_or_die(tmp_.file("s.json"), samples_path);
  ASSERT_NE(exporter, nullptr);
  const std::vector<RegionSample> batch = {
      sample(TimeType::EPOCH, Device::kCPU, 0, 1700000000000000000, 1500),
      sample(Key("load,\"shard\""), Device::kGPU, 3, 1700000000000001000, 42)};
  ASSERT_TRUE(exporter->write_samples(batch).ok());
  ASSERT_TRUE(exporter->flush().ok());
  EXPECT_THAT(lines_of(read_file(samples_path)),
              ElementsAre("key,device,thread,start_unix_ns,duration_ns",
                          "EPOCH,CPU,0,1700000000000000000,1500",
                          "\"load,\"\"shard\"\"\",GPU,3,1700000000000001000,42"));
}

TEST_F(FileExporterTest, AppendsToExistingSamplesFileWithoutSecondHeader) {
  const std::string samples_path = tmp_.file("appended.csv");
  for (int run = 0; run < 2; ++run) {
    std::shared_ptr<FileExporter> exporter = create_or_die(tmp_.file("a.json"), samples_path);
    ASSERT_NE(exporter, nullptr);
    ASSERT_TRUE(exporter->write_samples({sample(TimeType::BATCH, Device::kCPU, 0, run, 7)}).ok());
  }  // the destructor closes (and so flushes) the file
  EXPECT_THAT(lines_of(read_file(samples_path)),
              ElementsAre("key,device,thread,start_unix_ns,duration_ns", "BATCH,CPU,0,0,7",
                          "BATCH,CPU,0,1,7"));
}

TEST_F(FileExporterTest, SummaryReplacesPreviousOneInFormatOfExtension) {
  const std::string path = tmp_.file("summary.txt");
  std::shared_ptr<FileExporter> exporter = create_or_die(path);
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(exporter->write_summary(epoch_summary(1.0)).ok());
  ASSERT_TRUE(exporter->write_summary(epoch_summary(2.0)).ok());
  EXPECT_EQ(read_file(path), format_summary(epoch_summary(2.0), StatsFormat::kDeep500));
  EXPECT_EQ(temporaries_of(path), 0);
}

TEST_F(FileExporterTest, JsonSummaryParses) {
  const std::string path = tmp_.file("summary.json");
  std::shared_ptr<FileExporter> exporter = create_or_die(path);
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(exporter->write_summary(epoch_summary(0.5)).ok());
  const nlohmann::json doc = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(doc["entries"][0]["median"].get<double>(), 0.5);
}

TEST_F(FileExporterTest, TemporaryFileLeftByACrashDoesNotBlockTheSummary) {
  const std::string path = tmp_.file("stale.csv");
  // The name a writer with pid 1 would have used for its first temporary file.
  ASSERT_TRUE(detail::write_new_file(path + ".tmp-1-0", "left over by a crash").ok());
  std::shared_ptr<FileExporter> exporter = create_or_die(path);
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(exporter->write_summary(epoch_summary(1.0)).ok());
  EXPECT_THAT(read_file(path), StartsWith("key,device,count"));
  EXPECT_EQ(temporaries_of(path), 1);  // only the crashed writer's
}

TEST_F(FileExporterTest, SummaryInMissingDirectoryIsAnError) {
  const std::string path = tmp_.file("gone") + "/summary.json";
  std::shared_ptr<FileExporter> exporter = create_or_die(path);
  ASSERT_NE(exporter, nullptr);
  const absl::Status status = exporter->write_summary(epoch_summary(1.0));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

TEST_F(FileExporterTest, ReceivesSamplesThroughPipeline) {
  const std::string summary_path = tmp_.file("pipeline.json");
  const std::string samples_path = tmp_.file("pipeline_samples.csv");
  std::shared_ptr<FileExporter> exporter = create_or_die(summary_path, samples_path);
  ASSERT_NE(exporter, nullptr);
  {
    ExportPipeline::Options options;
    options.flush_interval = absl::InfiniteDuration();
    ExportPipeline pipeline(options);
    pipeline.add_exporter(exporter);
    std::shared_ptr<timing::detail::SampleRing> ring = pipeline.open_ring();
    for (int i = 0; i < 10; ++i) {
      ring->push(sample(TimeType::FORWARD, Device::kCPU, 0, detail::now_ns(), 100 + i));
    }
    pipeline.submit_summary(epoch_summary(1.0));
    pipeline.flush();
    EXPECT_EQ(pipeline.export_errors(), 0u);
  }
  const std::vector<std::string> lines = lines_of(read_file(samples_path));
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_THAT(lines[1], StartsWith("FORWARD,CPU,0,"));
  EXPECT_TRUE(nlohmann::json::accept(read_file(summary_path)));
}

TEST(StdoutExporterTest, PrintsSummaryInChosenFormat) {
  std::FILE* stream = std::tmpfile();
  ASSERT_NE(stream, nullptr);
  StdoutExporter exporter(StatsFormat::kCsv, stream);
  EXPECT_EQ(exporter.name(), "stdout");
  ASSERT_TRUE(exporter.write_summary(epoch_summary(1.0)).ok());
  ASSERT_TRUE(exporter.flush().ok());
  std::rewind(stream);
  std::string printed;
  char buffer[256];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), stream)) > 0;)
    printed.append(buffer, n);
  std::fclose(stream);
  EXPECT_EQ(printed, format_summary(epoch_summary(1.0), StatsFormat::kCsv));
}

}  // namespace
}  // namespace trainscope
