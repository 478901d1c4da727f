// A sweep job's run with a damaged summary (issue 25): the summary is skipped
// with a warning naming it, as every reader skips it, and the job's means are
// left out rather than the sweep failing or saying nothing.
#include <cmath>
#include <filesystem>

#include "gtest/gtest.h"
#include "support/damaged_run.hpp"
#include "support/warnings.hpp"
#include "sweep/job_launch.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;

TEST(SweepDamagedRunTest, ADamagedSummaryIsSkippedWithAWarningNamingIt) {
  testing::TempDir tmp;
  const fs::path dir = testing::write_finished_run(tmp.path() / "r");
  JobRecord whole;
  detail::read_job_results(dir.string(), &whole);
  EXPECT_NEAR(whole.batch_mean_s, 0.01, 1e-9);

  testing::write_file(dir / "summary-0.json", "{\"format\": \"trainscope.stats\"");
  testing::CapturedWarnings warned;
  JobRecord record;
  detail::read_job_results(dir.string(), &record);
  EXPECT_TRUE(std::isnan(record.batch_mean_s));
  EXPECT_TRUE(warned.contains((dir / "summary-0.json").string()));
  EXPECT_TRUE(warned.contains("skipped"));
}

}  // namespace
}  // namespace trainscope::sweep
