#include "trainscope/scaling/derived.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scaling/number_text.hpp"

namespace trainscope::scaling {
namespace {

using detail::same_value;  // scaling/number_text.hpp

std::vector<ScalingView> views(std::vector<ScalingView> rows) {
  const double r0 = rows.front().resource;
  const double t0 = rows.front().time;
  for (ScalingView& v : rows) {
    v.speedup = t0 / v.time;
    v.efficiency = v.speedup * r0 / v.resource;
    v.cost = v.time * v.resource;
  }
  return rows;
}

absl::Status check_resource(int resource_parameter, std::size_t dimension) {
  if (resource_parameter < 0 || static_cast<std::size_t>(resource_parameter) >= dimension) {
    return absl::InvalidArgumentError(
        fmt::format("scaling: resource parameter index {} is out of range (0..{})",
                    resource_parameter, static_cast<long long>(dimension) - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ScalingView>> measured_scaling(const Series& series,
                                                          int resource_parameter,
                                                          absl::Span<const double> fixed,
                                                          Measure measure) {
  if (absl::Status s = check_resource(resource_parameter, fixed.size()); !s.ok()) return s;
  const auto r_index = static_cast<std::size_t>(resource_parameter);

  // Matching points, repetitions of equal resource values merged.
  struct Line {
    double resource;
    std::vector<double> values;
  };
  std::vector<Line> line;
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const Point& p = series.points[i];
    if (p.coordinate.size() != fixed.size()) {
      return absl::InvalidArgumentError(
          fmt::format("scaling: point {} has {} coordinates, expected {}", i + 1,
                      p.coordinate.size(), fixed.size()));
    }
    bool on_line = true;
    for (std::size_t d = 0; d < fixed.size() && on_line; ++d) {
      if (d != r_index && !same_value(p.coordinate[d], fixed[d])) on_line = false;
    }
    if (!on_line) continue;
    const double r = p.coordinate[r_index];
    auto it = std::find_if(line.begin(), line.end(),
                           [&](const Line& l) { return same_value(l.resource, r); });
    if (it == line.end()) {
      line.push_back({r, p.values});
    } else {
      it->values.insert(it->values.end(), p.values.begin(), p.values.end());
    }
  }
  if (line.size() < 2) {
    return absl::InvalidArgumentError(fmt::format(
        "scaling: {} point(s) of '{}' / '{}' match the fixed parameters; at least two are needed",
        line.size(), series.callpath, series.metric));
  }
  std::sort(line.begin(), line.end(),
            [](const Line& a, const Line& b) { return a.resource < b.resource; });

  std::vector<ScalingView> rows;
  rows.reserve(line.size());
  for (const Line& l : line) {
    if (!(l.resource > 0) || !std::isfinite(l.resource)) {
      return absl::InvalidArgumentError(
          fmt::format("scaling: resource {} is not positive", l.resource));
    }
    if (l.values.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("scaling: the point at resource {} has no values", l.resource));
    }
    ScalingView v;
    v.resource = l.resource;
    v.time = measure_of(l.values, measure);
    if (!(v.time > 0) || !std::isfinite(v.time)) {
      return absl::InvalidArgumentError(
          fmt::format("scaling: the time at resource {} is {}, not positive", l.resource, v.time));
    }
    rows.push_back(v);
  }
  return views(std::move(rows));
}

absl::StatusOr<std::vector<ScalingView>> modeled_scaling(const Model& model, int resource_parameter,
                                                         absl::Span<const double> fixed,
                                                         absl::Span<const double> resources) {
  if (absl::Status s = check_resource(resource_parameter, fixed.size()); !s.ok()) return s;
  if (!model.parameters.empty() && fixed.size() != model.parameters.size()) {
    return absl::InvalidArgumentError(
        fmt::format("scaling: fixed has {} values, the model has {} parameters", fixed.size(),
                    model.parameters.size()));
  }
  if (resources.empty()) return absl::InvalidArgumentError("scaling: no resource values given");
  const auto r_index = static_cast<std::size_t>(resource_parameter);
  for (std::size_t d = 0; d < fixed.size(); ++d) {
    if (d != r_index && !std::isfinite(fixed[d])) {
      return absl::InvalidArgumentError(
          fmt::format("scaling: fixed value {} is not finite", fixed[d]));
    }
  }

  std::vector<double> coordinate(fixed.begin(), fixed.end());
  std::vector<ScalingView> rows;
  rows.reserve(resources.size());
  for (const double r : resources) {
    if (!(r > 0) || !std::isfinite(r)) {
      return absl::InvalidArgumentError(fmt::format("scaling: resource {} is not positive", r));
    }
    coordinate[r_index] = r;
    ScalingView v;
    v.resource = r;
    v.time = model.evaluate(coordinate);
    if (!(v.time > 0) || !std::isfinite(v.time)) {
      return absl::InvalidArgumentError(fmt::format(
          "scaling: the model predicts {} at resource {}, not a positive time", v.time, r));
    }
    rows.push_back(v);
  }
  return views(std::move(rows));
}

}  // namespace trainscope::scaling
