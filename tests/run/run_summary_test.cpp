// The run store's summary files: what the stats writer writes (format_summary,
// JSON), the run reader reads back, field by field (kTimeStatsFields).
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "run/run_format.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::run::detail {
namespace {

using ::testing::HasSubstr;

// Every field a different value, so a field read into another member shows.
TimeStats distinct_stats() {
  TimeStats s;
  double value = 0.001;
  std::uint64_t integer = 7;
  for (const TimeStatsField& f : kTimeStatsFields) {
    switch (f.kind) {
      case TimeStatsFieldKind::kInteger:
        s.*f.integer = integer++;
        break;
      case TimeStatsFieldKind::kDouble:
        s.*f.number = value;
        value *= 1.7;
        break;
      case TimeStatsFieldKind::kBoolean:
        s.*f.boolean = true;
        break;
    }
  }
  return s;
}

void expect_same_stats(const TimeStats& got, const TimeStats& want) {
  for (const TimeStatsField& f : kTimeStatsFields) {
    SCOPED_TRACE(f.name);
    switch (f.kind) {
      case TimeStatsFieldKind::kInteger:
        EXPECT_EQ(got.*f.integer, want.*f.integer);
        break;
      case TimeStatsFieldKind::kDouble:
        if (std::isnan(want.*f.number)) {
          EXPECT_TRUE(std::isnan(got.*f.number)) << got.*f.number;
        } else {
          EXPECT_EQ(got.*f.number, want.*f.number);
        }
        break;
      case TimeStatsFieldKind::kBoolean:
        EXPECT_EQ(got.*f.boolean, want.*f.boolean);
        break;
    }
  }
}

TEST(RunSummaryTest, EveryFieldOfTheStatsWriterIsReadBack) {
  Summary summary;
  summary.has_gpu_section = true;
  TimeStats empty;  // NaN fields: null in JSON, NaN again when read
  empty.warmup_excluded = 2;
  summary.entries = {{"BATCH", Device::kCPU, distinct_stats()}, {"EPOCH", Device::kGPU, empty}};
  const std::string text = format_summary(summary, StatsFormat::kJson);
  absl::StatusOr<Summary> read = parse_summary_file(text, "summary-0.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->has_gpu_section);
  ASSERT_EQ(read->entries.size(), 2u);
  EXPECT_EQ(read->entries[0].key, "BATCH");
  EXPECT_EQ(read->entries[1].device, Device::kGPU);
  expect_same_stats(read->entries[0].stats, summary.entries[0].stats);
  expect_same_stats(read->entries[1].stats, empty);
}

TEST(RunSummaryTest, EachMissingOrMistypedFieldIsAnErrorNamingTheFileAndField) {
  Summary summary;
  summary.entries = {{"BATCH", Device::kCPU, distinct_stats()}};
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(format_summary(summary, StatsFormat::kJson));
  for (const TimeStatsField& f : kTimeStatsFields) {
    SCOPED_TRACE(f.name);
    nlohmann::ordered_json missing = doc;
    missing["entries"][0].erase(f.name);
    absl::StatusOr<Summary> read = parse_summary_file(missing.dump(), "runs/r/summary-3.json");
    ASSERT_FALSE(read.ok());
    EXPECT_THAT(
        std::string(read.status().message()),
        HasSubstr("runs/r/summary-3.json: field \"" + std::string(f.name) + "\" is missing"));

    nlohmann::ordered_json mistyped = doc;
    mistyped["entries"][0][f.name] = "text";
    read = parse_summary_file(mistyped.dump(), "runs/r/summary-3.json");
    ASSERT_FALSE(read.ok());
    EXPECT_THAT(std::string(read.status().message()),
                HasSubstr("runs/r/summary-3.json: field \"" + std::string(f.name) +
                          "\" is \"text\", not "));
  }
}

// A negative duration or statistic (issue 36: "regions.BATCH.median = -1.0"
// read without a word): the summary is damaged, named by file, entry and field.
TEST(RunSummaryTest, ANegativeStatisticIsAnErrorNamingTheField) {
  Summary summary;
  summary.entries = {{"BATCH", Device::kCPU, distinct_stats()}};
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(format_summary(summary, StatsFormat::kJson));
  for (const TimeStatsField& f : kTimeStatsFields) {
    if (f.kind != TimeStatsFieldKind::kDouble) continue;
    SCOPED_TRACE(f.name);
    nlohmann::ordered_json negative = doc;
    negative["entries"][0][f.name] = -1.0;
    absl::StatusOr<Summary> read = parse_summary_file(negative.dump(), "runs/r/summary-3.json");
    ASSERT_FALSE(read.ok());
    EXPECT_THAT(std::string(read.status().message()),
                HasSubstr("runs/r/summary-3.json: entry \"BATCH\" on CPU: " + std::string(f.name) +
                          " is -1, below 0"));
  }
  nlohmann::ordered_json zero = doc;
  zero["entries"][0]["min"] = 0.0;
  zero["entries"][0]["stdev"] = -0.0;  // what a writer may print for a zero
  EXPECT_TRUE(parse_summary_file(zero.dump(), "summary-0.json").ok());
}

}  // namespace
}  // namespace trainscope::run::detail
