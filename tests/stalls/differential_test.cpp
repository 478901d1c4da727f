// The differential analysis without launching anything: conclude() on
// made-up runs (tests/support/differential_inputs.hpp), stalls.json's one
// writer and one reader (a round trip, and errors naming the file and the
// key), the printed text, and run_differential's checks before any run.
// tests/python/test_stalls.py runs real commands through the same call.
#include "trainscope/stalls/differential.hpp"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/differential_inputs.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::stalls {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Differential, ConcludesFromTheMeasuredRuns) {
  const DifferentialAnalysis a = conclude(testing::made_up_differential_inputs("/a"));
  EXPECT_EQ(a.batch_size, 8);  // the cold run's stalls.batch_size
  EXPECT_EQ(a.iterations, 10);
  EXPECT_EQ(a.warmup, 2);
  const Differential& d = a.differential;
  // N B = 80 samples: ingestion 80 / T1, prep 80 / T3, fetch 80 / (T2 - T3).
  EXPECT_NEAR(d.ingestion_rate, 800, 1e-9);
  EXPECT_NEAR(d.prep_rate, 80 / 0.35, 1e-9);
  EXPECT_NEAR(d.fetch_rate, 1600, 1e-6);
  EXPECT_NEAR(d.prep_share, 0.25 / 0.4, 1e-12);
  EXPECT_NEAR(d.fetch_share, 0.05 / 0.4, 1e-12);
  EXPECT_NEAR(d.live_wait_share, 0.74, 1e-12);
  EXPECT_TRUE(d.agree);  // 75% against 74%
  // The cold run's process tree read 2 MB for (W + N + 1) B samples, from a
  // 100 MB/s disk; nothing of the dataset was cached.
  EXPECT_NEAR(a.cache.bytes_per_sample, 2e6 / 104, 1e-9);
  EXPECT_EQ(a.cache.disk_rate_from, "diskstats");
  EXPECT_NEAR(a.cache.model.points.back().samples_per_s, d.prep_rate, 1e-9);
  // 2 workers gave 80 / 0.2 = 400 samples/s while prep-bound: 200 per worker,
  // 4 (the cores) keep up with the 800 the step takes.
  ASSERT_TRUE(a.workers.has_value());
  EXPECT_EQ(a.workers->key, "num_workers");
  ASSERT_TRUE(a.workers->fit.has_value()) << a.workers->note;
  EXPECT_NEAR(a.workers->fit->per_worker_rate, 200, 1e-9);
  EXPECT_EQ(a.workers->fit->workers_to_keep_up, 4);
  // The loader alone: 80 / 0.05 = 1600 samples/s, twice what one node's GPUs take.
  EXPECT_NEAR(a.gpus.loader_rate, 1600, 1e-6);
  EXPECT_NEAR(a.gpus.gpus_until_data_bound, 2, 1e-9);
  ASSERT_EQ(a.findings.size(), 3u);
  EXPECT_THAT(a.findings[0], HasSubstr("prep-bound: 62.5% of the cold run's time"));
  EXPECT_THAT(a.findings[0], HasSubstr("4 loader workers would prepare 800 samples/s"));
  EXPECT_THAT(a.findings[1], HasSubstr("fetch-bound: 12.5% of the cold run's time"));
  EXPECT_THAT(a.findings[2], HasSubstr("keeps up with up to 2.0x this node's GPUs"));
  EXPECT_TRUE(a.notes.empty());
}

TEST(Differential, SaysWhatItCouldNotConclude) {
  DifferentialInputs in = testing::made_up_differential_inputs("/a");
  in.runs.cold.stalls.batch_size.reset();             // no tensor-like batch
  in.runs.varied.front().leg.live_wait_share = 0.01;  // the varied run kept up
  in.notes = {"the cold run is partly warm"};
  const DifferentialAnalysis a = conclude(in);
  EXPECT_EQ(a.batch_size, 1);
  EXPECT_THAT(a.notes,
              ElementsAre("the cold run is partly warm", HasSubstr("the batch size is unknown")));
  ASSERT_TRUE(a.workers.has_value());
  EXPECT_FALSE(a.workers->fit.has_value());
  EXPECT_THAT(a.workers->note, HasSubstr("no warm run with loader workers was prep-bound"));
  // Without a varied run: no worker what-if, and the finding says how to get one.
  in.runs.varied.clear();
  const DifferentialAnalysis plain = conclude(in);
  EXPECT_FALSE(plain.workers.has_value());
  EXPECT_THAT(plain.findings[0], HasSubstr("run again with --vary num_workers=2,4"));
  // A run that does not wait for its data.
  in = testing::made_up_differential_inputs("/a");
  in.runs.cold.timing.total_s = in.runs.warm.timing.total_s = 0.1;
  const DifferentialAnalysis fast = conclude(in);
  EXPECT_THAT(fast.findings[0], HasSubstr("not data-bound"));
}

TEST(Differential, TheDocumentReadsBackAsWritten) {
  testing::TempDir tmp;
  DifferentialAnalysis a = conclude(testing::made_up_differential_inputs(tmp.path().string()));
  a.dir = tmp.path().string();
  a.cache.model.overlap_k = INFINITY;  // fully overlapped: null in JSON
  ASSERT_TRUE(write_differential(a).ok());
  absl::StatusOr<DifferentialAnalysis> read = read_differential(a.dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->dir, a.dir);
  EXPECT_EQ(differential_json(*read), differential_json(a));
  EXPECT_TRUE(std::isinf(read->cache.model.overlap_k));
  EXPECT_EQ(read->runs.varied.size(), 1u);
  EXPECT_EQ(read->runs.varied[0].value, 2);
  EXPECT_EQ(read->runs.cold.stalls.passes.size(), 1u);
  EXPECT_EQ(read->runs.cold.residency->resident_bytes, 0u);
  EXPECT_FALSE(read->runs.synthetic.residency.has_value());
  const json doc = json::parse(differential_json(a));
  EXPECT_TRUE(doc["what_if"]["cache"]["overlap_k"].is_null());
  EXPECT_EQ(doc["runs"]["warm-num_workers-2"]["time_s"], 0.2);
  EXPECT_FALSE(doc["runs"]["warm-num_workers-2"].contains("residency"));
  EXPECT_EQ(doc["runs"]["cold"]["analysis"]["run"]["input_bound"], "highly");
  // The worker what-if without a fit is its note.
  a.workers->fit.reset();
  a.workers->note = "nothing to fit";
  absl::StatusOr<DifferentialAnalysis> noted =
      parse_differential(differential_json(a), "stalls.json");
  ASSERT_TRUE(noted.ok()) << noted.status();
  EXPECT_EQ(noted->workers->note, "nothing to fit");
  EXPECT_EQ(differential_json(*noted), differential_json(a));
}

TEST(Differential, ABadDocumentNamesTheFileAndTheKey) {
  const DifferentialAnalysis a = conclude(testing::made_up_differential_inputs("/a"));
  const json good = json::parse(differential_json(a));
  const auto problem = [](const json& doc) {
    absl::StatusOr<DifferentialAnalysis> read = parse_differential(doc.dump(), "/a/stalls.json");
    EXPECT_FALSE(read.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
    return std::string(read.status().message());
  };
  json doc = good;
  doc["differential"].erase("prep_share");
  EXPECT_EQ(problem(doc),
            "/a/stalls.json: not a trainscope stalls analysis: differential.prep_share: missing");
  doc = good;
  doc["runs"]["cold"]["time_s"] = "0.4";
  EXPECT_THAT(problem(doc), HasSubstr(": runs.cold.time_s: a string, not a number"));
  doc = good;
  doc["what_if"]["cache"]["points"][1] = 7;
  EXPECT_THAT(problem(doc), HasSubstr(": what_if.cache.points[1]: a number, not an object"));
  doc = good;
  doc["findings"] = json::array({"ok", 3});
  EXPECT_THAT(problem(doc), HasSubstr(": findings[1]: a number, not a string"));
  doc = good;
  doc["iterations"] = -3;
  EXPECT_THAT(problem(doc), HasSubstr(": iterations: -3, not a whole number >= 1"));
  doc = good;
  doc["runs"]["cold"]["analysis"]["passes"][0].erase("bunched");
  EXPECT_THAT(problem(doc), HasSubstr(": runs.cold.analysis.passes[0].bunched: missing"));
  doc = good;
  doc["runs"]["warm-threads-2"] = doc["runs"]["warm"];
  EXPECT_THAT(problem(doc),
              HasSubstr(": runs.warm-threads-2: not a run of the analysis "
                        "(synthetic, cold, warm, loader or warm-num_workers-<value>)"));
  doc = good;
  doc["runs"].erase("loader");
  EXPECT_THAT(problem(doc), HasSubstr(": runs.loader: missing"));
  EXPECT_EQ(problem(json::array({1, 2})),
            "/a/stalls.json: not a trainscope stalls analysis: an array, not an object");
  absl::StatusOr<DifferentialAnalysis> not_json = parse_differential("{\"runs\": {", "f.json");
  EXPECT_THAT(std::string(not_json.status().message()),
              HasSubstr("f.json: not valid JSON: parse error at line 1"));
}

TEST(Differential, AMissingDocumentIsNotFoundNamingTheFile) {
  testing::TempDir tmp;
  absl::StatusOr<DifferentialAnalysis> read = read_differential(tmp.path().string());
  EXPECT_TRUE(absl::IsNotFound(read.status())) << read.status();
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr((tmp.path() / "stalls.json").string() + ": no such file"));
}

TEST(Differential, TheTextHasEveryRunInTheOrderTheyRan) {
  DifferentialAnalysis a = conclude(testing::made_up_differential_inputs("/a"));
  a.dir = "/a";
  const std::string text = format_differential(a, {"python", "train.py"});
  EXPECT_THAT(text, HasSubstr("Data stalls of `python train.py` (10 iterations of 8 samples "
                              "after 2 warm-up)"));
  const std::size_t synthetic = text.find("  synthetic "), cold = text.find("  cold "),
                    warm = text.find("  warm "), loader = text.find("  loader "),
                    varied = text.find("  warm-num_workers-2 ");
  ASSERT_NE(varied, std::string::npos) << text;
  EXPECT_LT(synthetic, cold);
  EXPECT_LT(cold, warm);
  EXPECT_LT(warm, loader);
  EXPECT_LT(loader, varied);
  EXPECT_THAT(text, HasSubstr("ingestion 800.0 samples/s, prep 228.6 samples/s, fetch 1600.0 "
                              "samples/s"));
  EXPECT_THAT(text, HasSubstr("disk 100 MB/s (sda read 2 MB in 20 ms busy)"));
  EXPECT_THAT(text, HasSubstr("  - prep-bound: 62.5%"));
  EXPECT_THAT(text, HasSubstr("\nAnalysis: /a/stalls.json\n"));
}

TEST(Differential, BadOptionsAreRefusedBeforeAnyRun) {
  testing::TempDir tmp;
  tmp.write("data/a.bin", "0123456789");
  DifferentialOptions options;
  options.command = {"/bin/false"};
  options.dataset = (tmp.path() / "data").string();
  options.dir = (tmp.path() / "analysis").string();
  options.iterations = 2;
  options.warmup = 5;
  absl::StatusOr<DifferentialAnalysis> a = run_differential(options);
  EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << a.status();
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("iterations 2 is smaller than warmup 5"));
  options.iterations = 10;
  options.vary_key = "num_workers";
  options.vary_values = {-1};
  EXPECT_THAT(std::string(run_differential(options).status().message()),
              HasSubstr("vary num_workers=-1"));
  options.vary_values.clear();
  options.vary_key.clear();
  options.dataset = (tmp.path() / "nothing").string();
  a = run_differential(options);
  EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << a.status();
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("nothing: no such file or directory"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "analysis"));  // nothing ran
  // A command that does not time its loader: the first run says how to.
  options.dataset = (tmp.path() / "data").string();
  options.command = {"/bin/true"};
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  a = run_differential(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status())) << a.status();
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("the synthetic run recorded no timed loader"));
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(), "[1/4] synthetic run");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "analysis" / "stalls.json"));
}

}  // namespace
}  // namespace trainscope::stalls
