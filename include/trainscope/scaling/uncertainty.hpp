// Prediction bands from the spread of repetitions: a bootstrap that resamples
// each point's repetitions (or, with one repetition per point, the residuals)
// and refits the chosen model's coefficients.
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
  double lower = 0;  // band, from the bootstrap distribution
  double upper = 0;
};

// Predictions of `model` (fitted to `series`) at `points`, each with its band.
// Deterministic for a given seed.
absl::StatusOr<std::vector<Prediction>> predict_with_band(
    const Model& model, const Series& series, const std::vector<std::vector<double>>& points,
    const BandOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_UNCERTAINTY_HPP_
