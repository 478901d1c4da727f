// trainscope's scaling modeler: Extra-P's search, plus negative exponents for
// strong scaling (with a positive coefficient: a share that shrinks as p
// grows), minus models that predict non-physical values, minus terms that fit
// only the noise between repetitions (an F-test, `significance`). The exact
// Extra-P modeler is one option away (Modeler::kExtrap).
#ifndef TRAINSCOPE_SCALING_MODELER_HPP_
#define TRAINSCOPE_SCALING_MODELER_HPP_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"

namespace trainscope::scaling {

enum class Modeler {
  kTrainscope,  // default: see ModelOptions
  kExtrap,      // Extra-P 4.2.5 exactly, with `extrap` options
};

// "trainscope" (or "default") and "extrap", any case.
absl::StatusOr<Modeler> parse_modeler(std::string_view name);

struct ModelOptions {
  Modeler modeler = Modeler::kTrainscope;
  // kExtrap: all of Extra-P's options. kTrainscope: the base of its search
  // (measure, exponents, cross-validation), with the changes below.
  ExtrapOptions extrap;
  // kTrainscope: also search negative exponents (t = a + b/p, b/sqrt(p), ...);
  // with every value positive, only with b > 0.
  bool negative_exponents = true;
  // kTrainscope: when every measured value is positive, reject a hypothesis
  // that predicts a value <= 0 anywhere from the smallest measured point to
  // `extrapolation_factor` times the largest, per parameter.
  bool reject_nonphysical = true;
  double extrapolation_factor = 8.0;
  // kTrainscope: parsimony. A parameter's term stays only when an F-test
  // against the constant rejects at this level: its reduction of the residual
  // sum of squares, over the noise of a point's value estimated from the
  // spread of the repetitions (without repetitions: from the residuals), is
  // F(1, df)-distributed if the term only fits noise. 0 turns the test off.
  double significance = 0.05;
};

// Extra-P's rule: a fit of a parameter's exponent needs measurements at at
// least 5 distinct values of it ("Number of measurements for a parameter
// needs to be at least 5 in order to create a performance model").
inline constexpr std::size_t kMinDistinctValues = 5;

// Per parameter (0 .. parameters - 1) of `series`, its distinct values when
// there are fewer than kMinDistinctValues of them (sorted); parameters with
// enough values are left out. Empty: the points are enough.
std::vector<std::pair<int, std::vector<double>>> too_few_values(const Series& series,
                                                                std::size_t parameters);

// fit and fit_series fit the same model to the same points; they differ in
// what they know of the input the series came from:
// - fit(parameters, series) sees the series alone and models the points it
//   has. Use it for a series made by hand or read on its own (one run
//   selection: read_runs gives one series).
// - fit_series(set, series) also sees the whole input (set.coordinates, the
//   coordinates of the experiment) and makes the check Extra-P makes on a
//   file before modeling any series: where the series is not measured once
//   at each of them, kExtrap refuses as Extra-P does and kTrainscope warns. Use it for a series
//   of a MeasurementSet read from an Extra-P file (`trainscope model` does).
// With every coordinate measured (or set.coordinates empty, as from run
// directories) both return the same model.

// Fits one series. Errors (with the reason): no points, dimension mismatch,
// non-finite values, fewer than 3 distinct values of a parameter (any curve
// fits). With 3 or 4 (too_few_values), the model is made but marked
// (Model::too_few_points) and its first warning says in plain words that the
// points cannot tell how the value scales (Extra-P's own "at least 5" warning
// is replaced by it).
absl::StatusOr<Model> fit(const std::vector<std::string>& parameters, const Series& series,
                          const ModelOptions& options = {});

// Fits `series` of `set` (with set.parameters) after the check Extra-P makes
// on a whole input: where the series lacks some of set.coordinates
// (check_coordinates), kExtrap refuses with that error and "Extra-P refuses
// such an input (InvalidExperimentError)", kTrainscope models the points
// measured with the error's text as the model's first warning.
absl::StatusOr<Model> fit_series(const MeasurementSet& set, const Series& series,
                                 const ModelOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MODELER_HPP_
