#include "diagnosis/statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "trainscope/stats/numbers.hpp"

namespace trainscope::diagnosis::detail {
namespace {

// The diagnosis's intervals use the stats room's exact t quantile (they had a
// 3-decimal table and a Cornish-Fisher expansion of their own).
TEST(DiagnosisStatisticsTest, T95IsTheExactStudentTQuantile) {
  EXPECT_TRUE(std::isnan(t95(0)));
  for (std::size_t df : {1, 2, 5, 9, 30, 31, 40, 100, 1000}) {
    EXPECT_DOUBLE_EQ(t95(df), stats::student_t_quantile(0.975, static_cast<double>(df))) << df;
  }
  EXPECT_NEAR(t95(9), 2.2621572, 1e-7);  // the table had 2.262
  EXPECT_NEAR(t95(40), 2.0210754, 1e-7);
}

TEST(DiagnosisStatisticsTest, MeanIntervalUsesBatchesOfConsecutiveSteps) {
  std::vector<double> x;
  for (int i = 0; i < 40; ++i) x.push_back(i % 2 == 0 ? 1.0 : 3.0);
  const Interval i = mean_interval(x);
  EXPECT_DOUBLE_EQ(i.value, 2.0);
  // Ten batches of four steps each have mean 2: no spread, a zero-width interval.
  EXPECT_DOUBLE_EQ(i.low, 2.0);
  EXPECT_DOUBLE_EQ(i.high, 2.0);
}

}  // namespace
}  // namespace trainscope::diagnosis::detail
