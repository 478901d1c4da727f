#include "trainscope/stats/numbers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace trainscope::stats {
namespace {

TEST(NumbersTest, NaNIsNaN) {
  EXPECT_TRUE(std::isnan(kNaN));
  EXPECT_FALSE(kNaN == kNaN);
}

TEST(NumbersTest, QuantileInterpolatesAsNumPy) {
  // numpy.quantile([4, 1, 3, 2, 10, 7], q) (type 7).
  const std::vector<double> v{4, 1, 3, 2, 10, 7};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 10);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 3.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 2.25);
  EXPECT_DOUBLE_EQ(quantile(v, 0.95), 9.25);
  EXPECT_DOUBLE_EQ(median(v), 3.5);
  EXPECT_DOUBLE_EQ(median({5, -1, 2}), 2);
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (double q : {0.0, 0.1, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0}) {
    std::vector<double> scratch = v;
    EXPECT_DOUBLE_EQ(quantile_in_place(&scratch, q), quantile(v, q)) << q;
    EXPECT_DOUBLE_EQ(quantile_sorted(sorted, q), quantile(v, q)) << q;
  }
  std::vector<double> scratch = v;
  EXPECT_DOUBLE_EQ(median_in_place(&scratch), 3.5);
}

TEST(NumbersTest, QuantileEdgeCases) {
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
  EXPECT_TRUE(std::isnan(quantile_sorted({}, 0.5)));
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_DOUBLE_EQ(quantile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(median({-3, -1}), -2);
  EXPECT_DOUBLE_EQ(median({0, 0, 0}), 0);
  EXPECT_DOUBLE_EQ(median({1e300, 1e300}), 1e300);  // no overflow in the mean of the middle
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(quantile({1, 2, inf}, 1.0), inf);
}

TEST(NumbersTest, StudentTAndIncompleteBeta) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.0422725, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 40), 2.0210754, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 1e9), 1.959964, 1e-6);
  EXPECT_TRUE(std::isnan(student_t_quantile(0.975, 0)));
  EXPECT_TRUE(std::isnan(student_t_quantile(kNaN, 3)));
  EXPECT_DOUBLE_EQ(incomplete_beta(2, 3, 0), 0);
  EXPECT_DOUBLE_EQ(incomplete_beta(2, 3, 1), 1);
  // I_x(1, 1) = x; I_x(a, 1) = x^a.
  EXPECT_NEAR(incomplete_beta(1, 1, 0.3), 0.3, 1e-14);
  EXPECT_NEAR(incomplete_beta(2.5, 1, 0.4), std::pow(0.4, 2.5), 1e-14);
  EXPECT_NEAR(incomplete_beta(2, 3, 0.7) + incomplete_beta(3, 2, 0.3), 1, 1e-14);
}

TEST(WelchTest, DifferenceStandardErrorAndDegreesOfFreedom) {
  // a: mean 2, variance 1 (n 3); b: mean 5, variance 4 (n 3): se^2 = 1/3 + 4/3.
  const Welch w = welch({1, 2, 3}, {3, 5, 7});
  EXPECT_DOUBLE_EQ(w.difference, 3.0);
  EXPECT_NEAR(w.se, std::sqrt(5.0 / 3.0), 1e-12);
  // (5/3)^2 / ((1/3)^2 / 2 + (4/3)^2 / 2) = (25/9) / (17/18) = 50/17.
  EXPECT_NEAR(w.df, 50.0 / 17.0, 1e-12);
  EXPECT_TRUE(std::isnan(welch({1}, {2, 3}).difference));
}

}  // namespace
}  // namespace trainscope::stats
