#include "diagnosis/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainscope/stats/numbers.hpp"

namespace trainscope::diagnosis::detail {
using stats::kNaN;
using stats::quantile;

double t95(std::size_t df) {
  return df == 0 ? kNaN : stats::student_t_quantile(0.975, static_cast<double>(df));
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

std::size_t batch_count(std::size_t n) {
  if (n < 8) return 0;
  return std::min<std::size_t>(10, n / 4);
}

Interval ratio_interval(const std::vector<double>& num, const std::vector<double>& den) {
  Interval out;
  const std::size_t n = std::min(num.size(), den.size());
  double sn = 0, sd = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sn += num[i];
    sd += den[i];
  }
  if (n == 0 || sd <= 0) return out;
  out.value = sn / sd;
  const std::size_t batches = batch_count(n);
  if (batches < 2) return out;
  std::vector<double> ratios;
  for (std::size_t b = 0; b < batches; ++b) {
    const std::size_t begin = b * n / batches, end = (b + 1) * n / batches;
    double bn = 0, bd = 0;
    for (std::size_t i = begin; i < end; ++i) {
      bn += num[i];
      bd += den[i];
    }
    if (bd > 0) ratios.push_back(bn / bd);
  }
  if (ratios.size() < 2) return out;
  double mean = 0;
  for (double r : ratios) mean += r;
  mean /= static_cast<double>(ratios.size());
  double ss = 0;
  for (double r : ratios) ss += (r - mean) * (r - mean);
  const double se = std::sqrt(ss / static_cast<double>(ratios.size() - 1)) /
                    std::sqrt(static_cast<double>(ratios.size()));
  const double half = t95(ratios.size() - 1) * se;
  out.low = out.value - half;
  out.high = out.value + half;
  return out;
}

Interval mean_interval(const std::vector<double>& x) {
  return ratio_interval(x, std::vector<double>(x.size(), 1.0));
}

Slope slope_hac(const std::vector<double>& x, const std::vector<double>& y) {
  Slope out;
  const std::size_t n = std::min(x.size(), y.size());
  out.n = n;
  if (n < 4) return out;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  out.mean_y = my;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0) return out;
  const double b = sxy / sxx;
  out.intercept = my - b * mx;
  out.slope.value = b;
  // Newey-West variance of b: sum over lags of weighted autocovariances of
  // u_i = (x_i - mx) e_i, over sxx^2.
  std::vector<double> u(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double e = y[i] - out.intercept - b * x[i];
    u[i] = (x[i] - mx) * e;
  }
  const auto lags = std::max<std::size_t>(
      1,
      static_cast<std::size_t>(std::floor(4 * std::pow(static_cast<double>(n) / 100.0, 2.0 / 9))));
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += u[i] * u[i];
  for (std::size_t l = 1; l <= lags && l < n; ++l) {
    const double w = 1.0 - static_cast<double>(l) / static_cast<double>(lags + 1);
    double c = 0;
    for (std::size_t i = l; i < n; ++i) c += u[i] * u[i - l];
    s += 2 * w * c;
  }
  const double se = std::sqrt(std::max(0.0, s)) / sxx;
  const double half = t95(n - 2) * se;
  out.slope.low = b - half;
  out.slope.high = b + half;
  return out;
}

Trend mann_kendall(const std::vector<double>& y) {
  Trend out;
  const std::size_t n = y.size();
  if (n < 4) return out;
  double s = 0;
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const double d = y[j] - y[i];
      s += (d > 0) - (d < 0);
      slopes.push_back(d / static_cast<double>(j - i));
    }
  }
  const double nd = static_cast<double>(n);
  const double var = nd * (nd - 1) * (2 * nd + 5) / 18.0;
  out.s = s;
  out.z = s > 0 ? (s - 1) / std::sqrt(var) : s < 0 ? (s + 1) / std::sqrt(var) : 0.0;
  out.p_increasing = normal_sf(out.z);
  std::sort(slopes.begin(), slopes.end());
  out.sen_slope.value = quantile(slopes, 0.5);
  const double c = 1.959964 * std::sqrt(var);
  const double count = static_cast<double>(slopes.size());
  const double m1 = (count - c) / 2.0, m2 = (count + c) / 2.0 + 1.0;  // 1-based ranks
  auto at_rank = [&slopes](double rank) {
    const double r = std::clamp(rank, 1.0, static_cast<double>(slopes.size()));
    const auto lo = static_cast<std::size_t>(std::floor(r)) - 1;
    const std::size_t hi = std::min(lo + 1, slopes.size() - 1);
    return slopes[lo] + (slopes[hi] - slopes[lo]) * (r - std::floor(r));
  };
  out.sen_slope.low = at_rank(m1);
  out.sen_slope.high = at_rank(m2);
  return out;
}

}  // namespace trainscope::diagnosis::detail
