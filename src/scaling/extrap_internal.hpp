// Internals of the Extra-P modelers shared with trainscope's own modeler.
#ifndef TRAINSCOPE_SRC_SCALING_EXTRAP_INTERNAL_HPP_
#define TRAINSCOPE_SRC_SCALING_EXTRAP_INTERNAL_HPP_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/model.hpp"

namespace trainscope::scaling::detail {

// One measurement point as Extra-P keeps it: the statistics of its repetitions.
struct PointStats {
  std::vector<double> coordinate;
  double mean = 0;
  double median = 0;
  double minimum = 0;
  double maximum = 0;

  static PointStats Of(std::vector<double> coordinate, absl::Span<const double> values);
  double value(Measure measure) const noexcept;
};

// The outcome of the single-parameter search: a constant, or c0 + c1 * term.
struct SingleResult {
  double constant = 0;
  double coefficient = 0;
  std::optional<Factor> term;  // parameter set to the modeled parameter
  ModelCosts costs;
};

// Accepts or vetoes a fitted single-parameter hypothesis c0 + c1 * f (after
// Extra-P's own checks, before the cost comparison).
using HypothesisFilter = std::function<bool(double c0, double c1, const Factor& f)>;

std::vector<Factor> default_building_blocks(bool allow_log_terms, bool allow_negative_exponents);
std::vector<Factor> building_blocks(const ExtrapOptions& options);

// How log terms are excluded where log2(x) misbehaves. kExtrap: Extra-P's
// rule (all log terms dropped if any x < 1, or x <= 1 when negative exponents
// are allowed). kExact: only what is undefined: negative log exponents where
// x <= 1, all log terms where x < 1.
enum class LogRule { kExtrap, kExact };

// Extra-P's Basic single-parameter modeler on points' coordinate[parameter].
SingleResult model_single(const std::vector<PointStats>& points, int parameter,
                          const ExtrapOptions& options, std::vector<std::string>& warnings,
                          const HypothesisFilter& filter = nullptr,
                          LogRule log_rule = LogRule::kExtrap);

// Extra-P's multi-parameter modeler; `single` models one parameter's line.
// `accept`, when set, vetoes candidate combinations (after Extra-P's checks).
using SingleModeler =
    std::function<SingleResult(const std::vector<PointStats>& line, int parameter)>;
using ModelFilter = std::function<bool(const Model& candidate)>;
Model model_multi(const std::vector<std::string>& parameters, const std::vector<PointStats>& points,
                  const ExtrapOptions& options, const SingleModeler& single,
                  std::vector<std::string>& warnings, const ModelFilter& accept = nullptr);

// Checks a series and turns it into points; errors name what is wrong.
absl::StatusOr<std::vector<PointStats>> prepare_points(const std::vector<std::string>& parameters,
                                                       const Series& series);

Model single_result_to_model(const std::vector<std::string>& parameters,
                             const SingleResult& result);

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_EXTRAP_INTERNAL_HPP_
