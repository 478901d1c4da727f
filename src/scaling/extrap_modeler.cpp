// Extra-P 4.2.5's default modelers, step by step as Extra-P does them
// (extrap/modelers/single_parameter/basic.py + abstract_base.py,
// modelers/multi_parameter/multi_parameter_modeler.py, entities/hypotheses.py).
// The order of floating-point operations follows Extra-P's where it decides
// between hypotheses, so the same terms win.
#include "trainscope/scaling/extrap_modeler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "scaling/extrap_internal.hpp"
#include "scaling/lapack_lstsq.hpp"
#include "scaling/svd_solve.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::scaling {

namespace {

absl::StatusOr<bool> parse_bool(std::string_view key, std::string_view value) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(std::string(value)));
  if (v == "true" || v == "on" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "off" || v == "no" || v == "0") return false;
  return absl::InvalidArgumentError(
      fmt::format("option {}: '{}' is not a boolean (use True or False)", key, value));
}

}  // namespace

absl::Status ExtrapOptions::set(std::string_view key, std::string_view value) {
  auto set_bool = [&](bool& target) -> absl::Status {
    absl::StatusOr<bool> parsed = parse_bool(key, value);
    if (!parsed.ok()) return parsed.status();
    target = *parsed;
    return absl::OkStatus();
  };
  if (key == "allow_log_terms") return set_bool(allow_log_terms);
  if (key == "use_crossvalidation") return set_bool(use_crossvalidation);
  if (key == "compare_with_RSS") return set_bool(compare_with_RSS);
  if (key == "retain_default_exponents") return set_bool(retain_default_exponents);
  if (key == "force_combination_exponents") return set_bool(force_combination_exponents);
  if (key == "allow_negative_exponents") return set_bool(allow_negative_exponents);
  if (key == "allow_combinations_of_sums_and_products")
    return set_bool(allow_combinations_of_sums_and_products);
  if (key == "minimum_term_contribution") {
    double parsed = 0;
    if (!absl::SimpleAtod(std::string(value), &parsed) || !std::isfinite(parsed) || parsed < 0) {
      return absl::InvalidArgumentError(fmt::format(
          "option minimum_term_contribution: '{}' is not a non-negative number", value));
    }
    minimum_term_contribution = parsed;
    return absl::OkStatus();
  }
  if (key == "poly_exponents" || key == "log_exponents") {
    (key == "poly_exponents" ? poly_exponents : log_exponents) = std::string(value);
    return absl::OkStatus();
  }
  if (key == "single_parameter_point_selection") {
    const std::string v(value);
    if (v != "auto" && v != "smallest" && v != "all") {
      return absl::InvalidArgumentError(fmt::format(
          "option single_parameter_point_selection: '{}' is not one of auto, smallest, all",
          value));
    }
    single_parameter_point_selection = v;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown modeler option '{}' (known: allow_log_terms, use_crossvalidation, compare_with_RSS, "
      "minimum_term_contribution, poly_exponents, log_exponents, retain_default_exponents, "
      "force_combination_exponents, allow_negative_exponents, single_parameter_point_selection, "
      "allow_combinations_of_sums_and_products)",
      key));
}

absl::StatusOr<Measure> parse_measure(std::string_view name) {
  const std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "mean") return Measure::kMean;
  if (n == "median") return Measure::kMedian;
  if (n == "minimum" || n == "min") return Measure::kMinimum;
  if (n == "maximum" || n == "max") return Measure::kMaximum;
  return absl::InvalidArgumentError(
      fmt::format("unknown measure '{}': use mean, median, minimum or maximum", name));
}

double measure_of(absl::Span<const double> values, Measure measure) {
  if (values.empty()) return stats::kNaN;
  switch (measure) {
    case Measure::kMean: {
      double sum = 0;
      for (double v : values) sum += v;
      return sum / static_cast<double>(values.size());
    }
    case Measure::kMedian:
      return stats::median(std::vector<double>(values.begin(), values.end()));
    case Measure::kMinimum:
      return *std::min_element(values.begin(), values.end());
    case Measure::kMaximum:
      return *std::max_element(values.begin(), values.end());
  }
  return stats::kNaN;
}

namespace detail {

PointStats PointStats::Of(std::vector<double> coordinate, absl::Span<const double> values) {
  PointStats s;
  s.coordinate = std::move(coordinate);
  s.mean = measure_of(values, Measure::kMean);
  s.median = measure_of(values, Measure::kMedian);
  s.minimum = measure_of(values, Measure::kMinimum);
  s.maximum = measure_of(values, Measure::kMaximum);
  for (double v : values) s.pure_error_ss += (v - s.mean) * (v - s.mean);
  s.pure_error_df = static_cast<double>(values.size()) - 1;
  s.variance_factor = 1.0 / static_cast<double>(values.size());
  return s;
}

double PointStats::value(Measure measure) const noexcept {
  switch (measure) {
    case Measure::kMean:
      return mean;
    case Measure::kMedian:
      return median;
    case Measure::kMinimum:
      return minimum;
    case Measure::kMaximum:
      return maximum;
  }
  return mean;
}

namespace {

// Python's int()/float() on one item of a comma-separated exponent list
// (basic.py parse_expos): "2" is an int, "0.5" a float, anything else skipped.
std::vector<Exponent> parse_exponents(const std::string& list) {
  std::vector<Exponent> out;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    const std::string text(absl::StripAsciiWhitespace(item));
    if (text.empty()) continue;
    if (text.find('.') != std::string::npos) {
      double value = 0;
      if (absl::SimpleAtod(text, &value) && std::isfinite(value))
        out.push_back(Exponent::Number(value));
    } else {
      int value = 0;
      if (absl::SimpleAtoi(text, &value)) out.push_back(Exponent::Fraction(value, 1));
    }
  }
  return out;
}

Factor make_factor(Exponent poly, Exponent log) {
  Factor f;
  f.poly = std::move(poly);
  f.log = std::move(log);
  return f;
}

constexpr int kDefaultWithLogs[][3] = {
    {0, 1, 1}, {0, 1, 2}, {1, 4, 0}, {1, 3, 0}, {1, 4, 1},  {1, 3, 1}, {1, 4, 2},
    {1, 3, 2}, {1, 2, 0}, {1, 2, 1}, {1, 2, 2}, {2, 3, 0},  {3, 4, 0}, {2, 3, 1},
    {3, 4, 1}, {4, 5, 0}, {2, 3, 2}, {3, 4, 2}, {1, 1, 0},  {1, 1, 1}, {1, 1, 2},
    {5, 4, 0}, {5, 4, 1}, {4, 3, 0}, {4, 3, 1}, {3, 2, 0},  {3, 2, 1}, {3, 2, 2},
    {5, 3, 0}, {7, 4, 0}, {2, 1, 0}, {2, 1, 1}, {2, 1, 2},  {9, 4, 0}, {7, 3, 0},
    {5, 2, 0}, {5, 2, 1}, {5, 2, 2}, {8, 3, 0}, {11, 4, 0}, {3, 1, 0}, {3, 1, 1}};
constexpr int kNegativeWithLogs[][3] = {
    {0, 1, -1},  {0, 1, -2},  {-1, 4, -1}, {-1, 3, -1}, {-1, 4, -2}, {-1, 3, -2},
    {-1, 2, -1}, {-1, 2, -2}, {-2, 3, -1}, {-3, 4, -1}, {-2, 3, -2}, {-3, 4, -2},
    {-1, 1, -1}, {-1, 1, -2}, {-5, 4, -1}, {-4, 3, -1}, {-3, 2, -1}, {-3, 2, -2},
    {-2, 1, -1}, {-2, 1, -2}, {-5, 2, -1}, {-5, 2, -2}, {-3, 1, -1}};
constexpr int kDefaultPolynomial[][3] = {{1, 4, 0}, {1, 3, 0}, {1, 2, 0},  {2, 3, 0}, {3, 4, 0},
                                         {4, 5, 0}, {1, 1, 0}, {5, 4, 0},  {4, 3, 0}, {3, 2, 0},
                                         {5, 3, 0}, {7, 4, 0}, {2, 1, 0},  {9, 4, 0}, {7, 3, 0},
                                         {5, 2, 0}, {8, 3, 0}, {11, 4, 0}, {3, 1, 0}};

template <std::size_t N>
void add_blocks(std::vector<Factor>& out, const int (&table)[N][3], int sign = 1) {
  for (const auto& e : table) {
    out.push_back(make_factor(e[0] != 0 ? Exponent::Fraction(sign * e[0], e[1]) : Exponent{},
                              e[2] != 0 ? Exponent::Fraction(e[2], 1) : Exponent{}));
  }
}

}  // namespace

std::vector<Factor> default_building_blocks(bool allow_log_terms, bool allow_negative_exponents) {
  std::vector<Factor> out;
  if (allow_log_terms) {
    add_blocks(out, kDefaultWithLogs);
    if (allow_negative_exponents) add_blocks(out, kNegativeWithLogs);
  } else {
    add_blocks(out, kDefaultPolynomial);
  }
  if (allow_negative_exponents) add_blocks(out, kDefaultPolynomial, -1);
  return out;
}

std::vector<Factor> building_blocks(const ExtrapOptions& options) {
  const std::vector<Exponent> poly = parse_exponents(options.poly_exponents);
  const std::vector<Exponent> log = parse_exponents(options.log_exponents);
  if (poly.empty() && log.empty()) {
    return default_building_blocks(options.allow_log_terms, options.allow_negative_exponents);
  }
  std::vector<Factor> out;
  auto add = [&](const Exponent& p, const Exponent& l) {
    if (p.value == 0 && l.value == 0) return;  // (0, 0) is the constant
    out.push_back(make_factor(p.value != 0 ? p : Exponent{}, l.value != 0 ? l : Exponent{}));
  };
  if (options.force_combination_exponents) {
    for (const Exponent& p : poly) {
      for (const Exponent& l : log) add(p, l);
    }
  } else {
    for (const Exponent& p : poly) add(p, Exponent{});
    for (const Exponent& l : log) add(Exponent{}, l);
    for (const Exponent& p : poly) {
      for (const Exponent& l : log) add(p, l);
    }
  }
  if (options.retain_default_exponents) {
    std::vector<Factor> defaults =
        default_building_blocks(options.allow_log_terms, options.allow_negative_exponents);
    out.insert(out.end(), defaults.begin(), defaults.end());
  }
  return out;
}

namespace {

LeastSquares least_squares(Numerics numerics, const std::vector<double>& a, std::size_t rows,
                           std::size_t cols, const std::vector<double>& b, double rcond = 0.0) {
  return numerics == Numerics::kNumpy ? lapack_least_squares(a, rows, cols, b, rcond)
                                      : solve_least_squares(a, rows, cols, b, rcond);
}

// numpy.linalg.lstsq(A, b) for A = [1, f(x)] (or [1] when f is absent).
std::pair<double, double> fit_constant_and_term(const std::vector<double>& xs,
                                                const std::vector<double>& ys, const Factor* factor,
                                                Numerics numerics) {
  const std::size_t n = xs.size();
  const std::size_t cols = factor != nullptr ? 2 : 1;
  std::vector<double> a(n * cols);
  for (std::size_t i = 0; i < n; ++i) {
    a[i * cols] = 1.0;
    if (factor != nullptr) a[i * cols + 1] = factor->evaluate(xs[i]);
  }
  LeastSquares solution = least_squares(numerics, a, n, cols, ys);
  return {solution.x[0], cols == 2 ? solution.x[1] : 0.0};
}

// hypotheses.py Hypothesis.clean_constant_coefficient
double clean_constant(double constant, double phi, const std::vector<double>& values) {
  const double minimum = *std::min_element(values.begin(), values.end());
  if (minimum == 0) {
    if (std::abs(constant - minimum) < phi) return 0;
  } else if (std::abs(constant / minimum) < phi) {
    return 0;
  }
  return constant;
}

// ConstantHypothesis.compute_cost (in-sample; RE keeps the last point's value),
// but for the adjusted R^2.
ModelCosts constant_costs(double constant, const std::vector<double>& ys) {
  ModelCosts c;
  double smape = 0;
  for (double actual : ys) {
    const double difference = constant - actual;
    c.rss += difference * difference;
    if (actual != 0) {
      const double relative = difference / actual;
      c.rrss += relative * relative;
      c.re = std::abs(difference) / actual;
    }
    const double abssum = std::abs(actual) + std::abs(constant);
    if (abssum != 0) smape += std::abs(difference) / abssum * 2;
  }
  c.smape = smape / static_cast<double>(ys.size()) * 100;
  const double mean = measure_of(ys, Measure::kMean);
  c.nrss = mean != 0.0 ? std::sqrt(c.rss) / mean : stats::kNaN;
  // A constant explains none of the variation between the points: adjusted
  // R^2 0 (1 only when they do not vary). Extra-P's ConstantHypothesis sets
  // AR2 = 1 ("TODO: should this be calculated?"), the one cost where
  // trainscope differs from it on purpose.
  c.ar2 = c.rss > 0 ? 0 : 1;
  return c;
}

double evaluate_single(double c0, double c1, const Factor& factor, double x) {
  return c0 + c1 * factor.evaluate(x);
}

// Hypothesis.calc_term_contribution: max over points of |term / actual|
// (NaN wins, as numpy's max).
double term_contribution(double coefficient, const std::vector<std::vector<double>>& coordinates,
                         const std::vector<Factor>& factors, const std::vector<double>& ys) {
  double maximum = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    double term = coefficient;
    for (const Factor& f : factors)
      term *= f.evaluate(coordinates[i][static_cast<std::size_t>(f.parameter)]);
    const double contribution = std::abs(term / ys[i]);
    if (std::isnan(contribution)) return contribution;
    maximum = std::max(maximum, contribution);
  }
  return maximum;
}

}  // namespace

double f_distribution_upper(double f, double d1, double d2) {
  if (!(f > 0)) return 1;
  if (std::isinf(f)) return 0;
  return stats::incomplete_beta(d2 / 2, d1 / 2, d2 / (d2 + d1 * f));
}

double term_p_value(const std::vector<PointStats>& points, double rss_constant, double rss_term) {
  double pure_ss = 0, pure_df = 0, factor = 0;
  for (const PointStats& p : points) {
    pure_ss += p.pure_error_ss;
    pure_df += p.pure_error_df;
    factor += p.variance_factor;
  }
  const double n = static_cast<double>(points.size());
  double noise = 0, df = 0;  // variance of one point's value, and its degrees of freedom
  if (pure_df >= 2) {
    noise = pure_ss / pure_df * (factor / n);
    df = pure_df;
  } else if (n > 2) {
    noise = rss_term / (n - 2);
    df = n - 2;
  } else {
    return stats::kNaN;
  }
  const double reduction = rss_constant - rss_term;
  if (!(reduction > 0)) return 1;
  if (noise <= 0) return 0;
  return f_distribution_upper(reduction / noise, 1, df);
}

bool clearly_lower(double candidate, double best, double scale) {
  if (!(candidate < best)) return false;
  const double tolerance = kCostTieRelative * std::max(std::abs(candidate), std::abs(best)) +
                           kCostTieFloor * std::abs(scale);
  return best - candidate > tolerance || std::isinf(best);
}

SingleResult model_single(const std::vector<PointStats>& points, int parameter,
                          const ExtrapOptions& options, std::vector<std::string>& warnings,
                          const HypothesisFilter& filter, LogRule log_rule, Numerics numerics,
                          double significance) {
  const std::size_t n = points.size();
  std::vector<double> xs(n), ys(n);
  std::vector<std::vector<double>> coordinates(n);
  for (std::size_t i = 0; i < n; ++i) {
    xs[i] = points[i].coordinate[static_cast<std::size_t>(parameter)];
    ys[i] = points[i].value(options.measure);
    coordinates[i] = {xs[i]};
  }
  if (n < 5) {
    warnings.push_back(
        fmt::format("Number of measurements for a parameter needs to be at least 5 in order to "
                    "create a performance "
                    "model (got {})",
                    n));
  }

  SingleResult best;
  best.constant = measure_of(ys, Measure::kMean);
  best.costs = constant_costs(best.constant, ys);
  const double constant_cost = best.costs.rss;
  if (constant_cost == 0) return best;
  const SingleResult constant_model = best;

  std::vector<Factor> blocks = building_blocks(options);
  const double smallest = *std::min_element(xs.begin(), xs.end());
  const bool has_log =
      std::any_of(blocks.begin(), blocks.end(), [](const Factor& f) { return !f.log.is_zero(); });
  if (log_rule == LogRule::kExtrap) {
    const bool log_capable = options.allow_negative_exponents ? smallest > 1.0 : smallest >= 1.0;
    if (!log_capable) {
      if (has_log) {
        warnings.push_back(
            "Your measurements contained a point value below one, therefore, Extra-P does not use "
            "logarithmic "
            "terms for modeling.");
      }
      blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                                  [](const Factor& f) { return !f.log.is_zero(); }),
                   blocks.end());
    }
  } else {
    if (smallest < 1.0 && has_log) {
      warnings.push_back(fmt::format(
          "parameter value {} is below 1, where log2 is negative: logarithmic terms are not used",
          smallest));
    }
    blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                                [&](const Factor& f) {
                                  return (smallest < 1.0 && !f.log.is_zero()) ||
                                         (smallest <= 1.0 && f.log.value < 0);
                                }),
                 blocks.end());
  }

  std::vector<double> train_x, train_y;
  train_x.reserve(n);
  train_y.reserve(n);
  const double count = static_cast<double>(n);
  for (const Factor& factor : blocks) {
    ModelCosts costs;
    if (options.use_crossvalidation) {
      for (std::size_t held = 0; held < n; ++held) {
        train_x.clear();
        train_y.clear();
        for (std::size_t i = 0; i < n; ++i) {
          if (i == held) continue;
          train_x.push_back(xs[i]);
          train_y.push_back(ys[i]);
        }
        auto [c0, c1] = fit_constant_and_term(train_x, train_y, &factor, numerics);
        c0 = clean_constant(c0, 0.0005, train_y);
        const double predicted = evaluate_single(c0, c1, factor, xs[held]);
        const double actual = ys[held];
        const double difference = predicted - actual;
        costs.rss += difference * difference;
        costs.nrss += std::sqrt(costs.rss) / measure_of(train_y, Measure::kMean) / count;
        if (actual != 0) {
          const double relative = difference / actual;
          costs.re += std::abs(relative) / count;
          costs.rrss += relative * relative;
        }
        const double abssum = std::abs(actual) + std::abs(predicted);
        if (abssum != 0) costs.smape += (std::abs(difference) / abssum * 2) / count * 100;
      }
    }
    auto [c0, c1] = fit_constant_and_term(xs, ys, &factor, numerics);
    if (!options.use_crossvalidation) {
      c0 = clean_constant(c0, 1e-3, ys);
      double smape_sum = 0, re_sum = 0, actual_sum = 0;
      std::size_t smape_count = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double predicted = evaluate_single(c0, c1, factor, xs[i]);
        const double difference = predicted - ys[i];
        costs.rss += difference * difference;
        costs.rrss += (difference / ys[i]) * (difference / ys[i]);
        re_sum += std::abs(difference) / ys[i];
        actual_sum += ys[i];
        const double abssum = std::abs(ys[i]) + std::abs(predicted);
        if (abssum != 0.0) {
          smape_sum += std::abs(difference) / abssum * 2;
          ++smape_count;
        }
      }
      costs.nrss = std::sqrt(costs.rss) / (actual_sum / count);
      costs.re = re_sum / count;
      costs.smape =
          smape_count > 0 ? smape_sum / static_cast<double>(smape_count) * 100 : stats::kNaN;
    }
    const double adj_r = 1.0 - costs.rss / constant_cost;
    const double degrees_of_freedom = count - 1 - 1;
    costs.ar2 = 1.0 - (1.0 - adj_r) * (count - 1.0) / degrees_of_freedom;

    if (std::isnan(costs.rss) || std::isinf(costs.rss)) continue;  // "numeric imprecision"
    if (c1 == 0) continue;
    Factor located = factor;
    located.parameter = 0;
    if (term_contribution(c1, coordinates, {located}, ys) < options.minimum_term_contribution)
      continue;
    if (filter && !filter(c0, c1, located)) continue;
    const bool better = options.compare_with_RSS
                            ? clearly_lower(costs.rss, best.costs.rss, constant_cost)
                            : clearly_lower(costs.smape, best.costs.smape);
    if (!better) continue;
    best.term = factor;
    best.term->parameter = parameter;
    best.constant = c0;
    best.coefficient = c1;
    best.costs = costs;
  }
  if (significance > 0 && best.term) {
    double rss_term = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double residual =
          ys[i] - evaluate_single(best.constant, best.coefficient, *best.term, xs[i]);
      rss_term += residual * residual;
    }
    const double p_value = term_p_value(points, constant_cost, rss_term);
    if (p_value >= significance) return constant_model;
  }
  return best;
}

namespace {

// A MultiParameterTerm with coefficient 1: the product of its factors.
using TermShape = std::vector<Factor>;

double evaluate_shape(const TermShape& shape, const std::vector<double>& coordinate) {
  double value = 1;
  for (const Factor& f : shape)
    value *= f.evaluate(coordinate[static_cast<std::size_t>(f.parameter)]);
  return value;
}

struct MultiHypothesis {
  std::vector<TermShape> terms;
  double constant = 0;
  std::vector<double> coefficients;
  ModelCosts costs;
};

// MultiParameterHypothesis.compute_coefficients: lstsq, retried with
// rcond = eps when the rank collapses.
void fit_multi(MultiHypothesis& h, const std::vector<PointStats>& points,
               const std::vector<double>& ys, Numerics numerics) {
  const std::size_t n = points.size();
  const std::size_t cols = h.terms.size() + 1;
  std::vector<double> a(n * cols);
  for (std::size_t i = 0; i < n; ++i) {
    a[i * cols] = 1;
    for (std::size_t t = 0; t < h.terms.size(); ++t)
      a[i * cols + t + 1] = evaluate_shape(h.terms[t], points[i].coordinate);
  }
  LeastSquares solution = least_squares(numerics, a, n, cols, ys);
  if (solution.rank < cols) solution = least_squares(numerics, a, n, cols, ys, -1);
  h.constant = solution.x[0];
  h.coefficients.assign(solution.x.begin() + 1, solution.x.end());
}

double evaluate_multi(const MultiHypothesis& h, const std::vector<double>& coordinate) {
  double value = h.constant;
  for (std::size_t t = 0; t < h.terms.size(); ++t)
    value += h.coefficients[t] * evaluate_shape(h.terms[t], coordinate);
  return value;
}

// MultiParameterHypothesis.compute_cost (in-sample; no nRSS) and
// compute_adjusted_rsquared.
void cost_multi(MultiHypothesis& h, const std::vector<PointStats>& points,
                const std::vector<double>& ys, double constant_cost) {
  ModelCosts c;
  double smape = 0, re_sum = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double predicted = evaluate_multi(h, points[i].coordinate);
    const double actual = ys[i];
    const double difference = predicted - actual;
    const double abssum = std::abs(actual) + std::abs(predicted);
    re_sum += std::abs(predicted - actual) / actual;
    c.rss += difference * difference;
    const double relative = difference / actual;
    c.rrss += relative * relative;
    if (abssum != 0.0) smape += std::abs(difference) / abssum * 2;
  }
  const double n = static_cast<double>(points.size());
  c.re = re_sum / n;
  c.smape = smape / n * 100;
  std::size_t factor_count = 0;
  for (const TermShape& t : h.terms) factor_count += t.size();
  const double adj_r = 1.0 - c.rss / constant_cost;
  const double degrees_of_freedom = n - static_cast<double>(factor_count) - 1;
  c.ar2 = 1.0 - (1.0 - adj_r) * (n - 1.0) / degrees_of_freedom;
  h.costs = c;
}

bool contributions_big_enough(const MultiHypothesis& h, const std::vector<PointStats>& points,
                              const std::vector<double>& ys) {
  std::vector<std::vector<double>> coordinates;
  coordinates.reserve(points.size());
  for (const PointStats& p : points) coordinates.push_back(p.coordinate);
  for (std::size_t t = 0; t < h.terms.size(); ++t) {
    if (h.coefficients[t] == 0) return false;
    if (term_contribution(h.coefficients[t], coordinates, h.terms[t], ys) < 0.0005) return false;
  }
  return true;
}

std::vector<double> partial(const std::vector<double>& coordinate, std::size_t except) {
  std::vector<double> out;
  out.reserve(coordinate.size());
  for (std::size_t i = 0; i < coordinate.size(); ++i) {
    if (i != except) out.push_back(coordinate[i]);
  }
  return out;
}

double nanmean(const std::vector<double>& values) {
  double sum = 0;
  std::size_t count = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    sum += v;
    ++count;
  }
  return count == 0 ? stats::kNaN : sum / static_cast<double>(count);
}

// find_best_measurement_points: per parameter, the longest lines of points
// where the other parameters are fixed, points at equal x averaged.
std::vector<std::vector<PointStats>> best_lines(const std::vector<PointStats>& points,
                                                Measure measure, bool warn_if_not_all,
                                                std::vector<std::string>& warnings) {
  const std::size_t dims = points.front().coordinate.size();
  std::vector<std::vector<PointStats>> lines(dims);
  bool use_all = true;
  for (std::size_t p = 0; p < dims; ++p) {
    // group by the other coordinates, in first-seen order
    std::vector<std::pair<std::vector<double>, std::vector<std::size_t>>> groups;
    for (std::size_t i = 0; i < points.size(); ++i) {
      std::vector<double> key = partial(points[i].coordinate, p);
      auto it =
          std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
      if (it == groups.end()) {
        groups.push_back({std::move(key), {i}});
      } else {
        it->second.push_back(i);
      }
    }
    std::size_t current_max = groups.front().second.size();
    std::vector<const std::vector<std::size_t>*> candidates{&groups.front().second};
    for (std::size_t g = 1; g < groups.size(); ++g) {
      const std::size_t length = groups[g].second.size();
      if (length > current_max) {
        current_max = length;
        candidates = {&groups[g].second};
        use_all = false;
      } else if (length == current_max) {
        candidates.push_back(&groups[g].second);
      } else {
        use_all = false;
      }
    }
    // regroup by this parameter's value
    std::vector<std::pair<double, std::vector<std::size_t>>> by_x;
    for (const auto* candidate : candidates) {
      for (std::size_t i : *candidate) {
        const double x = points[i].coordinate[p];
        auto it =
            std::find_if(by_x.begin(), by_x.end(), [&](const auto& g) { return g.first == x; });
        if (it == by_x.end()) {
          by_x.push_back({x, {i}});
        } else {
          it->second.push_back(i);
        }
      }
    }
    // keep only the lines present at the first x
    std::vector<std::vector<double>> common;
    for (std::size_t i : by_x.front().second) common.push_back(partial(points[i].coordinate, p));
    for (std::size_t g = 1; g < by_x.size(); ++g) {
      auto& members = by_x[g].second;
      members.erase(std::remove_if(members.begin(), members.end(),
                                   [&](std::size_t i) {
                                     return std::find(common.begin(), common.end(),
                                                      partial(points[i].coordinate, p)) ==
                                            common.end();
                                   }),
                    members.end());
    }
    for (const auto& [x, members] : by_x) {
      if (members.empty()) continue;
      PointStats combined;
      if (members.size() == 1) {
        combined = points[members.front()];
      } else {
        combined.pure_error_ss = 0;
        combined.pure_error_df = 0;
        combined.variance_factor = 0;
        for (std::size_t i : members) {
          combined.pure_error_ss += points[i].pure_error_ss;
          combined.pure_error_df += points[i].pure_error_df;
          combined.variance_factor += points[i].variance_factor;
        }
        const double m = static_cast<double>(members.size());
        combined.variance_factor /= m * m;
        double sum = 0;
        for (std::size_t i : members) sum += points[i].value(measure);
        const double value = sum / static_cast<double>(members.size());
        combined.mean = value;
        combined.median = value;
        std::vector<double> maxima, minima;
        for (std::size_t i : members) {
          if (value == 0) {
            maxima.push_back(points[i].maximum);
            minima.push_back(points[i].minimum);
          } else {
            maxima.push_back(points[i].maximum / points[i].mean);
            minima.push_back(points[i].minimum / points[i].mean);
          }
        }
        if (value == 0) {
          combined.maximum = measure_of(maxima, Measure::kMean);
          combined.minimum = measure_of(minima, Measure::kMean);
        } else {
          combined.maximum = nanmean(maxima) * value;
          combined.minimum = nanmean(minima) * value;
        }
      }
      combined.coordinate.assign(dims, 0.0);
      combined.coordinate[p] = x;
      lines[p].push_back(std::move(combined));
    }
  }
  if (warn_if_not_all && !use_all) {
    warnings.push_back(
        "Could not use all measurement points. At least 25 measurements are needed; one for each "
        "combination of "
        "parameters.");
  }
  return lines;
}

// find_first_measurement_points ("smallest"): per parameter, the points on
// the line through the smallest coordinates of the other parameters.
std::vector<std::vector<PointStats>> first_lines(const std::vector<PointStats>& points) {
  const std::size_t dims = points.front().coordinate.size();
  std::vector<std::vector<double>> min_coordinate(
      dims, std::vector<double>(dims, std::numeric_limits<double>::infinity()));
  std::vector<std::vector<PointStats>> lines(dims);
  for (const PointStats& m : points) {
    for (std::size_t p = 0; p < dims; ++p) {
      bool equal = true, lower = true;
      for (std::size_t i = 0; i < dims; ++i) {
        if (i == p) continue;
        equal = equal && m.coordinate[i] == min_coordinate[p][i];
        lower = lower && m.coordinate[i] <= min_coordinate[p][i];
      }
      if (equal) {
        lines[p].push_back(m);
      } else if (lower) {
        lines[p].clear();
        lines[p].push_back(m);
        min_coordinate[p] = m.coordinate;
      }
    }
  }
  return lines;
}

Model to_model(const std::vector<std::string>& parameters, const MultiHypothesis& h) {
  Model model;
  model.parameters = parameters;
  model.constant = h.constant;
  for (std::size_t t = 0; t < h.terms.size(); ++t) {
    Term term;
    term.coefficient = h.coefficients[t];
    term.factors = h.terms[t];
    model.terms.push_back(std::move(term));
  }
  model.costs = h.costs;
  return model;
}

}  // namespace

Model model_multi(const std::vector<std::string>& parameters, const std::vector<PointStats>& points,
                  const ExtrapOptions& options, const SingleModeler& single,
                  std::vector<std::string>& warnings, const ModelFilter& accept,
                  Numerics numerics) {
  const std::vector<std::vector<PointStats>> lines =
      options.single_parameter_point_selection == "smallest"
          ? first_lines(points)
          : best_lines(points, options.measure, options.single_parameter_point_selection == "all",
                       warnings);

  std::vector<std::pair<int, Factor>>
      pairs;  // parameters whose line is not constant, and their term
  std::vector<SingleResult> singles;
  for (std::size_t p = 0; p < lines.size(); ++p) {
    singles.push_back(single(lines[p], static_cast<int>(p)));
    if (singles.back().term) pairs.push_back({static_cast<int>(p), *singles.back().term});
  }
  if (points.size() < 5) {
    warnings.push_back(
        fmt::format("Number of measurements for each parameter needs to be at least 5 in order to "
                    "create a performance "
                    "model (got {})",
                    points.size()));
  }

  std::vector<double> ys;
  ys.reserve(points.size());
  for (const PointStats& point : points) ys.push_back(point.value(options.measure));
  const double mean_model = measure_of(ys, Measure::kMean);
  double constant_cost = 0;
  for (double y : ys) constant_cost += (y - mean_model) * (y - mean_model);

  if (pairs.empty()) {
    Model model;
    model.parameters = parameters;
    model.constant = mean_model;
    model.costs = constant_costs(mean_model, ys);
    return model;
  }

  if (pairs.size() == 1) {
    const auto& [param, factor] = pairs.front();
    MultiHypothesis reused;  // the single-parameter model's own coefficients
    reused.terms = {{factor}};
    reused.constant = singles[static_cast<std::size_t>(param)].constant;
    reused.coefficients = {singles[static_cast<std::size_t>(param)].coefficient};
    cost_multi(reused, points, ys, constant_cost);
    MultiHypothesis refit;
    refit.terms = {{factor}};
    fit_multi(refit, points, ys, numerics);
    cost_multi(refit, points, ys, constant_cost);
    MultiHypothesis* chosen = &reused;
    if (options.compare_with_RSS &&
        clearly_lower(refit.costs.rss, reused.costs.rss, constant_cost)) {
      chosen = &refit;
    } else if (clearly_lower(refit.costs.smape, reused.costs.smape)) {
      chosen = &refit;
    }
    return to_model(parameters, *chosen);
  }

  const std::size_t k = pairs.size();
  auto single_term = [&](std::size_t i) { return TermShape{pairs[i].second}; };
  auto product = [&](std::initializer_list<std::size_t> which) {
    TermShape shape;
    for (std::size_t i : which) shape.push_back(pairs[i].second);
    return shape;
  };
  TermShape mult;
  for (const auto& pair : pairs) mult.push_back(pair.second);
  std::vector<TermShape> add;
  for (std::size_t i = 0; i < k; ++i) add.push_back(single_term(i));

  std::vector<std::vector<TermShape>> functions{{mult}, add};
  if (options.allow_combinations_of_sums_and_products) {
    if (k == 2) {
      functions.push_back({add[0], mult});
      functions.push_back({add[1], mult});
    } else if (k == 3) {
      const TermShape xy = product({0, 1}), yz = product({1, 2}), xz = product({0, 2});
      const std::vector<std::vector<TermShape>> more{{mult, add[0]},
                                                     {mult, add[1]},
                                                     {mult, add[2]},
                                                     {mult, xy},
                                                     {mult, yz},
                                                     {mult, xz},
                                                     {mult, xy, add[2]},
                                                     {mult, yz, add[0]},
                                                     {mult, xz, add[1]},
                                                     {mult, add[0], add[1]},
                                                     {mult, add[0], add[2]},
                                                     {mult, add[1], add[2]},
                                                     {xy, add[2]},
                                                     {xy, add[2], add[1]},
                                                     {xy, add[2], add[0]},
                                                     {xz, add[1]},
                                                     {xz, add[1], add[0]},
                                                     {xz, add[1], add[2]},
                                                     {yz, add[0]},
                                                     {yz, add[0], add[1]},
                                                     {yz, add[0], add[2]}};
      functions.insert(functions.end(), more.begin(), more.end());
    }
  }

  MultiHypothesis best;
  best.terms = functions.front();
  fit_multi(best, points, ys, numerics);
  cost_multi(best, points, ys, constant_cost);
  for (const auto& terms : functions) {
    MultiHypothesis h;
    h.terms = terms;
    fit_multi(h, points, ys, numerics);
    cost_multi(h, points, ys, constant_cost);
    if (!contributions_big_enough(h, points, ys)) continue;
    if (accept && !accept(to_model(parameters, h))) continue;
    const bool better = options.compare_with_RSS
                            ? clearly_lower(h.costs.rss, best.costs.rss, constant_cost)
                            : clearly_lower(h.costs.smape, best.costs.smape);
    if (better) best = h;
  }
  return to_model(parameters, best);
}

absl::StatusOr<std::vector<PointStats>> prepare_points(const std::vector<std::string>& parameters,
                                                       const Series& series) {
  const std::string where = fmt::format("series '{}' / '{}'", series.callpath, series.metric);
  if (parameters.empty()) return absl::InvalidArgumentError(where + ": no parameters");
  if (parameters.size() > 4) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} parameters; Extra-P's modelers take at most 4", where, parameters.size()));
  }
  if (series.points.empty()) return absl::InvalidArgumentError(where + ": no measurements");
  std::vector<PointStats> points;
  points.reserve(series.points.size());
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const Point& point = series.points[i];
    if (point.coordinate.size() != parameters.size()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: point {} has {} coordinates for {} parameters", where, i + 1,
                      point.coordinate.size(), parameters.size()));
    }
    for (double x : point.coordinate) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: point {} has a non-finite coordinate", where, i + 1));
      }
    }
    if (point.values.empty()) {
      return absl::InvalidArgumentError(fmt::format("{}: point {} has no values", where, i + 1));
    }
    for (double v : point.values) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: point {} has a non-finite value", where, i + 1));
      }
    }
    points.push_back(PointStats::Of(point.coordinate, point.values));
  }
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    std::vector<double> distinct;
    for (const PointStats& point : points) {
      if (std::find(distinct.begin(), distinct.end(), point.coordinate[p]) == distinct.end()) {
        distinct.push_back(point.coordinate[p]);
      }
    }
    if (distinct.size() < 3) {
      return absl::InvalidArgumentError(
          fmt::format("{}: parameter '{}' has {} distinct value{}; a scaling model needs at least "
                      "3 (5 recommended), "
                      "otherwise any curve fits and the model says nothing",
                      where, parameters[p], distinct.size(), distinct.size() == 1 ? "" : "s"));
    }
  }
  return points;
}

Model single_result_to_model(const std::vector<std::string>& parameters,
                             const SingleResult& result) {
  Model model;
  model.parameters = parameters;
  model.constant = result.constant;
  if (result.term) {
    Term term;
    term.coefficient = result.coefficient;
    term.factors = {*result.term};
    model.terms.push_back(std::move(term));
  }
  model.costs = result.costs;
  return model;
}

}  // namespace detail

absl::StatusOr<Model> fit_extrap(const std::vector<std::string>& parameters, const Series& series,
                                 const ExtrapOptions& options) {
  absl::StatusOr<std::vector<detail::PointStats>> points =
      detail::prepare_points(parameters, series);
  if (!points.ok()) return points.status();
  std::vector<std::string> warnings;
  Model model;
  if (parameters.size() == 1) {
    model = detail::single_result_to_model(parameters,
                                           detail::model_single(*points, 0, options, warnings));
  } else {
    const detail::SingleModeler single = [&](const std::vector<detail::PointStats>& line,
                                             int parameter) {
      return detail::model_single(line, parameter, options, warnings);
    };
    model = detail::model_multi(parameters, *points, options, single, warnings);
  }
  model.warnings = std::move(warnings);
  return model;
}

}  // namespace trainscope::scaling
