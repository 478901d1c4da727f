// The numerics every analysis shares, once: NaN (what "no figure" is), the
// linear-interpolated quantile (Hyndman & Fan type 7, NumPy's default) and
// the median, Student's t distribution and the regularised incomplete beta
// function behind it. The diagnosis, compare, the report, stalls and scaling
// use these; none keeps its own.
#ifndef TRAINSCOPE_STATS_NUMBERS_HPP_
#define TRAINSCOPE_STATS_NUMBERS_HPP_

#include <limits>
#include <vector>

namespace trainscope::stats {

// A figure the data cannot give (no steps, no interval).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Quantile q in [0, 1] of `values`, interpolating linearly between the order
// statistics around q (n - 1) (type 7). NaN for no values.
double quantile(std::vector<double> values, double q);
// As quantile(), reordering *values (scratch space) instead of copying it:
// selection (nth_element), no sort.
double quantile_in_place(std::vector<double>* values, double q);
// As quantile() for values sorted ascending (no copy, no reordering).
double quantile_sorted(const std::vector<double>& sorted, double q);
// quantile(values, 0.5): the middle value, the mean of the two middle ones for even n.
double median(std::vector<double> values);
double median_in_place(std::vector<double>* values);

// Student's t distribution: P(T <= t) with df > 0 degrees of freedom (not
// necessarily whole), and its inverse for 0 < p < 1 (exact to about 1e-13
// relative, for any df). NaN for invalid arguments.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// Welch's comparison of two samples' means (each of at least 2 values):
// difference mean(b) - mean(a), its standard error and the
// Welch-Satterthwaite degrees of freedom (NaN when a side has fewer than 2
// values or neither varies: se 0).
struct Welch {
  double difference = 0;
  double se = 0;
  double df = 0;
};
Welch welch(const std::vector<double>& a, const std::vector<double>& b);

// The regularised incomplete beta function I_x(a, b) for a, b > 0 (continued
// fraction, modified Lentz): 0 for x <= 0, 1 for x >= 1.
double incomplete_beta(double a, double b, double x);

}  // namespace trainscope::stats

#endif  // TRAINSCOPE_STATS_NUMBERS_HPP_
