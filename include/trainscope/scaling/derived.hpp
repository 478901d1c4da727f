// Extra-Deep's derived views against a resource parameter (ranks, GPUs):
// speedup S(r) = T(r0) / T(r), parallel efficiency E(r) = S(r) * r0 / r and
// cost C(r) = T(r) * r, from measurements and from a model.
#ifndef TRAINSCOPE_SCALING_DERIVED_HPP_
#define TRAINSCOPE_SCALING_DERIVED_HPP_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"

namespace trainscope::scaling {

struct ScalingView {
  double resource = 0;  // r
  double time = 0;      // T(r): measured statistic, or the model's value
  double speedup = 0;
  double efficiency = 0;
  double cost = 0;
};

// From the measured points whose other coordinates equal `fixed` (fixed has
// one value per parameter; the resource entry is ignored), sorted by r; r0 is
// the smallest r. Error when the resource index is out of range, fewer than
// two points match, or a time or resource is not positive.
absl::StatusOr<std::vector<ScalingView>> measured_scaling(const Series& series,
                                                          int resource_parameter,
                                                          absl::Span<const double> fixed,
                                                          Measure measure = Measure::kMean);

// From the model at `resources` (r0 = resources.front()), others at `fixed`.
absl::StatusOr<std::vector<ScalingView>> modeled_scaling(const Model& model, int resource_parameter,
                                                         absl::Span<const double> fixed,
                                                         absl::Span<const double> resources);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_DERIVED_HPP_
