#include "trainscope/scaling/svg_plot.hpp"
#include "common/markup.hpp"
#include "scaling/number_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/scaling/extrap_modeler.hpp"

namespace trainscope::scaling {
namespace {

constexpr int kCurveSamples = 200;
constexpr int kBandSamples = 50;
constexpr double kMarginLeft = 78;
constexpr double kMarginRight = 24;
constexpr double kMarginTop = 74;
constexpr double kMarginBottom = 52;

constexpr const char* kCurveColor = "#1f5fa8";
constexpr const char* kPointColor = "#c2410c";

std::string escape(std::string_view text) { return ::trainscope::detail::escape_markup(text); }

using detail::same_value;  // scaling/number_text.hpp

// Tick labels: integers as integers (2^20 is "1048576", not "1.049e+06").
std::string tick_label(double v) {
  if (v == std::round(v) && std::abs(v) < 1e9) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

// About `target` ticks at 1, 2 or 5 times a power of ten in [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  const double span = hi - lo;
  if (!(span > 0) || !std::isfinite(span)) return ticks;
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  const double first = std::ceil(lo / step);
  const double count = std::floor((hi + 1e-9 * step) / step) - first + 1;
  // Far from zero a span can be below the precision of its endpoints (1e18
  // to 1e18 + 1000): k + 1 == k there, so label the ends instead of looping.
  if (!(count >= 1) || count > 4.0 * target + 4 || first + 1 == first) return {lo, hi};
  for (int i = 0; i < static_cast<int>(count); ++i) {
    const double v = (first + i) * step;
    ticks.push_back(std::abs(v) < 1e-9 * step ? 0.0 : v);
  }
  return ticks;
}

// An axis: data value -> pixel, linear or logarithmic (log2 for x, log10 for y;
// the base only matters for where ticks go).
struct Axis {
  bool log = false;
  double base = 2;
  double lo = 0;  // transformed
  double hi = 1;
  double pixel_lo = 0;
  double pixel_hi = 1;

  double transform(double v) const { return log ? std::log(v) / std::log(base) : v; }
  double untransform(double t) const { return log ? std::pow(base, t) : t; }
  bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
  double pixel(double v) const {
    const double p = pixel_lo + (transform(v) - lo) / (hi - lo) * (pixel_hi - pixel_lo);
    return std::clamp(p, -1e5, 1e5);  // a wild value stays a finite coordinate (clipped)
  }

  // Range [a, b] of data values (transformed first), padded by `pad` of the span.
  void fit(double a, double b, double pad) {
    lo = transform(a);
    hi = transform(b);
    if (!(hi > lo)) {
      const double half = log ? 0.5 : lo != 0 ? std::abs(lo) * 0.1 : 1.0;
      lo -= half;
      hi += half;
    }
    const double margin = (hi - lo) * pad;
    lo -= margin;
    hi += margin;
  }

  std::vector<double> ticks() const {
    const double a = untransform(lo);
    const double b = untransform(hi);
    std::vector<double> out;
    if (log) {
      const double first = std::ceil(lo - 1e-9);
      const double last = std::floor(hi + 1e-9);
      if (last - first >= 1) {
        const double step = std::max(1.0, std::ceil((last - first + 1) / 10));
        if (base == 10 && last - first <= 2) {
          // Few decades: 1, 2 and 5 times each power of ten in range.
          for (double e = first - 1; e <= last; e += 1) {
            for (const double m : {1.0, 2.0, 5.0}) {
              const double v = m * std::pow(base, e);
              if (v >= a * (1 - 1e-9) && v <= b * (1 + 1e-9)) out.push_back(v);
            }
          }
          return out;
        }
        for (double e = first; e <= last; e += step) out.push_back(std::pow(base, e));
        return out;
      }
      for (const double t : nice_ticks(a, b, 4)) {
        if (t > 0) out.push_back(t);
      }
      return out;
    }
    return nice_ticks(a, b, 6);
  }
};

std::string pt(double x, double y) { return fmt::format("{:.2f},{:.2f}", x, y); }

// `count` values from a to b inclusive, evenly spaced on the axis.
std::vector<double> spaced(const Axis& axis, double a, double b, int count) {
  std::vector<double> out;
  if (!(b > a) || count < 2) {
    out.push_back(a);
    return out;
  }
  const double ta = axis.transform(a);
  const double tb = axis.transform(b);
  for (int i = 0; i < count; ++i) {
    out.push_back(i == 0           ? a
                  : i == count - 1 ? b
                                   : axis.untransform(ta + (tb - ta) * i / (count - 1)));
  }
  return out;
}

// Maximal runs [begin, end) of indexes where ok(i) holds, at least two long.
std::vector<std::pair<std::size_t, std::size_t>> runs(std::size_t n,
                                                      const std::function<bool(std::size_t)>& ok) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t i = 0;
  while (i < n) {
    if (!ok(i)) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < n && ok(j)) ++j;
    if (j - i >= 2) out.emplace_back(i, j);
    i = j;
  }
  return out;
}

struct LinePoint {
  double x = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
};

struct Sample {
  double x = 0;
  double value = 0;
  double lower = 0;
  double upper = 0;
};

// What the plot shows, in data coordinates, and the axes that place it.
struct Plot {
  std::size_t xi = 0;           // the x parameter
  std::vector<double> fixed;    // the line: every parameter's value but xi's
  std::vector<LinePoint> line;  // the measured points on it, by x
  // The measured x range, and the largest x drawn.
  double x_first = 0;
  double x_last = 0;
  double x_end = 0;
  bool extrapolating = false;
  std::vector<Sample> curve;
  std::vector<Sample> band;
  Axis xa;
  Axis ya;
  // The plot area, pixels.
  double left = 0;
  double right = 0;
  double top = 0;
  double bottom = 0;

  bool drawable(double v) const { return ya.valid(v); }
};

struct Labels {
  std::string x_name;
  std::string y_name;
  std::string title;
  std::string formula;
  int confidence_percent = 0;
};

// --- Checks and data -------------------------------------------------------

absl::Status check_options(const PlotOptions& options, std::size_t dim) {
  if (options.x_parameter < 0 || static_cast<std::size_t>(options.x_parameter) >= dim) {
    return absl::InvalidArgumentError(fmt::format(
        "plot: x parameter {} is out of range for {} parameter(s)", options.x_parameter, dim));
  }
  if (!options.fixed.empty() && options.fixed.size() != dim) {
    return absl::InvalidArgumentError(
        fmt::format("plot: fixed has {} value(s), expected {}", options.fixed.size(), dim));
  }
  if (options.width < 240 || options.height < 160) {
    return absl::InvalidArgumentError(
        fmt::format("plot: {}x{} is too small (at least 240x160)", options.width, options.height));
  }
  if (!(options.extrapolate_to >= 0) || !std::isfinite(options.extrapolate_to)) {
    return absl::InvalidArgumentError(
        fmt::format("plot: extrapolate_to {} is invalid", options.extrapolate_to));
  }
  return absl::OkStatus();
}

absl::Status check_points(const Series& series, std::size_t dim) {
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const Point& p = series.points[i];
    if (p.coordinate.size() != dim) {
      return absl::InvalidArgumentError(fmt::format(
          "plot: point {} has {} coordinate(s), expected {}", i + 1, p.coordinate.size(), dim));
    }
    for (const double v : p.coordinate) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(fmt::format("plot: point {} is not finite", i + 1));
      }
    }
    if (p.values.empty()) {
      return absl::InvalidArgumentError(fmt::format("plot: point {} has no values", i + 1));
    }
    for (const double v : p.values) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            fmt::format("plot: point {} has a non-finite value", i + 1));
      }
    }
  }
  return absl::OkStatus();
}

// Whether a and b differ in parameter xi at most.
bool on_line(const std::vector<double>& a, const std::vector<double>& b, std::size_t xi) {
  for (std::size_t d = 0; d < a.size(); ++d) {
    if (d != xi && !same_value(a[d], b[d])) return false;
  }
  return true;
}

// The line: given, or the one with the most distinct x values (first seen
// wins ties).
absl::StatusOr<std::vector<double>> choose_line(const Series& series, std::size_t xi,
                                                const std::vector<double>& given) {
  std::vector<double> fixed = given;
  if (fixed.empty()) {
    std::size_t best_count = 0;
    for (const Point& candidate : series.points) {
      std::vector<double> xs;
      for (const Point& p : series.points) {
        if (!on_line(p.coordinate, candidate.coordinate, xi)) continue;
        const double x = p.coordinate[xi];
        if (std::none_of(xs.begin(), xs.end(), [&](double e) { return same_value(e, x); })) {
          xs.push_back(x);
        }
      }
      if (xs.size() > best_count) {
        best_count = xs.size();
        fixed = candidate.coordinate;
      }
    }
  }
  for (std::size_t d = 0; d < fixed.size(); ++d) {
    if (d != xi && !std::isfinite(fixed[d])) {
      return absl::InvalidArgumentError(
          fmt::format("plot: fixed value {} is not finite", fixed[d]));
    }
  }
  return fixed;
}

// Measured points on the line, repetitions at equal x merged, by x.
absl::StatusOr<std::vector<LinePoint>> measured_line(const Series& series, const Plot& plot,
                                                     const PlotOptions& options) {
  std::vector<std::pair<double, std::vector<double>>> grouped;
  for (const Point& p : series.points) {
    if (!on_line(p.coordinate, plot.fixed, plot.xi)) continue;
    const double x = p.coordinate[plot.xi];
    auto it = std::find_if(grouped.begin(), grouped.end(),
                           [&](const auto& g) { return same_value(g.first, x); });
    if (it == grouped.end()) {
      grouped.emplace_back(x, p.values);
    } else {
      it->second.insert(it->second.end(), p.values.begin(), p.values.end());
    }
  }
  if (grouped.empty()) {
    return absl::InvalidArgumentError("plot: no measured points on the chosen line");
  }
  std::vector<LinePoint> line;
  for (const auto& [x, values] : grouped) {
    if (options.log_x && !(x > 0)) {
      return absl::InvalidArgumentError(
          fmt::format("plot: x = {} cannot be drawn on a log x axis (set log_x = false)", x));
    }
    LinePoint lp;
    lp.x = x;
    lp.mean = measure_of(values, Measure::kMean);
    lp.min = *std::min_element(values.begin(), values.end());
    lp.max = *std::max_element(values.begin(), values.end());
    if (options.log_y && !(lp.min > 0)) {
      return absl::InvalidArgumentError(fmt::format(
          "plot: value {} cannot be drawn on a log y axis (set log_y = false)", lp.min));
    }
    line.push_back(lp);
  }
  std::sort(line.begin(), line.end(),
            [](const LinePoint& a, const LinePoint& b) { return a.x < b.x; });
  return line;
}

// The point on the line at x.
std::vector<double> at_x(const Plot& plot, double x) {
  std::vector<double> c = plot.fixed;
  c[plot.xi] = x;
  return c;
}

// Sample positions, split at the last measured x so both parts end on it.
std::vector<double> positions(const Plot& plot, int total) {
  const Axis& xa = plot.xa;
  if (!plot.extrapolating) return spaced(xa, plot.x_first, plot.x_last, total);
  if (!(plot.x_last > plot.x_first)) return spaced(xa, plot.x_last, plot.x_end, total);
  const double fraction = (xa.transform(plot.x_last) - xa.transform(plot.x_first)) /
                          (xa.transform(plot.x_end) - xa.transform(plot.x_first));
  const int measured = std::clamp(static_cast<int>(std::lround(total * fraction)), 2, total - 2);
  std::vector<double> xs = spaced(xa, plot.x_first, plot.x_last, measured);
  const std::vector<double> rest = spaced(xa, plot.x_last, plot.x_end, total - measured + 1);
  xs.insert(xs.end(), rest.begin() + 1, rest.end());
  return xs;
}

// The model's curve and its band along the line.
absl::Status sample_model(const Model& model, const Series& series, const BandOptions& options,
                          Plot* plot) {
  for (const double x : positions(*plot, kCurveSamples)) {
    plot->curve.push_back({x, model.evaluate(at_x(*plot, x)), 0, 0});
  }
  std::vector<std::vector<double>> band_points;
  for (const double x : positions(*plot, kBandSamples)) band_points.push_back(at_x(*plot, x));
  absl::StatusOr<std::vector<Prediction>> band =
      predict_with_band(model, series, band_points, options);
  if (!band.ok()) return band.status();
  for (const Prediction& p : *band) {
    plot->band.push_back({p.coordinate[plot->xi], p.value, p.lower, p.upper});
  }
  return absl::OkStatus();
}

// Ranges: the measurements, the curve and the band, but a curve or band
// that blows up (a pole of log2(x)^-1 at x = 1, a wild extrapolation) may
// widen the y range by at most 20 times the measured span; past that it is
// clipped to the plot area instead of flattening the measurements.
void fit_axes(Plot* plot) {
  const Axis& ya = plot->ya;
  double t_min = std::numeric_limits<double>::infinity();
  double t_max = -std::numeric_limits<double>::infinity();
  for (const LinePoint& p : plot->line) {
    t_min = std::min(t_min, ya.transform(p.min));
    t_max = std::max(t_max, ya.transform(p.max));
  }
  double span = t_max - t_min;
  if (!(span > 0)) span = ya.log ? 1.0 : t_max != 0 ? std::abs(t_max) : 1.0;
  const double t_floor = t_min - 20 * span;
  const double t_ceiling = t_max + 20 * span;
  auto include = [&](double v) {
    if (!plot->drawable(v)) return;
    const double t = std::clamp(ya.transform(v), t_floor, t_ceiling);
    t_min = std::min(t_min, t);
    t_max = std::max(t_max, t);
  };
  for (const Sample& s : plot->curve) include(s.value);
  for (const Sample& s : plot->band) {
    if (plot->drawable(s.lower) && plot->drawable(s.upper)) {
      include(s.lower);
      include(s.upper);
    }
  }
  plot->xa.fit(plot->x_first, plot->x_end, 0.04);
  plot->ya.fit(ya.untransform(t_min), ya.untransform(t_max), 0.06);
}

// The plot area inside the margins; the axes map onto it.
void place(const PlotOptions& options, Plot* plot) {
  plot->left = kMarginLeft;
  plot->right = options.width - kMarginRight;
  plot->top = kMarginTop;
  plot->bottom = options.height - kMarginBottom;
  plot->xa.pixel_lo = plot->left;
  plot->xa.pixel_hi = plot->right;
  plot->ya.pixel_lo = plot->bottom;
  plot->ya.pixel_hi = plot->top;
}

std::string parameter_name(const Model& model, std::size_t d) {
  return d < model.parameters.size() && !model.parameters[d].empty() ? model.parameters[d]
                                                                     : fmt::format("x{}", d + 1);
}

// "callpath / metric (q = 64)": the other parameters' values on the line.
std::string plot_title(const Model& model, const Series& series, const PlotOptions& options,
                       const Plot& plot) {
  std::string title = options.title;
  if (title.empty()) {
    if (!series.callpath.empty() && !series.metric.empty()) {
      title = series.callpath + " / " + series.metric;
    } else {
      title = !series.callpath.empty() ? series.callpath
              : !series.metric.empty() ? series.metric
                                       : "model";
    }
  }
  std::string others;
  for (std::size_t d = 0; d < plot.fixed.size(); ++d) {
    if (d == plot.xi) continue;
    others += fmt::format("{}{} = {}", others.empty() ? "" : ", ", parameter_name(model, d),
                          tick_label(plot.fixed[d]));
  }
  if (!others.empty()) title += " (" + others + ")";
  return title;
}

Labels make_labels(const Model& model, const Series& series, const PlotOptions& options,
                   const Plot& plot) {
  Labels out;
  out.x_name = parameter_name(model, plot.xi);
  out.y_name = series.metric.empty() ? std::string("value") : series.metric;
  out.title = plot_title(model, series, options, plot);
  out.formula = model.formula();
  out.confidence_percent = static_cast<int>(std::lround(options.band.confidence * 100));
  return out;
}

// --- SVG -------------------------------------------------------------------

void write_header(const PlotOptions& options, const Plot& plot, const Labels& labels,
                  std::string* svg) {
  *svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
      options.width, options.height);
  *svg += fmt::format("<title>{}: {}</title>\n", escape(labels.title), escape(labels.formula));
  *svg += fmt::format(
      "<defs><clipPath id=\"plot-area\"><rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
      "height=\"{:.2f}\"/></clipPath></defs>\n",
      plot.left, plot.top, plot.right - plot.left, plot.bottom - plot.top);
  *svg += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n",
                      options.width, options.height);
}

// Grid and tick labels.
void write_grid(const Plot& plot, std::string* svg) {
  const std::vector<double> x_ticks = plot.xa.ticks();
  const std::vector<double> y_ticks = plot.ya.ticks();
  *svg += "<g class=\"grid\" stroke=\"#e5e7eb\" stroke-width=\"1\">\n";
  for (const double t : x_ticks) {
    *svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\"/>\n",
                        plot.xa.pixel(t), plot.top, plot.bottom);
  }
  for (const double t : y_ticks) {
    *svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{2:.2f}\" y2=\"{1:.2f}\"/>\n",
                        plot.left, plot.ya.pixel(t), plot.right);
  }
  *svg += "</g>\n";
  *svg += "<g class=\"ticks\" fill=\"#374151\">\n";
  for (const double t : x_ticks) {
    *svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n",
                        plot.xa.pixel(t), plot.bottom + 16, escape(tick_label(t)));
  }
  for (const double t : y_ticks) {
    *svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n",
                        plot.left - 6, plot.ya.pixel(t) + 4, escape(tick_label(t)));
  }
  *svg += "</g>\n";
}

// Band: measured range darker, extrapolated range lighter.
void write_band(const Plot& plot, std::string* svg) {
  const std::vector<Sample>& band = plot.band;
  auto band_ok = [&](std::size_t i) {
    return std::isfinite(band[i].value) && plot.drawable(band[i].lower) &&
           plot.drawable(band[i].upper);
  };
  for (const bool past : {false, true}) {
    auto in_part = [&](std::size_t i) {
      const double x = band[i].x;
      return band_ok(i) && (past ? x >= plot.x_last : x <= plot.x_last);
    };
    for (const auto& [b, e] : runs(band.size(), in_part)) {
      std::string polygon;
      for (std::size_t i = b; i < e; ++i) {
        polygon += (polygon.empty() ? "" : " ") +
                   pt(plot.xa.pixel(band[i].x), plot.ya.pixel(band[i].upper));
      }
      for (std::size_t i = e; i-- > b;) {
        polygon += " " + pt(plot.xa.pixel(band[i].x), plot.ya.pixel(band[i].lower));
      }
      *svg += fmt::format(
          "<polygon class=\"{}\" points=\"{}\" fill=\"{}\" fill-opacity=\"{}\" stroke=\"none\"/>\n",
          past ? "band-extrapolated" : "band", polygon, kCurveColor, past ? "0.10" : "0.22");
    }
  }
}

// Curve: solid over the measured range, dashed past it.
void write_curve(const Plot& plot, std::string* svg) {
  const std::vector<Sample>& curve = plot.curve;
  for (const bool past : {false, true}) {
    auto in_part = [&](std::size_t i) {
      return plot.drawable(curve[i].value) &&
             (past ? curve[i].x >= plot.x_last : curve[i].x <= plot.x_last);
    };
    for (const auto& [b, e] : runs(curve.size(), in_part)) {
      std::string polyline;
      for (std::size_t i = b; i < e; ++i) {
        polyline += (polyline.empty() ? "" : " ") +
                    pt(plot.xa.pixel(curve[i].x), plot.ya.pixel(curve[i].value));
      }
      *svg += fmt::format(
          "<polyline class=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"2\"{}/>\n",
          past ? "model-extrapolated" : "model", polyline, kCurveColor,
          past ? " stroke-dasharray=\"7,5\"" : "");
    }
  }
}

void write_last_measured(const Plot& plot, std::string* svg) {
  const double px = plot.xa.pixel(plot.x_last);
  *svg += fmt::format(
      "<line class=\"last-measured\" x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" "
      "stroke=\"#6b7280\" stroke-width=\"1\" stroke-dasharray=\"2,3\"/>\n",
      px, plot.top, plot.bottom);
  *svg += fmt::format(
      "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"10\" fill=\"#6b7280\">extrapolated "
      "&#8594;</text>\n",
      px + 4, plot.top + 12);
}

// Measured points: min-max bar over the repetitions, marker at the mean.
void write_points(const Plot& plot, std::string* svg) {
  *svg += fmt::format("<g class=\"measured\" stroke=\"{0}\" fill=\"{0}\">\n", kPointColor);
  for (const LinePoint& p : plot.line) {
    const double px = plot.xa.pixel(p.x);
    if (p.max > p.min) {
      *svg += fmt::format(
          "<line class=\"bar\" x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" "
          "stroke-width=\"1.5\"/>\n",
          px, plot.ya.pixel(p.min), plot.ya.pixel(p.max));
    }
    *svg += fmt::format("<circle class=\"point\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\"/>\n", px,
                        plot.ya.pixel(p.mean));
  }
  *svg += "</g>\n";
}

// Frame, axis titles, title and formula.
void write_frame_and_titles(const PlotOptions& options, const Plot& plot, const Labels& labels,
                            std::string* svg) {
  *svg += fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"none\" "
      "stroke=\"#374151\"/>\n",
      plot.left, plot.top, plot.right - plot.left, plot.bottom - plot.top);
  *svg += fmt::format(
      "<text class=\"x-title\" x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}{}</text>\n",
      (plot.left + plot.right) / 2, static_cast<double>(options.height) - 12, escape(labels.x_name),
      options.log_x ? " (log2 scale)" : "");
  *svg += fmt::format(
      "<text class=\"y-title\" x=\"{0:.2f}\" y=\"{1:.2f}\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 {0:.2f} {1:.2f})\">{2}{3}</text>\n",
      16.0, (plot.top + plot.bottom) / 2, escape(labels.y_name),
      options.log_y ? " (log10 scale)" : "");
  *svg += fmt::format(
      "<text class=\"title\" x=\"{:.2f}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}"
      "</text>\n",
      plot.left, escape(labels.title));
  *svg += fmt::format(
      "<text class=\"formula\" x=\"{:.2f}\" y=\"38\" font-family=\"monospace\">{}</text>\n",
      plot.left, escape(labels.formula));
}

// Legend, one row under the formula; text widths estimated at 0.57 em.
void write_legend(const Plot& plot, const Labels& labels, std::string* svg) {
  const double ly = 58;
  double lx = plot.left;
  auto legend_text = [&](const std::string& text) {
    *svg +=
        fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n", lx + 28, ly + 1, escape(text));
    lx += 28 + 6.8 * static_cast<double>(text.size()) + 18;
  };
  *svg += "<g class=\"legend\">\n";
  *svg += fmt::format(
      "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"{3}\"/>", lx + 11,
      ly - 9, ly + 3, kPointColor);
  *svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"/>", lx + 11,
                      ly - 3, kPointColor);
  legend_text("measured mean, min-max");
  *svg += fmt::format(
      "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" "
      "stroke-width=\"2\"/>",
      lx, ly - 3, lx + 22, ly - 3, kCurveColor);
  legend_text("model");
  *svg += fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"22\" height=\"10\" fill=\"{}\" "
      "fill-opacity=\"0.22\"/>",
      lx, ly - 8, kCurveColor);
  legend_text(fmt::format("{}% band", labels.confidence_percent));
  if (plot.extrapolating) {
    *svg += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" "
        "stroke-width=\"2\" stroke-dasharray=\"7,5\"/>",
        lx, ly - 3, lx + 22, ly - 3, kCurveColor);
    legend_text(fmt::format("extrapolation past {} = {}", labels.x_name, tick_label(plot.x_last)));
  }
  *svg += "</g>\n";
}

std::string write_svg(const PlotOptions& options, const Plot& plot, const Labels& labels) {
  std::string svg;
  svg.reserve(32 * 1024);
  write_header(options, plot, labels, &svg);
  write_grid(plot, &svg);
  svg += "<g clip-path=\"url(#plot-area)\">\n";
  write_band(plot, &svg);
  write_curve(plot, &svg);
  svg += "</g>\n";
  if (plot.extrapolating) write_last_measured(plot, &svg);
  write_points(plot, &svg);
  write_frame_and_titles(options, plot, labels, &svg);
  write_legend(plot, labels, &svg);
  svg += "</svg>\n";
  return svg;
}

// The line, its measured points, the x range and the axes' scales.
absl::StatusOr<Plot> measured_plot(const Series& series, const PlotOptions& options) {
  Plot plot;
  plot.xi = static_cast<std::size_t>(options.x_parameter);
  absl::StatusOr<std::vector<double>> fixed = choose_line(series, plot.xi, options.fixed);
  if (!fixed.ok()) return fixed.status();
  plot.fixed = *std::move(fixed);
  absl::StatusOr<std::vector<LinePoint>> line = measured_line(series, plot, options);
  if (!line.ok()) return line.status();
  plot.line = *std::move(line);
  plot.x_first = plot.line.front().x;
  plot.x_last = plot.line.back().x;
  plot.x_end = options.extrapolate_to > 0 ? options.extrapolate_to : 4 * plot.x_last;
  if (!(plot.x_end > plot.x_last)) plot.x_end = plot.x_last;
  plot.extrapolating = plot.x_end > plot.x_last;
  plot.xa.log = options.log_x;
  plot.xa.base = 2;
  plot.ya.log = options.log_y;
  plot.ya.base = 10;
  return plot;
}

}  // namespace

absl::StatusOr<std::string> render_svg(const Model& model, const Series& series,
                                       const PlotOptions& options) {
  if (series.points.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("plot: series '{}' / '{}' has no points", series.callpath, series.metric));
  }
  const std::size_t dim =
      model.parameters.empty() ? series.points.front().coordinate.size() : model.parameters.size();
  if (absl::Status status = check_options(options, dim); !status.ok()) return status;
  if (absl::Status status = check_points(series, dim); !status.ok()) return status;
  absl::StatusOr<Plot> plot = measured_plot(series, options);
  if (!plot.ok()) return plot.status();
  if (absl::Status status = sample_model(model, series, options.band, &*plot); !status.ok()) {
    return status;
  }
  fit_axes(&*plot);
  place(options, &*plot);
  return write_svg(options, *plot, make_labels(model, series, options, *plot));
}

}  // namespace trainscope::scaling
