// Time series and distributions for display (internal): a series of any
// length becomes at most a fixed number of points without losing a spike,
// and a distribution becomes a histogram. Every function uses every value.
#ifndef TRAINSCOPE_SRC_REPORT_DOWNSAMPLE_HPP_
#define TRAINSCOPE_SRC_REPORT_DOWNSAMPLE_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainscope::report::detail {

// A series (y over x, in x order) shown as at most `max_points` points: the
// values in buckets of consecutive rows (sizes differing by at most one),
// each bucket's min and max (the envelope: every spike is in some bucket's
// max), and a rolling median and p95 over `window` rows centred on the
// bucket. With n <= max_points every bucket is one row (lo == hi == y).
struct Envelope {
  std::vector<double> x;  // x of each bucket's middle row
  std::vector<double> lo;
  std::vector<double> hi;
  std::vector<double> median;
  std::vector<double> p95;
  std::size_t rows = 0;    // n
  std::size_t bucket = 1;  // rows in the largest bucket (1: not downsampled)
  std::size_t window = 0;  // rows of the rolling median and p95
};
Envelope envelope(const std::vector<double>& x, const std::vector<double>& y,
                  std::size_t max_points);

// A single line through at most `max_points` points that still shows every
// spike: per bucket of consecutive rows, its minimum and its maximum point,
// in x order (min-max decimation). With n <= max_points: the series itself.
struct Line {
  std::vector<double> x;
  std::vector<double> y;
  std::size_t rows = 0;
  bool downsampled = false;
};
Line minmax_line(const std::vector<double>& x, const std::vector<double>& y,
                 std::size_t max_points);

// Counts of every value in `bins` bins between the minimum and the maximum;
// log-spaced bins when every value is positive and max / min > 20.
struct Histogram {
  std::vector<double> edges;  // bins + 1
  std::vector<std::uint64_t> counts;
  bool log = false;
};
Histogram histogram(const std::vector<double>& values, std::size_t bins);

// `value` rounded to `digits` significant digits, so that the page's JSON
// holds short numbers (display only; statistics keep full precision).
double round_significant(double value, int digits);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_DOWNSAMPLE_HPP_
