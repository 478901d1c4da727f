// A run recorded through Run and read back through RunReader.
#include "trainscope/run/run.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "support/run_dir_test.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using trainscope::testing::RunPtr;
using RunTest = trainscope::testing::RunDirTest;

TEST_F(RunTest, RecordsEverythingAndReadsItBack) {
  RunOptions o = options();
  o.name = "round trip";
  o.params = {{"batch_size", "32"}};
  RunPtr run = start(o);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->info().id.size(), 32u);
  EXPECT_EQ(run->info().name, "round trip");
  ASSERT_NE(std::getenv("TRAINSCOPE_RUN_DIR"), nullptr);
  EXPECT_EQ(run->dir(), std::getenv("TRAINSCOPE_RUN_DIR"));

  ASSERT_TRUE(run->log_param("lr", "0.1").ok());
  ASSERT_TRUE(run->set_tag("team", "vision").ok());
  for (double loss : {2.5, 1.25, 0.1}) ASSERT_TRUE(run->log_metric("loss", loss).ok());
  ASSERT_TRUE(run->log_metric("val/acc", 0.75, 10).ok());
  const fs::path artifact = root_ / "notes.txt";
  std::ofstream(artifact) << "hello\n";
  ASSERT_TRUE(run->log_artifact(artifact.string()).ok());

  Timer timer;
  run->attach(timer);
  const Key odd_key("data aug, \"quoted\"");
  for (int epoch = 0; epoch < 3; ++epoch) {
    timer.start(TimeType::EPOCH);
    for (int batch = 0; batch < 4; ++batch) {
      timer.start(TimeType::BATCH);
      timer.start(odd_key);
      timer.end(odd_key);
      timer.end(TimeType::BATCH);
    }
    timer.end(TimeType::EPOCH);
  }
  ASSERT_TRUE(run->end().ok());
  EXPECT_TRUE(run->end().ok());  // idempotent
  EXPECT_EQ(std::getenv("TRAINSCOPE_RUN_DIR"), nullptr);
  EXPECT_FALSE(run->log_metric("loss", 1.0).ok());

  RunReader reader = open_run(run->dir());
  EXPECT_EQ(reader.info().id, run->info().id);
  EXPECT_EQ(reader.info().name, "round trip");
  EXPECT_EQ(reader.info().experiment, "Default");
  EXPECT_EQ(reader.info().status, RunStatus::kFinished);
  EXPECT_GT(reader.info().end_time_ms, 0);
  EXPECT_EQ(reader.info().params,
            (std::map<std::string, std::string>{{"batch_size", "32"}, {"lr", "0.1"}}));
  EXPECT_EQ(reader.info().tags, (std::map<std::string, std::string>{{"team", "vision"}}));
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].status, RunStatus::kFinished);
  EXPECT_FALSE(reader.crashed());
  EXPECT_EQ(reader.artifacts(), std::vector<std::string>{"notes.txt"});

  absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(0);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_FALSE(regions->truncated);
  std::map<std::string, std::vector<double>> seconds;
  std::vector<const RegionRow*> batches;
  for (const RegionRow& row : regions->rows) {
    seconds[row.key].push_back(static_cast<double>(row.duration_ns) / 1e9);
    EXPECT_EQ(row.device, Device::kCPU);
    EXPECT_EQ(row.rank, 0u);
    EXPECT_GT(row.start_unix_ns, 0);
    if (row.key == "BATCH") batches.push_back(&row);
  }
  EXPECT_EQ(seconds["BATCH"], timer.get_time(TimeType::BATCH));
  EXPECT_EQ(seconds["EPOCH"], timer.get_time(TimeType::EPOCH));
  EXPECT_EQ(seconds[std::string(odd_key.name())], timer.get_time(odd_key));
  ASSERT_EQ(batches.size(), 12u);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i]->step, static_cast<std::int64_t>(i));
    EXPECT_EQ(batches[i]->epoch, static_cast<std::int64_t>(i / 4));
  }

  absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_EQ(metrics->rows.size(), 4u);
  const std::vector<std::pair<double, std::int64_t>> expected = {
      {2.5, 0}, {1.25, 1}, {0.1, 2}, {0.75, 10}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(metrics->rows[i].key, i < 3 ? "loss" : "val/acc");
    EXPECT_EQ(metrics->rows[i].value, expected[i].first);
    EXPECT_EQ(metrics->rows[i].step, expected[i].second);
    EXPECT_GT(metrics->rows[i].timestamp_ms, 0);
  }

  // The timer is summarized at end() without being asked.
  absl::StatusOr<Summary> summary = reader.read_summary(0);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->entries.size(), 3u);
  for (const SummaryEntry& entry : summary->entries) {
    EXPECT_EQ(entry.stats.count, timer.get_time_stats(Key(entry.key)).count) << entry.key;
    EXPECT_EQ(entry.stats.median, timer.get_time_stats(Key(entry.key)).median) << entry.key;
  }
}

TEST_F(RunTest, ExplicitSummaryReplacesTheStreamsEntries) {
  RunPtr run = start(options());
  TimerOptions timer_options;
  timer_options.warmup = 1;
  Timer timer(timer_options);
  run->attach(timer);
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  run->add_summary(timer.summary());
  ASSERT_TRUE(run->end().ok());
  absl::StatusOr<Summary> summary = open_run(run->dir()).read_summary(0);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->entries.size(), 1u);
  EXPECT_EQ(summary->entries[0].stats.count, 2u);  // the timer's own, warm-up excluded
  EXPECT_EQ(summary->entries[0].stats.warmup_excluded, 1u);
}

TEST_F(RunTest, RejectsWhatMlflowWouldRejectAndRecordsNothing) {
  RunPtr run = start(options());
  const std::string long_key(251, 'k');
  for (const std::string& key :
       {std::string(), long_key, std::string("a*b"), std::string("x\ny")}) {
    absl::Status status = run->log_metric(key, 1.0);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << key;
    EXPECT_TRUE(absl::IsInvalidArgument(run->log_param(key, "v"))) << key;
    EXPECT_TRUE(absl::IsInvalidArgument(run->set_tag(key, "v"))) << key;
  }
  EXPECT_THAT(std::string(run->log_metric("a*b", 1.0).message()), HasSubstr("a*b"));
  absl::Status too_long = run->log_param("notes", std::string(6001, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(too_long));
  EXPECT_THAT(std::string(too_long.message()), HasSubstr("notes"));
  EXPECT_THAT(std::string(too_long.message()), HasSubstr("6000"));
  EXPECT_TRUE(run->log_param("notes", std::string(6000, 'x')).ok());
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    absl::Status status = run->log_metric("loss", bad);
    EXPECT_TRUE(absl::IsInvalidArgument(status));
    EXPECT_THAT(std::string(status.message()), HasSubstr("loss"));
  }
  ASSERT_TRUE(run->end().ok());

  RunReader reader = open_run(run->dir());
  EXPECT_EQ(reader.info().params.size(), 1u);
  EXPECT_TRUE(reader.info().tags.empty());
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(0);
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(metrics->rows.empty());

  RunOptions bad = options();
  bad.params = {{"bad key!", "1"}};
  EXPECT_TRUE(absl::IsInvalidArgument(trainscope::Run::Start(bad).status()));
}

TEST_F(RunTest, ParamsAreWriteOnce) {
  RunPtr run = start(options());
  ASSERT_TRUE(run->log_param("lr", "0.1").ok());
  EXPECT_TRUE(run->log_param("lr", "0.1").ok());  // the same value again is fine
  absl::Status status = run->log_param("lr", "0.2");
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(std::string(status.message()), HasSubstr("lr"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("0.1"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("0.2"));
  ASSERT_TRUE(run->set_tag("stage", "a").ok());
  ASSERT_TRUE(run->set_tag("stage", "b").ok());  // tags may change
  ASSERT_TRUE(run->end().ok());
  RunReader reader = open_run(run->dir());
  EXPECT_EQ(reader.info().params.at("lr"), "0.1");
  EXPECT_EQ(reader.info().tags.at("stage"), "b");
}

TEST_F(RunTest, RanksAttachThroughTheEnvironment) {
  const fs::path shared = root_ / "job";
  ::setenv("TRAINSCOPE_RUN_DIR", shared.c_str(), 1);
  ::setenv("WORLD_SIZE", "2", 1);
  std::string id;
  for (int rank : {0, 1}) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    RunOptions o = options();
    o.params = {{"world", "2"}};
    RunPtr run = start(o);
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(run->dir(), shared.string());
    EXPECT_EQ(run->rank().rank, static_cast<std::uint32_t>(rank));
    if (rank == 0) id = run->info().id;
    EXPECT_EQ(run->info().id, id);  // rank 1 attached to rank 0's run
    ASSERT_TRUE(run->log_metric("loss", rank).ok());
    Timer timer;
    run->attach(timer);
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
    ASSERT_TRUE(run->end().ok());
    // An attached run leaves the environment to whoever set it.
    EXPECT_NE(std::getenv("TRAINSCOPE_RUN_DIR"), nullptr);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
  RunReader reader = open_run(shared.string());
  EXPECT_EQ(reader.info().id, id);
  EXPECT_EQ(reader.info().status, RunStatus::kFinished);
  ASSERT_EQ(reader.ranks().size(), 2u);
  for (std::uint32_t rank : {0u, 1u}) {
    EXPECT_EQ(reader.ranks()[rank].rank.rank, rank);
    EXPECT_EQ(reader.ranks()[rank].rank.local_rank, rank);
    EXPECT_EQ(reader.ranks()[rank].rank.world_size, 2u);
    absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(rank);
    ASSERT_TRUE(metrics.ok());
    ASSERT_EQ(metrics->rows.size(), 1u);
    EXPECT_EQ(metrics->rows[0].rank, rank);
    EXPECT_EQ(metrics->rows[0].value, rank);
    absl::StatusOr<Chunk<RegionRow>> regions = reader.read_regions(rank);
    ASSERT_TRUE(regions.ok());
    ASSERT_EQ(regions->rows.size(), 1u);
    EXPECT_EQ(regions->rows[0].rank, rank);
  }
}

TEST_F(RunTest, AConflictingParamFromAnotherRankIsAnError) {
  ::setenv("TRAINSCOPE_RUN_DIR", (root_ / "job").c_str(), 1);
  ::setenv("RANK", "0", 1);
  RunOptions o = options();
  o.params = {{"seed", "1"}};
  ASSERT_TRUE(start(o)->end().ok());
  ::setenv("RANK", "1", 1);
  o.params = {{"seed", "2"}};
  absl::StatusOr<RunPtr> second = trainscope::Run::Start(o);
  EXPECT_TRUE(absl::IsInvalidArgument(second.status()));
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("seed"));
}

TEST_F(RunTest, RankComesFromTheLauncher) {
  absl::StatusOr<RankInfo> rank = rank_from_environment();
  ASSERT_TRUE(rank.ok());
  EXPECT_EQ(rank->rank, 0u);
  EXPECT_EQ(rank->world_size, 1u);
  ::setenv("SLURM_PROCID", "3", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  rank = rank_from_environment();
  ASSERT_TRUE(rank.ok());
  EXPECT_EQ(rank->rank, 3u);
  EXPECT_EQ(rank->local_rank, 1u);
  EXPECT_EQ(rank->world_size, 8u);
  ::setenv("RANK", "x1", 1);  // torchrun's variables come first
  EXPECT_THAT(std::string(rank_from_environment().status().message()), HasSubstr("RANK"));
  ::setenv("RANK", "8", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  EXPECT_FALSE(rank_from_environment().ok());
  for (const char* v : {"SLURM_LOCALID", "SLURM_NTASKS"}) ::unsetenv(v);
}

TEST_F(RunTest, UnusableRootIsAClearError) {
  // A file where a directory should be: fails even for root, unlike permissions.
  std::ofstream(root_ / "file") << "x";
  RunOptions o = options();
  o.root = (root_ / "file" / "runs").string();
  absl::StatusOr<RunPtr> run = trainscope::Run::Start(o);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("file/runs"));
}

TEST_F(RunTest, StatusStrings) {
  for (RunStatus s :
       {RunStatus::kRunning, RunStatus::kFinished, RunStatus::kFailed, RunStatus::kKilled}) {
    absl::StatusOr<RunStatus> parsed = parse_run_status(run_status_name(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(parse_run_status("DONE").ok());
}

}  // namespace
}  // namespace trainscope
