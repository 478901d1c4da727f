// The report room: downsampling that keeps every spike, statistics on every
// row, the page's data for runs (two ranks, GPU and CPU, hardware, crashed,
// in progress, empty) and studies, chunked reading, and errors that name the
// input. The page in a real browser: tests/python/test_report.py.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/files.hpp"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/diagnosis_data.hpp"
#include "report/downsample.hpp"
#include "report/run_data.hpp"
#include "report/stalls_data.hpp"
#include "report/study.hpp"
#include "support/differential_inputs.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/report/report.hpp"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/differential.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using trainscope::testing::RankJson;
using trainscope::testing::RunJson;
using trainscope::testing::write_file;
using json = nlohmann::json;

// ---- downsampling ------------------------------------------------------------------------------

TEST(EnvelopeTest, KeepsEveryRowWhenItFits) {
  const std::vector<double> x{0, 1, 2, 3, 4, 5, 6};
  const std::vector<double> y{5, 1, 4, 2, 9, 3, 7};
  const detail::Envelope e = detail::envelope(x, y, 100);
  EXPECT_EQ(e.rows, 7u);
  EXPECT_EQ(e.bucket, 1u);
  EXPECT_EQ(e.x, x);
  EXPECT_EQ(e.lo, y);
  EXPECT_EQ(e.hi, y);
  EXPECT_EQ(e.window, 5u);
  // Rolling median over the 5 rows centred on each row (clamped at the ends).
  EXPECT_THAT(e.median, ElementsAre(4, 4, 4, 3, 4, 4, 4));
}

TEST(EnvelopeTest, EveryBucketHoldsItsMinimumAndMaximum) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> time(std::log(0.01), 0.2);
  const std::size_t n = 1'000'003;
  std::vector<double> x(n);
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i);
    y[i] = time(rng);
  }
  y[123'457] = 50.0;  // one spike in a million
  y[987'654] = 1e-9;  // and one dip
  const detail::Envelope e = detail::envelope(x, y, 1000);
  ASSERT_EQ(e.x.size(), 1000u);
  EXPECT_EQ(e.bucket, 1001u);
  EXPECT_EQ(*std::max_element(e.hi.begin(), e.hi.end()), 50.0);
  EXPECT_EQ(*std::min_element(e.lo.begin(), e.lo.end()), 1e-9);
  // Buckets are consecutive rows: bucket b covers [b*n/1000, (b+1)*n/1000).
  for (std::size_t b : {0u, 123u, 999u}) {
    const std::size_t begin = b * n / 1000;
    const std::size_t end = (b + 1) * n / 1000;
    EXPECT_EQ(e.hi[b], *std::max_element(y.begin() + begin, y.begin() + end)) << b;
    EXPECT_EQ(e.lo[b], *std::min_element(y.begin() + begin, y.begin() + end)) << b;
    EXPECT_LE(e.lo[b], e.median[b]);
    EXPECT_LE(e.median[b], e.p95[b]);
  }
}

TEST(MinmaxLineTest, KeepsTheExtremesOfEveryBucketInOrder) {
  std::vector<double> x(10'000);
  std::vector<double> y(10'000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<double>(i);
    y[i] = std::sin(static_cast<double>(i) / 100.0);
  }
  y[5'000] = 500.0;
  const detail::Line line = detail::minmax_line(x, y, 200);
  EXPECT_TRUE(line.downsampled);
  EXPECT_LE(line.x.size(), 200u);
  EXPECT_TRUE(std::is_sorted(line.x.begin(), line.x.end()));
  EXPECT_EQ(*std::max_element(line.y.begin(), line.y.end()), 500.0);
  const detail::Line small = detail::minmax_line({1, 2}, {3, 4}, 200);
  EXPECT_FALSE(small.downsampled);
  EXPECT_THAT(small.y, ElementsAre(3, 4));
}

TEST(HistogramTest, CountsEveryValueWithLogBinsForWideRanges) {
  std::vector<double> values;
  for (int i = 0; i < 990; ++i) values.push_back(0.01 + 1e-5 * i);
  for (int i = 0; i < 10; ++i) values.push_back(1.0);  // 100x slower
  const detail::Histogram h = detail::histogram(values, 40);
  EXPECT_TRUE(h.log);
  ASSERT_EQ(h.counts.size(), 40u);
  ASSERT_EQ(h.edges.size(), 41u);
  std::uint64_t total = 0;
  for (std::uint64_t c : h.counts) total += c;
  EXPECT_EQ(total, 1000u);
  EXPECT_EQ(h.counts.back(), 10u);
  EXPECT_EQ(h.edges.front(), 0.01);
  EXPECT_EQ(h.edges.back(), 1.0);
  const detail::Histogram flat = detail::histogram({2.0, 2.0, 2.0}, 10);
  EXPECT_FALSE(flat.log);
  EXPECT_THAT(flat.counts, ElementsAre(3u));
}

TEST(QuantileTest, InterpolatesAsTimeStats) {
  std::vector<double> values{4, 1, 3, 2, 10, 7};
  std::vector<double> copy = values;
  const TimeStats stats = compute_time_stats(values);
  EXPECT_DOUBLE_EQ(stats::quantile_in_place(&copy, 0.5), stats.median);
  copy = values;
  EXPECT_DOUBLE_EQ(stats::quantile_in_place(&copy, 0.95), stats.p95);
  EXPECT_EQ(detail::round_significant(0.0123456, 3), 0.0123);
  EXPECT_EQ(detail::round_significant(98765.4, 2), 99000.0);
}

// ---- run data
// --------------------------------------------------------------------------------------

class ReportRunTest : public trainscope::testing::RunDirTest {
 protected:
  // A finished run of two ranks with CPU and GPU BATCH regions (rank 1 slower) and host
  // readings; returns its directory.
  std::string two_rank_run(int rows) {
    RunJson run;
    run.name = "two-ranks";
    run.params = {{"lr", "0.1"}};
    run.start_time_ms = 1'761'000'000'000;
    std::vector<RankJson> ranks(2);
    for (std::uint32_t r = 0; r < 2; ++r) {
      ranks[r].rank = r;
      ranks[r].world_size = 2;
      ranks[r].status = "FINISHED";
      ranks[r].start_time_ms = run.start_time_ms;
      ranks[r].end_time_ms = run.start_time_ms + 60'000;
      ranks[r].heartbeat_ms = ranks[r].end_time_ms;
    }
    const auto dir = write_run_dir("two", run, ranks);
    for (std::uint32_t r = 0; r < 2; ++r) {
      std::string lines;
      for (int i = 0; i < rows; ++i) {
        const std::int64_t start = run.start_time_ms * 1'000'000 + i * 10'000'000LL;
        const std::int64_t cpu = 1'000'000 * (10 + (i % 7) + 5 * r) * (i == rows / 2 ? 20 : 1);
        lines += fmt::format("BATCH,CPU,{},0,{},{},{},0\n", r, start, cpu, i);
        lines += fmt::format("BATCH,GPU,{},0,{},{},{},0\n", r, start, cpu / 2, i);
      }
      write_file(dir / fmt::format("regions-{}.csv", r), lines, /*append=*/true);
    }
    std::string host = "key,value,step,timestamp_ms,rank\n";
    for (int i = 0; i < 100; ++i) {
      host += fmt::format("system/gpu.0.util_pct,{},0,{},\n", i == 50 ? 99.5 : 40.0,
                          run.start_time_ms + i * 500);
      host += fmt::format("system/proc.cpu_pct,{},0,{},1\n", 120.0, run.start_time_ms + i * 500);
    }
    write_file(dir / "host-h.csv", host);
    return dir.string();
  }
};

TEST_F(ReportRunTest, ReadsEveryRowInChunksAndComputesStatisticsOnAll) {
  const std::string dir = two_rank_run(5000);
  std::vector<std::string> lines;
  absl::StatusOr<detail::RunData> run =
      detail::read_run_data(dir, {}, [&](const std::string& text, bool) { lines.push_back(text); });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->region_rows, 20'000u);
  EXPECT_EQ(run->hardware_rows, 200u);
  ASSERT_EQ(run->regions.size(), 2u);  // BATCH CPU, BATCH GPU
  EXPECT_EQ(run->regions[0].device, Device::kCPU);
  EXPECT_EQ(run->regions[0].seconds.size(), 10'000u);

  const json page = detail::run_page_json(*run, 500);
  const json& cpu = page["stats"][0];
  EXPECT_EQ(cpu["key"], "BATCH");
  EXPECT_EQ(cpu["count"], 10'000);
  EXPECT_DOUBLE_EQ(cpu["median"].get<double>(), compute_time_stats(run->regions[0].seconds).median);
  EXPECT_EQ(page["series"][0]["rows"], 10'000);
  EXPECT_EQ(page["series"][0]["x"].size(), 500u);
  // Both ranks' spikes (20x) are in the envelope.
  double hi = 0;
  for (const json& v : page["series"][0]["hi"]) hi = std::max(hi, v.get<double>());
  EXPECT_DOUBLE_EQ(hi, 0.001 * (10 + (2500 % 7) + 5) * 20);
  // Per rank and the slowest rank per step: rank 1 is 5 ms slower on every step.
  EXPECT_EQ(page["rank_stats"].size(), 4u);
  const json& slow = page["stragglers"];
  EXPECT_EQ(slow["key"], "BATCH");
  EXPECT_EQ(slow["steps"], 5000);
  EXPECT_EQ(slow["slowest_count"], json::array({0, 5000}));
  // 5 ms per step, 100 ms on the step where both ranks are 20x slower.
  EXPECT_NEAR(slow["lag_total_s"].get<double>(), 4999 * 0.005 + 0.1, 1e-9);
  // Hardware on the run's time axis, the per-process reading labelled by its rank.
  ASSERT_EQ(page["hardware"].size(), 2u);
  EXPECT_EQ(page["hardware"][0]["chart"], "gpu.util_pct");
  EXPECT_EQ(page["hardware"][0]["datasets"][0]["label"], "0");
  EXPECT_EQ(page["hardware"][1]["datasets"][0]["label"], "rank 1");
  EXPECT_DOUBLE_EQ(page["hardware"][0]["datasets"][0]["x"][50].get<double>(), 25.0);
  EXPECT_EQ(page["run"]["status"], "FINISHED");
  EXPECT_EQ(page["run"]["params"]["lr"], "0.1");
}

TEST_F(ReportRunTest, ChunkedReadsMatchAWholeRead) {
  const std::string dir = two_rank_run(3000);
  const RunReader reader = open_run(dir);
  absl::StatusOr<Chunk<RegionRow>> whole = reader.read_regions(0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::vector<RegionRow> rows;
  std::uint64_t offset = 0;
  int reads = 0;
  for (;; ++reads) {
    absl::StatusOr<Chunk<RegionRow>> chunk = reader.read_regions(0, offset, 10'000);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    EXPECT_FALSE(chunk->truncated);
    rows.insert(rows.end(), chunk->rows.begin(), chunk->rows.end());
    if (chunk->next_offset == offset) break;
    offset = chunk->next_offset;
  }
  EXPECT_GT(reads, 10);
  EXPECT_EQ(offset, whole->next_offset);
  ASSERT_EQ(rows.size(), whole->rows.size());
  EXPECT_EQ(rows.back().start_unix_ns, whole->rows.back().start_unix_ns);
  // A window smaller than one line still reads that line.
  absl::StatusOr<Chunk<RegionRow>> tiny = reader.read_regions(0, 0, 3);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_GE(tiny->rows.size(), 1u);
  EXPECT_LE(tiny->next_offset, 4096u);
}

TEST_F(ReportRunTest, CrashedInProgressAndEmptyRuns) {
  RankJson crashed;  // RUNNING on another host, heartbeat long past
  const auto dead = write_run_dir("dead", RunJson{}, {crashed});
  absl::StatusOr<detail::RunData> run = detail::read_run_data(dead.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(detail::display_status(*run), "CRASHED");
  json meta = detail::run_meta_json(*run);
  EXPECT_TRUE(meta["crashed"]);
  EXPECT_FALSE(meta["in_progress"]);

  RankJson live;
  live.host = trainscope::detail::this_host();
  live.pid = ::getpid();
  live.heartbeat_ms = trainscope::detail::unix_now_ms();
  const auto alive = write_run_dir("alive", RunJson{}, {live});
  run = detail::read_run_data(alive.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  meta = detail::run_meta_json(*run);
  EXPECT_EQ(meta["status"], "RUNNING");
  EXPECT_TRUE(meta["in_progress"]);

  const json page = detail::run_page_json(*run, 100);  // no rows at all
  EXPECT_TRUE(page["stats"].empty());
  EXPECT_TRUE(page["series"].empty());
  EXPECT_TRUE(page["stragglers"].is_null());
}

TEST_F(ReportRunTest, PageEmbedsTheLibraryAndTheData) {
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  ReportOptions options;
  options.inputs = {two_rank_run(100)};
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("<title>two-ranks</title>"));
  EXPECT_THAT(*page, HasSubstr("Chart.js v"));
  EXPECT_THAT(*page, HasSubstr("id=\"trainscope-data\">{"));
  // Nothing from the data can end a script early.
  RunJson run;
  run.name = "</script><b>x";
  const auto dir = write_run_dir("evil", run, {RankJson{}});
  options.inputs = {dir.string()};
  page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("\\u003c/script>\\u003cb>x"));
  EXPECT_THAT(*page, HasSubstr("<title>&lt;/script&gt;&lt;b&gt;x</title>"));
  const std::string path = (root_ / "page.html").string();
  ASSERT_TRUE(write_report(options, path).ok());
  EXPECT_EQ(trainscope::testing::read_file(path), *page);
}

TEST_F(ReportRunTest, InputsAreRunsSweepsOrDirectoriesOfRuns) {
  write_run_dir("runs/a", RunJson{}, {RankJson{}});
  RunJson other;
  other.id = "fedcba9876543210fedcba9876543210";
  write_run_dir("runs/b", other, {RankJson{}});
  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({(root_ / "runs").string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_EQ(inputs->runs.size(), 2u);
  EXPECT_FALSE(inputs->single_run);

  // The same run given twice is one row; one run given alone is a run page.
  inputs = detail::classify_inputs({(root_ / "runs/a").string(), (root_ / "runs/a/").string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_EQ(inputs->runs.size(), 1u);
  inputs = detail::classify_inputs({(root_ / "runs/a/").string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_TRUE(inputs->single_run);

  const std::string missing = (root_ / "nope").string();
  inputs = detail::classify_inputs({missing});
  EXPECT_TRUE(absl::IsNotFound(inputs.status()));
  EXPECT_THAT(inputs.status().message(), HasSubstr(missing + ": no such file or directory"));
  std::filesystem::create_directories(root_ / "empty");
  inputs = detail::classify_inputs({(root_ / "empty").string()});
  EXPECT_THAT(inputs.status().message(),
              HasSubstr("empty: not a trainscope run (no run.json), sweep (no sweep.json)"));
  write_file(root_ / "file.txt", "x");
  inputs = detail::classify_inputs({(root_ / "file.txt").string()});
  EXPECT_THAT(inputs.status().message(), HasSubstr("file.txt: a file, not a run directory"));
  std::filesystem::create_directories(root_ / "sweep");
  write_file(root_ / "sweep/sweep.json", "{\"version\": 1, \"jobs\": [{}]}");
  inputs = detail::classify_inputs({(root_ / "sweep").string()});
  EXPECT_THAT(inputs.status().message(), HasSubstr("sweep.json"));
}

TEST_F(ReportRunTest, StudyOfRunsWithAScalingParameter) {
  // Five runs, BATCH ~ 1 + 8/p ms, and a damaged one that gets a row saying so.
  for (int p : {1, 2, 4, 8, 16}) {
    RunJson run;
    run.id = fmt::format("{:032x}", p);
    run.params = {{"p", std::to_string(p)}};
    RankJson rank;
    rank.status = "FINISHED";
    rank.end_time_ms = 2;
    const auto dir = write_run_dir(fmt::format("study/p{}", p), run, {rank});
    std::string lines;
    for (int i = 0; i < 10; ++i) {
      lines +=
          fmt::format("BATCH,CPU,0,0,{},{},{},0\n", 1000 + i, 1'000'000 + 8'000'000 / p + i, i);
    }
    write_file(dir / "regions-0.csv", lines, /*append=*/true);
  }
  RunJson broken;
  broken.id = fmt::format("{:032x}", 99);
  const auto bad = write_run_dir("study/broken", broken, {RankJson{}});
  write_file(bad / "regions-0.csv", "BATCH,TPU,0,0,1,1,0,0\n", /*append=*/true);

  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({(root_ / "study").string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  absl::StatusOr<json> study = detail::study_json(*inputs, "", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ((*study)["runs"].size(), 6u);
  const json& damaged = (*study)["runs"][0];
  EXPECT_EQ(damaged["status"], "UNREADABLE");
  EXPECT_THAT(damaged["error"].get<std::string>(), HasSubstr("regions-0.csv:2: device"));
  EXPECT_EQ((*study)["params"], json::array({"p"}));
  const json& scaling = (*study)["scaling"];
  EXPECT_EQ(scaling["parameter"], "p");
  ASSERT_EQ(scaling["models"].size(), 1u);
  const json& model = scaling["models"][0];
  ASSERT_FALSE(model.contains("error")) << model.dump();
  // The scaling room's Model JSON document, whole: the reader takes it back.
  absl::StatusOr<scaling::ModelDocument> document =
      scaling::parse_model_document(model["model"].dump(), "report");
  ASSERT_TRUE(document.ok()) << document.status();
  EXPECT_EQ(document->parameters, std::vector<std::string>{"p"});
  ASSERT_EQ(document->models.size(), 1u);
  const scaling::Model& fitted = document->models[0].model;
  EXPECT_THAT(fitted.formula(), HasSubstr("p^(-1)"));
  EXPECT_EQ(model["model"]["models"][0]["formula"], fitted.formula());
  EXPECT_EQ(model["model"]["models"][0]["cpp"], fitted.cpp());
  EXPECT_TRUE(model["model"]["models"][0]["costs"].contains("nrss"));
  for (const json& point : model["points"]) {  // the model read back is the one fitted
    double mean = 0;
    for (const json& v : point["values"]) mean += v.get<double>() / point["values"].size();
    EXPECT_NEAR(fitted.evaluate(std::vector<double>{point["x"].get<double>()}), mean, 0.01 * mean);
  }
  EXPECT_EQ(model["points"].size(), 5u);
  EXPECT_EQ(model["curve"]["x"].size(), 48u);
  EXPECT_DOUBLE_EQ(model["curve"]["x"].back().get<double>(), 64.0);  // 4x the largest p
  // The param was found varying, not named: no speedup or efficiency (they mean
  // something only for a param that splits a fixed amount of work; issue 26).
  EXPECT_EQ(scaling["views"], false);
  EXPECT_FALSE(model.contains("measured_scaling"));
  EXPECT_FALSE(model.contains("modeled_scaling"));
  study = detail::study_json(*inputs, "p", nullptr);  // --scaling p: named
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ((*study)["scaling"]["views"], true);
  EXPECT_EQ((*study)["scaling"]["models"][0]["measured_scaling"]["speedup"].size(), 5u);
  EXPECT_TRUE((*study)["scaling"]["models"][0].contains("modeled_scaling"));

  study = detail::study_json(*inputs, "none", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE((*study)["scaling"]["parameter"].is_null());
  study = detail::study_json(*inputs, "batch", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_THAT((*study)["scaling"]["why_none"].get<std::string>(),
              HasSubstr("no finished run has the param \"batch\""));
}

// ---- data stalls -------------------------------------------------------------------------------

// A run as the timed loader records it (support/run_files.hpp's timed_loader_rows): `passes`
// passes of 10 batches; pass 1 waits 50 ms for its first batch and 1 ms after, later passes
// 4 ms for every batch (one 30 ms spike in pass 2); each iteration is 10 ms of compute + the
// wait.
std::filesystem::path write_stalls_run(const std::filesystem::path& dir, int passes,
                                       std::map<std::string, std::string> tags = {}) {
  trainscope::testing::RunJson run;
  run.params = {{"stalls.batch_size", "16"}};
  run.tags = std::move(tags);
  run.start_time_ms = 1'700'000'000'000;
  trainscope::testing::RankJson rank;
  rank.status = "FINISHED";
  trainscope::testing::write_run_dir(dir, run, {rank});
  std::int64_t t = run.start_time_ms * 1'000'000 + 500'000'000;
  constexpr std::int64_t kMs = 1'000'000;
  const std::string rows = trainscope::testing::timed_loader_rows(
      passes, 10, 10 * kMs,
      [](int pass, int b) -> std::int64_t {
        if (pass == 0) return (b == 0 ? 50 : 1) * kMs;
        return (pass == 1 && b == 6 ? 30 : 4) * kMs;
      },
      &t);
  trainscope::testing::write_file(dir / "regions-0.csv", rows, /*append=*/true);
  return dir;
}

void expect_pass(const json& shown, const stalls::PassStalls& p) {
  EXPECT_EQ(shown["pass"], p.index);
  EXPECT_EQ(shown["wall_s"].get<double>(), p.wall_s);
  EXPECT_EQ(shown["wait_s"].get<double>(), p.wait_s);
  EXPECT_EQ(shown["data_wait_share"].get<double>(), p.share);
  EXPECT_EQ(shown["input_bound"], stalls::input_bound_class(p.share));
  EXPECT_EQ(shown["batches"], p.batches);
  EXPECT_EQ(shown["wait_p50_s"].get<double>(), p.wait_p50_s);
  EXPECT_EQ(shown["wait_p95_s"].get<double>(), p.wait_p95_s);
  EXPECT_EQ(shown["wait_max_s"].get<double>(), p.wait_max_s);
  EXPECT_EQ(shown["startup_wait_share"].get<double>(), p.startup_wait_share);
  EXPECT_EQ(shown["bunched"], p.bunched);
}

// The page's data, from the page itself.
json page_data(const std::string& page) {
  const std::string open = "id=\"trainscope-data\">";
  const std::size_t begin = page.find(open) + open.size();
  const std::size_t end = page.find("</script>", begin);
  return json::parse(page.substr(begin, end - begin));
}

TEST_F(ReportRunTest, RunPageShowsTheDataStallsOfAnalyzeRun) {
  const auto dir = write_stalls_run(root_ / "stalls", 3);
  absl::StatusOr<stalls::RunStalls> expected = stalls::analyze_run(dir.string());
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::StatusOr<detail::RunData> run = detail::read_run_data(dir.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const json shown = detail::run_stalls_json(*run, 16);
  ASSERT_TRUE(shown.is_object()) << shown.dump();
  ASSERT_FALSE(shown.contains("error")) << shown.dump();
  ASSERT_EQ(shown["passes"].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) expect_pass(shown["passes"][i], expected->passes[i]);
  expect_pass(shown["run"], expected->total);
  EXPECT_EQ(shown["run"]["input_bound"], "highly");
  EXPECT_EQ(shown["pattern"], expected->pattern);
  EXPECT_EQ(shown["batch_size"], 16);
  EXPECT_EQ(shown["rank"], 0);
  EXPECT_EQ(shown["iterations"], expected->iteration_s.size());
  // Every wait over the run, 30 of them in at most 16 buckets: the spikes stay.
  const json& waits = shown["waits"];
  EXPECT_EQ(waits["rows"], 30);
  EXPECT_EQ(waits["x"].size(), 16u);
  EXPECT_EQ(waits["bucket"], 2);
  double hi = 0;
  for (const json& v : waits["hi"]) hi = std::max(hi, v.get<double>());
  EXPECT_DOUBLE_EQ(hi, 0.05);
  EXPECT_DOUBLE_EQ(waits["x"][0].get<double>(), 0.5);  // seconds since the run's start
  // The passes start where analyze_run's windows do.
  ASSERT_EQ(shown["pass_starts_s"].size(), 3u);
  EXPECT_DOUBLE_EQ(shown["pass_starts_s"][0].get<double>(), 0.5);
  // Pass 1's loader_epoch row lasts 0.159 s: its 50 ms first wait, before any
  // step, is in none of its steps' periods, and its first 5 steps are the
  // warm-up (wall_s: steps 6-10, 0.058 s: docs/steps.md).
  EXPECT_NEAR(expected->passes[0].wall_s, 0.058, 1e-9);
  EXPECT_NEAR(shown["pass_starts_s"][1].get<double>(), 0.5 + 0.159, 1e-9);

  // The page holds the same figures; a run without IO rows has no section.
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  ReportOptions options;
  options.inputs = {dir.string()};
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  const json data = page_data(*page);
  EXPECT_EQ(data["stalls"]["passes"], shown["passes"]);
  EXPECT_TRUE(data["stalls_analysis"].is_null());
  options.inputs = {two_rank_run(20)};
  page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page_data(*page)["stalls"].is_null());
}

TEST_F(ReportRunTest, AFailedStallAnalysisIsANoteNotAFailedPage) {
  // IO rows, but a damaged line (written after read_run_data read the file) fails
  // analyze_run: the section says so, the page is still written.
  const auto dir = write_stalls_run(root_ / "stalls", 2);
  absl::StatusOr<detail::RunData> run = detail::read_run_data(dir.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  trainscope::testing::write_file(dir / "regions-0.csv", "IO,TPU,0,0,1,1,0,0\n", /*append=*/true);
  const json shown = detail::run_stalls_json(*run, 100);
  ASSERT_TRUE(shown.contains("error")) << shown.dump();
  EXPECT_THAT(shown["error"].get<std::string>(),
              HasSubstr("the data-stall analysis of this run failed"));
  EXPECT_THAT(shown["error"].get<std::string>(), HasSubstr("regions-0.csv:"));
}

// What `trainscope stalls --dataset` stores, in small: the stalls room's
// conclusions from made-up runs, as its writer writes them.
json stalls_analysis_file(const std::string& dir) {
  return json::parse(stalls::differential_json(
      stalls::conclude(trainscope::testing::made_up_differential_inputs(dir))));
}

TEST_F(ReportRunTest, AStallsAnalysisDirectoryIsAStudyWithItsAnalysis) {
  const std::filesystem::path analysis = root_ / "analysis";
  for (const char* leg : {"warm-num_workers-2", "warm", "cold", "synthetic"}) {
    write_stalls_run(
        analysis / "runs" / leg, 2,
        {{"trainscope.stalls.analysis", analysis.string()}, {"trainscope.stalls.leg", leg}});
  }
  const json file = stalls_analysis_file(analysis.string());
  trainscope::testing::write_file(analysis / "stalls.json", file.dump(1));

  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({analysis.string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_FALSE(inputs->single_run);
  EXPECT_THAT(inputs->stalls_dirs, ElementsAre(analysis.string()));
  std::vector<std::string> legs;
  for (const detail::StudyRun& r : inputs->runs) {
    legs.push_back(std::filesystem::path(r.dir).filename().string());
  }
  EXPECT_THAT(legs, ElementsAre("synthetic", "cold", "warm", "warm-num_workers-2"));
  absl::StatusOr<json> study = detail::study_json(*inputs, "", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ((*study)["stalls_analyses"].size(), 1u);  // given, and named by every run's tag
  const json& shown = (*study)["stalls_analyses"][0];
  ASSERT_FALSE(shown.contains("error")) << shown.dump();
  EXPECT_EQ(shown["analysis"], file);
  EXPECT_EQ(shown["file"], (analysis / "stalls.json").string());

  // One leg alone: a run page with its live stalls and its analysis (found through its tag,
  // or in ../.. when the analysis was moved).
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  ReportOptions options;
  options.inputs = {(analysis / "runs" / "cold").string()};
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  json data = page_data(*page);
  EXPECT_EQ(data["stalls_analysis"]["leg"], "cold");
  EXPECT_EQ(data["stalls_analysis"]["analysis"], file);
  EXPECT_EQ(data["stalls"]["passes"].size(), 2u);
  std::filesystem::rename(analysis, root_ / "moved");
  options.inputs = {(root_ / "moved" / "runs" / "cold").string()};
  page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  data = page_data(*page);
  EXPECT_EQ(data["stalls_analysis"]["dir"], (root_ / "moved").string());
  EXPECT_EQ(data["stalls_analysis"]["analysis"], file);
  options.inputs = {(root_ / "moved").string()};
  page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("<title>data stalls "));
  EXPECT_EQ(page_data(*page)["kind"], "study");
}

TEST_F(ReportRunTest, ADamagedStallsJsonIsANoteNamingTheFileAndTheProblem) {
  const std::filesystem::path analysis = root_ / "analysis";
  for (const char* leg : {"synthetic", "cold", "warm"}) {
    write_stalls_run(
        analysis / "runs" / leg, 1,
        {{"trainscope.stalls.analysis", analysis.string()}, {"trainscope.stalls.leg", leg}});
  }
  const std::string file = (analysis / "stalls.json").string();
  const auto note = [&](const std::string& text) {
    trainscope::testing::write_file(analysis / "stalls.json", text);
    absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({analysis.string()});
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    if (!inputs.ok()) return std::string();
    absl::StatusOr<json> study = detail::study_json(*inputs, "none", nullptr);
    EXPECT_TRUE(study.ok()) << study.status();
    if (!study.ok()) return std::string();
    EXPECT_EQ((*study)["runs"].size(), 3u);  // the runs are still shown
    const json& shown = (*study)["stalls_analyses"].at(0);
    EXPECT_FALSE(shown.contains("analysis"));
    return shown.value("error", std::string());
  };
  EXPECT_THAT(note("{\"runs\": {"), HasSubstr(file + ": not valid JSON: parse error at line 1"));
  EXPECT_THAT(note("[1, 2]"),
              HasSubstr(file + ": not a trainscope stalls analysis: an array, not an object"));
  json damaged = stalls_analysis_file(analysis.string());
  damaged["differential"].erase("prep_share");
  EXPECT_THAT(note(damaged.dump()), HasSubstr(file + ": not a trainscope stalls analysis: "
                                                     "differential.prep_share: missing"));
  damaged = stalls_analysis_file(analysis.string());
  damaged["runs"]["cold"]["time_s"] = "0.4";
  EXPECT_THAT(note(damaged.dump()), HasSubstr("runs.cold.time_s: a string, not a number"));
  damaged = stalls_analysis_file(analysis.string());
  damaged["what_if"]["cache"]["points"][1] = 7;
  EXPECT_THAT(note(damaged.dump()), HasSubstr("what_if.cache.points[1]: a number, not an object"));
  damaged = stalls_analysis_file(analysis.string());
  damaged["findings"] = json::array({"ok", 3});
  EXPECT_THAT(note(damaged.dump()), HasSubstr("findings[1]: a number, not a string"));

  // The run page of a leg with a damaged analysis is still written, with the note.
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  trainscope::testing::write_file(analysis / "stalls.json", "not json");
  ReportOptions options;
  options.inputs = {(analysis / "runs" / "warm").string()};
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  const json data = page_data(*page);
  EXPECT_THAT(data["stalls_analysis"]["error"].get<std::string>(),
              HasSubstr(file + ": not valid JSON"));
  EXPECT_EQ(data["stalls"]["passes"].size(), 1u);
  // Without its stalls.json (an analysis that did not finish) the note says so.
  std::filesystem::remove(analysis / "stalls.json");
  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({analysis.string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();  // a directory with its runs in runs/
  EXPECT_TRUE(inputs->stalls_dirs.empty());
  ASSERT_EQ(inputs->runs.size(), 3u);
  EXPECT_EQ(std::filesystem::path(inputs->runs[0].dir).filename(), "synthetic");  // as they ran
  absl::StatusOr<json> study = detail::study_json(*inputs, "none", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_THAT((*study)["stalls_analyses"].at(0)["error"].get<std::string>(),
              HasSubstr(file + ": no such file (the analysis did not finish"));
}

// ---- the diagnosis at the top of a run page ----------------------------------------------------

// One rank, 60 steps (BATCH) of about 10 ms, each waiting about 6 ms for data
// (IO) first: INPUT-BOUND by construction, a data-wait share near 0.6.
std::filesystem::path write_input_bound_run(const std::filesystem::path& dir) {
  RunJson run;
  run.start_time_ms = 1'700'000'000'000;
  RankJson rank;
  rank.status = "FINISHED";
  rank.start_time_ms = run.start_time_ms;
  rank.end_time_ms = run.start_time_ms + 1'000;
  rank.heartbeat_ms = rank.end_time_ms;
  trainscope::testing::write_run_dir(dir, run, {rank});
  constexpr std::int64_t kMs = 1'000'000;
  std::int64_t t = run.start_time_ms * kMs + 10 * kMs;
  std::string rows;
  for (int step = 0; step < 60; ++step) {
    const std::int64_t wait = 6 * kMs + (step % 5) * 100'000;
    const std::int64_t batch = 10 * kMs + (step % 3) * 150'000;
    rows += fmt::format("IO,CPU,0,0,{},{},{},0\n", t, wait, step);  // rows as they end
    rows += fmt::format("BATCH,CPU,0,0,{},{},{},0\n", t, batch, step);
    t += batch;
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  return dir;
}

TEST_F(ReportRunTest, RunPageOpensWithTheDiagnosisOfDiagnoseRun) {
  const std::string dir = write_input_bound_run(root_ / "input-bound").string();
  absl::StatusOr<diagnosis::Diagnosis> expected = diagnosis::diagnose_run(dir);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const json shown = detail::run_diagnosis_json(dir);
  ASSERT_FALSE(shown.contains("error")) << shown.dump();
  // The document `trainscope diagnose RUN --json` prints, from the room's one writer.
  EXPECT_EQ(shown, json::parse(diagnosis::diagnosis_json(*expected)));
  EXPECT_EQ(shown["format"], "trainscope.diagnosis");
  EXPECT_THAT(shown["headline"].get<std::string>(), StartsWith("INPUT-BOUND"));
  ASSERT_FALSE(shown["run"]["labels"].empty());
  const json& label = shown["run"]["labels"][0];
  EXPECT_EQ(label["name"], "INPUT-BOUND");
  EXPECT_NEAR(label["value"]["value"].get<double>(), 0.6, 0.05);
  EXPECT_FALSE(label["evidence"].get<std::string>().empty());
  EXPECT_FALSE(label["next_step"].get<std::string>().empty());
  bool data_wait = false;
  for (const json& p : shown["run"]["phases"]) data_wait |= p["phase"] == "data_wait";
  EXPECT_TRUE(data_wait) << shown["run"]["phases"].dump();

  // The page embeds the same document; a run the diagnosis cannot read is a note.
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  ReportOptions options;
  options.inputs = {dir};
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page_data(*page)["diagnosis"], shown);
}

TEST_F(ReportRunTest, AFailedDiagnosisIsANoteNamingTheFileNotAFailedPage) {
  const auto dir = write_input_bound_run(root_ / "damaged");
  write_file(dir / "regions-0.csv", "IO,TPU,0,0,1,1,0,0\n", /*append=*/true);
  const json shown = detail::run_diagnosis_json(dir.string());
  ASSERT_TRUE(shown.contains("error")) << shown.dump();
  EXPECT_THAT(shown["error"].get<std::string>(), HasSubstr("the diagnosis of this run failed"));
  EXPECT_THAT(shown["error"].get<std::string>(), HasSubstr("regions-0.csv"));
}

}  // namespace
}  // namespace trainscope::report
