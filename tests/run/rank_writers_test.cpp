// Older damage: a regions file that two processes of one rank appended to at
// once (as before a rank had one owner) is told from one process's rows and
// from a rank restarted after a crash.
#include "run/rank_writers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/files.hpp"
#include "run/run_format.hpp"
#include "run/run_store_exporter.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

using run::detail::RankWriterCheck;
using run::detail::RunStoreExporter;
using ::testing::HasSubstr;
using RankWritersTest = trainscope::testing::RunDirTest;

RegionView batch(std::uint32_t thread, std::int64_t step) {
  RegionView row;
  row.key = "BATCH";
  row.thread = thread;
  row.step = step;
  return row;
}

RegionView other(std::string_view key, Device device, std::int64_t step) {
  RegionView row;
  row.key = key;
  row.device = device;
  row.step = step;
  return row;
}

TEST(RankWriterCheckTest, OneProcessAndARestartAreClean) {
  RankWriterCheck check;
  for (std::int64_t step = 0; step < 5; ++step) {
    check.add(other("data", Device::kCPU, step));
    check.add(batch(0, step));
    check.add(batch(1, step));                          // another thread counts its own steps
    check.add(other("BATCH", Device::kGPU, step + 1));  // GPU rows may carry the next step
  }
  // Restarted after a crash: from 0 again, the old series never goes on.
  for (std::int64_t step = 0; step < 8; ++step) check.add(batch(0, step));
  EXPECT_FALSE(check.interleaved());
  EXPECT_EQ(check.finding("regions-0.csv"), std::nullopt);
}

TEST(RankWriterCheckTest, TwoSeriesAdvancingAtOnceAreFoundWithTheirLine) {
  RankWriterCheck check;
  for (std::int64_t step : {0, 1, 2}) check.add(batch(0, step));  // lines 2-4
  check.add(other("data", Device::kCPU, 0));                      // line 5
  for (std::int64_t step : {0, 1}) check.add(batch(0, step));     // lines 6-7: a second process
  check.add(batch(0, 3));                                         // line 8: the first goes on
  ASSERT_TRUE(check.interleaved());
  const std::optional<std::string> finding = check.finding("/r/regions-0.csv");
  ASSERT_TRUE(finding.has_value());
  EXPECT_THAT(*finding, HasSubstr("/r/regions-0.csv:8: rows of more than one process: thread 0's "
                                  "BATCH rows on CPU go on at step 3 while another series of "
                                  "steps, begun later, has reached step 1"));
  EXPECT_THAT(*finding, HasSubstr("the same RANK"));
}

TEST(RankWriterCheckTest, ASecondSeriesThatCaughtUpExactlyReadsAsTheRestartItCouldBe) {
  RankWriterCheck check;
  for (std::int64_t step : {0, 1, 2, 0, 1, 2, 3, 4}) check.add(batch(0, step));
  EXPECT_FALSE(check.interleaved());
}

TEST(RankWriterCheckTest, ProcessesInLockstepAreFoundToo) {
  RankWriterCheck check;
  for (std::int64_t step = 0; step < 4; ++step) {
    check.add(batch(0, step));  // process A
    check.add(batch(0, step));  // process B, flushed just after
  }
  EXPECT_TRUE(check.interleaved());
}

// Two stores of rank 0 in one directory, as two processes with RANK=0 were
// before Run::Start claimed ranks: the second appends to the first's files.
TEST_F(RankWritersTest, FindsTheRowsOfTwoWritersOfOneRankInARealFile) {
  const std::string dir = (root_ / "job").string();
  std::filesystem::create_directories(dir);
  const auto store = [&dir] {
    absl::StatusOr<std::shared_ptr<RunStoreExporter>> created =
        RunStoreExporter::Create({dir, RankInfo{}, absl::Seconds(1), 0});
    EXPECT_TRUE(created.ok()) << created.status();
    return *std::move(created);
  };
  const auto write_batches = [](RunStoreExporter& s, int n) {
    std::vector<RegionSample> samples(n);
    for (RegionSample& sample : samples) {
      sample.key = static_cast<KeyId>(TimeType::BATCH);
      sample.duration_ns = 1000;
    }
    ASSERT_TRUE(s.write_samples(samples).ok());
    ASSERT_TRUE(s.flush().ok());
  };
  const auto check_file = [&dir] {
    RankWriterCheck check;
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    EXPECT_TRUE(reader.ok()) << reader.status();
    absl::StatusOr<RunReader::Scan> scan = reader->scan_regions(
        0, 0, std::uint64_t{1} << 20, [&check](const RegionView& row) { check.add(row); });
    EXPECT_TRUE(scan.ok()) << scan.status();
    return check.finding(dir + "/regions-0.csv");
  };
  // run.json, so that the directory reads as a run.
  RunInfo info;
  info.id = "00000000000000000000000000000001";
  ASSERT_TRUE(
      trainscope::detail::write_new_file(dir + "/run.json", run::detail::format_run_file(info))
          .ok());
  {
    std::shared_ptr<RunStoreExporter> first = store();
    write_batches(*first, 3);
    first.reset();  // a crash; the restart appends from step 0
    std::shared_ptr<RunStoreExporter> restarted = store();
    write_batches(*restarted, 3);
    EXPECT_EQ(check_file(), std::nullopt);

    std::shared_ptr<RunStoreExporter> second = store();  // restarted's lock is held
    ASSERT_FALSE(second->owns_rank());
    write_batches(*second, 2);
    write_batches(*restarted, 1);
  }
  const std::optional<std::string> finding = check_file();
  ASSERT_TRUE(finding.has_value());
  // Rows: 3 (first), 3 (restarted), 2 (second), then restarted's step 3 on line 10.
  EXPECT_THAT(*finding, HasSubstr(dir + "/regions-0.csv:10: rows of more than one process"));
}

// What every reader calls (check_run) names it as a warning, the run still readable.
TEST_F(RankWritersTest, CheckRunWarnsOfARankWrittenByTwoProcesses) {
  const std::string dir = (root_ / "job").string();
  std::filesystem::create_directories(dir);
  RunInfo info;
  info.id = "00000000000000000000000000000001";
  ASSERT_TRUE(
      trainscope::detail::write_new_file(dir + "/run.json", run::detail::format_run_file(info))
          .ok());
  const auto store = [&dir] {
    absl::StatusOr<std::shared_ptr<RunStoreExporter>> created =
        RunStoreExporter::Create({dir, RankInfo{}, absl::Seconds(1), 0});
    EXPECT_TRUE(created.ok()) << created.status();
    return *std::move(created);
  };
  const auto write_batches = [](RunStoreExporter& s, int n) {
    std::vector<RegionSample> samples(n);
    for (RegionSample& sample : samples) sample.key = static_cast<KeyId>(TimeType::BATCH);
    ASSERT_TRUE(s.write_samples(samples).ok());
    ASSERT_TRUE(s.flush().ok());
  };
  std::shared_ptr<RunStoreExporter> owner = store();
  std::shared_ptr<RunStoreExporter> second = store();  // as a second process with RANK=0 was
  // (A second series exactly as long as the first one's rows so far would read as a restart.)
  write_batches(*owner, 4);
  write_batches(*second, 2);
  write_batches(*owner, 4);
  ASSERT_TRUE(owner->write_summary(owner->stream_summary()).ok());
  info.status = RunStatus::kFinished;
  info.end_time_ms = 1;
  ASSERT_TRUE(owner->write_run_info(info).ok());

  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<RunProblem>> problems = check_run(*reader);
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(problems->size(), 1u);
  EXPECT_EQ((*problems)[0].kind, RunProblemKind::kRegionsMixed);
  EXPECT_FALSE((*problems)[0].error);
  EXPECT_EQ((*problems)[0].path, dir + "/regions-0.csv");
  EXPECT_THAT((*problems)[0].message,
              HasSubstr(dir + "/regions-0.csv:8: rows of more than one process"));
}

}  // namespace
}  // namespace trainscope
