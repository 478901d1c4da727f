// The exposition on hand-made diagnoses: families with HELP and TYPE, each
// once and its samples together, labels (run, run_name, the named params,
// rank, host) escaped, units converted, unknown values absent, the host
// filter; --prometheus-labels' parser; and `promtool check metrics` on it
// (skipped without promtool: Debian's prometheus package, scripts/setup.sh).
#include "trainscope/prometheus/exposition.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::prometheus {
namespace {

using diagnosis::Diagnosis;
using diagnosis::Label;
using diagnosis::LabelKind;
using diagnosis::LabelName;
using diagnosis::Phase;
using diagnosis::RankNow;
using ::testing::HasSubstr;
using ::testing::Not;

RankNow rank_now(std::uint32_t rank, std::string host, double p50, double p95) {
  RankNow r;
  r.rank = rank;
  r.host = std::move(host);
  r.steps = 100 + rank;
  r.step_p50_s = p50;
  r.step_p95_s = p95;
  r.steps_per_s = 1 / p50;
  r.phase_share.fill(0.1);
  r.phase_share[static_cast<std::size_t>(Phase::kDataWait)] = 0.25;
  r.phase_share[static_cast<std::size_t>(Phase::kComm)] = stats::kNaN;  // not timed
  r.cpu_pct = 150;
  r.rss_mb = 2000;
  return r;
}

RunMetrics sample_run(std::string id = "0123abcd") {
  RunMetrics m;
  Diagnosis& d = m.diagnosis;
  d.run_id = std::move(id);
  d.run_name = "base \"a\"\\b";
  d.status = RunStatus::kRunning;
  d.elapsed_ms = 12'500;
  d.ranks = {rank_now(0, "n0", 0.2, 0.25), rank_now(1, "n1", 0.3, 0.45)};
  d.window.name = "window";
  Label straggler;
  straggler.name = LabelName::kStraggler;
  straggler.kind = LabelKind::kCompute;
  straggler.rank = 1;
  straggler.value.value = 0.1;
  Label input;
  input.name = LabelName::kInputBound;
  d.window.labels = {input, straggler};
  diagnosis::HostNow host;
  host.host = "n1";
  host.time_ms = 1;
  host.gpus.push_back(diagnosis::GpuNow{3, 87.5, 1000, 80000});
  d.host_now = {host};
  m.params = {{"lr", "0.1"}, {"batch_size", ""}};
  return m;
}

TEST(Exposition, FamiliesHaveHelpAndTypeOnceAndTheirSamplesTogether) {
  const std::string text = exposition({sample_run(), sample_run("4567ef")});
  std::istringstream lines(text);
  std::string line;
  std::map<std::string, int> help, type;
  std::vector<std::string> order;  // family of each sample, in order
  while (std::getline(lines, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      ++help[line.substr(7, line.find(' ', 7) - 7)];
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      ++type[name];
      const std::string kind = line.substr(line.rfind(' ') + 1);
      EXPECT_EQ(kind == "counter", name.size() > 6 && name.substr(name.size() - 6) == "_total")
          << line;
    } else {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(help.count(name), 1u) << "no HELP before " << line;
      EXPECT_EQ(type.count(name), 1u) << "no TYPE before " << line;
      if (order.empty() || order.back() != name) order.push_back(name);
    }
  }
  for (const auto& [name, n] : help) EXPECT_EQ(n, 1) << name;
  for (const auto& [name, n] : type) EXPECT_EQ(n, 1) << name;
  const std::set<std::string> distinct(order.begin(), order.end());
  EXPECT_EQ(distinct.size(), order.size()) << "a family's samples are split";
}

TEST(Exposition, PerRankValuesInBaseUnitsWithTheirLabels) {
  const std::string text = exposition({sample_run()});
  const std::string rank1 =
      R"({run="0123abcd",run_name="base \"a\"\\b",lr="0.1",batch_size="",rank="1",host="n1"})";
  EXPECT_THAT(text, HasSubstr("trainscope_step_p50_seconds" + rank1 + " 0.3\n"));
  EXPECT_THAT(text, HasSubstr("trainscope_step_p95_seconds" + rank1 + " 0.45\n"));
  EXPECT_THAT(text, HasSubstr("trainscope_steps_total" + rank1 + " 101\n"));
  EXPECT_THAT(text, HasSubstr("trainscope_process_cpu_ratio" + rank1 + " 1.5\n"));
  EXPECT_THAT(text,
              HasSubstr("trainscope_process_resident_memory_bytes" + rank1 + " 2000000000\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(trainscope_step_phase_ratio{run="0123abcd",run_name="base \"a\"\\b",lr="0.1",batch_size="",rank="0",host="n0",phase="data_wait"} 0.25)"));
  // Unknown is absent: comm is not timed, no GPU memory reading.
  EXPECT_THAT(text, Not(HasSubstr("phase=\"comm\"")));
  EXPECT_THAT(text, Not(HasSubstr("trainscope_process_gpu_memory_bytes{")));
  EXPECT_THAT(text, Not(HasSubstr("NaN")));
  // The host's GPU: ratio and bytes.
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(trainscope_gpu_utilization_ratio{run="0123abcd",run_name="base \"a\"\\b",lr="0.1",batch_size="",host="n1",gpu="3"} 0.875)"));
  EXPECT_THAT(text, HasSubstr("gpu=\"3\"} 80000000000\n"));
}

TEST(Exposition, ARankThatTimesNoPhaseHasNoPhaseSample) {
  // Issue 42: RankNow's phase shares began NaN for 7 of the 9 phases; sync and
  // rest read 0, shown as timed.
  RunMetrics run = sample_run();
  for (RankNow& r : run.diagnosis.ranks) r.phase_share = RankNow{}.phase_share;
  const std::string text = exposition({run});
  EXPECT_THAT(text, Not(HasSubstr("trainscope_step_phase_ratio{")));
  // comm_exposed and sync where timed.
  run.diagnosis.ranks[0].phase_share[static_cast<std::size_t>(Phase::kCommExposed)] = 0.125;
  run.diagnosis.ranks[0].phase_share[static_cast<std::size_t>(Phase::kSync)] = 0.0625;
  const std::string timed = exposition({run});
  EXPECT_THAT(timed, HasSubstr(R"(phase="comm_exposed"} 0.125)"));
  EXPECT_THAT(timed, HasSubstr(R"(phase="sync"} 0.0625)"));
}

TEST(Exposition, RunStatusDiagnosisAndStraggler) {
  const std::string text = exposition({sample_run()});
  const std::string run = R"(run="0123abcd",run_name="base \"a\"\\b",lr="0.1",batch_size="")";
  EXPECT_THAT(text, HasSubstr("trainscope_run_info{" + run + ",status=\"RUNNING\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainscope_run_elapsed_seconds{" + run + "} 12.5\n"));
  EXPECT_THAT(text, HasSubstr("trainscope_diagnosis_info{" + run +
                              R"(,scope="window",label="INPUT-BOUND",kind="",rank=""} 1)"));
  EXPECT_THAT(text, HasSubstr("trainscope_diagnosis_info{" + run +
                              R"(,scope="window",label="STRAGGLER",kind="compute",rank="1"} 1)"));
  EXPECT_THAT(text, HasSubstr("trainscope_straggler_rank{" + run + R"(,kind="compute"} 1)"));
  EXPECT_THAT(text, HasSubstr("trainscope_straggler_lag_seconds{" + run +
                              R"(,kind="compute",rank="1"} 0.1)"));
}

TEST(Exposition, AnEndedRunShowsItsRunScopeAndNoLabelIsNoData) {
  RunMetrics m = sample_run();
  m.diagnosis.status = RunStatus::kFinished;
  m.diagnosis.run.name = "run";  // no labels
  const std::string text = exposition({m});
  EXPECT_THAT(text, HasSubstr(R"(status="FINISHED"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(scope="run",label="NO-DATA",kind="",rank=""} 1)"));
  EXPECT_THAT(text, Not(HasSubstr("label=\"STRAGGLER\"")));
}

TEST(Exposition, OnlyHostKeepsThatHostsRanksAndGpus) {
  RunMetrics m = sample_run();
  m.only_host = "n0";
  const std::string text = exposition({m});
  EXPECT_THAT(text, HasSubstr("rank=\"0\",host=\"n0\""));
  EXPECT_THAT(text, Not(HasSubstr("host=\"n1\"")));
  // The run's own figures stay (the diagnosis is the run's).
  EXPECT_THAT(text, HasSubstr("trainscope_run_ranks{"));
}

TEST(Exposition, NoRunIsHelpAndTypeOnly) {
  const std::string text = exposition({});
  EXPECT_THAT(text, HasSubstr("# TYPE trainscope_steps_total counter\n"));
  EXPECT_THAT(text, Not(HasSubstr("trainscope_steps_total{")));
}

TEST(ParamLabels, NamesBecomeLabelsAndBadOnesAreRefusedByName) {
  absl::StatusOr<std::vector<ParamLabel>> labels = parse_param_labels("lr, model.depth,batch-size");
  ASSERT_TRUE(labels.ok()) << labels.status();
  ASSERT_EQ(labels->size(), 3u);
  EXPECT_EQ((*labels)[0].param, "lr");
  EXPECT_EQ((*labels)[1].param, "model.depth");
  EXPECT_EQ((*labels)[1].label, "model_depth");
  EXPECT_EQ((*labels)[2].label, "batch_size");
  for (const char* bad : {"lr,,x", "", "rank", "host", "2x", "__x", "a.b,a_b"}) {
    absl::StatusOr<std::vector<ParamLabel>> r = parse_param_labels(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
  }
  EXPECT_THAT(std::string(parse_param_labels("rank").status().message()), HasSubstr("'rank'"));
}

TEST(ExpositionPromtool, PromtoolAcceptsIt) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian's prometheus package; scripts/setup.sh)";
  }
  testing::TempDir tmp;
  const std::string path = tmp.file("metrics.txt");
  {
    std::ofstream out(path);
    out << exposition({sample_run(), sample_run("4567ef")});
  }
  const std::string report = tmp.file("promtool.txt");
  const int rc =
      std::system(("promtool check metrics < '" + path + "' > '" + report + "' 2>&1").c_str());
  std::ifstream in(report);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "") << "promtool's lint";
}

}  // namespace
}  // namespace trainscope::prometheus
