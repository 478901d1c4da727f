// RunReader on damaged, partial and hand-written run directories.
#include "trainscope/run/run_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "fmt/format.h"
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

TEST_F(RunReaderTest, NegativeDurationIsAnErrorNamingFileLineAndField) {
  write("regions-0.csv", std::string(kRegionsHeader) + "k,CPU,0,0,1,2,3,4\nk,CPU,0,0,1,-5,3,4\n");
  const std::string error = message(open().read_regions(0).status());
  EXPECT_THAT(error, HasSubstr("regions-0.csv:3: duration_ns is \"-5\", not a non-negative"));
  // 0 is a duration (a region shorter than the clock's tick).
  write("regions-0.csv", std::string(kRegionsHeader) + "k,CPU,0,0,-1,0,-1,0\n");
  absl::StatusOr<Chunk<RegionRow>> regions = open().read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_EQ(regions->rows.at(0).duration_ns, 0);
}

// A directory in a data file's place is not an empty file: its read fails
// (EISDIR) and the error names it, as does every other file's.
TEST_F(RunReaderTest, DirectoryInPlaceOfAFileIsAnErrorNamingIt) {
  write("rank-0.json", rank_json("h", 1, "FINISHED", 2));
  RunReader reader = open();
  fs::create_directory(dir_ / "regions-0.csv");
  fs::create_directory(dir_ / "metrics-0.csv");
  fs::create_directory(dir_ / "summary-0.json");
  const std::string host_file = "host-h.csv";
  fs::create_directory(dir_ / host_file);
  const auto names_it = [](const absl::Status& status, const std::string& name) {
    EXPECT_FALSE(status.ok()) << name;
    EXPECT_FALSE(absl::IsNotFound(status)) << status;  // not "no data yet"
    EXPECT_THAT(message(status), HasSubstr(name + "\": it is a directory"));
  };
  names_it(reader.read_regions(0).status(), "regions-0.csv");
  names_it(reader.read_regions(0, 0, 4096).status(), "regions-0.csv");
  names_it(reader.scan_regions(0, 0, 4096, [](const RegionView&) {}).status(), "regions-0.csv");
  names_it(reader.read_metrics(0).status(), "metrics-0.csv");
  names_it(reader.read_summary(0).status(), "summary-0.json");
  names_it(reader.read_host_metrics("h").status(), host_file);
  fs::remove(dir_ / "rank-0.json");
  fs::create_directory(dir_ / "rank-0.json");
  names_it(RunReader::Open(dir_.string()).status(), "rank-0.json");
}

// A FIFO in a run file's place: an error naming it, not a reader that waits
// for a writer forever. (Were it to block, the test opens the FIFO's other
// end after a few seconds, so that it fails instead of hanging.)
TEST_F(RunReaderTest, FifoInPlaceOfAFileIsAnErrorNotAHang) {
  write("rank-0.json", rank_json("h", 1, "FINISHED", 2));
  RunReader reader = open();
  const auto fails_naming = [&](const std::string& name, auto read) {
    const std::string path = (dir_ / name).string();
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    std::future<absl::Status> result = std::async(std::launch::async, read);
    if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << "reading " << name << " hangs";
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    const absl::Status status = result.get();
    EXPECT_FALSE(status.ok()) << name;
    EXPECT_THAT(message(status), HasSubstr(name + "\": it is a FIFO"));
    fs::remove(path);
  };
  fails_naming("metrics-0.csv", [&] { return reader.read_metrics(0).status(); });
  fails_naming("regions-0.csv", [&] { return reader.read_regions(0).status(); });
  fails_naming("summary-0.json", [&] { return reader.read_summary(0).status(); });
  fails_naming("stdout.log", [&] { return reader.log_tail(RunLog::kStdout, 100).status(); });
  fs::remove(dir_ / "rank-0.json");
  fails_naming("rank-0.json", [&] { return RunReader::Open(dir_.string()).status(); });
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

// Rows split a word at a time (the fast path) read back exactly as written,
// whatever the lengths put the commas, the quote or the newline inside a
// word; a quoted key and a stray quote take the RFC 4180 path.
TEST_F(RunReaderTest, RowsOfEveryShapeReadBackAsWritten) {
  std::string text(kRegionsHeader);
  std::vector<RegionRow> written;
  for (int k = 1; k <= 40; ++k) {
    RegionRow row;
    row.key = std::string(static_cast<std::size_t>(k), static_cast<char>('a' + k % 26));
    if (k % 5 == 0) row.key += "-x.y/z";
    row.device = k % 3 == 0 ? Device::kGPU : Device::kCPU;
    row.rank = static_cast<std::uint32_t>(k % 4);
    row.thread = static_cast<std::uint32_t>(k * 7);
    row.start_unix_ns = 1'700'000'000'000'000'000 + k * 1'234'567;
    row.duration_ns = std::int64_t{1} << (k % 40);
    row.step = k * 11;
    row.epoch = k % 2;
    // Every fourth CPU row a step with its run-queue wait (11 fields).
    if (k % 4 == 1 && row.device == Device::kCPU) row.cpu_wait_ns = k * 1000;
    text += fmt::format("{},{},{},{},{},{},{},{}{}\n", row.key,
                        row.device == Device::kGPU ? "GPU" : "CPU", row.rank, row.thread,
                        row.start_unix_ns, row.duration_ns, row.step, row.epoch,
                        row.cpu_wait_ns >= 0 ? fmt::format(",,,{}", row.cpu_wait_ns) : "");
    written.push_back(row);
  }
  RegionRow quoted = written[0];
  quoted.key = "a,b \"c\"";
  quoted.rank = 0;
  quoted.cpu_wait_ns = kNoCpuWait;
  text += "\"a,b \"\"c\"\"\",CPU,0,7,1700000000001234567,2,11,1\n";
  written.push_back(quoted);
  write("regions-0.csv", text);
  RunReader reader = open();
  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  ASSERT_EQ(regions->rows.size(), written.size());
  for (std::size_t i = 0; i < written.size(); ++i) {
    const RegionRow& a = regions->rows[i];
    const RegionRow& b = written[i];
    EXPECT_EQ(a.key, b.key) << i;
    EXPECT_EQ(a.device, b.device) << i;
    EXPECT_EQ(a.rank, b.rank) << i;
    EXPECT_EQ(a.thread, b.thread) << i;
    EXPECT_EQ(a.start_unix_ns, b.start_unix_ns) << i;
    EXPECT_EQ(a.duration_ns, b.duration_ns) << i;
    EXPECT_EQ(a.step, b.step) << i;
    EXPECT_EQ(a.epoch, b.epoch) << i;
    EXPECT_EQ(a.cpu_wait_ns, b.cpu_wait_ns) << i;
  }
  // A quote inside an unquoted field, and a row of 40 fields, are errors naming the line.
  write("regions-0.csv",
        std::string(kRegionsHeader) + "abcdefghij,CPU,0,0,1,2,3,4\nk\"ey,CPU,0,0,1,2,3,4\n");
  EXPECT_THAT(message(reader.read_regions(0).status()), HasSubstr("regions-0.csv:3: a quote"));
  std::string wide = "k";
  for (int i = 0; i < 39; ++i) wide += ",1";
  write("regions-0.csv", std::string(kRegionsHeader) + wide + "\n");
  EXPECT_THAT(message(reader.read_regions(0).status()),
              HasSubstr("regions-0.csv:2: 40 fields, expected 11 (or 10 or 8, written before "
                        "steps' waits and before device starts)"));
}

// Where a follower that reads only the newest bytes resumes: at a line start.
TEST_F(RunReaderTest, RegionsTailOffsetResumesAtALineStart) {
  RunReader reader = open();
  EXPECT_TRUE(absl::IsNotFound(reader.regions_tail_offset(0, 0, 10).status()));
  const std::string header(kRegionsHeader);
  const std::string line = "FORWARD,CPU,0,0,1700000000000000000,1000,0,0\n";  // 46 bytes
  std::string text = header;
  for (int i = 0; i < 100; ++i) text += line;
  write("regions-0.csv", text);
  const std::uint64_t size = text.size();
  // Grown by no more than kept: from itself.
  EXPECT_EQ(*reader.regions_tail_offset(0, 0, size), 0u);
  EXPECT_EQ(*reader.regions_tail_offset(0, size - 10, 100), size - 10);
  EXPECT_EQ(*reader.regions_tail_offset(0, size, 0), size);
  // Else the first line that starts in the last `keep` bytes.
  for (std::uint64_t keep : {std::uint64_t{1}, std::uint64_t{45}, std::uint64_t{46},
                             std::uint64_t{47}, std::uint64_t{500}}) {
    const absl::StatusOr<std::uint64_t> at = reader.regions_tail_offset(0, 0, keep);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_GE(*at, size - keep) << keep;
    EXPECT_LT(*at, size - keep + line.size()) << keep;
    EXPECT_EQ((*at - header.size()) % line.size(), 0u) << keep;
    absl::StatusOr<Chunk<RegionRow>> rows = reader.read_regions(0, *at);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->rows.size(), (size - *at) / line.size()) << keep;
  }
  // A last line still being written, longer than kept: no line starts there.
  write("regions-0.csv", text + std::string(200, 'k'));
  EXPECT_EQ(*reader.regions_tail_offset(0, 7, 50), 7u);
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
  LauncherState launcher;
  launcher.host = "b";
  launcher.pid = 77;
  launcher.command = {"python", "train.py"};
  launcher.status = RunStatus::kFinished;
  launcher.exit_code = 0;
  launcher.end_time_ms = 9;
  write(run::detail::launcher_file_name("b", 77), run::detail::format_launcher_file(launcher));
  write(
      run::detail::host_metrics_file_name("b"),
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
  launcher.status = RunStatus::kFailed;
  launcher.exit_code = 1;
  write(run::detail::launcher_file_name("b", 77), run::detail::format_launcher_file(launcher));
  EXPECT_EQ(open_run(dir_.string()).info().status, RunStatus::kFailed);
}

// Rank and launcher files share their process fields: each round-trips every
// field, and a rank file of the writer is byte for byte what it was.
TEST_F(RunReaderTest, ProcessFilesRoundTrip) {
  RankState rank;
  rank.rank = {3, 1, 8};
  rank.host = "node7";
  rank.pid = 4242;
  rank.status = RunStatus::kKilled;
  rank.start_time_ms = 10;
  rank.end_time_ms = 20;
  rank.heartbeat_ms = 19;
  rank.flush_interval_ms = 250;
  rank.launcher = "node7:4200";
  const std::string text = run::detail::format_rank_file(rank);
  EXPECT_EQ(text,
            "{\n \"format\": \"trainscope.rank\",\n \"version\": 2,\n \"rank\": 3,\n"
            " \"local_rank\": 1,\n \"world_size\": 8,\n \"host\": \"node7\",\n \"pid\": 4242,\n"
            " \"status\": \"KILLED\",\n \"start_time_ms\": 10,\n \"end_time_ms\": 20,\n"
            " \"heartbeat_ms\": 19,\n \"flush_interval_ms\": 250,\n"
            " \"launcher\": \"node7:4200\"\n}\n");
  absl::StatusOr<RankState> back = run::detail::parse_rank_file(text, "r.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank.rank, 3u);
  EXPECT_EQ(back->rank.local_rank, 1u);
  EXPECT_EQ(back->rank.world_size, 8u);
  EXPECT_EQ(back->host, "node7");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->status, RunStatus::kKilled);
  EXPECT_EQ(back->start_time_ms, 10);
  EXPECT_EQ(back->end_time_ms, 20);
  EXPECT_EQ(back->heartbeat_ms, 19);
  EXPECT_EQ(back->flush_interval_ms, 250);
  EXPECT_EQ(back->launcher, "node7:4200");

  LauncherState launcher;
  launcher.host = "node7";
  launcher.pid = 4200;
  launcher.status = RunStatus::kFailed;
  launcher.command = {"python", "t.py"};
  launcher.exit_code = 3;
  launcher.term_signal = 0;
  launcher.start_time_ms = 1;
  launcher.end_time_ms = 2;
  launcher.heartbeat_ms = 2;
  launcher.flush_interval_ms = 1000;
  absl::StatusOr<LauncherState> again =
      run::detail::parse_launcher_file(run::detail::format_launcher_file(launcher), "l.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), "node7:4200");
  EXPECT_EQ(again->status, RunStatus::kFailed);
  EXPECT_THAT(again->command, ElementsAre("python", "t.py"));
  EXPECT_EQ(again->exit_code, 3);
  EXPECT_EQ(again->end_time_ms, 2);
  EXPECT_EQ(again->heartbeat_ms, 2);
  EXPECT_EQ(again->flush_interval_ms, 1000);

  // The same process fields, the same errors, naming the file and the value.
  EXPECT_THAT(
      message(run::detail::parse_launcher_file(
                  R"({"format":"trainscope.launcher","version":2,"host":"h","pid":-4})", "l.json")
                  .status()),
      HasSubstr("l.json: field \"pid\" is -4, not an integer from 0 to"));
  EXPECT_THAT(
      message(
          run::detail::parse_rank_file(
              R"({"format":"trainscope.rank","version":2,"rank":0,"host":"h","pid":-4})", "r.json")
              .status()),
      HasSubstr("r.json: field \"pid\" is -4, not an integer from 0 to"));
}

// Hand-written files may leave out what has a natural default; what is there
// must be right, and errors say what was found.
TEST_F(RunReaderTest, OptionalFieldsAndErrorsNamingTheValue) {
  write("run.json", R"({"format":"trainscope.run","version":1,"id":"x","start_time_ms":3})");
  write("rank-0.json", R"({"format":"trainscope.rank","version":1,"rank":0,"host":"h","pid":1,)"
                       R"("status":"FINISHED","start_time_ms":1,"end_time_ms":2,"heartbeat_ms":2,)"
                       R"("flush_interval_ms":1000})");
  RunReader reader = open();
  EXPECT_EQ(reader.version(), 1);
  EXPECT_EQ(reader.info().name, "");
  EXPECT_TRUE(reader.info().params.empty());
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].rank.world_size, 1u);
  EXPECT_EQ(reader.ranks()[0].launcher, "");
  EXPECT_FALSE(reader.in_progress());

  write("run.json", R"({"format":"trainscope.run","version":2,"id":7,"start_time_ms":3})");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("run.json: field \"id\" is 7, not a string"));
  write("run.json", "{\"format\":");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("run.json: not valid JSON"));
  write("run.json", "[1]");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("run.json: not a JSON object ([1])"));
  write("run.json", R"({"format":"other"})");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("run.json: format \"other\" version null"));
  write("run.json", R"({"format":"trainscope.run","version":2,"id":"x","start_time_ms":3})");
  write("rank-0.json", rank_json("h", 1, "DONE", 1));
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("rank-0.json: field \"status\" is \"DONE\", not one of RUNNING"));

  fs::remove(dir_ / "run.json");
  EXPECT_THAT(message(RunReader::Open(dir_.string()).status()),
              HasSubstr("is not a trainscope run: it has no run.json"));
  EXPECT_EQ(message(RunReader::Open((dir_ / "nope").string()).status()),
            (dir_ / "nope").string() + ": no such run directory");
}

// The data files as they are now, whoever's they are; the host of a host file
// as the run's processes name it.
TEST_F(RunReaderTest, FilesListsTheDataFilesWithTheirSizes) {
  RankJson rank;
  rank.host = "node/7";
  write(rank.file_name(), rank.text());
  write("regions-10.csv", std::string(kRegionsHeader) + "k,CPU,10,0,1,2,3,4\n");
  write("regions-2.csv", kRegionsHeader);
  write("metrics-0.csv", kMetricsHeader);
  write("summary-0.json", "{}");
  write("host-node_7.csv", kMetricsHeader);
  write("host-other.csv", kMetricsHeader);
  write("regions-02.csv", "not a rank's");
  write("notes.csv", "not a run file");
  const std::vector<RunFile> files = open().files();
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files[0].kind, RunFileKind::kRegions);
  EXPECT_EQ(files[0].rank, 2u);
  EXPECT_EQ(files[1].rank, 10u);
  EXPECT_EQ(files[1].path, (dir_ / "regions-10.csv").string());
  EXPECT_EQ(files[1].size_bytes, std::string(kRegionsHeader).size() + 19);
  EXPECT_EQ(files[1].csv_header,
            "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch,gpu_start_ns,stream,cpu_"
            "wait_ns");
  EXPECT_EQ(files[2].kind, RunFileKind::kMetrics);
  EXPECT_EQ(files[2].csv_header, "key,value,step,timestamp_ms,rank");
  EXPECT_EQ(files[3].kind, RunFileKind::kSummary);
  EXPECT_EQ(files[3].csv_header, "");
  EXPECT_EQ(files[4].kind, RunFileKind::kHostMetrics);
  EXPECT_EQ(files[4].rank, kNoRank);
  EXPECT_EQ(files[4].host, "node/7");
  EXPECT_EQ(files[5].host, "other");
  EXPECT_EQ(run_data_file_name(RunFileKind::kRegions, 3), "regions-3.csv");
  EXPECT_EQ(run_data_file_name(RunFileKind::kHostMetrics, kNoRank, "node/7"), "host-node_7.csv");
  EXPECT_TRUE(is_run_directory(dir_.string()));
  EXPECT_FALSE(is_run_directory((dir_ / "artifacts").string()));
}

// A directory or FIFO by a data file's name is listed (size 0), so that a
// reader of every listed file refuses it by name instead of skipping it
// (Python's read_run read such a run as 0 rows).
TEST_F(RunReaderTest, FilesListsWhatIsNotARegularFileToo) {
  write("regions-0.csv", std::string(kRegionsHeader) + "k,CPU,0,0,1,2,3,4\n");
  fs::create_directory(dir_ / "regions-1.csv");
  const std::string fifo = (dir_ / "metrics-0.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << fifo;
  const RunReader reader = open();
  const std::vector<RunFile> files = reader.files();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[1].path, (dir_ / "regions-1.csv").string());
  EXPECT_EQ(files[1].rank, 1u);
  EXPECT_EQ(files[1].size_bytes, 0u);
  EXPECT_EQ(files[2].path, fifo);
  EXPECT_EQ(files[2].kind, RunFileKind::kMetrics);
  EXPECT_THAT(message(reader.read_regions(1).status()),
              HasSubstr("regions-1.csv\": it is a directory, not a regular file"));
  EXPECT_THAT(message(reader.read_metrics(0).status()),
              HasSubstr("metrics-0.csv\": it is a FIFO, not a regular file"));
}

TEST_F(RunReaderTest, EnvironmentAndLogTails) {
  RunReader reader = open();
  EXPECT_TRUE(absl::IsNotFound(reader.environment().status()));
  EXPECT_TRUE(absl::IsNotFound(reader.log_tail(RunLog::kStdout, 10).status()));

  write("environment.json", R"({"hostname": "h"})");
  EXPECT_EQ(reader.environment().value_or(""), R"({"hostname": "h"})");
  write("environment.json", R"({"hostname": )");
  EXPECT_THAT(message(reader.environment().status()),
              HasSubstr((dir_ / "environment.json").string() + ": not valid JSON"));

  write("stdout.log", "first\nsecond\nthird\n");
  write("stderr.log", "only\n");
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 100).value_or(""), "first\nsecond\nthird\n");
  // The last 10 bytes ("ond\nthird\n") from their first whole line.
  EXPECT_EQ(reader.log_tail(RunLog::kStdout, 10).value_or(""), "third\n");
  EXPECT_EQ(reader.log_tail(RunLog::kStderr, 5).value_or("?"), "only\n");
  EXPECT_EQ(run_log_path(dir_.string(), RunLog::kStderr), (dir_ / "stderr.log").string());
  EXPECT_EQ(run_environment_path(dir_.string()), (dir_ / "environment.json").string());
}

TEST_F(RunReaderTest, WriteRunArtifactIsListed) {
  fs::create_directories(dir_ / "artifacts");
  ASSERT_TRUE(write_run_artifact(dir_.string(), "notes.txt", "n").ok());
  EXPECT_EQ(open().artifacts(), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(trainscope::testing::read_file(dir_ / "artifacts" / "notes.txt"), "n");
}

}  // namespace
}  // namespace trainscope
