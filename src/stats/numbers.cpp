#include "trainscope/stats/numbers.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace trainscope::stats {
namespace {

// Regularised incomplete beta I_x(a, b) by its continued fraction (modified Lentz).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-15;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a - 1.0 + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEps) break;
  }
  return h;
}

}  // namespace

double quantile(std::vector<double> values, double q) { return quantile_in_place(&values, q); }

double quantile_in_place(std::vector<double>* scratch, double q) {
  std::vector<double>& values = *scratch;
  if (values.empty()) return kNaN;
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(lo);
  // Selection, not a sort: the lo-th value, then the smallest above it.
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double low = values[lo];
  if (frac == 0 || lo + 1 >= values.size()) return low;
  const double high =
      *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo) + 1, values.end());
  return low + (high - low) * frac;
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

double median(std::vector<double> values) { return quantile_in_place(&values, 0.5); }

double median_in_place(std::vector<double>* values) { return quantile_in_place(values, 0.5); }

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

double student_t_cdf(double t, double df) {
  if (!(df > 0) || std::isnan(t)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

Welch welch(const std::vector<double>& a, const std::vector<double>& b) {
  Welch w;
  if (a.size() < 2 || b.size() < 2) {
    w.difference = w.se = w.df = std::numeric_limits<double>::quiet_NaN();
    return w;
  }
  const auto mean_and_var_of_mean = [](const std::vector<double>& v, double* mean) {
    const double n = static_cast<double>(v.size());
    double sum = 0;
    for (double x : v) sum += x;
    *mean = sum / n;
    double ss = 0;
    for (double x : v) ss += (x - *mean) * (x - *mean);
    return ss / (n - 1) / n;
  };
  double ma = 0, mb = 0;
  const double va = mean_and_var_of_mean(a, &ma), vb = mean_and_var_of_mean(b, &mb);
  w.difference = mb - ma;
  w.se = std::sqrt(va + vb);
  w.df =
      (va + vb) * (va + vb) /
      (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  return w;
}

double student_t_quantile(double p, double df) {
  if (!(df > 0) || !(p > 0 && p < 1)) return kNaN;
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  // Bisection on the upper tail (monotone, so robust for any df).
  const double tail = 1 - p;
  const auto upper_tail = [df](double t) {
    return 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  };
  double lo = 0, hi = 1;
  while (upper_tail(hi) > tail && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (upper_tail(mid) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace trainscope::stats
