// The report room: downsampling that keeps every spike, statistics on every
// row, the page's data for runs (two ranks, GPU and CPU, hardware, crashed,
// in progress, empty) and studies, chunked reading, and errors that name the
// input. The page in a real browser: tests/python/test_report.py.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/files.hpp"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/downsample.hpp"
#include "report/run_data.hpp"
#include "report/study.hpp"
#include "support/run_dir_test.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/report/report.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
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
  EXPECT_DOUBLE_EQ(detail::quantile_in_place(copy, 0.5), stats.median);
  copy = values;
  EXPECT_DOUBLE_EQ(detail::quantile_in_place(copy, 0.95), stats.p95);
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
  EXPECT_EQ(page["hardware"][1]["datasets"][0]["label"], "total rank 1");
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
  EXPECT_THAT(model["formula"].get<std::string>(), HasSubstr("p^(-1)"));
  EXPECT_EQ(model["points"].size(), 5u);
  EXPECT_EQ(model["curve"]["x"].size(), 48u);
  EXPECT_DOUBLE_EQ(model["curve"]["x"].back().get<double>(), 64.0);  // 4x the largest p
  EXPECT_EQ(model["measured_scaling"]["speedup"].size(), 5u);

  study = detail::study_json(*inputs, "none", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE((*study)["scaling"]["parameter"].is_null());
  study = detail::study_json(*inputs, "batch", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_THAT((*study)["scaling"]["why_none"].get<std::string>(),
              HasSubstr("no finished run has the param \"batch\""));
}

}  // namespace
}  // namespace trainscope::report
