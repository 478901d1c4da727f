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
#include "scaling/svd_solve.hpp"

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
std::size_t draw(std::mt19937_64& rng, std::size_t n) { return static_cast<std::size_t>(rng() % n); }

// Quantile q of sorted values, linear interpolation between order statistics
// (Hyndman & Fan type 7, numpy's default).
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double h = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
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

}  // namespace

absl::StatusOr<std::vector<Prediction>> predict_with_band(const Model& model, const Series& series,
                                                          const std::vector<std::vector<double>>& points,
                                                          const BandOptions& options) {
  if (options.resamples < 1) {
    return absl::InvalidArgumentError(fmt::format("band: resamples must be at least 1, got {}", options.resamples));
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return absl::InvalidArgumentError(
        fmt::format("band: confidence must be in (0, 1), got {}", options.confidence));
  }
  if (series.points.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("band: series '{}' / '{}' has no points", series.callpath, series.metric));
  }
  const std::size_t dim =
      model.parameters.empty() ? series.points.front().coordinate.size() : model.parameters.size();
  for (std::size_t k = 0; k < model.terms.size(); ++k) {
    for (const Factor& f : model.terms[k].factors) {
      if (f.parameter < 0 || static_cast<std::size_t>(f.parameter) >= dim) {
        return absl::InvalidArgumentError(
            fmt::format("band: term {} of the model uses parameter {} of {}", k + 1, f.parameter, dim));
      }
    }
  }
  const std::size_t n = series.points.size();
  bool single_repetitions = true;
  for (std::size_t i = 0; i < n; ++i) {
    const Point& p = series.points[i];
    if (p.coordinate.size() != dim) {
      return absl::InvalidArgumentError(fmt::format("band: measured point {} {} has {} coordinates, expected {}",
                                                    i + 1, coordinate_text(p.coordinate), p.coordinate.size(), dim));
    }
    if (!all_finite(p.coordinate)) {
      return absl::InvalidArgumentError(
          fmt::format("band: measured point {} {} is not finite", i + 1, coordinate_text(p.coordinate)));
    }
    if (p.values.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("band: measured point {} {} has no values", i + 1, coordinate_text(p.coordinate)));
    }
    if (!all_finite(p.values)) {
      return absl::InvalidArgumentError(
          fmt::format("band: measured point {} {} has a non-finite value", i + 1, coordinate_text(p.coordinate)));
    }
    if (p.values.size() > 1) single_repetitions = false;
  }
  for (std::size_t j = 0; j < points.size(); ++j) {
    if (points[j].size() != dim) {
      return absl::InvalidArgumentError(fmt::format("band: requested point {} {} has {} coordinates, expected {}",
                                                    j + 1, coordinate_text(points[j]), points[j].size(), dim));
    }
    if (!all_finite(points[j])) {
      return absl::InvalidArgumentError(
          fmt::format("band: requested point {} {} is not finite", j + 1, coordinate_text(points[j])));
    }
  }

  // Design matrix of the fixed structure at the measured points.
  const Structure structure(model);
  const std::size_t k = structure.columns();
  std::vector<double> design;
  design.reserve(n * k);
  for (std::size_t i = 0; i < n; ++i) {
    structure.row(series.points[i].coordinate, &design);
    if (!all_finite(absl::MakeConstSpan(design).subspan(i * k, k))) {
      return absl::InvalidArgumentError(fmt::format("band: the model's terms are not finite at measured point {} {}",
                                                    i + 1, coordinate_text(series.points[i].coordinate)));
    }
  }
  const detail::SvdLeastSquares ls(design, n, k);

  // Regressors at the requested points (may be non-finite: log2 of x < 1, ...).
  std::vector<double> at_points;
  at_points.reserve(points.size() * k);
  for (const std::vector<double>& x : points) structure.row(x, &at_points);
  auto predict = [&](const std::vector<double>& coefficients, std::size_t j) {
    double sum = 0;
    for (std::size_t c = 0; c < k; ++c) sum += at_points[j * k + c] * coefficients[c];
    return sum;
  };

  // Bootstrap predictions are shifted by the model's value minus the refit on
  // the unresampled data (the per-point statistics, or for the residual
  // bootstrap the model's fitted values), so the band is centred on the model
  // even when its coefficients came from elsewhere, and collapses onto it
  // exactly when every resample equals the data.
  std::vector<double> observed(n);
  for (std::size_t i = 0; i < n; ++i) observed[i] = measure_of(series.points[i].values, options.measure);

  // Residual bootstrap (one repetition everywhere): residuals around the
  // model, inflated by sqrt(n / (n - rank)) for the degrees of freedom the
  // fit used (Davison & Hinkley's modified residuals, without leverages).
  std::vector<double> fitted;
  std::vector<double> residuals;
  if (single_repetitions) {
    fitted.resize(n);
    residuals.resize(n);
    const std::size_t rank = ls.rank();
    const double inflation = n > rank ? std::sqrt(static_cast<double>(n) / static_cast<double>(n - rank)) : 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      fitted[i] = model.evaluate(series.points[i].coordinate);
      residuals[i] = (observed[i] - fitted[i]) * inflation;
    }
  }

  const std::vector<double> base_coefficients = ls.solve(single_repetitions ? fitted : observed);
  std::vector<double> base(points.size());
  std::vector<Prediction> out(points.size());
  for (std::size_t j = 0; j < points.size(); ++j) {
    base[j] = predict(base_coefficients, j);
    out[j].coordinate = points[j];
    out[j].value = model.evaluate(points[j]);
  }

  std::mt19937_64 rng(options.seed);
  const auto rounds = static_cast<std::size_t>(options.resamples);
  std::vector<std::vector<double>> samples(points.size());
  for (auto& s : samples) s.reserve(rounds);
  std::vector<double> resampled(n);
  std::vector<double> scratch;
  for (std::size_t r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      if (single_repetitions) {
        resampled[i] = fitted[i] + residuals[draw(rng, n)];
        continue;
      }
      const std::vector<double>& values = series.points[i].values;
      if (values.size() == 1) {
        resampled[i] = values.front();
        continue;
      }
      scratch.resize(values.size());
      for (double& v : scratch) v = values[draw(rng, values.size())];
      resampled[i] = measure_of(scratch, options.measure);
    }
    const std::vector<double> coefficients = ls.solve(resampled);
    for (std::size_t j = 0; j < points.size(); ++j) {
      const double value = out[j].value + (predict(coefficients, j) - base[j]);
      if (std::isfinite(value)) samples[j].push_back(value);
    }
  }

  const double lower_q = (1 - options.confidence) / 2;
  const double upper_q = (1 + options.confidence) / 2;
  for (std::size_t j = 0; j < points.size(); ++j) {
    std::vector<double>& s = samples[j];
    if (!std::isfinite(out[j].value) || s.empty()) {
      out[j].lower = out[j].upper = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    std::sort(s.begin(), s.end());
    // A band always contains its prediction: with (near-)identical
    // repetitions the bootstrap refits differ from the model by rounding.
    out[j].lower = std::min(quantile_sorted(s, lower_q), out[j].value);
    out[j].upper = std::max(quantile_sorted(s, upper_q), out[j].value);
  }
  return out;
}

}  // namespace trainscope::scaling
