// Prediction bands from the spread of repetitions: a bootstrap that resamples
// each point's repetitions (or, with one repetition per point, the residuals)
// and refits the chosen model's coefficients. Where the points cannot decide
// the model (a parameter with fewer than 5 distinct values: too_few_values,
// Model::too_few_points) the band is also at least least squares' prediction
// interval of the points around the model, value +- t * s * sqrt(1 + h(x))
// (s^2 = RSS / df, df = points - coefficients, t the Student quantile of df
// degrees of freedom, h the leverage of x), and unbounded (-inf, inf) when no
// degree of freedom is left: a constant that misses 3 points is no tight
// prediction.
#ifndef TRAINSCOPE_SCALING_UNCERTAINTY_HPP_
#define TRAINSCOPE_SCALING_UNCERTAINTY_HPP_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"

namespace trainscope::scaling {

struct BandOptions {
  int resamples = 400;
  double confidence = 0.90;  // central interval
  std::uint64_t seed = 0x7261696e;
  Measure measure = Measure::kMean;
};

struct Prediction {
  std::vector<double> coordinate;
  double value = 0;  // the model at coordinate
  double lower = 0;  // band, from the bootstrap distribution (with too few points
  double upper = 0;  // at least the prediction interval; -inf/inf: unbounded)
};

// Predictions of `model` (fitted to `series`) at `points`, each with its band.
// Deterministic for a given seed.
absl::StatusOr<std::vector<Prediction>> predict_with_band(
    const Model& model, const Series& series, const std::vector<std::vector<double>>& points,
    const BandOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_UNCERTAINTY_HPP_
