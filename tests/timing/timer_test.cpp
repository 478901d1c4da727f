#include "trainscope/timing/timer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <thread>

#include "support/temp_dir.hpp"

namespace trainscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void spin_for(std::chrono::microseconds us) {
  const auto until = std::chrono::steady_clock::now() + us;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(TimerTest, RecordsOneSamplePerRegionInSeconds) {
  Timer timer;
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::BATCH);
    spin_for(std::chrono::microseconds(200));
    timer.end(TimeType::BATCH);
  }
  const std::vector<double> times = timer.get_time(TimeType::BATCH);
  ASSERT_EQ(times.size(), 3u);
  for (double t : times) {
    EXPECT_GE(t, 200e-6);
    EXPECT_LT(t, 1.0);
  }
  const TimeStats stats = timer.get_time_stats(TimeType::BATCH);
  EXPECT_EQ(stats.count, 3u);
  EXPECT_DOUBLE_EQ(stats.min, *std::min_element(times.begin(), times.end()));
  EXPECT_DOUBLE_EQ(stats.max, *std::max_element(times.begin(), times.end()));
  EXPECT_NEAR(stats.total, times[0] + times[1] + times[2], 1e-12);
}

TEST(TimerTest, CancelClosesARegionWithoutRecordingIt) {
  Timer timer;
  timer.start(TimeType::IO);
  timer.cancel(TimeType::IO);
  EXPECT_EQ(timer.get_time_stats(TimeType::IO).count, 0u);
  EXPECT_TRUE(timer.keys().empty());
  // The key is closed: it starts again, and cancelling it twice is end()'s error.
  timer.start(TimeType::IO);
  timer.end(TimeType::IO);
  EXPECT_EQ(timer.get_time_stats(TimeType::IO).count, 1u);
  const absl::Status again = timer.try_cancel(TimeType::IO);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("IO"), std::string_view::npos) << again;
  EXPECT_EQ(timer.get_time_stats(TimeType::IO).count, 1u);
}

TEST(TimerTest, DifferentKeysMayOverlapAndNest) {
  Timer timer;
  timer.start(TimeType::EPOCH);
  timer.start(TimeType::BATCH);
  timer.start(TimeType::IO);
  timer.end(TimeType::BATCH);  // overlaps IO without nesting
  timer.end(TimeType::IO);
  timer.end(TimeType::EPOCH);
  EXPECT_EQ(timer.get_time_stats(TimeType::EPOCH).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::IO).count, 1u);
  EXPECT_GE(timer.get_time(TimeType::EPOCH)[0], timer.get_time(TimeType::BATCH)[0]);
}

TEST(TimerTest, StartingAnOpenKeyFailsNamingItAndChangesNothing) {
  Timer timer;
  timer.start(TimeType::BATCH);
  absl::Status status = timer.try_start(TimeType::BATCH);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("Detected nesting for timing region type BATCH"));
  try {
    timer.start(TimeType::BATCH);
    FAIL() << "expected TimerError";
  } catch (const TimerError& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(e.what(), HasSubstr("BATCH"));
  }
  // The original region is still open and still ends normally.
  timer.end(TimeType::BATCH);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1u);
}

TEST(TimerTest, EndWithoutStartFailsNamingTheKeyAndTimerStaysUsable) {
  Timer timer;
  absl::Status status = timer.try_end(TimeType::FORWARD);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("Unbalanced end for timing region type FORWARD"));
  timer.start(TimeType::FORWARD);
  timer.end(TimeType::FORWARD);
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD).count, 1u);
  EXPECT_EQ(timer.try_end(TimeType::FORWARD).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD).count, 1u);
}

TEST(TimerTest, AllIsRejectedAsInvalidArgument) {
  Timer timer;
  EXPECT_EQ(timer.try_start(TimeType::ALL).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(timer.try_end(TimeType::ALL).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(timer.try_start(TimeType::ALL).message()), HasSubstr("ALL"));
  EXPECT_TRUE(timer.keys().empty());
}

TEST(TimerTest, UnknownKeyIdIsRejected) {
  Timer timer;
  const Key bogus = Key::FromId(key_count() + 1000);
  EXPECT_EQ(timer.try_start(bogus).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(timer.try_start(Key::FromId(0)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TimerTest, NamedKeysAreInternedOnceAndPrintByName) {
  const Key a("data_aug");
  const Key b(std::string("data_aug"));
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.is_builtin());
  EXPECT_EQ(a.name(), "data_aug");
  EXPECT_EQ(Key("EPOCH"), Key(TimeType::EPOCH));
  Timer timer;
  timer.start("data_aug");
  timer.end(a);
  EXPECT_EQ(timer.get_time_stats("data_aug").count, 1u);
  EXPECT_THAT(timer.format_all_time_stats(), HasSubstr("data_aug\nmin: "));
}

TEST(TimerTest, KeyInternedAfterTimerConstructionWorks) {
  Timer timer;
  const Key late("interned_after_the_timer_was_built");
  timer.start(late);
  timer.end(late);
  EXPECT_EQ(timer.get_time_stats(late).count, 1u);
}

TEST(TimerTest, EmptyKeyGivesCountZeroAndNaNWithoutThrowing) {
  Timer timer;
  const TimeStats stats = timer.get_time_stats(TimeType::COMM);
  EXPECT_EQ(stats.count, 0u);
  EXPECT_TRUE(std::isnan(stats.mean));
  EXPECT_TRUE(std::isnan(stats.median));
  EXPECT_TRUE(std::isnan(stats.min));
  EXPECT_TRUE(timer.get_time(TimeType::COMM).empty());
}

TEST(TimerTest, StatsCanBeReadWhileRegionsAreOpen) {
  Timer timer;
  timer.start(TimeType::BATCH);
  timer.end(TimeType::BATCH);
  timer.start(TimeType::BATCH);  // open
  timer.start(TimeType::EPOCH);  // open, never completed
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1u);
  EXPECT_EQ(timer.get_time(TimeType::BATCH).size(), 1u);
  EXPECT_EQ(timer.format_all_time_stats().find("EPOCH"), std::string::npos);
  EXPECT_THAT(timer.format_all_time_stats(), HasSubstr("BATCH"));
}

TEST(TimerTest, GetTimeReturnsACopy) {
  Timer timer;
  timer.start(TimeType::IO);
  timer.end(TimeType::IO);
  std::vector<double> times = timer.get_time(TimeType::IO);
  times.push_back(42.0);
  EXPECT_EQ(timer.get_time(TimeType::IO).size(), 1u);
}

TEST(TimerTest, KeysComeInFirstCompletedOrder) {
  Timer timer;
  timer.start(TimeType::EPOCH);
  timer.start(TimeType::BATCH);
  timer.end(TimeType::BATCH);
  timer.start(TimeType::IO);
  timer.end(TimeType::IO);
  timer.end(TimeType::EPOCH);
  const std::vector<Key> keys = timer.keys();
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], Key(TimeType::BATCH));
  EXPECT_EQ(keys[1], Key(TimeType::IO));
  EXPECT_EQ(keys[2], Key(TimeType::EPOCH));
}

TEST(TimerTest, WarmupExcludesTheFirstSamplesOfEachKey) {
  TimerOptions options;
  options.warmup = 2;
  Timer timer(options);
  for (int i = 0; i < 5; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  timer.start(TimeType::EPOCH);
  timer.end(TimeType::EPOCH);
  const TimeStats batch = timer.get_time_stats(TimeType::BATCH);
  EXPECT_EQ(batch.count, 3u);
  EXPECT_EQ(batch.warmup_excluded, 2u);
  EXPECT_EQ(timer.get_time(TimeType::BATCH).size(), 3u);
  const TimeStats epoch = timer.get_time_stats(TimeType::EPOCH);
  EXPECT_EQ(epoch.count, 0u);
  EXPECT_EQ(epoch.warmup_excluded, 1u);
}

TEST(TimerTest, PastTheExactCapQuantilesComeFromABoundedSketch) {
  TimerOptions options;
  options.exact_sample_cap = 1000;
  Timer timer(options);
  for (int i = 0; i < 5000; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  const TimeStats stats = timer.get_time_stats(TimeType::BATCH);
  EXPECT_EQ(stats.count, 5000u);
  EXPECT_TRUE(stats.approximate);
  EXPECT_LE(stats.min, stats.median);
  EXPECT_LE(stats.median, stats.max * 1.01);
  std::vector<double> out;
  const absl::Status status = timer.try_get_time(TimeType::BATCH, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("BATCH"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("exact-sample cap of 1000"));
}

TEST(TimerTest, ExactModeCostsAtMostEightBytesPerSamplePlusChunkPointers) {
  Timer timer(TimerOptions{});
  const std::size_t before = timer.memory_bytes();
  constexpr int kSamples = 200000;
  for (int i = 0; i < kSamples; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  const double per_sample = static_cast<double>(timer.memory_bytes() - before) / kSamples;
  EXPECT_LE(per_sample, 8.5);
  EXPECT_GE(per_sample, 8.0);
}

TEST(TimerTest, ResetDropsSamplesAndOpenRegions) {
  Timer timer;
  timer.start(TimeType::BATCH);
  timer.end(TimeType::BATCH);
  timer.start(TimeType::EPOCH);
  timer.reset();
  EXPECT_TRUE(timer.keys().empty());
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 0u);
  EXPECT_TRUE(timer.try_start(TimeType::EPOCH).ok());  // no longer open
}

TEST(TimerTest, ScopeEndsTheRegionWhenItLeavesScope) {
  Timer timer;
  {
    auto region = timer.scope(TimeType::FORWARD);
    EXPECT_EQ(timer.try_start(TimeType::FORWARD).code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(timer.get_time_stats(TimeType::FORWARD).count, 1u);
  EXPECT_THROW({ auto bad = timer.scope(TimeType::ALL); }, TimerError);
}

TEST(TimerTest, MergeAddsAnotherTimersCompletedRegions) {
  Timer a;
  Timer b;
  for (int i = 0; i < 3; ++i) {
    a.start(TimeType::BATCH);
    a.end(TimeType::BATCH);
  }
  b.start(TimeType::BATCH);
  b.end(TimeType::BATCH);
  b.start(TimeType::IO);
  b.end(TimeType::IO);
  b.start(TimeType::EPOCH);  // open: not merged
  a.merge(b);
  EXPECT_EQ(a.get_time_stats(TimeType::BATCH).count, 4u);
  EXPECT_EQ(a.get_time_stats(TimeType::IO).count, 1u);
  EXPECT_EQ(a.get_time_stats(TimeType::EPOCH).count, 0u);
  EXPECT_TRUE(a.try_start(TimeType::EPOCH).ok());
}

TEST(TimerTest, PrintsDeep500TextToAStream) {
  Timer timer;
  timer.start(TimeType::EPOCH);
  timer.end(TimeType::EPOCH);
  std::ostringstream out;
  timer.print_all_time_stats(out);
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("EPOCH\nmin: ", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr(" mean: "));
  EXPECT_THAT(text, HasSubstr(" stdev: 0.00000\n---\n"));
}

TEST(TimerTest, SaveRefusesAnExistingFileAndUnknownExtensions) {
  Timer timer;
  timer.start(TimeType::EPOCH);
  timer.end(TimeType::EPOCH);
  const trainscope::testing::TempDir tmp;
  const std::string path = tmp.file("timer_test_save.txt");
  ASSERT_TRUE(timer.try_save_all_time_stats(path).ok());
  const absl::Status again = timer.try_save_all_time_stats(path);
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.message()), HasSubstr(path));
  const absl::Status bad = timer.try_save_all_time_stats(tmp.file("stats.xlsx"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr(".xlsx"));
  EXPECT_EQ(timer.get_time_stats(TimeType::EPOCH).count, 1u);  // nothing lost
}

}  // namespace
}  // namespace trainscope
