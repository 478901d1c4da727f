#include "trainscope/scaling/measurement_set.hpp"

#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"

namespace trainscope::scaling {

std::vector<std::vector<double>> missing_coordinates(const MeasurementSet& set,
                                                     const Series& series) {
  std::set<std::vector<double>> measured;
  for (const Point& point : series.points) measured.insert(point.coordinate);
  std::vector<std::vector<double>> missing;
  for (const std::vector<double>& coordinate : set.coordinates) {
    if (measured.count(coordinate) == 0) missing.push_back(coordinate);
  }
  return missing;
}

namespace {

// "(p=4, q=64), (p=8, q=64)", at most 8 and "... (n more)".
std::string describe(const std::vector<std::vector<double>>& coordinates,
                     const std::vector<std::string>& parameters) {
  constexpr std::size_t kShown = 8;
  std::string where;
  for (std::size_t i = 0; i < coordinates.size() && i < kShown; ++i) {
    where += i > 0 ? ", (" : "(";
    for (std::size_t p = 0; p < coordinates[i].size(); ++p) {
      const std::string name = p < parameters.size() ? parameters[p] : "?";
      where += fmt::format("{}{}={}", p > 0 ? ", " : "", name, coordinates[i][p]);
    }
    where += ')';
  }
  if (coordinates.size() > kShown) {
    where += fmt::format(", ... ({} more)", coordinates.size() - kShown);
  }
  return where;
}

}  // namespace

absl::Status check_coordinates(const MeasurementSet& set, const Series& series) {
  std::vector<std::vector<double>> twice;
  for (const RepeatedPoint& r : set.repeated) {
    if (r.callpath == series.callpath && r.metric == series.metric) twice.push_back(r.coordinate);
  }
  if (!twice.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("callpath '{}', metric '{}' is measured twice at {} (given again in the "
                    "input; its values are merged as repetitions)",
                    series.callpath, series.metric, describe(twice, set.parameters)));
  }
  const std::vector<std::vector<double>> missing = missing_coordinates(set, series);
  if (missing.empty()) return absl::OkStatus();
  const std::string where = describe(missing, set.parameters);
  return absl::InvalidArgumentError(
      fmt::format("callpath '{}', metric '{}' has no measurement at {} ({} of {} coordinates "
                  "measured)",
                  series.callpath, series.metric, where, set.coordinates.size() - missing.size(),
                  set.coordinates.size()));
}

}  // namespace trainscope::scaling
