#include "trainscope/scaling/uncertainty.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "scaling/extrap_internal.hpp"
#include "scaling/svd_solve.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::scaling {
namespace {

std::string coordinate_text(absl::Span<const double> coordinate) {
  std::string out = "(";
  for (std::size_t i = 0; i < coordinate.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}", coordinate[i]);
  }
  return out + ")";
}

bool all_finite(absl::Span<const double> values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

// A uniform index in [0, n); mt19937_64 is fully specified and the modulo bias
// is below n / 2^64, so the bootstrap is the same on every platform.
std::size_t draw(std::mt19937_64& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % n);
}

// The model's fixed structure as regressors: 1, then each term with coefficient 1.
class Structure {
 public:
  explicit Structure(const Model& model) : terms_(model.terms) {
    for (Term& t : terms_) t.coefficient = 1;
  }
  std::size_t columns() const noexcept { return 1 + terms_.size(); }
  void row(absl::Span<const double> coordinate, std::vector<double>* out) const {
    out->push_back(1.0);
    for (const Term& t : terms_) out->push_back(t.evaluate(coordinate));
  }

 private:
  std::vector<Term> terms_;
};

// --- Checks ----------------------------------------------------------------

absl::Status check_options(const BandOptions& options) {
  if (options.resamples < 1) {
    return absl::InvalidArgumentError(
        fmt::format("band: resamples must be at least 1, got {}", options.resamples));
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return absl::InvalidArgumentError(
        fmt::format("band: confidence must be in (0, 1), got {}", options.confidence));
  }
  return absl::OkStatus();
}

absl::Status check_terms(const Model& model, std::size_t dim) {
  for (std::size_t k = 0; k < model.terms.size(); ++k) {
    for (const Factor& f : model.terms[k].factors) {
      if (f.parameter < 0 || static_cast<std::size_t>(f.parameter) >= dim) {
        return absl::InvalidArgumentError(fmt::format(
            "band: term {} of the model uses parameter {} of {}", k + 1, f.parameter, dim));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status check_measured(const Series& series, std::size_t dim) {
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const Point& p = series.points[i];
    const std::string where =
        fmt::format("band: measured point {} {}", i + 1, coordinate_text(p.coordinate));
    if (p.coordinate.size() != dim) {
      return absl::InvalidArgumentError(
          fmt::format("{} has {} coordinates, expected {}", where, p.coordinate.size(), dim));
    }
    if (!all_finite(p.coordinate)) {
      return absl::InvalidArgumentError(fmt::format("{} is not finite", where));
    }
    if (p.values.empty()) return absl::InvalidArgumentError(fmt::format("{} has no values", where));
    if (!all_finite(p.values)) {
      return absl::InvalidArgumentError(fmt::format("{} has a non-finite value", where));
    }
  }
  return absl::OkStatus();
}

absl::Status check_requested(const std::vector<std::vector<double>>& points, std::size_t dim) {
  for (std::size_t j = 0; j < points.size(); ++j) {
    if (points[j].size() != dim) {
      return absl::InvalidArgumentError(
          fmt::format("band: requested point {} {} has {} coordinates, expected {}", j + 1,
                      coordinate_text(points[j]), points[j].size(), dim));
    }
    if (!all_finite(points[j])) {
      return absl::InvalidArgumentError(fmt::format("band: requested point {} {} is not finite",
                                                    j + 1, coordinate_text(points[j])));
    }
  }
  return absl::OkStatus();
}

// --- Bootstrap -------------------------------------------------------------

// The design matrix of the fixed structure at the measured points, row-major.
absl::StatusOr<std::vector<double>> design_matrix(const Structure& structure,
                                                  const Series& series) {
  const std::size_t k = structure.columns();
  std::vector<double> design;
  design.reserve(series.points.size() * k);
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    structure.row(series.points[i].coordinate, &design);
    if (!all_finite(absl::MakeConstSpan(design).subspan(i * k, k))) {
      return absl::InvalidArgumentError(
          fmt::format("band: the model's terms are not finite at measured point {} {}", i + 1,
                      coordinate_text(series.points[i].coordinate)));
    }
  }
  return design;
}

// The structure's regressors at the requested points (may be non-finite:
// log2 of x < 1, ...), to predict there from refitted coefficients.
class Regressors {
 public:
  Regressors(const Structure& structure, const std::vector<std::vector<double>>& points)
      : columns_(structure.columns()) {
    values_.reserve(points.size() * columns_);
    for (const std::vector<double>& x : points) structure.row(x, &values_);
  }

  double predict(const std::vector<double>& coefficients, std::size_t j) const {
    double sum = 0;
    for (std::size_t c = 0; c < columns_; ++c) sum += values_[j * columns_ + c] * coefficients[c];
    return sum;
  }

 private:
  std::size_t columns_;
  std::vector<double> values_;
};

// The data the bootstrap resamples, and the unresampled data its refits are
// compared with. Bootstrap predictions are shifted by the model's value minus
// the refit on the unresampled data (the per-point statistics, or for the
// residual bootstrap the model's fitted values), so the band is centred on
// the model even when its coefficients came from elsewhere, and collapses
// onto it exactly when every resample equals the data.
class Resampler {
 public:
  Resampler(const Model& model, const Series& series, Measure measure, std::size_t rank)
      : series_(series), measure_(measure), residual_(single_repetitions(series)) {
    const std::size_t n = series.points.size();
    observed_.resize(n);
    for (std::size_t i = 0; i < n; ++i) observed_[i] = measure_of(series.points[i].values, measure);
    if (!residual_) return;
    // Residual bootstrap (one repetition everywhere): residuals around the
    // model, inflated by sqrt(n / (n - rank)) for the degrees of freedom the
    // fit used (Davison & Hinkley's modified residuals, without leverages).
    fitted_.resize(n);
    residuals_.resize(n);
    const double inflation =
        n > rank ? std::sqrt(static_cast<double>(n) / static_cast<double>(n - rank)) : 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      fitted_[i] = model.evaluate(series.points[i].coordinate);
      residuals_[i] = (observed_[i] - fitted_[i]) * inflation;
    }
  }

  const std::vector<double>& unresampled() const { return residual_ ? fitted_ : observed_; }

  // One value per point, from the repetitions or residuals drawn with rng.
  void resample(std::mt19937_64& rng, std::vector<double>* resampled) {
    const std::size_t n = series_.points.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (residual_) {
        (*resampled)[i] = fitted_[i] + residuals_[draw(rng, n)];
        continue;
      }
      const std::vector<double>& values = series_.points[i].values;
      if (values.size() == 1) {
        (*resampled)[i] = values.front();
        continue;
      }
      scratch_.resize(values.size());
      for (double& v : scratch_) v = values[draw(rng, values.size())];
      (*resampled)[i] = measure_of(scratch_, measure_);
    }
  }

 private:
  static bool single_repetitions(const Series& series) {
    return std::all_of(series.points.begin(), series.points.end(),
                       [](const Point& p) { return p.values.size() <= 1; });
  }

  const Series& series_;
  Measure measure_;
  bool residual_;
  std::vector<double> observed_;
  std::vector<double> fitted_;
  std::vector<double> residuals_;
  std::vector<double> scratch_;
};

// The finite bootstrap predictions at each requested point.
std::vector<std::vector<double>> bootstrap(const detail::SvdLeastSquares& ls,
                                           const Regressors& regressors, Resampler* resampler,
                                           const std::vector<Prediction>& predictions,
                                           std::size_t n, const BandOptions& options) {
  const std::vector<double> base_coefficients = ls.solve(resampler->unresampled());
  std::vector<double> base(predictions.size());
  for (std::size_t j = 0; j < predictions.size(); ++j) {
    base[j] = regressors.predict(base_coefficients, j);
  }
  std::mt19937_64 rng(options.seed);
  const auto rounds = static_cast<std::size_t>(options.resamples);
  std::vector<std::vector<double>> samples(predictions.size());
  for (auto& s : samples) s.reserve(rounds);
  std::vector<double> resampled(n);
  for (std::size_t r = 0; r < rounds; ++r) {
    resampler->resample(rng, &resampled);
    const std::vector<double> coefficients = ls.solve(resampled);
    for (std::size_t j = 0; j < predictions.size(); ++j) {
      const double value = predictions[j].value + (regressors.predict(coefficients, j) - base[j]);
      if (std::isfinite(value)) samples[j].push_back(value);
    }
  }
  return samples;
}

// Each prediction's band: the central `confidence` of its samples.
void set_bands(std::vector<std::vector<double>>* samples, double confidence,
               std::vector<Prediction>* predictions) {
  const double lower_q = (1 - confidence) / 2;
  const double upper_q = (1 + confidence) / 2;
  for (std::size_t j = 0; j < predictions->size(); ++j) {
    Prediction& p = (*predictions)[j];
    std::vector<double>& s = (*samples)[j];
    if (!std::isfinite(p.value) || s.empty()) {
      p.lower = p.upper = stats::kNaN;
      continue;
    }
    std::sort(s.begin(), s.end());
    // A band always contains its prediction: with (near-)identical
    // repetitions the bootstrap refits differ from the model by rounding.
    p.lower = std::min(stats::quantile_sorted(s, lower_q), p.value);
    p.upper = std::max(stats::quantile_sorted(s, upper_q), p.value);
  }
}

// --- Too few points --------------------------------------------------------

// The Student t quantile t with P(|T| > t) = tail, T ~ t(df).
double two_sided_t(double tail, double df) { return stats::student_t_quantile(1 - tail / 2, df); }

// Where the points cannot decide the model (too_few_values), the band is at
// least least squares' prediction interval of the points around the model:
//   value +- t_df((1 + confidence) / 2) * s * sqrt(1 + h(x)),
// s^2 the points' residual sum of squares over df = points - coefficients
// (the spread the bootstrap of repetitions does not see when the model
// misses the points), h(x) the leverage of x. With no degree of freedom left
// the band is unbounded (-inf, inf).
void widen_for_few_points(const Model& model, const Series& series,
                          const detail::SvdLeastSquares& ls, const Regressors& regressors,
                          const BandOptions& options, std::vector<Prediction>* predictions) {
  const std::size_t n = series.points.size();
  const std::size_t df = n > ls.rank() ? n - ls.rank() : 0;
  double rss = 0;
  for (const Point& p : series.points) {
    const double residual = measure_of(p.values, options.measure) - model.evaluate(p.coordinate);
    rss += residual * residual;
  }
  const double infinity = std::numeric_limits<double>::infinity();
  // The least-squares prediction at x is sum_i a_i(x) y_i, a_i(x) the
  // prediction for the unit vector e_i; h(x) = sum_i a_i(x)^2.
  std::vector<std::vector<double>> unit_fits(n);
  std::vector<double> unit(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    unit[i] = 1;
    unit_fits[i] = ls.solve(unit);
    unit[i] = 0;
  }
  const double t = df > 0 ? two_sided_t(1 - options.confidence, static_cast<double>(df)) : 0;
  const double s = df > 0 ? std::sqrt(rss / static_cast<double>(df)) : 0;
  for (std::size_t j = 0; j < predictions->size(); ++j) {
    Prediction& p = (*predictions)[j];
    if (!std::isfinite(p.value) || std::isnan(p.lower) || std::isnan(p.upper)) continue;
    if (df == 0) {
      p.lower = -infinity;
      p.upper = infinity;
      continue;
    }
    double leverage = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double a = regressors.predict(unit_fits[i], j);
      leverage += a * a;
    }
    const double half = t * s * std::sqrt(1 + leverage);
    if (!std::isfinite(half)) continue;
    p.lower = std::min(p.lower, p.value - half);
    p.upper = std::max(p.upper, p.value + half);
  }
}

}  // namespace

absl::StatusOr<std::vector<Prediction>> predict_with_band(
    const Model& model, const Series& series, const std::vector<std::vector<double>>& points,
    const BandOptions& options) {
  if (absl::Status status = check_options(options); !status.ok()) return status;
  if (series.points.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("band: series '{}' / '{}' has no points", series.callpath, series.metric));
  }
  const std::size_t dim =
      model.parameters.empty() ? series.points.front().coordinate.size() : model.parameters.size();
  if (absl::Status status = check_terms(model, dim); !status.ok()) return status;
  if (absl::Status status = check_measured(series, dim); !status.ok()) return status;
  if (absl::Status status = check_requested(points, dim); !status.ok()) return status;

  const Structure structure(model);
  absl::StatusOr<std::vector<double>> design = design_matrix(structure, series);
  if (!design.ok()) return design.status();
  const std::size_t n = series.points.size();
  const detail::SvdLeastSquares ls(*design, n, structure.columns());
  std::vector<Prediction> out(points.size());
  for (std::size_t j = 0; j < points.size(); ++j) {
    out[j].coordinate = points[j];
    out[j].value = model.evaluate(points[j]);
  }
  Resampler resampler(model, series, options.measure, ls.rank());
  const Regressors regressors(structure, points);
  std::vector<std::vector<double>> samples = bootstrap(ls, regressors, &resampler, out, n, options);
  set_bands(&samples, options.confidence, &out);
  if (!too_few_values(series, dim).empty()) {
    widen_for_few_points(model, series, ls, regressors, options, &out);
  }
  return out;
}

}  // namespace trainscope::scaling
