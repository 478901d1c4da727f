#include "report/downsample.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainscope/stats/numbers.hpp"

namespace trainscope::report::detail {
namespace {

// Bucket b of `buckets` over n rows: [begin, end).
std::size_t bucket_begin(std::size_t b, std::size_t n, std::size_t buckets) {
  return static_cast<std::size_t>(static_cast<unsigned __int128>(b) * n / buckets);
}

}  // namespace

double round_significant(double value, int digits) {
  if (!std::isfinite(value) || value == 0.0) return value;
  const double magnitude = std::floor(std::log10(std::fabs(value)));
  const double scale = std::pow(10.0, static_cast<double>(digits) - 1.0 - magnitude);
  const double rounded = std::round(value * scale) / scale;
  return std::isfinite(rounded) ? rounded : value;
}

Envelope envelope(const std::vector<double>& x, const std::vector<double>& y,
                  std::size_t max_points) {
  Envelope out;
  const std::size_t n = std::min(x.size(), y.size());
  out.rows = n;
  if (n == 0) return out;
  const std::size_t buckets = std::min(n, std::max<std::size_t>(max_points, 1));
  out.bucket = (n + buckets - 1) / buckets;
  const std::size_t wanted = std::clamp<std::size_t>((n + 99) / 100, 5, 4001);
  out.window = std::min(n, std::max(out.bucket, wanted));
  out.x.reserve(buckets);
  out.lo.reserve(buckets);
  out.hi.reserve(buckets);
  out.median.reserve(buckets);
  out.p95.reserve(buckets);
  std::vector<double> scratch;
  scratch.reserve(out.window);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = bucket_begin(b, n, buckets);
    const std::size_t end = bucket_begin(b + 1, n, buckets);
    const std::size_t mid = begin + (end - begin) / 2;
    const auto [lo, hi] = std::minmax_element(y.begin() + static_cast<std::ptrdiff_t>(begin),
                                              y.begin() + static_cast<std::ptrdiff_t>(end));
    out.x.push_back(x[mid]);
    out.lo.push_back(*lo);
    out.hi.push_back(*hi);
    // The rolling window, centred on the bucket's middle row, inside [0, n).
    std::size_t first = mid >= out.window / 2 ? mid - out.window / 2 : 0;
    first = std::min(first, n - out.window);
    scratch.assign(y.begin() + static_cast<std::ptrdiff_t>(first),
                   y.begin() + static_cast<std::ptrdiff_t>(first + out.window));
    out.p95.push_back(stats::quantile_in_place(&scratch, 0.95));
    out.median.push_back(stats::quantile_in_place(&scratch, 0.5));
  }
  return out;
}

Line minmax_line(const std::vector<double>& x, const std::vector<double>& y,
                 std::size_t max_points) {
  Line out;
  const std::size_t n = std::min(x.size(), y.size());
  out.rows = n;
  if (n <= std::max<std::size_t>(max_points, 2)) {
    out.x.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    out.y.assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  out.downsampled = true;
  const std::size_t buckets = std::max<std::size_t>(max_points / 2, 1);
  out.x.reserve(2 * buckets);
  out.y.reserve(2 * buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = bucket_begin(b, n, buckets);
    const std::size_t end = bucket_begin(b + 1, n, buckets);
    const auto [lo, hi] = std::minmax_element(y.begin() + static_cast<std::ptrdiff_t>(begin),
                                              y.begin() + static_cast<std::ptrdiff_t>(end));
    std::size_t first = static_cast<std::size_t>(lo - y.begin());
    std::size_t second = static_cast<std::size_t>(hi - y.begin());
    if (first > second) std::swap(first, second);
    out.x.push_back(x[first]);
    out.y.push_back(y[first]);
    if (second != first) {
      out.x.push_back(x[second]);
      out.y.push_back(y[second]);
    }
  }
  return out;
}

Histogram histogram(const std::vector<double>& values, std::size_t bins) {
  Histogram out;
  if (values.empty() || bins == 0) return out;
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  double lo = *min_it;
  double hi = *max_it;
  out.log = lo > 0 && hi / lo > 20.0;
  if (hi == lo) {  // one bin around the single value
    bins = 1;
    const double pad = lo == 0 ? 1e-9 : std::fabs(lo) * 1e-3;
    lo -= pad;
    hi += pad;
  }
  const double a = out.log ? std::log(lo) : lo;
  const double b = out.log ? std::log(hi) : hi;
  const double width = (b - a) / static_cast<double>(bins);
  out.edges.resize(bins + 1);
  for (std::size_t i = 0; i <= bins; ++i) {
    const double edge = a + width * static_cast<double>(i);
    out.edges[i] = out.log ? std::exp(edge) : edge;
  }
  out.edges.front() = lo;
  out.edges.back() = hi;
  out.counts.assign(bins, 0);
  for (const double v : values) {
    const double t = ((out.log ? std::log(v) : v) - a) / width;
    std::size_t i = t <= 0 ? 0 : static_cast<std::size_t>(t);
    if (i >= bins) i = bins - 1;
    ++out.counts[i];
  }
  return out;
}

}  // namespace trainscope::report::detail
