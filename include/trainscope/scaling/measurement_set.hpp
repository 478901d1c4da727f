// Measurements for scaling models: named parameters, and per (callpath,
// metric) series the repetitions measured at each point. Every input (Extra-P
// text/JSON/JSON Lines files, run directories) is read into this one shape.
#ifndef TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_
#define TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_

#include <string>
#include <vector>

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
};

struct MeasurementSet {
  std::vector<std::string> parameters;
  std::vector<Series> series;  // in the order first seen in the input

  // nullptr when absent.
  const Series* find(const std::string& callpath, const std::string& metric) const {
    for (const Series& s : series) {
      if (s.callpath == callpath && s.metric == metric) return &s;
    }
    return nullptr;
  }
};

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MEASUREMENT_SET_HPP_
