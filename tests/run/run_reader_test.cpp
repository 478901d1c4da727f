// RunReader on damaged, partial and hand-written run directories.
#include "trainscope/run/run_reader.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "run/run_format.hpp"
#include "support/run_dir_test.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using trainscope::testing::kMetricsHeader;
using trainscope::testing::kRegionsHeader;
using trainscope::testing::RankJson;
using trainscope::testing::RunJson;

std::string rank_json(const std::string& host, long pid, const std::string& status,
                      long heartbeat_ms) {
  RankJson rank;
  rank.host = host;
  rank.pid = pid;
  rank.status = status;
  rank.start_time_ms = 1;
  rank.end_time_ms = 2;
  rank.heartbeat_ms = heartbeat_ms;
  rank.flush_interval_ms = 1000;
  return rank.text();
}

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

std::string message(const absl::Status& status) { return std::string(status.message()); }

// dir_: a run directory with just run.json (id kRunId, one param a=1).
class RunReaderTest : public trainscope::testing::RunDirTest {
 protected:
  void SetUp() override {
    RunDirTest::SetUp();
    RunJson run;
    run.start_time_ms = 5;
    run.params = {{"a", "1"}};
    dir_ = write_run_dir("run", run);
  }
  void write(const std::string& name, const std::string& contents) {
    trainscope::testing::write_file(dir_ / name, contents);
  }
  RunReader open() { return open_run(dir_.string()); }

  fs::path dir_;
};

TEST_F(RunReaderTest, EmptyRunHasMetadataAndNothingElse) {
  RunReader reader = open();
  EXPECT_EQ(reader.info().id, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(reader.info().params.at("a"), "1");
  EXPECT_TRUE(reader.ranks().empty());
  EXPECT_EQ(reader.info().status, RunStatus::kRunning);
  EXPECT_FALSE(reader.crashed());
  EXPECT_TRUE(reader.artifacts().empty());
  absl::StatusOr<Summary> summary = reader.read_summary(0);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->entries.empty());
  // Missing record files are errors naming them.
  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  EXPECT_TRUE(absl::IsNotFound(regions.status()));
  EXPECT_THAT(message(regions.status()), HasSubstr("regions-0.csv"));
  EXPECT_THAT(message(reader.read_metrics(3).status()), HasSubstr("metrics-3.csv"));
}

TEST_F(RunReaderTest, MissingOrCorruptRunJsonIsAnErrorNamingIt) {
  write("run.json", "{\"format\":\"trainscope.run\",\"vers");
  absl::StatusOr<RunReader> reader = RunReader::Open(dir_.string());
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(message(reader.status()), HasSubstr("run.json"));

  // A newer writer's file is refused, naming its version and the ones understood.
  write("run.json", R"({"format":"trainscope.run","version":3})");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()), HasSubstr("version 3"));
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()), HasSubstr("versions 1 to 2"));
  write("run.json", R"({"format":"trainscope.run","version":1,"id":7})");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()), HasSubstr("\"id\""));

  fs::remove(dir_ / "run.json");
  reader = RunReader::Open(dir_.string());
  EXPECT_TRUE(absl::IsNotFound(reader.status()));
  EXPECT_THAT(message(reader.status()), HasSubstr(dir_.string()));
}

TEST_F(RunReaderTest, CorruptRankFileIsAnErrorNamingIt) {
  write("rank-0.json", "{\"format\":");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()), HasSubstr("rank-0.json"));
  write("rank-0.json", rank_json("h", 1, "DONE", 1));
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()), HasSubstr("DONE"));
}

TEST_F(RunReaderTest, BadLineIsAnErrorNamingFileAndLine) {
  write("metrics-0.csv", std::string(kMetricsHeader) + "loss,1.5,0,10,0\nloss,abc,1,11,0\n");
  RunReader reader = open();
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(0);
  ASSERT_FALSE(metrics.ok());
  EXPECT_THAT(message(metrics.status()), HasSubstr("metrics-0.csv:3"));
  EXPECT_THAT(message(metrics.status()), HasSubstr("value"));
  // The line number counts from the file's start, not the read's.
  const std::uint64_t second_row = std::string(kMetricsHeader).size() + 16;
  metrics = reader.read_metrics(0, second_row);
  EXPECT_THAT(message(metrics.status()), HasSubstr("metrics-0.csv:3"));

  write("regions-0.csv", std::string(kRegionsHeader) + "k,CPU,0,0,1,2,3\n");
  EXPECT_THAT(message(reader.read_regions(0).status()), HasSubstr("regions-0.csv:2: 7 fields"));
  write("regions-0.csv", std::string(kRegionsHeader) + "k,TPU,0,0,1,2,3,4\n");
  EXPECT_THAT(message(reader.read_regions(0).status()), HasSubstr("device"));
  write("regions-0.csv", "key,device\nk,CPU\n");
  EXPECT_THAT(message(reader.read_regions(0).status()), HasSubstr("regions-0.csv:1"));
  write("metrics-0.csv", std::string(kMetricsHeader) + "loss,nan,0,10,0\n");
  EXPECT_FALSE(reader.read_metrics(0).ok());
}

TEST_F(RunReaderTest, TruncatedLastLineIsLeftForLater) {
  const std::string complete = std::string(kRegionsHeader) + "\"a,\"\"b\"\"\nc\",GPU,2,3,4,5,6,7\n";
  write("regions-0.csv", complete + "BATCH,CPU,0,0,9,");
  RunReader reader = open();
  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_TRUE(regions->truncated);
  EXPECT_EQ(regions->next_offset, complete.size());
  ASSERT_EQ(regions->rows.size(), 1u);
  const RegionRow& row = regions->rows[0];
  EXPECT_EQ(row.key, "a,\"b\"\nc");
  EXPECT_EQ(row.device, Device::kGPU);
  EXPECT_EQ(row.rank, 2u);
  EXPECT_EQ(row.thread, 3u);
  EXPECT_EQ(row.start_unix_ns, 4);
  EXPECT_EQ(row.duration_ns, 5);
  EXPECT_EQ(row.step, 6);
  EXPECT_EQ(row.epoch, 7);

  // The writer finishes the line: a read from next_offset gets just it.
  trainscope::testing::write_file(dir_ / "regions-0.csv", "10,0,0\n", /*append=*/true);
  regions = reader.read_regions(0, regions->next_offset);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_FALSE(regions->truncated);
  ASSERT_EQ(regions->rows.size(), 1u);
  EXPECT_EQ(regions->rows[0].key, "BATCH");
  EXPECT_EQ(regions->rows[0].duration_ns, 10);
  EXPECT_TRUE(absl::IsOutOfRange(reader.read_regions(0, 1 << 20).status()));
}

TEST_F(RunReaderTest, SilentOrVanishedRanksAreCrashed) {
  // Another host, silent for longer than three flush intervals and 10 s.
  write("rank-0.json", rank_json("elsewhere", 1, "RUNNING", 1000));
  RunReader reader = open();
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_TRUE(reader.crashed());
  EXPECT_EQ(reader.info().status, RunStatus::kFailed);

  // This host, fresh heartbeat, but the process is gone.
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  const long now_ms = static_cast<long>(absl::ToUnixMillis(absl::Now()));
  write("rank-0.json", rank_json(hostname(), pid, "RUNNING", now_ms));
  EXPECT_TRUE(open().crashed());

  // This host, this (live) process: running.
  write("rank-0.json", rank_json(hostname(), ::getpid(), "RUNNING", now_ms));
  reader = open();
  EXPECT_FALSE(reader.crashed());
  EXPECT_EQ(reader.info().status, RunStatus::kRunning);

  write("rank-0.json", rank_json("elsewhere", 1, "KILLED", 1000));
  reader = open();
  EXPECT_FALSE(reader.crashed());
  EXPECT_EQ(reader.info().status, RunStatus::kKilled);
  EXPECT_EQ(reader.info().end_time_ms, 2);
}

TEST_F(RunReaderTest, SummaryAndArtifacts) {
  write("summary-0.json",
        R"({"format":"trainscope.stats","version":1,"has_gpu_section":true,"entries":[)"
        R"({"key":"BATCH","device":"GPU","count":2,"total":1.0,"min":0.5,"mean":0.5,)"
        R"("median":0.5,"max":0.5,"stdev":0.0,"p5":0.5,"p25":0.5,"p75":0.5,"p95":0.5,)"
        R"("p99":0.5,"cv":0.0,"median_ci_low":null,"median_ci_high":null,)"
        R"("warmup_excluded":0,"approximate":false}]})");
  fs::create_directories(dir_ / "artifacts" / "sub");
  write("artifacts/sub/b.txt", "b");
  write("artifacts/a.txt", "a");
  write("artifacts/.trainscope-tmp-1-c.txt", "partial copy");
  RunReader reader = open();
  absl::StatusOr<Summary> summary = reader.read_summary(0);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->has_gpu_section);
  ASSERT_EQ(summary->entries.size(), 1u);
  EXPECT_EQ(summary->entries[0].device, Device::kGPU);
  EXPECT_EQ(summary->entries[0].stats.count, 2u);
  EXPECT_TRUE(std::isnan(summary->entries[0].stats.median_ci_low));
  EXPECT_EQ(reader.artifacts(), (std::vector<std::string>{"a.txt", "sub/b.txt"}));

  write("summary-0.json", R"({"format":"trainscope.stats","version":1,"entries":[]})");
  EXPECT_THAT(message(reader.read_summary(0).status()), HasSubstr("has_gpu_section"));
}

// Format 2: launchers are not ranks, hardware readings are per host, and the
// run's status combines both; version 1 rank files (no launcher) still read.
TEST_F(RunReaderTest, LaunchersHostsAndWorldSize) {
  RankJson rank0;
  rank0.world_size = 4;
  rank0.host = "a";
  rank0.status = "FINISHED";
  rank0.end_time_ms = 5;
  RankJson rank1 = rank0;
  rank1.rank = 1;
  rank1.host = "b";
  write(rank0.file_name(), rank0.text());
  write(rank1.file_name(), rank1.text());
  detail::LauncherRecord launcher;
  launcher.state.host = "b";
  launcher.state.pid = 77;
  launcher.state.command = {"python", "train.py"};
  launcher.state.status = RunStatus::kFinished;
  launcher.state.exit_code = 0;
  launcher.state.end_time_ms = 9;
  write(detail::launcher_file_name("b", 77), detail::format_launcher_file(launcher));
  write(
      detail::host_metrics_file_name("b"),
      std::string(kMetricsHeader) + "system/cpu.util_pct,50,0,10,\nsystem/proc.rss_mb,8,0,10,1\n");

  RunReader reader = open_run(dir_.string());
  EXPECT_EQ(reader.world_size(), 4u);
  EXPECT_EQ(reader.hosts(), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(reader.launchers().size(), 1u);
  EXPECT_EQ(reader.launchers()[0].id(), "b:77");
  EXPECT_THAT(reader.launchers()[0].command, ElementsAre("python", "train.py"));
  EXPECT_EQ(reader.info().status, RunStatus::kFinished);
  EXPECT_EQ(reader.info().end_time_ms, 9);

  absl::StatusOr<Chunk<MetricPoint>> host = reader.read_host_metrics("b");
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_EQ(host->rows.size(), 2u);
  EXPECT_EQ(host->rows[0].rank, kNoRank);
  EXPECT_EQ(host->rows[1].rank, 1u);
  absl::StatusOr<Chunk<MetricPoint>> none = reader.read_host_metrics("a");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->rows.empty());

  // A command that failed fails the run, even where every rank finished.
  launcher.state.status = RunStatus::kFailed;
  launcher.state.exit_code = 1;
  write(detail::launcher_file_name("b", 77), detail::format_launcher_file(launcher));
  EXPECT_EQ(open_run(dir_.string()).info().status, RunStatus::kFailed);
}

}  // namespace
}  // namespace trainscope
