// The report of damaged runs (issue 25): lost region rows fail a run page
// naming the file, a regions file cut short is said on the page, a damaged run
// of a study is skipped and named, and the scaling section says what it fitted.
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/run_data.hpp"
#include "report/study.hpp"
#include "support/damaged_run.hpp"
#include "support/warnings.hpp"
#include "trainscope/report/report.hpp"

namespace trainscope::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using trainscope::testing::cut_regions;
using trainscope::testing::FinishedRun;
using trainscope::testing::write_finished_run;

TEST(ReportDamagedRunTest, LostRegionRowsFailTheRunNamingTheFile) {
  testing::TempDir tmp;
  const fs::path dir = write_finished_run(tmp.path() / "r");
  testing::write_file(dir / "regions-0.csv", testing::kRegionsHeader);
  absl::StatusOr<detail::RunData> run =
      detail::read_run_data(dir.string(), detail::ReadOptions{}, nullptr);
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(absl::IsDataLoss(run.status())) << run.status();
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr((dir / "regions-0.csv").string() + ": holds no region rows"));
}

// One run that cannot be read, alone, is an error naming what is wrong (as
// diagnose), never a study page of one UNREADABLE run (issue 36): run.json a
// FIFO (not waited on), a directory, a symlink loop, or lost beside its files.
TEST(ReportDamagedRunTest, ASingleRunThatCannotBeReadIsAnError) {
  if (chart_library().empty()) GTEST_SKIP() << "built without Chart.js: no page to render";
  testing::TempDir tmp;
  const std::pair<const char*, const char*> cases[] = {{"fifo", "it is a FIFO"},
                                                       {"directory", "it is a directory"},
                                                       {"loop", "symbolic links"},
                                                       {"lost", "it has no run.json"}};
  for (const auto& [name, what] : cases) {
    const fs::path dir = write_finished_run(tmp.path() / name);
    fs::remove(dir / "run.json");
    if (std::string(name) == "fifo") ASSERT_EQ(::mkfifo((dir / "run.json").c_str(), 0600), 0);
    if (std::string(name) == "directory") fs::create_directory(dir / "run.json");
    if (std::string(name) == "loop") fs::create_symlink("run.json", dir / "run.json");
    absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({dir.string()});
    ASSERT_TRUE(inputs.ok()) << inputs.status();
    EXPECT_TRUE(inputs->single_run) << name;
    ReportOptions options;
    options.inputs = {dir.string()};
    const absl::StatusOr<std::string> page = render_report(options);
    ASSERT_FALSE(page.ok()) << name;
    EXPECT_THAT(std::string(page.status().message()), HasSubstr(what)) << name;
    EXPECT_THAT(std::string(page.status().message()), HasSubstr(dir.string())) << name;
  }
}

TEST(ReportDamagedRunTest, ARegionsFileCutShortIsOnThePageAndWarned) {
  testing::TempDir tmp;
  const fs::path dir = write_finished_run(tmp.path() / "r");
  cut_regions(dir, 453);
  testing::CapturedWarnings warned;
  absl::StatusOr<detail::RunData> run =
      detail::read_run_data(dir.string(), detail::ReadOptions{}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->warnings.size(), 1u);
  EXPECT_THAT(run->warnings[0], HasSubstr("holds 453 rows of BATCH on CPU"));
  EXPECT_THAT(run->warnings[0], HasSubstr("summary-0.json counts 900"));
  EXPECT_THAT(run->notes, ::testing::Contains(run->warnings[0]));
  EXPECT_EQ(run->region_rows, 453u);
}

TEST(ReportDamagedRunTest, AStudySkipsAndNamesADamagedRunAndSaysWhatTheFitUsed) {
  testing::TempDir tmp;
  const fs::path root = tmp.path() / "runs";
  int i = 0;
  for (int p : {1, 2, 4, 8}) {
    FinishedRun spec;
    spec.params = {{"p", std::to_string(p)}};
    spec.batch_s = 0.08 / p;
    spec.rows = 50;
    spec.id = fmt::format("{:032x}", ++i);
    write_finished_run(root / ("run" + std::to_string(p)), spec);
  }
  fs::remove(root / "run2" / "run.json");
  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs({root.string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->runs.size(), 4u);  // the damaged one too: it is named, not lost
  testing::CapturedWarnings warned;
  absl::StatusOr<nlohmann::json> study = detail::study_json(*inputs, "p", nullptr);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE(warned.contains((root / "run2").string() + ": skipped:"));
  int unreadable = 0;
  for (const nlohmann::json& row : study->at("runs")) unreadable += row["status"] == "UNREADABLE";
  EXPECT_EQ(unreadable, 1);
  const nlohmann::json& model = study->at("scaling").at("models").at(0);
  EXPECT_EQ(model.at("points_used"), 3);
  EXPECT_EQ(model.at("runs_used"), 3);
  EXPECT_EQ(model.at("model").at("models").at(0).at("points"), 3);
}

}  // namespace
}  // namespace trainscope::report
