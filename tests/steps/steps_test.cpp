// The steps room on run directories written by hand: periods, the one
// data-wait definition (overlap with the period, the step thread's rows),
// per-step key sums, the job's CPU summed over a host's process trees, and
// an incremental read that equals reading at once.
#include "trainscope/steps/steps.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::steps {
namespace {

using testing::RankJson;
using testing::RunJson;
using testing::TempDir;
using testing::write_file;
using testing::write_run_dir;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // ns
constexpr std::int64_t kMs = 1'000'000;

std::string row(const std::string& key, std::int64_t start, std::int64_t ns, std::uint32_t rank = 0,
                std::uint32_t thread = 0, const char* device = "CPU") {
  return key + "," + device + "," + std::to_string(rank) + "," + std::to_string(thread) + "," +
         std::to_string(start) + "," + std::to_string(ns) + ",0,0\n";
}

RankJson finished(std::uint32_t rank = 0, std::uint32_t world = 1) {
  RankJson r;
  r.rank = rank;
  r.world_size = world;
  r.status = "FINISHED";
  r.end_time_ms = 2;
  r.heartbeat_ms = 2;
  return r;
}

RunSteps read(const std::string& dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<RunSteps> steps = read_steps(*reader);
  EXPECT_TRUE(steps.ok()) << steps.status();
  return steps.ok() ? *steps : RunSteps{};
}

std::uint32_t key_index(const RunSteps& s, const std::string& key) {
  for (std::uint32_t i = 0; i < s.keys.size(); ++i)
    if (s.keys[i].first == key) return i;
  return 0xFFFFFFFFu;
}

// BATCH rows of 10 ms every 12 ms; the wait for the next batch (2 ms) lies
// between two BATCH rows: in the period of the step before it. The wait for
// the first batch is before any step; a wait on another thread (a prefetcher)
// is no wait of the loop.
TEST(Steps, DataWaitIsTheStepThreadsWaitInsideThePeriod) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows = row("IO", kT0 - 2 * kMs, 2 * kMs);  // the first batch's
  for (int i = 0; i < 4; ++i) {
    const std::int64_t start = kT0 + i * 12 * kMs;
    rows += row("IO", start + 1 * kMs, 5 * kMs, 0, /*thread=*/7);  // another thread's
    rows += row("BATCH", start, 10 * kMs);
    if (i < 3) rows += row("IO", start + 10 * kMs, 2 * kMs);
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  const RunSteps s = read(dir.string());
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankSteps& r = s.ranks[0];
  EXPECT_EQ(r.step_key, "BATCH");
  ASSERT_EQ(r.history.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(r.history[i].period_s, 0.012, 1e-12) << i;
    EXPECT_NEAR(r.history[i].data_wait_s(), 0.002, 1e-12) << i;
  }
  // The last step: its own duration, and no wait after it.
  EXPECT_NEAR(r.history[3].period_s, 0.010, 1e-12);
  EXPECT_NEAR(r.history[3].data_wait_s(), 0.0, 1e-12);
  EXPECT_NEAR(with_rest(r.history[0]).cpu_s[static_cast<std::size_t>(Phase::kRest)], 0.010, 1e-12);
}

// The step thread's run-queue wait (a step row's cpu_wait_ns, read by a timer
// attached to the run): each step's own; a run without the column: unknown.
TEST(Steps, CpuWaitIsTheStepRowsOwn) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t start = kT0 + i * 12 * kMs;
    std::string r = row("BATCH", start, 10 * kMs);
    r.pop_back();  // gpu_start_ns, stream, cpu_wait_ns
    rows += r + ",,," + std::to_string((i + 1) * kMs) + "\n";
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  const RunSteps s = read(dir.string());
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankSteps& r = s.ranks[0];
  EXPECT_TRUE(r.cpu_wait_measured);
  ASSERT_EQ(r.history.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.history[i].cpu_wait_s, (i + 1) * 1e-3, 1e-12);
  // Not a phase: rest is the period less the measured phases.
  EXPECT_NEAR(with_rest(r.history[0]).cpu_s[static_cast<std::size_t>(Phase::kRest)], 0.012, 1e-12);
  const auto old_dir = write_run_dir(tmp.file("old"), RunJson{}, {finished()});
  write_file(old_dir / "regions-0.csv", row("BATCH", kT0, 10 * kMs), /*append=*/true);
  EXPECT_FALSE(read(old_dir.string()).ranks.at(0).cpu_wait_measured);
}

// Communication (issue 39): comm is every collective's time (COMM/ rows,
// overlapping backward or not), comm_exposed the part the step waits for (the
// loop's COMM rows and DDP's COMM_EXPOSED), sync the SYNC rows; rest counts
// only the phases outside each other (a bucket's all-reduce inside BACKWARD
// is not subtracted twice). A step without COMM/ rows takes its COMM rows as
// comm (communication timed by hand).
TEST(Steps, CommIsEveryCollectiveAndCommExposedWhatTheStepWaitsFor) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 2; ++i) {
    const std::int64_t start = kT0 + i * 20 * kMs;
    rows += row("BATCH", start, 20 * kMs);
    rows += row("BACKWARD", start + 1 * kMs, 10 * kMs);
    rows += row("COMM/all_reduce/world", start + 2 * kMs, 6 * kMs, 0, 0);  // a bucket
    rows += row("COMM/all_reduce/world", start + 5 * kMs, 6 * kMs, 0, 0);  // the last one
    rows += row("COMM_EXPOSED", start + 5 * kMs, 6 * kMs);
    rows += row("SYNC", start + 12 * kMs, 1 * kMs);
    if (i == 0) {
      rows += row("COMM", start + 14 * kMs, 3 * kMs);  // the loop's all_reduce
      rows += row("COMM/all_reduce/world", start + 14 * kMs, 3 * kMs);
    }
  }
  rows += row("BATCH", kT0 + 40 * kMs, 20 * kMs);
  rows += row("COMM", kT0 + 41 * kMs, 4 * kMs);  // timed by hand: no COMM/ row
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  const RunSteps s = read(dir.string());
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankSteps& r = s.ranks[0];
  ASSERT_EQ(r.history.size(), 3u);
  const auto at = [](const Step& step, Phase p) { return step.cpu_s[static_cast<std::size_t>(p)]; };
  EXPECT_NEAR(at(r.history[0], Phase::kComm), 0.015, 1e-12);
  EXPECT_NEAR(at(r.history[0], Phase::kCommExposed), 0.009, 1e-12);
  EXPECT_NEAR(at(r.history[0], Phase::kSync), 0.001, 1e-12);
  // 20 ms - backward 10 - sync 1 - the loop's COMM 3.
  EXPECT_NEAR(with_rest(r.history[0]).cpu_s[static_cast<std::size_t>(Phase::kRest)], 0.006, 1e-12);
  EXPECT_NEAR(at(r.history[1], Phase::kComm), 0.012, 1e-12);
  EXPECT_NEAR(at(r.history[1], Phase::kCommExposed), 0.006, 1e-12);
  EXPECT_NEAR(with_rest(r.history[1]).cpu_s[static_cast<std::size_t>(Phase::kRest)], 0.009, 1e-12);
  EXPECT_NEAR(at(r.history[2], Phase::kComm), 0.004, 1e-12);
  EXPECT_NEAR(at(r.history[2], Phase::kCommExposed), 0.004, 1e-12);
  EXPECT_TRUE(r.cpu_measured[static_cast<std::size_t>(Phase::kCommExposed)]);
  // The collective's rows, kept in order for the arrival of each.
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(s.keys[r.collectives[0].key].first, "COMM/all_reduce/world");
  EXPECT_EQ(r.collectives[0].count, 5u);
  EXPECT_NEAR(r.collectives[0].seconds, 0.027, 1e-12);
  ASSERT_EQ(r.collectives[0].rows.size(), 5u);
  EXPECT_EQ(r.collectives[0].rows[1].first, kT0 + 5 * kMs);
  EXPECT_EQ(parse_phase("comm_exposed").value(), Phase::kCommExposed);
  EXPECT_EQ(phase_name(Phase::kSync), "sync");
}

// --auto=layers times a layer's backward on one step in K (the run's tag): only
// layer/<path>/backward keys are sampled, and a tag that is no count reads as every step.
TEST(Steps, OnlyLayerBackwardKeysAreSampled) {
  EXPECT_EQ(sampled_every("layer/body.0/backward", "8"), 8u);
  EXPECT_EQ(sampled_every("layer/body.0/backward", ""), 1u);
  EXPECT_EQ(sampled_every("layer/body.0", "8"), 1u);
  EXPECT_EQ(sampled_every("eval/layer/body.0", "8"), 1u);
  EXPECT_EQ(sampled_every("BACKWARD", "8"), 1u);
  EXPECT_EQ(sampled_every("layer//backward", "8"), 1u);
  EXPECT_EQ(sampled_every("layer/x/backward", "0"), 1u);
  EXPECT_EQ(sampled_every("layer/x/backward", "eight"), 1u);
  EXPECT_EQ(sampled_every("layer/x/backward", "99999999999"), 1u);
}

// A wait that starts in one step's period and ends in the next counts in
// each by its overlap.
// GPU busy (issue 39): the device time of the step's GPU-timed compute rows
// (h2d, forward, backward, optimizer), a GPU row collected after the next step
// ended (written late) too; a GPU BATCH row, a GPU row of no phase and the CPU
// rows (launch times) are no busy time.
TEST(Steps, GpuBusyIsTheDeviceTimeOfTheGpuTimedComputeRows) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t start = kT0 + i * 20 * kMs;
    rows += row("FORWARD", start + 1 * kMs, 1 * kMs);
    rows += row("BACKWARD", start + 3 * kMs, 2 * kMs);
    rows += row("BATCH", start, 19 * kMs);
    rows += row("BATCH", start, 18 * kMs, 0, 0, "GPU");
    rows += row("clip", start + 6 * kMs, 1 * kMs, 0, 0, "GPU");
    rows += row("FORWARD", start + 1 * kMs, 4 * kMs, 0, 0, "GPU");
    if (i > 0) {  // the previous step's backward, collected late
      rows += row("BACKWARD", start - 17 * kMs, 9 * kMs, 0, 0, "GPU");
    }
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  const RunSteps s = read(dir.string());
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankSteps& r = s.ranks[0];
  ASSERT_EQ(r.history.size(), 3u);
  EXPECT_NEAR(r.history[0].gpu_busy_s, 0.013, 1e-12);
  EXPECT_NEAR(r.history[1].gpu_busy_s, 0.013, 1e-12);
  EXPECT_NEAR(r.history[2].gpu_busy_s, 0.004, 1e-12);  // its backward never collected
}

TEST(Steps, AWaitAcrossTwoPeriodsCountsInEachByItsOverlap) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  rows += row("STEP", kT0, 10 * kMs);
  rows += row("IO", kT0 + 8 * kMs, 4 * kMs);  // 2 ms in step 0, 2 ms in step 1
  rows += row("STEP", kT0 + 10 * kMs, 10 * kMs);
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok());
  KeyMap keys = default_key_map();
  ASSERT_TRUE(keys.map("step=STEP").ok());
  absl::StatusOr<RunSteps> s = read_steps(*reader, keys);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->ranks.at(0).history.size(), 2u);
  EXPECT_NEAR(s->ranks[0].history[0].data_wait_s(), 0.002, 1e-12);
  EXPECT_NEAR(s->ranks[0].history[1].data_wait_s(), 0.002, 1e-12);
}

// FORWARD timed by the model and by the loss module: one value per step.
TEST(Steps, KeySumsAreOneValuePerStep) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows = row("setup", kT0 - 5 * kMs, 3 * kMs);
  for (int i = 0; i < 3; ++i) {
    const std::int64_t start = kT0 + i * 10 * kMs;
    rows += row("FORWARD", start + 1 * kMs, 4 * kMs);  // the model
    rows += row("FORWARD", start + 5 * kMs, 1 * kMs);  // the loss
    rows += row("BATCH", start, 10 * kMs);
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  const RunSteps s = read(dir.string());
  const RankSteps& r = s.ranks.at(0);
  ASSERT_EQ(r.key_sums.size(), 3u);
  const std::uint32_t forward = key_index(s, "FORWARD");
  for (const std::vector<KeySum>& step : r.key_sums) {
    bool found = false;
    for (const KeySum& k : step) {
      if (k.key != forward) continue;
      found = true;
      EXPECT_NEAR(k.seconds, 0.005, 1e-12);
      EXPECT_EQ(k.rows, 2u);
    }
    EXPECT_TRUE(found);
  }
  EXPECT_NEAR(r.history[0].cpu_s[static_cast<std::size_t>(Phase::kForward)], 0.005, 1e-12);
  // The row before the first step is in no step: listed alone.
  ASSERT_EQ(r.unstepped.size(), 1u);
  EXPECT_EQ(r.unstepped[0].key, key_index(s, "setup"));
}

// Two ranks on one host, each under its own launcher: their process trees'
// CPU readings (at their own times) add up; the host's cores come from the
// environment record; other processes' CPU is the rest of the host's busy.
TEST(Steps, TheJobsCpuIsTheSumOverTheHostsProcessTrees) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished(0, 2), finished(1, 2)});
  std::string host = testing::kMetricsHeader;
  for (int i = 0; i < 4; ++i) {
    const std::string t = std::to_string(1000 + i * 1000);
    const std::string t2 = std::to_string(1000 + i * 1000 + 300);  // the second launcher's tick
    host += "system/cpu.util_pct,50," + std::to_string(i) + "," + t + ",\n";
    host += "system/cpu.0.util_pct,50," + std::to_string(i) + "," + t + ",\n";
    host += "system/proc.cpu_pct,100," + std::to_string(i) + "," + t + ",0\n";
    host += "system/proc.cpu_pct,60," + std::to_string(i) + "," + t2 + ",1\n";
  }
  write_file(dir / "host-h.csv", host);
  write_file(dir / "environment.json", R"({"cores": 8})");
  const RunSteps s = read(dir.string());
  ASSERT_EQ(s.hosts.size(), 1u);
  const HostLoad& h = s.hosts[0];
  EXPECT_EQ(h.cores, 8);
  ASSERT_EQ(h.samples.size(), 4u);
  // From the second sample on both trees were sampled around it: 160% of one core of 8.
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_NEAR(h.samples[i].job_cpu_pct, 20.0, 1e-9) << i;
    EXPECT_NEAR(h.samples[i].other_cpu_pct(), 30.0, 1e-9) << i;
  }
  // Each rank's own tree.
  EXPECT_EQ(s.ranks.at(1).cpu_pct.size(), 4u);
}

// Read in pieces (a follower's polls) or at once: the same steps.
TEST(Steps, AnIncrementalReadEqualsReadingAtOnce) {
  TempDir tmp;
  RankJson running;  // alive until the second poll
  running.heartbeat_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {running});
  std::string rows;
  for (int i = 0; i < 30; ++i) {
    const std::int64_t start = kT0 + i * 10 * kMs;
    rows += row("IO", start, 3 * kMs);
    rows += row("FORWARD", start + 3 * kMs, 4 * kMs);
    rows += row("BATCH", start, 9 * kMs);
  }
  const std::size_t half = rows.size() / 2 + 7;  // cut inside a line
  write_file(dir / "regions-0.csv", rows.substr(0, half), /*append=*/true);
  StepOptions options;
  options.window_steps = 5;
  absl::StatusOr<StepReader> reader = StepReader::Open(dir.string(), options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(reader->poll().ok());
  ASSERT_EQ(reader->ranks().size(), 1u);
  EXPECT_TRUE(reader->ranks()[0]->open);
  write_file(dir / "regions-0.csv", rows.substr(half), /*append=*/true);
  write_file(dir / "rank-0.json", finished().text());
  ASSERT_TRUE(reader->poll().ok());
  const RunSteps once = read(dir.string());
  ASSERT_EQ(reader->ranks().size(), 1u);
  const RankSteps& a = *reader->ranks()[0];
  const RankSteps& b = once.ranks.at(0);
  ASSERT_EQ(a.history.size(), 30u);
  ASSERT_EQ(b.history.size(), 30u);
  EXPECT_EQ(a.window.size(), 5u);
  for (std::size_t i = 0; i < 30; ++i) {
    EXPECT_EQ(a.history[i].period_s, b.history[i].period_s) << i;
    EXPECT_EQ(a.history[i].cpu_s, b.history[i].cpu_s) << i;
  }
  EXPECT_NEAR(b.history[3].data_wait_s(), 0.003, 1e-12);
}

}  // namespace
}  // namespace trainscope::steps
