// read_runs among damaged runs (issue 25): one damaged run is skipped and named
// (never the whole study, never silently), a regions file cut short is warned,
// and the Model JSON says how many points and values the fit used.
#include <filesystem>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/damaged_run.hpp"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/scaling/model_study.hpp"
#include "trainscope/scaling/run_input.hpp"

namespace trainscope::scaling {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using trainscope::testing::cut_regions;
using trainscope::testing::FinishedRun;
using trainscope::testing::write_finished_run;

fs::path four_runs(const fs::path& root) {
  int i = 0;
  for (int p : {1, 2, 4, 8}) {
    FinishedRun spec;
    spec.params = {{"p", std::to_string(p)}};
    spec.batch_s = 0.08 / p;
    spec.rows = 40;
    spec.id = fmt::format("{:032x}", ++i);
    write_finished_run(root / ("run" + std::to_string(p)), spec);
  }
  return root;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(ScalingDamagedRunsTest, ADamagedRunIsSkippedAndNamedNotTheWholeStudy) {
  testing::TempDir tmp;
  const fs::path root = four_runs(tmp.path() / "runs");
  RunSelection selection;
  selection.parameters = {"p"};
  // A run.json lost (before: silently 3 points), a rank file damaged (before:
  // the whole study failed), region rows lost.
  for (const std::string& damage : {"run.json lost", "rank file damaged", "rows lost"}) {
    SCOPED_TRACE(damage);
    const fs::path dir = tmp.path() / "work";
    fs::remove_all(dir);
    fs::copy(root, dir, fs::copy_options::recursive);
    const fs::path run2 = dir / "run2";
    if (damage == std::string("run.json lost")) fs::remove(run2 / "run.json");
    if (damage == std::string("rank file damaged")) testing::write_file(run2 / "rank-0.json", "{");
    if (damage == std::string("rows lost")) fs::remove(run2 / "regions-0.csv");
    std::vector<std::string> warnings;
    absl::StatusOr<MeasurementSet> set = read_runs({dir.string()}, selection, &warnings);
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_EQ(set->series.size(), 1u);
    EXPECT_EQ(set->series[0].points.size(), 3u);
    EXPECT_THAT(joined(warnings), HasSubstr(run2.string() + ": skipped: "));
  }
}

TEST(ScalingDamagedRunsTest, ACutRegionsFileIsWarnedAndTheFitSaysWhatItUsed) {
  testing::TempDir tmp;
  const fs::path root = four_runs(tmp.path() / "runs");
  cut_regions(root / "run4", 15);
  ModelStudyOptions options;
  options.inputs = {root.string()};
  options.runs.parameters = {"p"};
  std::vector<std::string> warnings;
  absl::StatusOr<ModelStudy> study = model_study(options, &warnings);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_THAT(joined(warnings),
              HasSubstr((root / "run4" / "regions-0.csv").string() +
                        " holds 15 rows of BATCH on CPU, but summary-0.json counts 40"));
  ASSERT_EQ(study->document.models.size(), 1u);
  EXPECT_EQ(study->document.models[0].points, 4u);
  EXPECT_EQ(study->document.models[0].values, 4u);
  absl::StatusOr<ModelDocument> back =
      parse_model_document(model_document_json(study->document), "m.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->models[0].points, 4u);
  EXPECT_EQ(back->models[0].values, 4u);
}

}  // namespace
}  // namespace trainscope::scaling
