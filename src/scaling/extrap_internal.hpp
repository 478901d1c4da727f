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
  // The spread of the repetitions, for trainscope's parsimony test: the sum of
  // squared deviations from the mean, its degrees of freedom, and
  // Var(mean) / Var(one repetition) (1 / repetitions; for points averaged
  // over several lines, the sum of theirs over the number squared).
  double pure_error_ss = 0;
  double pure_error_df = 0;
  double variance_factor = 1;

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

// How least squares are solved. kNumpy: LAPACK's dgelsd as numpy.linalg.lstsq
// does it (what Extra-P computes, digits lost to bad column scaling
// included); kAccurate: the Jacobi SVD (svd_solve.hpp).
enum class Numerics { kNumpy, kAccurate };

// Extra-P compares costs with a strict "<" and keeps the earlier hypothesis
// on equality. Two hypotheses whose fitted values agree on every point (a
// cross of points makes c + a*t1 + b*t2, c + a*t1 + b*t1*t2 and
// c + a*t2 + b*t1*t2 the same function there) have equal costs in exact
// arithmetic; numpy's rounding then picks one, differently per BLAS kernel.
// Costs within this relative difference (plus kCostTieFloor times `scale`)
// are equal, so the earlier hypothesis stays, on every machine.
inline constexpr double kCostTieRelative = 1e-9;
inline constexpr double kCostTieFloor = 1e-12;
bool clearly_lower(double candidate, double best, double scale = 1.0);

// Extra-P's Basic single-parameter modeler on points' coordinate[parameter].
SingleResult model_single(const std::vector<PointStats>& points, int parameter,
                          const ExtrapOptions& options, std::vector<std::string>& warnings,
                          const HypothesisFilter& filter = nullptr,
                          LogRule log_rule = LogRule::kExtrap, Numerics numerics = Numerics::kNumpy,
                          double significance = 0.0);

// trainscope's parsimony rule: the p-value of the F-test of c0 + c1 * f(x)
// (residual sum of squares rss_term) against the constant (rss_constant) on
// `points`, the noise estimated from the spread of the repetitions (pure
// error; without repetitions, from the term model's residuals). NaN when
// there is nothing to estimate the noise from.
double term_p_value(const std::vector<PointStats>& points, double rss_constant, double rss_term);

// P(F >= f) for F ~ F(d1, d2).
double f_distribution_upper(double f, double d1, double d2);

// Extra-P's multi-parameter modeler; `single` models one parameter's line.
// `accept`, when set, vetoes candidate combinations (after Extra-P's checks).
using SingleModeler =
    std::function<SingleResult(const std::vector<PointStats>& line, int parameter)>;
using ModelFilter = std::function<bool(const Model& candidate)>;
Model model_multi(const std::vector<std::string>& parameters, const std::vector<PointStats>& points,
                  const ExtrapOptions& options, const SingleModeler& single,
                  std::vector<std::string>& warnings, const ModelFilter& accept = nullptr,
                  Numerics numerics = Numerics::kNumpy);

// Checks a series and turns it into points; errors name what is wrong.
absl::StatusOr<std::vector<PointStats>> prepare_points(const std::vector<std::string>& parameters,
                                                       const Series& series);

Model single_result_to_model(const std::vector<std::string>& parameters,
                             const SingleResult& result);

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_EXTRAP_INTERNAL_HPP_
