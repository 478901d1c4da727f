// The report's comparison page (`trainscope report A B --compare`): the page of
// two runs holds the verdict, both labels, every row and the step series of A
// and B downsampled; two sweeps give one pair per configuration; a saved
// comparison is a side; errors name the problem. The page in a real browser:
// tests/python/test_report.py.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/compare_page.hpp"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/report/report.hpp"

namespace trainscope::report {
namespace {

using ::testing::HasSubstr;
using ::trainscope::testing::RankJson;
using ::trainscope::testing::RunJson;
using ::trainscope::testing::TempDir;
using ::trainscope::testing::write_file;
using ::trainscope::testing::write_run_dir;
using json = nlohmann::json;
namespace fs = std::filesystem;

// A finished one-rank run of `steps` BATCH regions around `step_ms` (5%
// lognormal noise, seeded), each holding a FORWARD of half of it; the step at
// `spike_at` (when >= 0) lasts `spike_s`.
fs::path make_run(const fs::path& dir, int steps, double step_ms, std::uint64_t seed,
                  std::map<std::string, std::string> params = {}, int spike_at = -1,
                  double spike_s = 0) {
  RunJson run;
  run.name = dir.filename().string();
  run.params = std::move(params);
  RankJson rank;
  rank.status = "FINISHED";
  rank.end_time_ms = 2;
  write_run_dir(dir, run, {rank});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::string rows;
  std::int64_t t = 1'000'000'000'000;
  for (int i = 0; i < steps; ++i) {
    auto ns = static_cast<std::int64_t>(step_ms * 1e6 * std::exp(noise(rng)));
    if (i == spike_at) ns = static_cast<std::int64_t>(spike_s * 1e9);
    rows += fmt::format("FORWARD,CPU,0,0,{},{},{},0\n", t, ns / 2, i);
    rows += fmt::format("BATCH,CPU,0,0,{},{},{},0\n", t, ns, i);
    t += ns;
  }
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  return dir;
}

// The JSON the page draws from (its <script id="trainscope-data">).
json page_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"trainscope-data\">";
  const std::size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  if (begin == std::string::npos) return json();
  const std::size_t end = html.find("</script>", begin);
  return json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

double max_of(const json& values) {
  double out = -1;
  for (const json& v : values) out = std::max(out, v.get<double>());
  return out;
}

std::string rendered_error(const std::vector<std::string>& inputs) {
  ReportOptions options;
  options.inputs = inputs;
  options.compare = true;
  absl::StatusOr<std::string> page = render_report(options);
  EXPECT_FALSE(page.ok());
  return page.ok() ? std::string() : std::string(page.status().message());
}

TEST(ReportCompareTest, TwoRunsGiveTheVerdictTheRowsAndTheStepSeriesDownsampled) {
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  TempDir tmp;
  const std::string a = make_run(tmp.path() / "base", 3000, 10, 1, {}, 1500, 0.5).string();
  const std::string b = make_run(tmp.path() / "new", 3000, 11, 2).string();
  ReportOptions options;
  options.inputs = {a, b};
  options.compare = true;
  options.max_points = 200;
  std::vector<std::string> progress;
  options.progress = [&](const std::string& text, bool) { progress.push_back(text); };
  absl::StatusOr<std::string> page = render_report(options);
  ASSERT_TRUE(page.ok()) << page.status();
  // A side of one run is titled by the run's name, not its directory (issue 37).
  EXPECT_THAT(*page, HasSubstr("<title>new vs base</title>"));
  EXPECT_THAT(progress.back(), HasSubstr("compared B (1 run) with A (1 run) in"));

  const json data = page_data(*page);
  EXPECT_EQ(data["kind"], "compare");
  EXPECT_EQ(data["title"], "new vs base");
  EXPECT_EQ(data["max_points"], 200);
  const json& doc = data["comparison"];
  EXPECT_EQ(doc["format"], "trainscope.compare");  // compare_json's document, no series
  EXPECT_EQ(doc["a"]["label"], a);
  EXPECT_EQ(doc["b"]["label"], b);
  EXPECT_FALSE(doc["a"].contains("series"));
  ASSERT_EQ(doc["pairs"].size(), 1u);
  const json& pair = doc["pairs"][0];
  EXPECT_EQ(pair["overall"]["verdict"], "slower");
  EXPECT_EQ(pair["overall_basis"], "step time (BATCH)");
  EXPECT_NEAR(pair["overall"]["ratio"].get<double>(), 1.1, 0.02);
  EXPECT_THAT(*page, HasSubstr("\"verdict\":\"slower\""));
  std::vector<std::string> names;
  for (const json& row : pair["rows"]) names.push_back(row["name"].get<std::string>());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("BATCH", "FORWARD", compare::kThroughput));
  for (const std::string& name : names) EXPECT_THAT(*page, HasSubstr("\"" + name + "\""));
  // A's stall is named in the tail, not in the verdict.
  bool stall = false;
  for (const json& row : pair["rows"]) {
    stall = stall || row["note"].get<std::string>().find("a stall") != std::string::npos;
  }
  EXPECT_TRUE(stall);

  // The step key's series of each side: every step, downsampled to at most
  // max_points buckets that keep the spike.
  ASSERT_EQ(data["charts"].size(), 1u);
  const json& chart = data["charts"][0];
  EXPECT_EQ(chart["name"], "BATCH");
  EXPECT_EQ(chart["device"], "CPU");
  EXPECT_TRUE(chart["overall"]);
  for (const char* side : {"a", "b"}) {
    const json& s = chart[side];
    EXPECT_EQ(s["rows"], 3000) << side;
    EXPECT_EQ(s["runs"], 1) << side;
    EXPECT_EQ(s["run_starts"], json::array({0})) << side;
    EXPECT_LE(s["x"].size(), 200u) << side;
    EXPECT_EQ(s["x"].size(), s["hi"].size()) << side;
    EXPECT_GT(s["bucket"].get<int>(), 1) << side;
    EXPECT_LE(max_of(s["x"]), 2999) << side;
  }
  EXPECT_DOUBLE_EQ(max_of(chart["a"]["hi"]), 0.5);
  EXPECT_LT(max_of(chart["b"]["hi"]), 0.05);
}

TEST(ReportCompareTest, TwoSweepsGiveOnePairPerConfigurationEachWithItsChart) {
  TempDir tmp;
  for (const char* lr : {"0.1", "0.2"}) {
    make_run(tmp.path() / "old" / lr, 400, 10, 3, {{"lr", lr}, {"version", "1"}});
    make_run(tmp.path() / "new" / lr, 400, std::string(lr) == "0.1" ? 10 : 12, 4,
             {{"lr", lr}, {"version", "2"}});
  }
  const std::vector<std::string> inputs{(tmp.path() / "old").string(),
                                        (tmp.path() / "new").string()};
  absl::StatusOr<json> data = detail::comparison_page(inputs, 100, nullptr);
  ASSERT_TRUE(data.ok()) << data.status();
  const json& pairs = (*data)["comparison"]["pairs"];
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0]["config"], "lr=0.1");
  EXPECT_EQ(pairs[1]["config"], "lr=0.2");
  EXPECT_EQ(pairs[1]["overall"]["verdict"], "slower");
  ASSERT_EQ((*data)["charts"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const json& chart = (*data)["charts"][i];
    ASSERT_TRUE(chart.is_object()) << i;
    // Each configuration's own run on each side: 400 steps, not the sweep's 800.
    EXPECT_EQ(chart["a"]["rows"], 400) << i;
    EXPECT_EQ(chart["b"]["rows"], 400) << i;
    EXPECT_LE(chart["a"]["x"].size(), 100u);
  }
}

TEST(ReportCompareTest, FoldersOfRunsAreDrawnOneRunAfterAnother) {
  TempDir tmp;
  for (int i = 0; i < 3; ++i) {
    make_run(tmp.path() / "base" / fmt::format("r{}", i), 200, 10, 10 + i);
    make_run(tmp.path() / "new" / fmt::format("r{}", i), 300, 10, 20 + i);
  }
  absl::StatusOr<json> data = detail::comparison_page(
      {(tmp.path() / "base").string(), (tmp.path() / "new").string()}, 2000, nullptr);
  ASSERT_TRUE(data.ok()) << data.status();
  const json& chart = (*data)["charts"][0];
  EXPECT_EQ(chart["a"]["runs"], 3);
  EXPECT_EQ(chart["a"]["rows"], 600);
  EXPECT_EQ(chart["a"]["run_starts"], json::array({0, 200, 400}));
  EXPECT_EQ(chart["b"]["run_starts"], json::array({0, 300, 600}));
  EXPECT_EQ(chart["a"]["bucket"], 1);  // fits: every step shown
  EXPECT_EQ((*data)["comparison"]["pairs"][0]["overall"]["unit"], "runs");
}

TEST(ReportCompareTest, ASavedComparisonIsASideWithItsSeries) {
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  TempDir tmp;
  const fs::path a = make_run(tmp.path() / "a", 300, 10, 1);
  const fs::path b = make_run(tmp.path() / "b", 300, 10, 2);
  compare::CompareRequest request;
  request.a = {a.string()};
  request.b = {b.string()};
  absl::StatusOr<compare::Comparison> first = compare::compare(request);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string saved = (tmp.path() / "ref.json").string();
  ASSERT_TRUE(compare::write_comparison(*first, saved).ok());
  ReportOptions options;
  options.inputs = {saved + ":a", b.string()};
  options.compare = true;
  options.title = "baseline";
  const std::string out = (tmp.path() / "page.html").string();
  ASSERT_TRUE(write_report(options, out).ok());
  const json data = page_data(::trainscope::testing::read_file(out));
  EXPECT_EQ(data["title"], "baseline");
  EXPECT_EQ(data["comparison"]["a"]["label"], saved + ":a");
  EXPECT_EQ(data["charts"][0]["a"]["rows"], 300);
}

TEST(ReportCompareTest, ErrorsNameTheProblem) {
  if (chart_library().empty()) GTEST_SKIP() << "this build has no Chart.js (libjs-chart.js)";
  TempDir tmp;
  const std::string a = make_run(tmp.path() / "a", 100, 10, 1).string();
  EXPECT_EQ(rendered_error({a}), "a comparison page needs two inputs (A and B), got 1");
  EXPECT_EQ(rendered_error({a, a, a}), "a comparison page needs two inputs (A and B), got 3");
  const std::string missing = (tmp.path() / "missing").string();
  EXPECT_THAT(rendered_error({a, missing}), HasSubstr("B: " + missing + ": no such run directory"));
  RunJson run;
  write_run_dir(tmp.path() / "empty", run, {RankJson{}});
  EXPECT_THAT(rendered_error({(tmp.path() / "empty").string(), a}),
              HasSubstr("A's run " + (tmp.path() / "empty").string() + " recorded no regions"));
  // Nothing is written for a page that fails.
  ReportOptions options;
  options.inputs = {a, missing};
  options.compare = true;
  const fs::path out = tmp.path() / "x.html";
  EXPECT_FALSE(write_report(options, out.string()).ok());
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace trainscope::report
