#include "trainscope/stats/stats_format.hpp"
#include "common/files.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope {
namespace {

using ::trainscope::testing::lines_of;
using ::trainscope::testing::read_file;

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Deep500's own example numbers (two samples, 0.0073 s and 0.01058 s).
TimeStats epoch_stats() {
  TimeStats s;
  s.count = 2;
  s.total = 0.01788;
  s.min = 0.0073;
  s.mean = 0.00894;
  s.median = 0.00894;
  s.max = 0.01058;
  s.stdev = 0.00232;
  s.p5 = 0.0074;
  s.p25 = 0.0081;
  s.p75 = 0.0098;
  s.p95 = 0.0105;
  s.p99 = 0.01057;
  s.cv = 0.2595;
  return s;
}

TimeStats batch_stats() {
  TimeStats s;
  s.count = 10;
  s.total = 0.0123;
  s.min = 0.001;
  s.mean = 0.00123;
  s.median = 0.0012;
  s.max = 0.0016;
  s.stdev = 0.0002;
  s.p95 = 0.0015;
  s.median_ci_low = 0.0011;
  s.median_ci_high = 0.0013;
  return s;
}

// Every sample of the key was warm-up.
TimeStats warmup_only_stats() {
  TimeStats s;
  s.warmup_excluded = 3;
  return s;
}

constexpr char kEpochLine[] =
    "min: 0.00730 mean: 0.00894 median: 0.00894 max: 0.01058 stdev: 0.00232\n";
constexpr char kBatchLine[] =
    "min: 0.00100 mean: 0.00123 median: 0.00120 max: 0.00160 stdev: 0.00020\n";

// --- Deep500 text ------------------------------------------------------------

TEST(Deep500FormatTest, TimerLayoutIsByteExact) {
  Summary summary;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()},
                     {"BATCH", Device::kCPU, batch_stats()}};
  EXPECT_EQ(format_summary(summary, StatsFormat::kDeep500),
            std::string("EPOCH\n") + kEpochLine + "BATCH\n" + kBatchLine + "---\n");
}

TEST(Deep500FormatTest, CpuGpuTimerLayoutIsByteExact) {
  Summary summary;
  summary.has_gpu_section = true;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()},
                     {"BATCH", Device::kCPU, batch_stats()},
                     {"BATCH", Device::kGPU, batch_stats()}};
  EXPECT_EQ(format_summary(summary, StatsFormat::kDeep500),
            std::string("CPU\nEPOCH\n") + kEpochLine + "BATCH\n" + kBatchLine +
                "---\nGPU\nBATCH\n" + kBatchLine + "---\n");
}

TEST(Deep500FormatTest, DeviceWithoutKeysPrintsHeaderAndSeparator) {
  Summary summary;
  summary.has_gpu_section = true;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()}};
  EXPECT_EQ(format_summary(summary, StatsFormat::kDeep500),
            std::string("CPU\nEPOCH\n") + kEpochLine + "---\nGPU\n---\n");
  EXPECT_EQ(format_summary(Summary{true, {}}, StatsFormat::kDeep500), "CPU\n---\nGPU\n---\n");
  EXPECT_EQ(format_summary(Summary{}, StatsFormat::kDeep500), "---\n");
}

TEST(Deep500FormatTest, SkipsKeysWithoutCompletedSamples) {
  Summary summary;
  summary.entries = {{"WARM", Device::kCPU, warmup_only_stats()},
                     {"EPOCH", Device::kCPU, epoch_stats()}};
  EXPECT_EQ(format_summary(summary, StatsFormat::kDeep500),
            std::string("EPOCH\n") + kEpochLine + "---\n");
}

// --- Table -------------------------------------------------------------------

TEST(TableFormatTest, ShowsUnitsCountsAndMedianConfidenceInterval) {
  Summary summary;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()},
                     {"BATCH", Device::kCPU, batch_stats()}};
  const std::string table = format_summary(summary, StatsFormat::kTable);
  const std::vector<std::string> lines = lines_of(table);
  ASSERT_EQ(lines.size(), 3u) << table;
  EXPECT_THAT(lines[0], HasSubstr("median [95% CI]"));
  EXPECT_THAT(lines[0], HasSubstr("p95"));
  EXPECT_THAT(lines[0], Not(HasSubstr("gpu")));
  EXPECT_THAT(lines[1], HasSubstr("EPOCH"));
  EXPECT_THAT(lines[1], HasSubstr("17.9 ms"));  // total
  EXPECT_THAT(lines[1], HasSubstr("8.94 ms"));  // median, no CI for n = 2
  EXPECT_THAT(lines[1], Not(HasSubstr("[")));
  EXPECT_THAT(lines[2], HasSubstr("1.20 ms [1.10, 1.30]"));
  EXPECT_THAT(lines[2], HasSubstr("1.50 ms"));  // p95
}

TEST(TableFormatTest, ColumnsAreAligned) {
  Summary summary;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()},
                     {"a much longer key name", Device::kCPU, batch_stats()}};
  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kTable));
  ASSERT_EQ(lines.size(), 3u);
  // Numbers are right-aligned, so every row ends in the same column.
  EXPECT_EQ(lines[0].size(), lines[1].size());
  EXPECT_EQ(lines[0].size(), lines[2].size());
}

TEST(TableFormatTest, PutsCpuAndGpuSideBySide) {
  Summary summary;
  summary.has_gpu_section = true;
  TimeStats gpu = batch_stats();
  gpu.median = 0.0009;
  gpu.median_ci_low = gpu.median_ci_high = kNaN;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()},
                     {"BATCH", Device::kCPU, batch_stats()},
                     {"BATCH", Device::kGPU, gpu}};
  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kTable));
  ASSERT_EQ(lines.size(), 3u);  // header + one row per key
  EXPECT_THAT(lines[0], HasSubstr("cpu median [95% CI]"));
  EXPECT_THAT(lines[0], HasSubstr("gpu median [95% CI]"));
  EXPECT_THAT(lines[0], HasSubstr("gpu p95"));
  EXPECT_THAT(lines[2], HasSubstr("1.20 ms [1.10, 1.30]"));
  EXPECT_THAT(lines[2], HasSubstr("900 us"));
  // EPOCH has no GPU entry: its GPU cells are "-".
  EXPECT_THAT(lines[1], ::testing::EndsWith("-"));
}

TEST(TableFormatTest, MarksWarmupApproximateAndEmptyKeys) {
  Summary summary;
  TimeStats sketched = batch_stats();
  sketched.approximate = true;
  sketched.warmup_excluded = 5;
  summary.entries = {{"WARM", Device::kCPU, warmup_only_stats()}, {"BIG", Device::kCPU, sketched}};
  const std::string table = format_summary(summary, StatsFormat::kTable);
  const std::vector<std::string> lines = lines_of(table);
  ASSERT_GE(lines.size(), 3u) << table;
  EXPECT_THAT(lines[1], HasSubstr("WARM"));
  EXPECT_THAT(lines[1], HasSubstr("0 (+3)"));
  EXPECT_THAT(lines[1], ::testing::EndsWith("-"));
  EXPECT_THAT(lines[2], HasSubstr("10 (+5)"));
  EXPECT_THAT(lines[2], HasSubstr("~1.20 ms [1.10, 1.30]"));
  EXPECT_THAT(lines[2], HasSubstr("~1.50 ms"));
  EXPECT_THAT(table, HasSubstr("warm-up"));
  EXPECT_THAT(table, HasSubstr("approximate"));
}

TEST(TableFormatTest, EscapesControlCharactersInKeys) {
  Summary summary;
  summary.entries = {{"two\nlines", Device::kCPU, batch_stats()}};
  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kTable));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr("two\\x0alines"));
}

// --- JSON --------------------------------------------------------------------

TEST(JsonFormatTest, RoundTripsWithNullForNonFinite) {
  Summary summary;
  summary.has_gpu_section = true;
  TimeStats odd = warmup_only_stats();
  odd.total = kInf;
  summary.entries = {{"EPOCH", Device::kCPU, epoch_stats()}, {"say \"hi\"\n\\", Device::kGPU, odd}};
  const nlohmann::json doc = nlohmann::json::parse(format_summary(summary, StatsFormat::kJson));
  EXPECT_EQ(doc["format"], "trainscope.stats");
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["has_gpu_section"], true);
  ASSERT_EQ(doc["entries"].size(), 2u);
  const nlohmann::json& epoch = doc["entries"][0];
  EXPECT_EQ(epoch["key"], "EPOCH");
  EXPECT_EQ(epoch["device"], "CPU");
  EXPECT_EQ(epoch["count"], 2);
  EXPECT_EQ(epoch["min"].get<double>(), 0.0073);  // full precision
  EXPECT_EQ(epoch["stdev"].get<double>(), 0.00232);
  EXPECT_EQ(epoch["p99"].get<double>(), 0.01057);
  EXPECT_TRUE(epoch["median_ci_low"].is_null());
  EXPECT_EQ(epoch["approximate"], false);
  const nlohmann::json& odd_entry = doc["entries"][1];
  EXPECT_EQ(odd_entry["key"], "say \"hi\"\n\\");
  EXPECT_EQ(odd_entry["device"], "GPU");
  EXPECT_EQ(odd_entry["count"], 0);
  EXPECT_TRUE(odd_entry["total"].is_null());
  EXPECT_TRUE(odd_entry["mean"].is_null());
  EXPECT_EQ(odd_entry["warmup_excluded"], 3);
  for (const char* field : {"total", "min", "mean", "median", "max", "stdev", "p5", "p25", "p75",
                            "p95", "p99", "cv", "median_ci_low", "median_ci_high"}) {
    EXPECT_TRUE(epoch.contains(field)) << field;
  }
}

TEST(JsonFormatTest, InvalidUtf8KeyStillGivesValidJson) {
  Summary summary;
  summary.entries = {{std::string("bad\xff\xfe"), Device::kCPU, batch_stats()}};
  const std::string json = format_summary(summary, StatsFormat::kJson);
  EXPECT_TRUE(nlohmann::json::accept(json)) << json;
}

// --- The field list ----------------------------------------------------------

TEST(TimeStatsFieldsTest, EachNameReadsItsOwnMemberWithItsKindAndUnit) {
  TimeStats s;
  const struct {
    const char* name;
    const void* member;
    TimeStatsFieldKind kind;
    bool seconds;
  } expected[] = {
      {"count", &s.count, TimeStatsFieldKind::kInteger, false},
      {"total", &s.total, TimeStatsFieldKind::kDouble, true},
      {"min", &s.min, TimeStatsFieldKind::kDouble, true},
      {"mean", &s.mean, TimeStatsFieldKind::kDouble, true},
      {"median", &s.median, TimeStatsFieldKind::kDouble, true},
      {"max", &s.max, TimeStatsFieldKind::kDouble, true},
      {"stdev", &s.stdev, TimeStatsFieldKind::kDouble, true},
      {"p5", &s.p5, TimeStatsFieldKind::kDouble, true},
      {"p25", &s.p25, TimeStatsFieldKind::kDouble, true},
      {"p75", &s.p75, TimeStatsFieldKind::kDouble, true},
      {"p95", &s.p95, TimeStatsFieldKind::kDouble, true},
      {"p99", &s.p99, TimeStatsFieldKind::kDouble, true},
      {"cv", &s.cv, TimeStatsFieldKind::kDouble, false},
      {"median_ci_low", &s.median_ci_low, TimeStatsFieldKind::kDouble, true},
      {"median_ci_high", &s.median_ci_high, TimeStatsFieldKind::kDouble, true},
      {"warmup_excluded", &s.warmup_excluded, TimeStatsFieldKind::kInteger, false},
      {"approximate", &s.approximate, TimeStatsFieldKind::kBoolean, false},
  };
  ASSERT_EQ(std::size(kTimeStatsFields), std::size(expected));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    const TimeStatsField& f = kTimeStatsFields[i];
    SCOPED_TRACE(expected[i].name);
    EXPECT_STREQ(f.name, expected[i].name);
    EXPECT_EQ(f.kind, expected[i].kind);
    EXPECT_EQ(f.seconds, expected[i].seconds);
    const void* member = f.kind == TimeStatsFieldKind::kInteger ? &(s.*f.integer)
                         : f.kind == TimeStatsFieldKind::kDouble
                             ? static_cast<const void*>(&(s.*f.number))
                             : &(s.*f.boolean);
    EXPECT_EQ(member, expected[i].member);
  }
}

TEST(TimeStatsFieldsTest, ValueReadsEveryKindAsADouble) {
  TimeStats s = batch_stats();
  s.warmup_excluded = 4;
  s.approximate = true;
  for (const TimeStatsField& f : kTimeStatsFields) {
    SCOPED_TRACE(f.name);
    if (f.kind == TimeStatsFieldKind::kDouble && std::isnan(s.*f.number)) {
      EXPECT_TRUE(std::isnan(f.value(s)));
    } else if (f.kind == TimeStatsFieldKind::kDouble) {
      EXPECT_EQ(f.value(s), s.*f.number);
    }
  }
  EXPECT_EQ(kTimeStatsFields[0].value(s), 10.0);
  EXPECT_EQ(kTimeStatsFields[std::size(kTimeStatsFields) - 2].value(s), 4.0);
  EXPECT_EQ(kTimeStatsFields[std::size(kTimeStatsFields) - 1].value(s), 1.0);
}

TEST(TimeStatsFieldsTest, JsonEntriesAndCsvColumnsAreTheFieldListInOrder) {
  Summary summary;
  summary.entries = {{"BATCH", Device::kCPU, batch_stats()}};
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(format_summary(summary, StatsFormat::kJson));
  std::vector<std::string> keys;
  for (const auto& item : doc["entries"][0].items()) keys.push_back(item.key());
  std::vector<std::string> expected = {"key", "device"};
  for (const TimeStatsField& f : kTimeStatsFields) expected.push_back(f.name);
  EXPECT_EQ(keys, expected);

  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kCsv));
  ASSERT_EQ(lines.size(), 2u);
  std::string header;
  for (const std::string& name : expected) header += (header.empty() ? "" : ",") + name;
  EXPECT_EQ(lines[0], header);
}

// --- CSV ---------------------------------------------------------------------

TEST(CsvFormatTest, HeaderQuotingAndEmptyNaN) {
  Summary summary;
  summary.entries = {{"a,\"b\"", Device::kCPU, epoch_stats()},
                     {"WARM", Device::kGPU, warmup_only_stats()}};
  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kCsv));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "key,device,count,total,min,mean,median,max,stdev,p5,p25,p75,p95,p99,cv,median_ci_low,"
            "median_ci_high,warmup_excluded,approximate");
  EXPECT_THAT(lines[1], ::testing::StartsWith("\"a,\"\"b\"\"\",CPU,2,0.01788,0.0073"));
  EXPECT_THAT(lines[1], ::testing::EndsWith(",,,0,false"));  // no CI for n = 2
  EXPECT_EQ(lines[2], "WARM,GPU,0,0,,,,,,,,,,,,,,3,false");
}

TEST(CsvFormatTest, KeepsFullPrecision) {
  TimeStats s = epoch_stats();
  s.mean = 0.1 + 0.2;  // not representable in fewer than 17 digits
  Summary summary;
  summary.entries = {{"K", Device::kCPU, s}};
  const std::vector<std::string> lines = lines_of(format_summary(summary, StatsFormat::kCsv));
  ASSERT_EQ(lines.size(), 2u);
  std::vector<std::string> fields;
  std::stringstream row(lines[1]);
  for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
  ASSERT_GT(fields.size(), 5u);
  EXPECT_EQ(std::strtod(fields[5].c_str(), nullptr), 0.1 + 0.2);
}

// --- Durations ---------------------------------------------------------------

TEST(FormatDurationTest, PicksUnitsWithThreeToFourSignificantDigits) {
  EXPECT_EQ(format_duration(812e-9), "812 ns");
  EXPECT_EQ(format_duration(12.4e-6), "12.4 us");
  EXPECT_EQ(format_duration(3.21e-3), "3.21 ms");
  EXPECT_EQ(format_duration(1.234), "1.234 s");
  EXPECT_EQ(format_duration(12.3456), "12.35 s");
  EXPECT_EQ(format_duration(4000.4), "4000 s");
  EXPECT_EQ(format_duration(0.5e-9), "0.50 ns");
  EXPECT_EQ(format_duration(0.0), "0 ns");
  EXPECT_EQ(format_duration(-3.21e-3), "-3.21 ms");
}

TEST(FormatDurationTest, UnitBoundaries) {
  EXPECT_EQ(format_duration(999e-9), "999 ns");
  EXPECT_EQ(format_duration(1e-6), "1.00 us");
  EXPECT_EQ(format_duration(999.4e-6), "999 us");
  EXPECT_EQ(format_duration(1e-3), "1.00 ms");
  EXPECT_EQ(format_duration(1.0), "1.000 s");
  // Rounding up into the next unit or decade keeps 3 significant digits.
  EXPECT_EQ(format_duration(999.7e-9), "1.00 us");
  EXPECT_EQ(format_duration(999.7e-3), "1.000 s");
  EXPECT_EQ(format_duration(9.996e-3), "10.0 ms");
  EXPECT_EQ(format_duration(99.96e-6), "100 us");
}

TEST(FormatDurationTest, NonFinite) {
  EXPECT_EQ(format_duration(kNaN), "-");
  EXPECT_EQ(format_duration(kInf), "inf");
}

// --- Format names --------------------------------------------------------------

TEST(StatsFormatForPathTest, KnownExtensions) {
  EXPECT_EQ(stats_format_for_path("out.txt").value(), StatsFormat::kDeep500);
  EXPECT_EQ(stats_format_for_path("/a.b/run.json").value(), StatsFormat::kJson);
  EXPECT_EQ(stats_format_for_path("run.CSV").value(), StatsFormat::kCsv);
}

TEST(StatsFormatForPathTest, UnknownExtensionNamesPathAndChoices) {
  const absl::StatusOr<StatsFormat> format = stats_format_for_path("out.xlsx");
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(format.status().message(),
            "cannot save statistics to \"out.xlsx\": unknown extension \".xlsx\" (use .txt, .json "
            "or .csv)");
}

TEST(StatsFormatForPathTest, MissingExtension) {
  for (const char* path : {"out", "dir.d/out", "", "dir/.hidden"}) {
    const absl::StatusOr<StatsFormat> format = stats_format_for_path(path);
    ASSERT_FALSE(format.ok()) << path;
    EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(format.status().message()), HasSubstr("no extension"));
    EXPECT_THAT(std::string(format.status().message()), HasSubstr(std::string("\"") + path + "\""));
  }
}

TEST(ParseStatsFormatTest, NamesAndErrors) {
  EXPECT_EQ(parse_stats_format("deep500").value(), StatsFormat::kDeep500);
  EXPECT_EQ(parse_stats_format("table").value(), StatsFormat::kTable);
  EXPECT_EQ(parse_stats_format("JSON").value(), StatsFormat::kJson);
  EXPECT_EQ(parse_stats_format("csv").value(), StatsFormat::kCsv);
  const absl::StatusOr<StatsFormat> format = parse_stats_format("xml");
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(format.status().message(),
            "unknown statistics format \"xml\" (use deep500, table, json or csv)");
}

// --- write_new_file ------------------------------------------------------------

// Files go to a fresh directory per test (ctest runs tests as parallel processes).
class WriteNewFileTest : public ::testing::Test {
 protected:
  trainscope::testing::TempDir tmp_;
};

TEST_F(WriteNewFileTest, WritesContents) {
  const std::string path = tmp_.file("new.txt");
  const std::string contents(100000, 'x');
  ASSERT_TRUE(detail::write_new_file(path, contents).ok());
  EXPECT_EQ(read_file(path), contents);
}

TEST_F(WriteNewFileTest, RefusesExistingFileAndLeavesItUntouched) {
  const std::string path = tmp_.file("existing.txt");
  ASSERT_TRUE(detail::write_new_file(path, "first").ok());
  const absl::Status status = detail::write_new_file(path, "second");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_EQ(read_file(path), "first");
}

TEST_F(WriteNewFileTest, MissingDirectoryErrorNamesPath) {
  const std::string path = tmp_.file("no_such_dir") + "/out.txt";
  const absl::Status status = detail::write_new_file(path, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("No such file or directory"));
}

TEST_F(WriteNewFileTest, FileUsedAsDirectoryErrorNamesPath) {
  const std::string file = tmp_.file("plain_file");
  ASSERT_TRUE(detail::write_new_file(file, "x").ok());
  const absl::Status status = detail::write_new_file(file + "/out.txt", "x");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(file + "/out.txt"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("Not a directory"));
}

// A file size limit stands in for a full disk: the first write is cut short,
// the next one fails (EFBIG), and no truncated file may remain.
TEST_F(WriteNewFileTest, FailedWriteRemovesPartialFileAndNamesPath) {
  const std::string path = tmp_.file("too_big.txt");
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 1000;
  const sighandler_t previous = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  const absl::Status status = detail::write_new_file(path, std::string(5000, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot write \"" + path + "\""));
  EXPECT_THAT(std::string(status.message()), HasSubstr("File too large"));
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST_F(WriteNewFileTest, UnwritableDirectoryErrorNamesPath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = tmp_.file("read_only_dir");
  ::rmdir(dir.c_str());
  ASSERT_EQ(::mkdir(dir.c_str(), 0555), 0);
  const std::string path = dir + "/out.txt";
  const absl::Status status = detail::write_new_file(path, "x");
  ::rmdir(dir.c_str());
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("Permission denied"));
}

TEST(DeviceNameTest, Names) {
  EXPECT_EQ(device_name(Device::kCPU), "CPU");
  EXPECT_EQ(device_name(Device::kGPU), "GPU");
}

}  // namespace
}  // namespace trainscope
