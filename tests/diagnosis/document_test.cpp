// The diagnosis document: the writer's output reads back the same through the
// one reader, errors name the source and the key, and the texts carry the
// labels, evidence and next steps.
#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Diagnosis sample() {
  Diagnosis d;
  d.run_dir = "/runs/abc";
  d.run_id = "abc";
  d.run_name = "resnet";
  d.status = RunStatus::kFinished;
  d.start_time_ms = 1000;
  d.elapsed_ms = 65000;
  d.world_size = 2;
  d.ranks = {{0, "h1", ProcessStatus{RunStatus::kFinished, false}, 120},
             {1, "h2", ProcessStatus{RunStatus::kRunning, true}, 90}};
  d.hosts = {"h1", "h2"};
  d.window_steps = 100;
  d.read_share = 0.25;  // a live follower sampled the run
  Scope s;
  s.name = "run";
  s.steps = 115;
  s.warmup = 5;
  s.steps_per_s = 10;
  s.step_s = Interval{0.1, 0.09, 0.11};
  s.phases.push_back(
      PhaseRow{Phase::kDataWait, Device::kCPU, 0.04, 0.05, 0.4, 0.04, 0.05, 1, 0.25});
  s.phases.push_back(PhaseRow{Phase::kForward, Device::kGPU, 0.02, 0.03, 0.2, 0.02, 0.02, 0, 0});
  Label input;
  input.name = LabelName::kInputBound;
  input.quantity = "data_wait_share";
  input.value = Interval{0.4, 0.38, 0.42};
  input.threshold = 0.2;
  input.threshold_name = "input_bound_share";
  input.evidence = "waits 40%";
  input.next_step = "more workers";
  Label straggler = input;
  straggler.name = LabelName::kStraggler;
  straggler.kind = LabelKind::kCompute;
  straggler.rank = 1;
  straggler.value = Interval{0.003, std::numeric_limits<double>::quiet_NaN(), 0.004};
  Label host = input;
  host.name = LabelName::kHostPressure;
  host.host = "h2";
  s.labels = {input, straggler, host};
  s.notes = {"GPU-IDLE: no GPU-timed phases"};
  CollectiveRow reduce;
  reduce.key = "COMM/all_reduce/world";
  reduce.op = "all_reduce";
  reduce.group = "world";
  reduce.seconds = 1.5;
  reduce.count = 230;
  reduce.median_s = 0.003;
  reduce.matched = 230;
  reduce.last_rank = 1;
  reduce.last_share = 0.9;
  reduce.lag_s = 0.002;
  CollectiveRow one = reduce;  // one rank: no arrival
  one.key = "COMM/broadcast/group1";
  one.last_rank.reset();
  s.collectives = {reduce, one};
  d.run = s;
  d.window = s;
  d.window.name = "window";
  KeyRow k;
  k.key = "data \"aug\", v2";
  k.count = 7;
  k.window_count = 3;
  k.rate_per_s = 1.5;
  k.p50_s = 0.01;
  k.p95_s = 0.02;
  k.share = 0.1;
  k.run_median_s = 0.011;
  k.run_median_low_s = 0.009;
  k.run_median_high_s = 0.012;
  k.run_p95_s = 0.02;
  d.keys = {k};
  HostNow now;
  now.host = "h1";
  now.time_ms = 5;
  now.cpu_util_pct = 50;
  now.gpus = {GpuNow{0, 90, 1000, 80000}};
  now.contention = steps::ContentionShare{0.25, 0.2, 0.3, 12};
  now.step_wait = steps::ContentionShare{0.4, 0.35, 0.45, 300};
  d.host_now = {now};
  return d;
}

TEST(Document, RoundTripsThroughTheOneReader) {
  const std::string text = diagnosis_json(sample(), 1);
  absl::StatusOr<Diagnosis> back = parse_diagnosis(text, "d.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(diagnosis_json(*back, 1), text);
  EXPECT_EQ(back->read_share, 0.25);
  EXPECT_EQ(back->run.labels[1].rank, 1u);
  ASSERT_EQ(back->run.collectives.size(), 2u);
  EXPECT_EQ(back->run.collectives[0].last_rank, 1u);
  EXPECT_FALSE(back->run.collectives[1].last_rank.has_value());
  // A document written before read_share existed: everything was read.
  std::string old = text;
  const std::size_t at = old.find("\"read_share\"");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, old.find('\n', at) - at + 1);
  // ... and before the collectives (issue 39): none.
  for (std::size_t c = old.find("\"collectives\""); c != std::string::npos;
       c = old.find("\"collectives\"")) {
    const std::size_t end = old.find("\"notes\"", c);
    old.erase(c, end - c);
  }
  back = parse_diagnosis(old, "old.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->run.collectives.empty());
  EXPECT_EQ(back->read_share, 1.0);
  EXPECT_EQ(back->run.labels[2].host, "h2");
  EXPECT_TRUE(std::isnan(back->run.labels[1].value.low));
  EXPECT_EQ(back->keys[0].key, "data \"aug\", v2");
  EXPECT_EQ(back->host_now[0].gpus[0].mem_total_mb, 80000);
  EXPECT_EQ(back->host_now[0].contention.low, 0.2);
  EXPECT_EQ(back->host_now[0].contention.readings, 12u);
  EXPECT_EQ(back->host_now[0].step_wait.high, 0.45);
  EXPECT_EQ(back->host_now[0].step_wait.readings, 300u);
  EXPECT_THAT(text, HasSubstr("\"headline\": \"INPUT-BOUND, STRAGGLER(compute, rank 1), "
                              "HOST-PRESSURE(h2)\""));
}

TEST(Document, TheLedgerIsTypedInTheDocument) {
  // Issue 42: diagnose_run's ledger was a line, not in the document.
  Diagnosis d = sample();
  EXPECT_THAT(diagnosis_json(d, 1), Not(HasSubstr("\"ledger\"")));
  steps::Ledger l;
  l.steps = 30;
  l.samples_per_s = 84.2;
  l.tokens_per_s = 2810;
  l.flops_per_step = 5e8;
  l.flops_source = "FlopCounterMode";
  l.achieved_flops = 4.27e10;
  l.peak_flops = 5.35e10;
  l.peak_source = "cpu GEMM probe";
  l.device = "cpu";
  l.dtype = "fp32";
  l.mfu = 0.798;
  l.notes = {"energy: no RAPL energy: /sys/class/powercap does not exist"};
  steps::RankLedger r;
  r.rank = 1;
  r.steps = 30;
  r.seconds = 0.5;
  r.samples = 42;
  r.samples_per_s = 84;
  r.mfu = 0.798;
  l.ranks = {r};
  d.ledger = l;
  const std::string text = diagnosis_json(d, 1);
  EXPECT_THAT(text, HasSubstr("\"line\": \"ledger: "));
  absl::StatusOr<Diagnosis> back = parse_diagnosis(text, "d.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->ledger.has_value());
  EXPECT_EQ(back->ledger->tokens_per_s, 2810);
  EXPECT_EQ(back->ledger->mfu, 0.798);
  EXPECT_EQ(back->ledger->peak_source, "cpu GEMM probe");
  EXPECT_TRUE(std::isnan(back->ledger->energy_j));
  ASSERT_EQ(back->ledger->ranks.size(), 1u);
  EXPECT_EQ(back->ledger->ranks[0].rank, 1u);
  EXPECT_TRUE(std::isnan(back->ledger->ranks[0].tokens_per_s));
  EXPECT_EQ(diagnosis_json(*back, 1), text);
  EXPECT_THAT(format_diagnosis(*back), HasSubstr(steps::format_ledger_line(l)));
  // The end-of-run summary of `trainscope run` has the line too (without its notes), and a
  // run without work none.
  EXPECT_THAT(format_run_summary(*back),
              HasSubstr("\n  " + steps::format_ledger_line(l, /*notes=*/false) + "\n"));
  EXPECT_THAT(format_run_summary(sample()), Not(HasSubstr("ledger:")));
}

// A label judged on the device (issue 39): its device round-trips, the text
// says "gpu: backward"; a document without "device" reads as before (none).
TEST(Document, ALabelsDeviceRoundTripsAndShows) {
  Diagnosis d = sample();
  Label l;
  l.name = LabelName::kComputeBound;
  l.kind = LabelKind::kBackward;
  l.device = Device::kGPU;
  l.quantity = "compute_share";
  l.value = Interval{0.9, 0.88, 0.92};
  d.run.labels = {l};
  const std::string text = diagnosis_json(d, 1);
  absl::StatusOr<Diagnosis> back = parse_diagnosis(text, "d.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->run.labels.size(), 1u);
  EXPECT_EQ(back->run.labels[0].device, Device::kGPU);
  EXPECT_EQ(diagnosis_json(*back, 1), text);
  EXPECT_THAT(format_diagnosis(*back), HasSubstr("COMPUTE-BOUND(gpu: backward)"));
  EXPECT_FALSE(
      parse_diagnosis(diagnosis_json(sample(), 1), "old.json")->run.labels[0].device.has_value());
}

TEST(Document, ReadsAFileAndNamesItInErrors) {
  testing::TempDir tmp;
  const std::string path = tmp.file("d.json");
  testing::write_file(path, diagnosis_json(sample()));
  ASSERT_TRUE(read_diagnosis(path).ok());

  testing::write_file(path, "{\"format\": \"trainscope.diagnosis\", \"version\": 1}");
  absl::StatusOr<Diagnosis> missing = read_diagnosis(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
  EXPECT_THAT(missing.status().message(), HasSubstr("run_dir: missing"));

  std::string wrong = diagnosis_json(sample());
  wrong.replace(wrong.find("\"worst_rank\":1"), 14, "\"worst_rank\":\"x\"");
  absl::StatusOr<Diagnosis> typed = parse_diagnosis(wrong, "w.json");
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("w.json: "));
  EXPECT_THAT(typed.status().message(), HasSubstr("window.phases[0].worst_rank"));

  EXPECT_THAT(parse_diagnosis("{", "x.json").status().message(), HasSubstr("x.json: not valid"));
  std::string newer = diagnosis_json(sample());
  newer.replace(newer.find("\"version\":1"), 11, "\"version\":9");
  EXPECT_THAT(parse_diagnosis(newer, "n.json").status().message(), HasSubstr("newer"));

  // Labels, kinds and statuses are enums: a name the reader does not know is an error naming it.
  std::string label = diagnosis_json(sample());
  label.replace(label.find("\"STRAGGLER\""), 11, "\"STRAGGLY\"");
  absl::StatusOr<Diagnosis> unknown = parse_diagnosis(label, "l.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("window.labels[1].name"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("STRAGGLY"));
  std::string kind = diagnosis_json(sample());
  const std::string compute = "\"kind\":\"compute\"";
  kind.replace(kind.find(compute), compute.size(), "\"kind\":\"gpu\"");
  EXPECT_THAT(parse_diagnosis(kind, "k.json").status().message(), HasSubstr("labels[1].kind"));
  std::string status = diagnosis_json(sample());
  status.replace(status.find("\"CRASHED\""), 9, "\"CRASH\"");
  EXPECT_THAT(parse_diagnosis(status, "s.json").status().message(), HasSubstr("ranks[1].status"));
}

TEST(Document, TextsCarryLabelsEvidenceAndNextSteps) {
  const std::string text = format_diagnosis(sample());
  EXPECT_THAT(text, HasSubstr("INPUT-BOUND"));
  EXPECT_THAT(text, HasSubstr("STRAGGLER(compute, rank 1)"));
  EXPECT_THAT(text, HasSubstr("waits 40%"));
  EXPECT_THAT(text, HasSubstr("next: more workers"));
  EXPECT_THAT(text, HasSubstr("data_wait"));
  EXPECT_THAT(text, HasSubstr("1m05s"));
  const std::string summary = format_run_summary(sample());
  // A crashed rank: the summary says CRASHED (as the report's badge), whatever the run's status.
  EXPECT_THAT(summary, HasSubstr("run abc CRASHED after"));
  Diagnosis finished = sample();
  finished.ranks[1].status = ProcessStatus{RunStatus::kFinished, false};
  EXPECT_THAT(format_run_summary(finished), HasSubstr("run abc FINISHED after"));
  EXPECT_THAT(summary, HasSubstr("data wait 40.0%"));
  EXPECT_THAT(summary, HasSubstr("median"));
  EXPECT_THAT(summary, HasSubstr("[9 ms, 12 ms]"));
  EXPECT_THAT(summary, HasSubstr("trainscope report /runs/abc"));
}

TEST(Keys, MapsPhasesAndRefusesNonsense) {
  KeyMap map = default_key_map();
  EXPECT_EQ(map.phase_of("IO"), Phase::kDataWait);
  EXPECT_EQ(map.phase_of(kOptimizerKey), Phase::kOptimizer);
  EXPECT_TRUE(map.is_step("BATCH"));
  EXPECT_TRUE(map.is_step("iteration"));
  ASSERT_TRUE(map.map("optimizer=opt_step").ok());
  EXPECT_EQ(map.phase_of("opt_step"), Phase::kOptimizer);
  ASSERT_TRUE(map.map("forward=opt_step").ok());  // a key means one phase
  EXPECT_EQ(map.phase_of("opt_step"), Phase::kForward);
  ASSERT_TRUE(map.map("step=train_step").ok());
  EXPECT_TRUE(map.is_step("train_step"));
  EXPECT_THAT(map.map("nonsense=x").message(), HasSubstr("unknown phase 'nonsense'"));
  EXPECT_THAT(map.map("forward").message(), HasSubstr("expected PHASE=KEY"));
  EXPECT_THAT(map.map("rest=x").message(), HasSubstr("not a key"));
}

TEST(Keys, ThresholdsByName) {
  Thresholds t;
  ASSERT_TRUE(t.set("input_bound_share=0.3").ok());
  EXPECT_EQ(t.input_bound_share, 0.3);
  EXPECT_THAT(t.set("nope", 1).message(), HasSubstr("unknown threshold 'nope'"));
  EXPECT_THAT(t.set("min_steps", -1).message(), HasSubstr(">= 0"));
  EXPECT_THAT(t.set("min_steps=abc").message(), HasSubstr("expected NAME=NUMBER"));
  // + hang_factor, hang_min_s, host_pressure_contention_share, comm_bound_share, mfu_low,
  // launch_bound_cpu_gpu_ratio, launch_bound_busy_share
  EXPECT_EQ(threshold_table().size(), 23u);
  ASSERT_TRUE(t.set("mfu_low=0.4").ok());
  EXPECT_EQ(t.mfu_low, 0.4);
  ASSERT_TRUE(t.set("host_pressure_contention_share=0.2").ok());
  EXPECT_EQ(t.host_pressure_contention_share, 0.2);
  for (const ThresholdInfo& info : threshold_table()) EXPECT_FALSE(info.meaning.empty());
}

}  // namespace
}  // namespace trainscope::diagnosis
