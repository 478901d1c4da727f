// The diagnosis's statistics: intervals that respect the dependence between
// consecutive steps (batch means), a regression slope with a
// heteroskedasticity- and autocorrelation-consistent error (Newey-West), and
// a trend test (Mann-Kendall with Sen's slope). docs/diagnosis.md argues them.
#ifndef TRAINSCOPE_SRC_DIAGNOSIS_STATISTICS_HPP_
#define TRAINSCOPE_SRC_DIAGNOSIS_STATISTICS_HPP_

#include <cstddef>
#include <vector>

#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis::detail {

// Student's t quantile for a two-sided 95% interval with `df` degrees of
// freedom (stats::student_t_quantile); NaN for df = 0.
double t95(std::size_t df);
// Standard normal upper-tail probability.
double normal_sf(double z);

// How many batches a series of n consecutive observations is cut into for
// batch means: 10, fewer for short series (at least 4 observations each);
// 0 when n < 8 (no interval).
std::size_t batch_count(std::size_t n);

// sum(num) / sum(den) with a 95% interval from batch means over consecutive
// batches (the batch ratios' spread; t with batches - 1 degrees of freedom).
// NaN bounds when there are too few observations.
Interval ratio_interval(const std::vector<double>& num, const std::vector<double>& den);
// mean(x) with the batch-means 95% interval.
Interval mean_interval(const std::vector<double>& x);

// Ordinary least squares slope of y on x with a Newey-West standard error
// (Bartlett kernel, lag floor(4 (n/100)^(2/9)), at least 1); the interval
// uses t with n - 2 degrees of freedom. NaN with fewer than 4 points.
struct Slope {
  Interval slope;
  double intercept = 0;
  double mean_y = 0;
  std::size_t n = 0;
};
Slope slope_hac(const std::vector<double>& x, const std::vector<double>& y);

// Mann-Kendall trend test of a series (one-sided, increasing: p-value) with
// Sen's slope per index and its 95% interval (Gilbert's rank method).
struct Trend {
  double s = 0;
  double z = 0;
  double p_increasing = 1;
  Interval sen_slope;
};
Trend mann_kendall(const std::vector<double>& y);

}  // namespace trainscope::diagnosis::detail

#endif  // TRAINSCOPE_SRC_DIAGNOSIS_STATISTICS_HPP_
