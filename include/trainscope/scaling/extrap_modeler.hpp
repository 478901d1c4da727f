// Extra-P 4.2.5's default modelers, reproduced exactly: the single-parameter
// "Basic" modeler (hypothesis search with leave-one-out cross-validated SMAPE)
// and the multi-parameter modeler (single-parameter terms from the longest
// lines of points, then products and sums chosen by in-sample SMAPE).
// Same chosen terms, same coefficients (to rounding), same costs: least
// squares as numpy's lstsq computes them (LAPACK's dgelsd, digits lost to bad
// column scaling included). Where hypotheses tie exactly (equal costs in exact
// arithmetic, e.g. additive and mixed forms on a cross of points), Extra-P's
// pick depends on numpy's last bits and the BLAS kernel; the earlier
// hypothesis is kept, as Extra-P's "<" does in exact arithmetic.
#ifndef TRAINSCOPE_SCALING_EXTRAP_MODELER_HPP_
#define TRAINSCOPE_SCALING_EXTRAP_MODELER_HPP_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"

namespace trainscope::scaling {

// Which statistic of a point's repetitions is modeled (Extra-P's --measure).
enum class Measure { kMean, kMedian, kMinimum, kMaximum };

// Extra-P's modeler options under Extra-P's names (`--options KEY=VALUE`).
// Single-parameter options also apply to the single-parameter modeling step
// of the multi-parameter modeler (Extra-P's `#spo KEY=VALUE`).
struct ExtrapOptions {
  Measure measure = Measure::kMean;
  // single-parameter ("Basic")
  bool allow_log_terms = true;
  bool use_crossvalidation = true;
  bool compare_with_RSS = false;
  double minimum_term_contribution = 0.0005;
  std::string poly_exponents;  // comma-separated, as Extra-P: "1,2,0.5"
  std::string log_exponents;
  bool retain_default_exponents = false;
  bool force_combination_exponents = false;
  bool allow_negative_exponents = false;
  // multi-parameter
  std::string single_parameter_point_selection = "auto";  // auto | smallest | all
  bool allow_combinations_of_sums_and_products = true;

  // Sets one option from its Extra-P name and a value as Extra-P parses it
  // (True/False, numbers, strings); an unknown key or bad value is an error
  // naming both.
  absl::Status set(std::string_view key, std::string_view value);
};

// "mean", "median", "minimum"/"min", "maximum"/"max" (any case); an error
// naming the choices otherwise. The CLI and Python accept these names.
absl::StatusOr<Measure> parse_measure(std::string_view name);

// The statistic `measure` of values (not empty).
double measure_of(absl::Span<const double> values, Measure measure);

// Models one series with Extra-P's default modeler for its number of
// parameters (1: Basic, 2-4: Multi-Parameter). Errors: no points, a point
// whose coordinate has the wrong dimension or no values, non-finite values,
// fewer distinct points than two per parameter. Fewer than 5 points is a
// warning on the model, as in Extra-P.
absl::StatusOr<Model> fit_extrap(const std::vector<std::string>& parameters, const Series& series,
                                 const ExtrapOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_EXTRAP_MODELER_HPP_
