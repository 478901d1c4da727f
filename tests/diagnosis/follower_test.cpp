// The follower on run directories written by hand: steps and phases from
// BATCH rows and from the timed loader's rows, incremental polls that leave a
// cut last line for later, late GPU rows, host readings, a run that ends
// while followed, and errors naming the run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/ledger.hpp"

namespace trainscope::diagnosis {
namespace {

using testing::RankJson;
using testing::RunJson;
using testing::TempDir;
using testing::write_file;
using testing::write_run_dir;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // ns
constexpr std::int64_t kMs = 1'000'000;

std::string row(const std::string& key, std::int64_t start, std::int64_t ns, std::uint32_t rank = 0,
                const char* device = "CPU") {
  return key + "," + device + "," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
         std::to_string(ns) + ",0,0\n";
}

// A step of 10 ms: IO 4 ms, FORWARD 3 ms, BACKWARD 2 ms, 1 ms untimed; BATCH
// encloses it (rows in completion order).
std::string step_rows(std::int64_t start, std::uint32_t rank = 0, std::int64_t extra_forward = 0) {
  std::string out;
  out += row("IO", start, 4 * kMs, rank);
  out += row("FORWARD", start + 4 * kMs, 3 * kMs + extra_forward, rank);
  out += row("BACKWARD", start + 7 * kMs + extra_forward, 2 * kMs, rank);
  out += row("BATCH", start, 10 * kMs + extra_forward, rank);
  return out;
}

RankJson finished(std::uint32_t rank = 0) {
  RankJson r;
  r.rank = rank;
  r.status = "FINISHED";
  r.end_time_ms = 2;
  r.heartbeat_ms = 2;
  return r;
}

TEST(Follower, PhasesAndSharesFromBatchRows) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 50; ++i) rows += step_rows(kT0 + i * 10 * kMs);
  write_file(dir / "regions-0.csv", rows, /*append=*/true);

  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->status, RunStatus::kFinished);
  ASSERT_EQ(d->ranks.size(), 1u);
  EXPECT_EQ(d->ranks[0].steps, 50u);
  // 5 warm-up steps dropped.
  EXPECT_EQ(d->run.steps, 45u);
  EXPECT_EQ(d->run.warmup, 5u);
  EXPECT_NEAR(d->run.step_s.value, 0.010, 1e-6);
  const Label* input = d->run.find(LabelName::kInputBound);
  ASSERT_NE(input, nullptr);
  EXPECT_NEAR(input->value.value, 0.4, 1e-6);
  for (const PhaseRow& p : d->run.phases) {
    if (p.phase == Phase::kForward) EXPECT_NEAR(p.median_s, 0.003, 1e-9);
    if (p.phase == Phase::kRest) EXPECT_NEAR(p.median_s, 0.001, 1e-9);
  }
  // Keys: BATCH, IO, FORWARD, BACKWARD with their run counts.
  ASSERT_EQ(d->keys.size(), 4u);
  EXPECT_EQ(d->keys[0].key, "BATCH");
  EXPECT_EQ(d->keys[0].count, 50u);
  EXPECT_NEAR(d->keys[0].run_median_s, 0.010, 1e-9);
}

TEST(Follower, AnAutoRunSaysWhatItFoundAndTheLossIsForward) {
  // Issue 37: --auto's LOSS rows (a criterion module) are in the forward phase,
  // not a second FORWARD; the run's tags say what ended a step and which key
  // mixes two modules, and the texts show both and the warm-up dropped.
  TempDir tmp;
  RunJson run;
  run.tags = {{"trainscope.auto", "on"},
              {"trainscope.auto.steps", "backward"},
              {"trainscope.auto.found",
               "steps from backward (no training DataLoader, no "
               "torch.optim optimizer)"},
              {"trainscope.auto.callers.FORWARD", "Net, Head"}};
  const auto dir = write_run_dir(tmp.file("run"), run, {finished()});
  std::string rows;
  for (int i = 0; i < 30; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += row("FORWARD", s, 3 * kMs) + row("LOSS", s + 3 * kMs, 1 * kMs) +
            row("BACKWARD", s + 4 * kMs, 5 * kMs) + row("BATCH", s, 10 * kMs);
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  for (const PhaseRow& p : d->run.phases) {
    if (p.phase == Phase::kForward) EXPECT_NEAR(p.median_s, 0.004, 1e-9);
    if (p.phase == Phase::kRest) EXPECT_NEAR(p.median_s, 0.001, 1e-9);
  }
  EXPECT_EQ(d->auto_found.mode, "on");
  EXPECT_EQ(d->auto_found.steps, "backward");
  const auto forward = std::find_if(d->keys.begin(), d->keys.end(),
                                    [](const KeyRow& k) { return k.key == "FORWARD"; });
  ASSERT_NE(forward, d->keys.end());
  EXPECT_EQ(forward->callers, "Net, Head");
  const std::string summary = format_run_summary(*d);
  EXPECT_THAT(summary, ::testing::HasSubstr("30 steps (5 warm-up steps dropped"));
  EXPECT_THAT(summary, ::testing::HasSubstr("--auto: steps from backward"));
  EXPECT_THAT(summary, ::testing::HasSubstr("(mixes Net, Head)"));
  EXPECT_THAT(format_diagnosis(*d), ::testing::HasSubstr("--auto: steps from backward"));
  // The document keeps both.
  absl::StatusOr<Diagnosis> back = parse_diagnosis(diagnosis_json(*d), "test");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->auto_found.found, d->auto_found.found);
  const auto again = std::find_if(back->keys.begin(), back->keys.end(),
                                  [](const KeyRow& k) { return k.key == "FORWARD"; });
  ASSERT_NE(again, back->keys.end());
  EXPECT_EQ(again->callers, "Net, Head");
}

TEST(Follower, TimedLoaderRowsMakeSteps) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::int64_t t = kT0;
  // 3 passes of 20 batches: 6 ms of compute, 4 ms waits.
  write_file(dir / "regions-0.csv",
             testing::timed_loader_rows(
                 3, 20, 6 * kMs, [](int, int) { return 4 * kMs; }, &t),
             /*append=*/true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->ranks[0].steps, 60u);
  const Label* input = d->run.find(LabelName::kInputBound);
  ASSERT_NE(input, nullptr);
  EXPECT_NEAR(input->value.value, 0.4, 0.01);
}

TEST(Follower, ReadsOnlyWhatWasAppendedAndLeavesACutLineForLater) {
  TempDir tmp;
  RankJson running;
  running.heartbeat_ms = 4'000'000'000'000;  // far future: not crashed
  running.host = "elsewhere";
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {running});
  std::string first;
  for (int i = 0; i < 20; ++i) first += step_rows(kT0 + i * 10 * kMs);
  const std::string cut = step_rows(kT0 + 20 * 10 * kMs);
  const std::string half = cut.substr(0, cut.size() - 5);
  write_file(dir / "regions-0.csv", first + half, /*append=*/true);

  absl::StatusOr<Follower> f = Follower::Open(dir.string());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->poll().ok());
  EXPECT_TRUE(f->in_progress());
  const std::uint64_t bytes = f->bytes_read();
  const std::string batch_line = cut.substr(cut.rfind("BATCH"));
  EXPECT_EQ(bytes, std::string(testing::kRegionsHeader).size() + first.size() + cut.size() -
                       batch_line.size());
  Diagnosis d = f->diagnose();
  EXPECT_EQ(d.status, RunStatus::kRunning);
  // 20 whole steps plus the rows of the cut one before its BATCH line; the
  // last BATCH is open (its period unknown).
  EXPECT_EQ(d.ranks[0].steps, 20u);

  // The rest of the cut line and 10 more steps.
  std::string more = cut.substr(cut.size() - 5);
  for (int i = 21; i < 31; ++i) more += step_rows(kT0 + i * 10 * kMs);
  write_file(dir / "regions-0.csv", more, /*append=*/true);
  ASSERT_TRUE(f->poll().ok());
  EXPECT_EQ(f->bytes_read(), std::filesystem::file_size(dir / "regions-0.csv"));
  d = f->diagnose();
  EXPECT_EQ(d.ranks[0].steps, 31u);
  EXPECT_EQ(d.run.steps, 25u);  // 30 closed steps, 5 of warm-up

  // Polling again reads nothing new.
  ASSERT_TRUE(f->poll().ok());
  EXPECT_EQ(f->bytes_read(), std::filesystem::file_size(dir / "regions-0.csv"));

  // The run ends: the open step closes with its own duration.
  write_file(dir / "rank-0.json", finished().text());
  ASSERT_TRUE(f->poll().ok());
  EXPECT_FALSE(f->in_progress());
  d = f->diagnose();
  EXPECT_EQ(d.status, RunStatus::kFinished);
  EXPECT_EQ(d.run.steps, 26u);
}

TEST(Follower, ARankThatEndedClosesItsLastStepWhileOthersRun) {
  TempDir tmp;
  RankJson running;
  running.rank = 1;
  running.host = "elsewhere";
  running.heartbeat_ms = 4'000'000'000'000;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished(0), running});
  std::string r0, r1;
  for (int i = 0; i < 20; ++i) {
    r0 += step_rows(kT0 + i * 10 * kMs, 0);
    r1 += step_rows(kT0 + i * 10 * kMs, 1);
  }
  write_file(dir / "regions-0.csv", r0, true);
  write_file(dir / "regions-1.csv", r1, true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->status, RunStatus::kRunning);
  ASSERT_EQ(d->ranks.size(), 2u);
  EXPECT_EQ(d->ranks[0].steps, 20u);  // all closed
  EXPECT_EQ(d->ranks[1].steps, 20u);  // 19 closed and the open one
  // Rank 0's 20 closed steps, less 5 of warm-up: its last step counts.
  EXPECT_EQ(d->run.steps, 15u);
}

TEST(Follower, WindowHoldsTheLastKSteps) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  // 100 steps without IO, then 40 input-bound ones.
  for (int i = 0; i < 100; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += row("FORWARD", s, 9 * kMs) + row("BATCH", s, 10 * kMs);
  }
  for (int i = 100; i < 140; ++i) rows += step_rows(kT0 + i * 10 * kMs);
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  FollowOptions options;
  options.window_steps = 30;
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string(), options);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->window.steps, 30u);
  EXPECT_NE(d->window.find(LabelName::kInputBound), nullptr);
  EXPECT_EQ(d->run.find(LabelName::kInputBound), nullptr);
}

// A run that appends faster than the read budget is sampled: a poll reads
// the newest rows that hold the window, skips the rest, and says so; the
// window is the one a full read gives, step numbers come from the BATCH rows,
// and a late GPU row of a skipped step joins no step read before the gap.
TEST(Follower, SampledReadingKeepsTheWindowExact) {
  TempDir tmp;
  RankJson running;
  running.heartbeat_ms = 4'000'000'000'000;  // far future: not crashed
  running.host = "elsewhere";
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {running});
  // Step i: IO 4 ms (5 ms from step 1,000 on), FORWARD 3 ms, BATCH 10 ms with its own number.
  const auto steps = [](int from, int to) {
    std::string out;
    for (int i = from; i < to; ++i) {
      const std::int64_t s = kT0 + i * 12 * kMs;
      const std::int64_t io = (i >= 1000 ? 5 : 4) * kMs;
      const std::string n = std::to_string(i);
      out += "IO,CPU,0,0," + std::to_string(s) + "," + std::to_string(io) + "," + n + ",0\n";
      out += "FORWARD,CPU,0,0," + std::to_string(s + io) + ",3000000," + n + ",0\n";
      if (i == 1290) {  // the GPU row of step 500, collected late
        out += "FORWARD,GPU,0,0," + std::to_string(kT0 + 500 * 12 * kMs) + ",3000000," + n + ",0\n";
      }
      out += "BATCH,CPU,0,0," + std::to_string(s) + ",10000000," + n + ",0\n";
    }
    return out;
  };
  write_file(dir / "regions-0.csv", steps(0, 300), /*append=*/true);
  FollowOptions options;
  options.window_steps = 50;
  options.read_budget_bytes_per_s = 64 * 1024;  // the first poll's second holds 300 steps
  absl::StatusOr<Follower> sampled = Follower::Open(dir.string(), options);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  ASSERT_TRUE(sampled->poll().ok());
  EXPECT_EQ(sampled->bytes_skipped(), 0u);
  EXPECT_EQ(sampled->diagnose().read_share, 1.0);
  options.read_budget_bytes_per_s = 0;
  absl::StatusOr<Follower> full = Follower::Open(dir.string(), options);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full->poll().ok());

  // 1,000 more steps (about 150 KB) before the next poll, which comes at once:
  // its budget (a twentieth of a second's) holds less than the window, so it
  // reads the window's 50 steps and a tenth more.
  write_file(dir / "regions-0.csv", steps(300, 1300), /*append=*/true);
  ASSERT_TRUE(sampled->poll().ok());
  ASSERT_TRUE(full->poll().ok());
  const Diagnosis ds = sampled->diagnose();
  const Diagnosis df = full->diagnose();
  EXPECT_GT(sampled->bytes_skipped(), 100'000u);
  EXPECT_EQ(full->bytes_skipped(), 0u);
  EXPECT_LT(ds.read_share, 0.4);
  EXPECT_EQ(df.read_share, 1.0);
  EXPECT_NE(format_diagnosis(ds).find("sampled:"), std::string::npos);
  EXPECT_EQ(format_diagnosis(df).find("sampled:"), std::string::npos);
  ASSERT_EQ(ds.ranks.size(), 1u);
  EXPECT_EQ(ds.ranks[0].steps, 1300u);  // from the BATCH rows' own numbers
  EXPECT_EQ(df.ranks[0].steps, 1300u);

  // The window: the same 50 steps, the same phases to the nanosecond.
  EXPECT_EQ(ds.window.steps, 50u);
  EXPECT_EQ(df.window.steps, 50u);
  ASSERT_EQ(ds.window.phases.size(), df.window.phases.size());
  for (std::size_t i = 0; i < df.window.phases.size(); ++i) {
    const PhaseRow& a = ds.window.phases[i];
    const PhaseRow& b = df.window.phases[i];
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.device, b.device);
    EXPECT_DOUBLE_EQ(a.median_s, b.median_s) << phase_name(b.phase);
    EXPECT_DOUBLE_EQ(a.p95_s, b.p95_s) << phase_name(b.phase);
    EXPECT_DOUBLE_EQ(a.share, b.share) << phase_name(b.phase);
  }
  const auto phase = [](const Scope& scope, Phase p, Device device) -> const PhaseRow* {
    for (const PhaseRow& row : scope.phases) {
      if (row.phase == p && row.device == device) return &row;
    }
    return nullptr;
  };
  const PhaseRow* wait = phase(ds.window, Phase::kDataWait, Device::kCPU);
  ASSERT_NE(wait, nullptr);
  EXPECT_DOUBLE_EQ(wait->median_s, 0.005);
  // Keys: the window's counts and quantiles agree; the run's count is of the rows read.
  for (const KeyRow& k : df.keys) {
    auto it = std::find_if(ds.keys.begin(), ds.keys.end(),
                           [&](const KeyRow& x) { return x.key == k.key && x.device == k.device; });
    ASSERT_NE(it, ds.keys.end()) << k.key;
    if (k.device == Device::kGPU) continue;
    EXPECT_EQ(it->window_count, k.window_count) << k.key;
    EXPECT_DOUBLE_EQ(it->p50_s, k.p50_s) << k.key;
    EXPECT_DOUBLE_EQ(it->p95_s, k.p95_s) << k.key;
    EXPECT_LT(it->count, k.count) << k.key;
  }
  // The late GPU row of step 500 joins step 500 in the full read; the sampled
  // follower read no step of that time, so it joins none (not step 299).
  const PhaseRow* gpu_full = phase(df.run, Phase::kForward, Device::kGPU);
  ASSERT_NE(gpu_full, nullptr);
  EXPECT_GT(gpu_full->share, 0.0);
  const PhaseRow* gpu_sampled = phase(ds.run, Phase::kForward, Device::kGPU);
  ASSERT_NE(gpu_sampled, nullptr);
  EXPECT_EQ(gpu_sampled->share, 0.0);
}

TEST(Follower, LateGpuRowsJoinTheirStep) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += row("FORWARD", s + kMs, 8 * kMs) + row("BATCH", s, 10 * kMs);
    // The GPU row of step i is collected after step i + 1 ended.
    if (i > 0) rows += row("FORWARD", s - 9 * kMs, 2 * kMs, 0, "GPU");
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok());
  const Label* idle = d->run.find(LabelName::kGpuIdle);
  ASSERT_NE(idle, nullptr);
  EXPECT_NEAR(idle->value.value, 0.2, 0.01);
}

TEST(Follower, StragglerAcrossTwoRanks) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished(0), finished(1)});
  std::string r0, r1;
  for (int i = 0; i < 60; ++i) {
    r0 += step_rows(kT0 + i * 13 * kMs, 0);
    r1 += step_rows(kT0 + i * 13 * kMs, 1, 3 * kMs);
  }
  write_file(dir / "regions-0.csv", r0, true);
  write_file(dir / "regions-1.csv", r1, true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok());
  const Label* s = d->run.find(LabelName::kStraggler);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(*s->rank, 1u);
  EXPECT_EQ(s->kind, LabelKind::kCompute);
  EXPECT_NEAR(s->value.value, 0.003, 1e-6);
}

TEST(Follower, HostReadingsGiveMemoryCreepAndTheLatestGauges) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 1000; ++i) rows += step_rows(kT0 + i * 10 * kMs);
  write_file(dir / "regions-0.csv", rows, true);
  // RSS +2 MB per 100 ms (10 steps) = 200 MB per 1,000 steps.
  std::string host = testing::kMetricsHeader;
  for (int i = 0; i < 100; ++i) {
    const std::int64_t ms = kT0 / kMs + i * 100;
    host +=
        "system/proc.rss_mb," + std::to_string(500 + 2 * i) + ",0," + std::to_string(ms) + ",0\n";
    host += "system/cpu.util_pct,50,0," + std::to_string(ms) + ",\n";
    host += "system/mem.used_pct,12.5,0," + std::to_string(ms) + ",\n";
    host += "system/gpu.0.util_pct,77,0," + std::to_string(ms) + ",\n";
  }
  // The last sample came after the rank's process exited: 0 MB, no point of its steps.
  host += "system/proc.rss_mb,0,0," + std::to_string(kT0 / kMs + 10'050) + ",0\n";
  write_file(dir / "host-h.csv", host);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  const Label* creep = d->run.find(LabelName::kMemoryCreep);
  ASSERT_NE(creep, nullptr);
  EXPECT_NEAR(creep->value.value, 200, 1);
  ASSERT_EQ(d->host_now.size(), 1u);
  EXPECT_EQ(d->host_now[0].mem_used_pct, 12.5);
  ASSERT_EQ(d->host_now[0].gpus.size(), 1u);
  EXPECT_EQ(d->host_now[0].gpus[0].util_pct, 77);
}

// The GPU busy share from NVML (issue 39): the utilization of the rank's own
// device (gpu.1, where its process tree holds memory), not of the host's other
// device; GPU-timed spans cover 80% of each step, NVML sees kernels 20% of the
// time: GPU-IDLE on the measured share, naming its source.
TEST(Follower, GpuBusyShareFromTheRanksDevicesNvmlReadings) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 300; ++i) {
    const std::int64_t start = kT0 + i * 10 * kMs;
    rows += row("FORWARD", start, 3 * kMs);
    rows += row("BACKWARD", start + 3 * kMs, 2 * kMs);
    rows += row("BATCH", start, 10 * kMs);
    rows += row("FORWARD", start, 8 * kMs, 0, "GPU");
  }
  write_file(dir / "regions-0.csv", rows, true);
  std::string host = testing::kMetricsHeader;
  for (int i = 0; i < 30; ++i) {
    const std::string ms = std::to_string(kT0 / kMs + i * 100);
    host += "system/gpu.0.util_pct,100,0," + ms + ",\n";
    host += "system/gpu.1.util_pct,20,0," + ms + ",\n";
    host += "system/gpu.1.proc.mem_used_mb,900,0," + ms + ",0\n";
  }
  write_file(dir / "host-h.csv", host);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  const Label* idle = d->run.find(LabelName::kGpuIdle);
  ASSERT_NE(idle, nullptr);
  EXPECT_NEAR(idle->value.value, 0.20, 1e-9);
  EXPECT_THAT(idle->evidence, ::testing::HasSubstr("NVML"));
}

TEST(Follower, RanksOnTwoHostsInOneDirectory) {
  // A shared filesystem: ranks 0 and 1 on host a, 2 and 3 on host b, each
  // host's launcher sampling its own host file; rank 3 is the straggler.
  TempDir tmp;
  std::vector<RankJson> ranks;
  for (std::uint32_t r = 0; r < 4; ++r) {
    RankJson rank = finished(r);
    rank.world_size = 4;
    rank.host = r < 2 ? "a" : "b";
    ranks.push_back(rank);
  }
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, ranks);
  for (std::uint32_t r = 0; r < 4; ++r) {
    std::string rows;
    for (int i = 0; i < 60; ++i) rows += step_rows(kT0 + i * 14 * kMs, r, r == 3 ? 4 * kMs : 0);
    write_file(dir / ("regions-" + std::to_string(r) + ".csv"), rows, true);
  }
  for (const char* host : {"a", "b"}) {
    std::string readings = testing::kMetricsHeader;
    for (int i = 0; i < 5; ++i) {
      readings += "system/cpu.util_pct,40,0," + std::to_string(kT0 / kMs + i * 100) + ",\n";
    }
    write_file(dir / (std::string("host-") + host + ".csv"), readings);
  }
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->world_size, 4u);
  EXPECT_EQ(d->hosts, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(d->ranks.size(), 4u);
  EXPECT_EQ(d->ranks[3].host, "b");
  EXPECT_EQ(d->host_now.size(), 2u);
  const Label* s = d->run.find(LabelName::kStraggler);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(*s->rank, 3u);
  EXPECT_NEAR(s->value.value, 0.004, 1e-6);
}

TEST(Follower, PhaseMappingAndStepKey) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += row("opt_step", s, 7 * kMs) + row("train_step", s, 10 * kMs);
  }
  write_file(dir / "regions-0.csv", rows, true);
  absl::StatusOr<Diagnosis> plain = diagnose_run(dir.string());
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->run.find(LabelName::kNoData), nullptr);
  FollowOptions options;
  ASSERT_TRUE(options.keys.map("step=train_step").ok());
  ASSERT_TRUE(options.keys.map("optimizer=opt_step").ok());
  absl::StatusOr<Diagnosis> mapped = diagnose_run(dir.string(), options);
  ASSERT_TRUE(mapped.ok());
  const Label* compute = mapped->run.find(LabelName::kComputeBound);
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(compute->kind, LabelKind::kOptimizer);
}

RankJson running_rank(std::uint32_t rank, std::uint32_t world_size) {
  RankJson r;
  r.rank = r.local_rank = rank;
  r.world_size = world_size;
  r.heartbeat_ms = 4'000'000'000'000;  // far future: not crashed
  r.host = "elsewhere";
  return r;
}

// A run of `count` running ranks without rows.
std::filesystem::path write_running_run(const TempDir& tmp, std::uint32_t count) {
  std::vector<RankJson> ranks;
  for (std::uint32_t r = 0; r < count; ++r) ranks.push_back(running_rank(r, count));
  return write_run_dir(tmp.file("run"), RunJson{}, ranks);
}

std::string steps_of(int count, std::uint32_t rank = 0) {
  std::string rows;
  for (int i = 0; i < count; ++i) rows += step_rows(kT0 + i * 10 * kMs, rank);
  return rows;
}

// The window and the run scope as phases and labels, to compare two followers.
void expect_same_scope(const Scope& a, const Scope& b) {
  EXPECT_EQ(a.steps, b.steps) << a.name;
  ASSERT_EQ(a.phases.size(), b.phases.size()) << a.name;
  for (std::size_t i = 0; i < a.phases.size(); ++i) {
    EXPECT_DOUBLE_EQ(a.phases[i].median_s, b.phases[i].median_s) << a.name;
    EXPECT_DOUBLE_EQ(a.phases[i].share, b.phases[i].share) << a.name;
  }
  ASSERT_EQ(a.labels.size(), b.labels.size()) << a.name;
  for (std::size_t i = 0; i < a.labels.size(); ++i) EXPECT_EQ(a.labels[i].name, b.labels[i].name);
}

// 1,000 running ranks of which one has rows (200 steps, 48 KB), followed with
// top's budget (4 MiB/s): the budget was split evenly over the ranks, empty
// ones included (4 KiB, 17 steps each: "NO-DATA" and "sampled" of a run far
// below the budget). All that is unread fits: nothing is sampled.
TEST(Follower, EmptyRanksTakeNothingFromTheBudget) {
  TempDir tmp;
  const auto dir = write_running_run(tmp, 1000);
  write_file(dir / "regions-0.csv", steps_of(200), /*append=*/true);
  FollowOptions live;
  live.read_budget_bytes_per_s = 4.0 * 1024 * 1024;
  absl::StatusOr<Follower> f = Follower::Open(dir.string(), live);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->poll().ok());
  EXPECT_EQ(f->bytes_skipped(), 0u);
  const Diagnosis d = f->diagnose();
  EXPECT_EQ(d.read_share, 1.0);
  EXPECT_EQ(d.window.steps, 100u);
  EXPECT_EQ(d.ranks.at(0).steps, 200u);
  const absl::StatusOr<Diagnosis> full = diagnose_run(dir.string());
  ASSERT_TRUE(full.ok()) << full.status();
  expect_same_scope(d.window, full->window);
  expect_same_scope(d.run, full->run);
  EXPECT_EQ(d.headline(), full->headline());
}

// 64 ranks of the same rows (300 steps, 72 KB each) above the budget (1 MiB/s:
// 16 KiB, 66 steps a rank): the window must still hold its 100 steps, counted
// in each rank's newest rows before its step size is known, and be the one a
// full read gives.
TEST(Follower, SampledRanksKeepTheirWholeWindowFromTheFirstPoll) {
  TempDir tmp;
  const auto dir = write_running_run(tmp, 64);
  for (std::uint32_t r = 0; r < 64; ++r) {
    write_file(dir / ("regions-" + std::to_string(r) + ".csv"), steps_of(300, r), true);
  }
  FollowOptions options;
  options.read_budget_bytes_per_s = 1024 * 1024;
  absl::StatusOr<Follower> sampled = Follower::Open(dir.string(), options);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  ASSERT_TRUE(sampled->poll().ok());
  EXPECT_GT(sampled->bytes_skipped(), 0u);
  const Diagnosis d = sampled->diagnose();
  EXPECT_LT(d.read_share, 1.0);
  const absl::StatusOr<Diagnosis> full = diagnose_run(dir.string());
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->window.steps, 100u);
  expect_same_scope(d.window, full->window);
  EXPECT_EQ(d.headline(), full->headline());

  // Once the ranks end, the run is read whole: the view converges to diagnose's.
  for (std::uint32_t r = 0; r < 64; ++r) {
    RankJson done = running_rank(r, 64);
    done.status = "FINISHED";
    done.end_time_ms = 2;
    write_file(dir / done.file_name(), done.text());
  }
  ASSERT_TRUE(sampled->poll().ok());
  EXPECT_EQ(sampled->bytes_skipped(), 0u);
  const Diagnosis ended = sampled->diagnose();
  const absl::StatusOr<Diagnosis> final_full = diagnose_run(dir.string());
  ASSERT_TRUE(final_full.ok()) << final_full.status();
  EXPECT_EQ(ended.read_share, 1.0);
  expect_same_scope(ended.window, final_full->window);
  expect_same_scope(ended.run, final_full->run);
  EXPECT_EQ(ended.ranks.at(5).steps, 300u);
}

// The directory deleted and created again at the same path holds another run:
// the follower starts over on it (its id, its rows from the first line), not
// at the old run's offsets, where a line of the new file starts mid-way.
TEST(Follower, AnotherRunAtThePathIsFollowedFromItsStart) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {running_rank(0, 1)});
  write_file(dir / "regions-0.csv", steps_of(30), true);
  absl::StatusOr<Follower> f = Follower::Open(dir.string());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->poll().ok());
  EXPECT_EQ(f->diagnose().ranks.at(0).steps, 30u);

  std::filesystem::remove_all(dir);
  RunJson other;
  other.id = "fedcba9876543210fedcba9876543210";
  other.start_time_ms = 5;
  write_run_dir(dir, other, {finished()});
  std::string rows;  // 45 steps of another shape: the old offset falls inside a line
  for (int i = 0; i < 45; ++i) rows += row("BATCH", kT0 + i * 7 * kMs, 7 * kMs - 3);
  write_file(dir / "regions-0.csv", rows, true);
  const absl::Status polled = f->poll();
  ASSERT_TRUE(polled.ok()) << polled;
  const Diagnosis d = f->diagnose();
  EXPECT_EQ(d.run_id, other.id);
  EXPECT_EQ(d.status, RunStatus::kFinished);
  EXPECT_EQ(d.ranks.at(0).steps, 45u);
}

// A CPU row longer than its whole step (INT64_MAX) made shares of
// 3487103028755.2%: it is left out of the step and named in a warning; every
// share stays in [0, 1].
TEST(Follower, ARowLongerThanItsStepIsLeftOutAndNamed) {
  TempDir tmp;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  std::string rows;
  for (int i = 0; i < 60; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    if (i == 30) {
      rows += row("IO", s, 4 * kMs) +
              row("FORWARD", s + 4 * kMs, std::numeric_limits<std::int64_t>::max()) +
              row("BATCH", s, 10 * kMs);
    } else {
      rows += step_rows(s);
    }
  }
  write_file(dir / "regions-0.csv", rows, true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_THAT(d->warnings[0], ::testing::HasSubstr("regions-0.csv: 1 CPU row of rank 0 lasts "
                                                   "longer than the whole step"));
  EXPECT_THAT(d->warnings[0],
              ::testing::HasSubstr("FORWARD, lasts 9223372036.854776 s in step 30 of 0.01 s"));
  for (const Scope* scope : {&d->window, &d->run}) {
    for (const PhaseRow& p : scope->phases) {
      EXPECT_GE(p.share, 0.0);
      EXPECT_LE(p.share, 1.0) << phase_name(p.phase);
    }
    for (const Label& l : scope->labels) {
      EXPECT_LE(l.value.value, 1.0) << label_name(l.name);
      if (std::isfinite(l.value.low)) EXPECT_GE(l.value.low, 0.0) << label_name(l.name);
      if (std::isfinite(l.value.high)) EXPECT_LE(l.value.high, 1.0) << label_name(l.name);
    }
  }
  const Label* input = d->run.find(LabelName::kInputBound);
  ASSERT_NE(input, nullptr);
  EXPECT_NEAR(input->value.value, 0.4, 1e-6);
}

TEST(Follower, ErrorsNameTheRun) {
  TempDir tmp;
  absl::StatusOr<Follower> missing = Follower::Open(tmp.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("nope"));

  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {finished()});
  write_file(dir / "regions-0.csv", "BATCH,CPU,0,0,notanumber,5,0,0\n", true);
  absl::StatusOr<Follower> f = Follower::Open(dir.string());
  ASSERT_TRUE(f.ok());
  const absl::Status polled = f->poll();
  ASSERT_FALSE(polled.ok());
  EXPECT_THAT(polled.message(), ::testing::HasSubstr("regions-0.csv:2"));

  // A run that vanishes while followed: an error naming it, what was read kept.
  const auto gone = write_run_dir(tmp.file("gone"), RunJson{}, {finished()});
  absl::StatusOr<Follower> g = Follower::Open(gone.string());
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(g->poll().ok());
  std::filesystem::remove_all(gone);
  const absl::Status after = g->poll();
  ASSERT_FALSE(after.ok());
  EXPECT_THAT(after.message(), ::testing::HasSubstr("gone"));
  EXPECT_EQ(g->diagnose().status, RunStatus::kFinished);
}

// Each rank's own window (RankNow, the Prometheus endpoint's per-rank
// figures): rank 1's forward is 4 ms longer in every step.
TEST(Follower, PerRankWindowFigures) {
  TempDir tmp;
  RankJson r0 = finished(0), r1 = finished(1);
  r0.world_size = r1.world_size = 2;
  r1.host = "h1";
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {r0, r1});
  std::string rows0, rows1;
  for (int i = 0; i < 40; ++i) {
    rows0 += step_rows(kT0 + i * 10 * kMs, 0);
    rows1 += step_rows(kT0 + i * 14 * kMs, 1, 4 * kMs);
  }
  write_file(dir / "regions-0.csv", rows0, /*append=*/true);
  write_file(dir / "regions-1.csv", rows1, /*append=*/true);
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->ranks.size(), 2u);
  const RankNow& a = d->ranks[0];
  const RankNow& b = d->ranks[1];
  EXPECT_NEAR(a.step_p50_s, 0.010, 1e-9);
  EXPECT_NEAR(a.step_p95_s, 0.010, 1e-9);
  EXPECT_NEAR(a.steps_per_s, 100.0, 1e-6);
  EXPECT_NEAR(b.step_p50_s, 0.014, 1e-9);
  EXPECT_NEAR(b.steps_per_s, 1 / 0.014, 1e-6);
  const auto share = [](const RankNow& r, Phase p) {
    return r.phase_share[static_cast<std::size_t>(p)];
  };
  EXPECT_NEAR(share(a, Phase::kDataWait), 0.4, 1e-9);
  EXPECT_NEAR(share(a, Phase::kForward), 0.3, 1e-9);
  EXPECT_NEAR(share(a, Phase::kRest), 0.1, 1e-9);
  EXPECT_NEAR(share(b, Phase::kForward), 7.0 / 14.0, 1e-9);
  EXPECT_TRUE(std::isnan(share(a, Phase::kComm)));  // never timed
  EXPECT_TRUE(std::isnan(a.rss_mb));                // no readings
  // The document carries them (one writer, one reader).
  absl::StatusOr<Diagnosis> back = parse_diagnosis(diagnosis_json(*d), "test");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->ranks[1].step_p50_s, b.step_p50_s);
  EXPECT_DOUBLE_EQ(back->ranks[1].phase_share[static_cast<std::size_t>(Phase::kForward)],
                   share(b, Phase::kForward));
  EXPECT_TRUE(std::isnan(back->ranks[0].rss_mb));
}

}  // namespace
}  // namespace trainscope::diagnosis

namespace trainscope::diagnosis {
namespace {

// A live run's ledger (docs/ledger.md) as the follower derives it, poll by poll, with a
// history merged past its cap and the work kept flat (steps::WorkReader::compact): the same
// figures as read_ledger's over the whole run, exact steps. Rank 1's steps are slower.
TEST(Follower, TheLedgerOfALiveRunIsTheEndOfRunLedger) {
  TempDir tmp;
  // Two live ranks (their heartbeat fresh: another host's rank is alive while it beats).
  RankJson r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r0.world_size = r1.world_size = 2;
  r0.heartbeat_ms = r1.heartbeat_ms = trainscope::detail::unix_now_ms() + 3'600'000;
  RunJson run;
  run.params["work/flops_per_step"] = "2e+06";
  run.params["work/peak_flops"] = "1e+09";
  const auto dir = write_run_dir(tmp.file("run"), run, {r0, r1});
  FollowOptions options = live_options();
  options.max_history_steps = 64;
  options.run_refresh_s = 0;  // the run scope and the ledger concluded again at every diagnose
  absl::StatusOr<Follower> follower = Follower::Open(dir.string(), options);
  ASSERT_TRUE(follower.ok()) << follower.status();
  constexpr int kSteps = 600;
  for (int part = 0; part < 6; ++part) {
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      std::string regions, metrics;
      for (int i = part * kSteps / 6; i < (part + 1) * kSteps / 6; ++i) {
        // Steps of 10, 11 and 12 ms in turn (rank 1: 5 ms more), back to back.
        const std::int64_t period = (10 + 5 * rank + i % 3) * kMs;
        const std::int64_t start =
            kT0 + ((10 + 5 * rank) * i + 3 * (i / 3) + (i % 3 == 2 ? 1 : 0)) * kMs;
        regions += "BATCH,CPU," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
                   std::to_string(period) + "," + std::to_string(i) + ",0\n";
        metrics += "work/samples,4," + std::to_string(i) + ",1," + std::to_string(rank) + "\n";
        metrics += "work/tokens,128," + std::to_string(i) + ",1," + std::to_string(rank) + "\n";
      }
      write_file(dir / ("regions-" + std::to_string(rank) + ".csv"), regions, /*append=*/true);
      write_file(dir / ("metrics-" + std::to_string(rank) + ".csv"), metrics, /*append=*/true);
    }
    ASSERT_TRUE(follower->poll().ok());
    (void)follower->diagnose();  // concludes the ledger at each poll, as a live view does
  }
  const Diagnosis live = follower->diagnose();
  ASSERT_TRUE(live.ledger.has_value());
  absl::StatusOr<RunReader> reader = RunReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<steps::Ledger> whole = steps::read_ledger(*reader);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(live.ledger->ranks.size(), 2u);
  ASSERT_EQ(whole->ranks.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    // The open last step of a live rank is in neither (its period is not known yet).
    EXPECT_EQ(live.ledger->ranks[i].steps, whole->ranks[i].steps);
    EXPECT_NEAR(live.ledger->ranks[i].tokens_per_s, whole->ranks[i].tokens_per_s, 1e-9);
    EXPECT_NEAR(live.ledger->ranks[i].mfu, whole->ranks[i].mfu, 1e-12);
    EXPECT_NEAR(live.ledger->ranks[i].tokens_per_s, 32 * live.ledger->ranks[i].samples_per_s, 1e-9);
  }
  // 128 tokens a step of 11 ms on average (rank 1: 16 ms).
  EXPECT_NEAR(live.ledger->ranks[0].tokens_per_s, 128 / 0.011, 128 / 0.011 * 0.01);
  EXPECT_NEAR(live.ledger->ranks[1].tokens_per_s, 128 / 0.016, 128 / 0.016 * 0.01);
  EXPECT_NEAR(live.ledger->tokens_per_s, whole->tokens_per_s, 1e-9);
  EXPECT_NEAR(live.ledger->mfu, whole->mfu, 1e-12);
}

}  // namespace
}  // namespace trainscope::diagnosis
