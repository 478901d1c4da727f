// The contract of every Extra-P input parser, checked by each fuzz target:
// an error is InvalidArgument whose message starts with the input's name
// ("in:"), a result is well-formed.
#ifndef TRAINSCOPE_TESTS_FUZZ_MEASUREMENT_SET_CHECK_HPP_
#define TRAINSCOPE_TESTS_FUZZ_MEASUREMENT_SET_CHECK_HPP_

#include <cmath>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/scaling/measurement_set.hpp"

namespace trainscope_fuzz {

// What every successful parse guarantees, and the shape of every error.
inline void check(const absl::StatusOr<trainscope::scaling::MeasurementSet>& set,
                  std::size_t max_parameters) {
  if (!set.ok()) {
    const std::string message(set.status().message());
    if (!absl::IsInvalidArgument(set.status()) || message.rfind("in:", 0) != 0) __builtin_trap();
    return;
  }
  const std::size_t n = set->parameters.size();
  if (n == 0 || n > max_parameters || set->series.empty()) __builtin_trap();
  // the experiment's coordinates: distinct, of n values, and every measured point among them
  const std::set<std::vector<double>> coordinates(set->coordinates.begin(), set->coordinates.end());
  if (coordinates.size() != set->coordinates.size()) __builtin_trap();
  for (const std::vector<double>& c : set->coordinates) {
    if (c.size() != n) __builtin_trap();
  }
  for (const trainscope::scaling::Series& series : set->series) {
    if (series.points.empty()) __builtin_trap();
    for (const trainscope::scaling::Point& point : series.points) {
      if (point.coordinate.size() != n || point.values.empty()) __builtin_trap();
      if (coordinates.count(point.coordinate) == 0) __builtin_trap();
      for (double v : point.coordinate) {
        if (!std::isfinite(v)) __builtin_trap();
      }
      for (double v : point.values) {
        if (!std::isfinite(v)) __builtin_trap();
      }
    }
  }
}

}  // namespace trainscope_fuzz

#endif  // TRAINSCOPE_TESTS_FUZZ_MEASUREMENT_SET_CHECK_HPP_
