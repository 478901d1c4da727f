// One meaning per quantity (issue 38): every view of one run shows the same
// data-wait share, job CPU and step count: the diagnosis, compare, stalls and
// the report's sections, on a run of two ranks on one host (each step's wait
// for the next batch lies between two BATCH rows; both ranks' process trees
// sampled at the same times).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/diagnosis_data.hpp"
#include "report/run_data.hpp"
#include "report/stalls_data.hpp"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/steps/steps.hpp"
#include "trainscope/steps/warmup.hpp"

namespace trainscope {
namespace {

using testing::RankJson;
using testing::RunJson;
using testing::write_file;
using testing::write_run_dir;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // ns
constexpr std::int64_t kMs = 1'000'000;
constexpr int kSteps = 40;
// Every step waits a sixth of its period: 2 ms of 12 (the last, 10 ms long,
// a sixth of that inside it).
constexpr double kShare = 1.0 / 6;
// Host h: 4 cores, 95% busy; rank 0's tree 100% of a core, rank 1's 60%: the
// job takes 40% of all cores, others 55%.
constexpr double kOtherShare = 0.55;

std::string row(const std::string& key, std::int64_t start, std::int64_t ns, std::uint32_t rank) {
  return key + ",CPU," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
         std::to_string(ns) + ",0,0\n";
}

// `warmup_wait_ms`: what each of the first steps::kWarmupSteps steps waits
// for its next batch (the others 2 ms).
std::filesystem::path write_run(const std::filesystem::path& dir, std::int64_t warmup_wait_ms = 2) {
  std::vector<RankJson> ranks;
  for (std::uint32_t r = 0; r < 2; ++r) {
    RankJson rank;
    rank.rank = r;
    rank.local_rank = r;
    rank.world_size = 2;
    rank.pid = 1 + r;
    rank.status = "FINISHED";
    rank.end_time_ms = 2;
    rank.heartbeat_ms = 2;
    ranks.push_back(rank);
  }
  write_run_dir(dir, RunJson{}, ranks);
  for (std::uint32_t r = 0; r < 2; ++r) {
    std::string rows;
    std::int64_t start = kT0;
    for (int i = 0; i < kSteps; ++i) {
      const std::int64_t wait = (i < steps::kWarmupSteps ? warmup_wait_ms : 2) * kMs;
      if (i + 1 < kSteps) {
        rows += row("FORWARD", start + 1 * kMs, 5 * kMs, r);
        rows += row("BATCH", start, 10 * kMs, r);
        rows += row("IO", start + 10 * kMs, wait, r);  // the next batch's wait
      } else {
        rows += row("IO", start + 1 * kMs, 10 * kMs / 6, r);
        rows += row("BATCH", start, 10 * kMs, r);
      }
      start += 10 * kMs + wait;
    }
    write_file(dir / ("regions-" + std::to_string(r) + ".csv"), rows, /*append=*/true);
  }
  std::string host = testing::kMetricsHeader;
  for (int s = 0; s < 12; ++s) {  // enough for the diagnosis's interval
    const std::string t = std::to_string(kT0 / kMs + 50 + s * 35);
    host += "system/cpu.util_pct,95,0," + t + ",\n";
    for (int core = 0; core < 4; ++core)
      host += "system/cpu." + std::to_string(core) + ".util_pct,95,0," + t + ",\n";
    host += "system/proc.cpu_pct,100,0," + t + ",0\n";
    host += "system/proc.cpu_pct,60,0," + t + ",1\n";
  }
  write_file(dir / "host-h.csv", host);
  return dir;
}

const diagnosis::PhaseRow* phase(const diagnosis::Scope& scope, diagnosis::Phase p) {
  for (const diagnosis::PhaseRow& row : scope.phases)
    if (row.phase == p && row.device == Device::kCPU) return &row;
  return nullptr;
}

// `trainscope stalls`' analysis of `dir`: the run's and each rank's share is
// kShare; its step series keeps every step.
void expect_stalls_show(const std::string& dir) {
  absl::StatusOr<stalls::RunStalls> st = stalls::analyze_run(dir);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_NEAR(st->total.share, kShare, 1e-6);
  EXPECT_EQ(st->step_period_s.size(), std::size_t{kSteps});
  ASSERT_EQ(st->ranks.size(), 2u);
  for (const stalls::RankStalls& r : st->ranks) EXPECT_NEAR(r.total.share, kShare, 1e-6);
}

// The report's run page of `dir`: its diagnosis section (every rank's
// kSteps steps, the data-wait share) and its data-stalls section show kShare.
void expect_report_shows(const std::string& dir) {
  const nlohmann::json diagnosed = report::detail::run_diagnosis_json(dir);
  ASSERT_FALSE(diagnosed.contains("error")) << diagnosed.dump();
  bool shown = false;
  for (const nlohmann::json& p : diagnosed["run"]["phases"]) {
    if (p["phase"] == "data_wait" && p["device"] == "CPU") {
      shown = true;
      EXPECT_NEAR(p["share"].get<double>(), kShare, 1e-6);
    }
  }
  EXPECT_TRUE(shown) << diagnosed["run"].dump();
  for (const nlohmann::json& r : diagnosed["ranks"]) EXPECT_EQ(r["steps"], kSteps);
  absl::StatusOr<report::detail::RunData> run = report::detail::read_run_data(dir, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const nlohmann::json stalls_shown = report::detail::run_stalls_json(*run, 16);
  ASSERT_FALSE(stalls_shown.contains("error")) << stalls_shown.dump();
  EXPECT_NEAR(stalls_shown["run"]["data_wait_share"].get<double>(), kShare, 1e-6);
}

TEST(OneMeaning, EveryViewShowsTheSameDataWaitJobCpuAndSteps) {
  testing::TempDir tmp;
  const std::string dir = write_run(tmp.path() / "run").string();

  // The steps room: the one derivation.
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<steps::RunSteps> stepped = steps::read_steps(*reader);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  ASSERT_EQ(stepped->ranks.size(), 2u);
  ASSERT_EQ(stepped->hosts.size(), 1u);
  for (const steps::HostSample& x : stepped->hosts[0].samples)
    EXPECT_NEAR(x.other_cpu_pct() / 100, kOtherShare, 1e-9);

  // The diagnosis (every step: no warm-up dropped).
  diagnosis::FollowOptions follow;
  follow.thresholds.warmup_steps = 0;
  absl::StatusOr<diagnosis::Diagnosis> d = diagnosis::diagnose_run(dir, follow);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->ranks.size(), 2u);
  for (const diagnosis::RankNow& r : d->ranks) EXPECT_EQ(r.steps, std::uint64_t{kSteps});
  const diagnosis::PhaseRow* wait = phase(d->run, diagnosis::Phase::kDataWait);
  ASSERT_NE(wait, nullptr);
  EXPECT_NEAR(wait->share, kShare, 1e-6);
  const diagnosis::Label* pressure = d->run.find(diagnosis::LabelName::kHostPressure);
  ASSERT_NE(pressure, nullptr) << d->headline();
  EXPECT_NEAR(pressure->value.value, kOtherShare, 1e-9);

  // Compare: per step, the data wait over the period; the steps; others' CPU.
  absl::StatusOr<compare::Side> side = compare::gather_side({dir});
  ASSERT_TRUE(side.ok()) << side.status();
  ASSERT_EQ(side->runs.size(), 1u);
  EXPECT_NEAR(side->runs[0].other_cpu_share, kOtherShare, 1e-9);
  bool saw_wait = false, saw_rate = false;
  for (const compare::Series& s : side->series) {
    if (s.name == compare::kDataWait) {
      saw_wait = true;
      ASSERT_EQ(s.runs.at(0).size(), std::size_t{kSteps});
      for (double share : s.runs[0]) EXPECT_NEAR(share, kShare, 1e-6);
    }
    if (s.name == compare::kThroughput) {
      saw_rate = true;
      EXPECT_EQ(s.runs.at(0).size(), std::size_t{kSteps});
    }
  }
  EXPECT_TRUE(saw_wait);
  EXPECT_TRUE(saw_rate);

  // Stalls: the run is one pass of every step, on each rank.
  expect_stalls_show(dir);

  // The report's sections of the run page (its default diagnosis drops the
  // warm-up steps: every step here waits the same share).
  expect_report_shows(dir);
}

// Issue 38: the diagnosis dropped its warm-up steps and stalls did not, so a
// run whose first steps wait longer showed two data-wait shares (the report's
// diagnosis 0.098%, its data stalls 0.356%). One warm-up rule (the steps
// room's): every run-wide figure leaves the first steps::kWarmupSteps out.
TEST(OneMeaning, ARunWhoseWarmUpWaitsLongerShowsOneDataWaitShare) {
  testing::TempDir tmp;
  const std::string dir = write_run(tmp.path() / "run", /*warmup_wait_ms=*/30).string();

  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<steps::RunSteps> stepped = steps::read_steps(*reader);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  ASSERT_EQ(stepped->ranks.size(), 2u);
  for (const steps::RankSteps& rank : stepped->ranks) {
    ASSERT_EQ(rank.step_count(), std::uint64_t{kSteps});
    ASSERT_EQ(steps::warmup_steps(rank), steps::kWarmupSteps);
    steps::DataWait all, past_warmup;
    for (const steps::Step& step : rank.history) {
      all.add(step);
      if (!steps::is_warmup(step, steps::warmup_steps(rank))) past_warmup.add(step);
    }
    EXPECT_NEAR(past_warmup.share(), kShare, 1e-6);
    EXPECT_GT(all.share(), kShare + 0.1);  // the warm-up's waits would change the figure
  }

  // The diagnosis, with its default warm-up.
  absl::StatusOr<diagnosis::Diagnosis> d = diagnosis::diagnose_run(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  for (const diagnosis::RankNow& r : d->ranks) EXPECT_EQ(r.steps, std::uint64_t{kSteps});
  const diagnosis::PhaseRow* wait = phase(d->run, diagnosis::Phase::kDataWait);
  ASSERT_NE(wait, nullptr);
  EXPECT_NEAR(wait->share, kShare, 1e-6);

  // Stalls: the run and each rank, the same share; its step series keeps every step.
  expect_stalls_show(dir);

  // Compare's per-step rows keep every step (its statistics drop their own
  // warm-up): past the warm-up each is the share.
  absl::StatusOr<compare::Side> side = compare::gather_side({dir});
  ASSERT_TRUE(side.ok()) << side.status();
  bool saw_wait = false;
  for (const compare::Series& s : side->series) {
    if (s.name != compare::kDataWait) continue;
    saw_wait = true;
    ASSERT_EQ(s.runs.at(0).size(), std::size_t{kSteps});
    for (std::size_t i = steps::kWarmupSteps; i < s.runs[0].size(); ++i)
      EXPECT_NEAR(s.runs[0][i], kShare, 1e-6) << "step " << i;
  }
  EXPECT_TRUE(saw_wait);

  // The report's run page: its diagnosis section and its data-stalls section.
  expect_report_shows(dir);
}

}  // namespace
}  // namespace trainscope
