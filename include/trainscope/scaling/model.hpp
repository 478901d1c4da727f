// A fitted performance model in the performance model normal form (PMNF):
//   f(x) = c0 + sum_k c_k * prod_(p in term k) x_p^(i) * log2(x_p)^(j)
// with its costs, and the ways to print it (Extra-P's text, Python, C++).
#ifndef TRAINSCOPE_SCALING_MODEL_HPP_
#define TRAINSCOPE_SCALING_MODEL_HPP_

#include <string>
#include <vector>

#include "absl/types/span.h"

namespace trainscope::scaling {

// An exponent as Extra-P writes it: "1/2", "-1", "0.75"; value is what is computed with.
struct Exponent {
  double value = 0;
  std::string text = "0";

  static Exponent Fraction(int numerator, int denominator);  // reduced, "n/d" or "n"
  static Exponent Number(double value);                      // Python's repr of the value
  bool is_zero() const noexcept { return value == 0; }
};

// x_p^poly * log2(x_p)^log for one parameter p (either exponent may be zero).
struct Factor {
  int parameter = 0;  // index into Model::parameters
  Exponent poly;
  Exponent log;
  double evaluate(double x) const noexcept;
};

// coefficient * product of factors (over distinct parameters).
struct Term {
  double coefficient = 1;
  std::vector<Factor> factors;
  double evaluate(absl::Span<const double> coordinate) const noexcept;
};

// Extra-P's cost figures. For the single-parameter modeler with
// cross-validation they are the leave-one-out values, as Extra-P reports them.
// A constant model explains none of the variation between points: its ar2 is
// 0 with the trainscope modeler (1 when the points do not vary at all), and 1
// with kExtrap, which reproduces Extra-P (its ConstantHypothesis sets AR2 = 1).
struct ModelCosts {
  double rss = 0;
  double rrss = 0;
  double nrss = 0;
  double smape = 0;  // percent
  double ar2 = 0;    // adjusted R^2
  double re = 0;     // mean relative error
};

struct Model {
  std::vector<std::string> parameters;
  double constant = 0;
  std::vector<Term> terms;  // empty for a constant model
  ModelCosts costs;
  // What the modeler wants the user to know (too few points, log terms
  // dropped because a parameter value is below 1, ...).
  std::vector<std::string> warnings;
  // The points cannot decide the model: a parameter has fewer distinct values
  // than a fit of its exponent needs (kMinDistinctValues, Extra-P's rule).
  // fit() then says so in plain words as the first warning, and
  // predict_with_band widens the band to the points' spread (uncertainty.hpp).
  bool too_few_points = false;

  double evaluate(absl::Span<const double> coordinate) const noexcept;
  bool is_constant() const noexcept { return terms.empty(); }

  // "11.68 + 100.36 * p^(-1)" with log2(p)^(j); coefficients as Python's repr.
  std::string formula() const;
  // The name each parameter has in python() and cpp(): the parameter's name
  // where it is a valid identifier of both languages, else one made valid
  // ("batch-size" -> "batch_size", "1st" -> "_1st", "lambda" -> "lambda_",
  // "log2" -> "log2_"), unique among the parameters.
  std::vector<std::string> identifiers() const;
  // A Python expression of identifiers() ("from math import log2" assumed).
  std::string python() const;
  // A C++ expression of identifiers() (<cmath>: std::pow, std::log2).
  std::string cpp() const;
};

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MODEL_HPP_
