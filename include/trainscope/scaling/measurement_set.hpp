// Measurements for scaling models: named parameters, and per (callpath,
// metric) series the repetitions measured at each point. Every input (Extra-P
// text/JSON/JSON Lines files, run directories) is read into this one shape.
#ifndef TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_
#define TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace trainscope::scaling {

// One point of the parameter space and the repetitions measured there.
struct Point {
  std::vector<double> coordinate;  // one value per parameter, in MeasurementSet::parameters order
  std::vector<double> values;      // repetitions (at least one)
};

// Everything measured for one region (callpath) and metric, in input order.
struct Series {
  std::string callpath;
  std::string metric;
  std::vector<Point> points;
  // The values of the params this series is one group of (read_runs with
  // RunSelection::by: {{"lr", "0.1"}}), in `by` order; empty otherwise.
  std::vector<std::pair<std::string, std::string>> group;
};

// A point given twice for one series where Extra-P counts each as a
// measurement of its own (an Extra-P text file's REGION/METRIC block given
// again, a point listed twice in a JSON file's series); trainscope merges the
// values as repetitions, Extra-P refuses the file.
struct RepeatedPoint {
  std::string callpath;
  std::string metric;
  std::vector<double> coordinate;
};

struct MeasurementSet {
  std::vector<std::string> parameters;
  std::vector<Series> series;  // in the order first seen in the input
  // The coordinates of the experiment, as Extra-P counts them: an Extra-P
  // text file's POINTS, a legacy JSON file's "coordinates", otherwise every
  // point measured in any series; no duplicates, in the order first seen.
  // Empty where the input has no such notion (run directories).
  std::vector<std::vector<double>> coordinates;
  std::vector<RepeatedPoint> repeated;  // each once, in input order

  // nullptr when absent.
  const Series* find(const std::string& callpath, const std::string& metric) const {
    for (const Series& s : series) {
      if (s.callpath == callpath && s.metric == metric) return &s;
    }
    return nullptr;
  }
};

// The coordinates of set.coordinates at which `series` has no measurement,
// in set.coordinates order. Extra-P refuses a file where any series has some
// (InvalidExperimentError: "The number of measurements ... does not match the
// number of coordinates").
std::vector<std::vector<double>> missing_coordinates(const MeasurementSet& set,
                                                     const Series& series);

// OK when `series` is measured once at every coordinate of `set`; otherwise
// InvalidArgument "callpath 'x', metric 'y' has no measurement at (p=64) (4 of
// 5 coordinates measured)" or "... is measured twice at (p=2) ...".
absl::Status check_coordinates(const MeasurementSet& set, const Series& series);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_
