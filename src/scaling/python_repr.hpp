// Numbers printed the way Python's repr(float) prints them, so formulas read
// the same as Extra-P's ("100.0", "1e-05", "-5.640000000000001").
#ifndef TRAINSCOPE_SRC_SCALING_PYTHON_REPR_HPP_
#define TRAINSCOPE_SRC_SCALING_PYTHON_REPR_HPP_

#include <cmath>
#include <string>

#include "fmt/format.h"

namespace trainscope::scaling::detail {

inline std::string python_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // fmt's shortest round-trip form switches to exponent notation at the same
  // thresholds as Python (exponent < -4 or >= 16) but drops a trailing ".0".
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_PYTHON_REPR_HPP_
