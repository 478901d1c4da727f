// trainscope's scaling modeler: Extra-P's search, plus negative exponents for
// strong scaling, minus models that predict non-physical values. The exact
// Extra-P modeler is one option away (Modeler::kExtrap).
#ifndef TRAINSCOPE_SCALING_MODELER_HPP_
#define TRAINSCOPE_SCALING_MODELER_HPP_

#include <string>
#include <string_view>
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
  // kTrainscope: also search negative exponents (t = a + b/p, b/sqrt(p), ...).
  bool negative_exponents = true;
  // kTrainscope: when every measured value is positive, reject a hypothesis
  // that predicts a value <= 0 anywhere from the smallest measured point to
  // `extrapolation_factor` times the largest, per parameter.
  bool reject_nonphysical = true;
  double extrapolation_factor = 8.0;
};

// Fits one series. Errors (with the reason): no points, dimension mismatch,
// non-finite values, fewer distinct values of a parameter than a model needs.
absl::StatusOr<Model> fit(const std::vector<std::string>& parameters, const Series& series,
                          const ModelOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MODELER_HPP_
