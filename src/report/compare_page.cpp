#include "report/compare_page.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "fmt/format.h"
#include "report/downsample.hpp"

namespace trainscope::report::detail {
namespace {

using nlohmann::json;

const compare::Series* find_series(const compare::Side& side, const compare::Row& row) {
  for (const compare::Series& s : side.series) {
    if (s.kind == row.kind && s.name == row.name && s.device == row.device) return &s;
  }
  return nullptr;
}

// The pair's runs of one side (those named in `dirs`, in the side's order) one
// after another, downsampled: x is the step's index on the side.
json side_series_json(const compare::Side& side, const compare::Series& series,
                      const std::vector<std::string>& dirs, std::size_t max_points) {
  std::vector<double> x, y;
  json starts = json::array();
  std::size_t runs = 0;
  for (std::size_t i = 0; i < side.runs.size() && i < series.runs.size(); ++i) {
    if (series.runs[i].empty() ||
        std::find(dirs.begin(), dirs.end(), side.runs[i].dir) == dirs.end()) {
      continue;
    }
    starts.push_back(y.size());
    ++runs;
    for (const double v : series.runs[i]) {
      x.push_back(static_cast<double>(y.size()));
      y.push_back(v);
    }
  }
  json out = envelope_json(envelope(x, y, max_points), /*x_is_time=*/false);
  out["runs"] = runs;
  out["run_starts"] = std::move(starts);
  return out;
}

// The series a pair's chart shows: the overall row's (the step time), else
// the first region row's (the largest effect), when both sides have it.
json pair_chart_json(const compare::Comparison& c, const compare::Pair& pair,
                     std::size_t max_points) {
  std::vector<std::pair<const compare::Row*, bool>> candidates{{&pair.overall, true}};
  for (const compare::Row& row : pair.rows) candidates.emplace_back(&row, false);
  for (const auto& [row, overall] : candidates) {
    if (row->kind != compare::SeriesKind::kRegion) continue;
    const compare::Series* a = find_series(c.a, *row);
    const compare::Series* b = find_series(c.b, *row);
    if (a == nullptr || b == nullptr) continue;
    json chart{{"name", row->name},
               {"device", row->device},
               {"overall", overall},
               {"a", side_series_json(c.a, *a, pair.runs_a, max_points)},
               {"b", side_series_json(c.b, *b, pair.runs_b, max_points)}};
    if (chart["a"]["rows"] == 0 || chart["b"]["rows"] == 0) continue;
    return chart;
  }
  return nullptr;
}

}  // namespace

json comparison_page_json(const compare::Comparison& comparison, std::size_t max_points) {
  // The fields of `trainscope compare --json`, from the same writer.
  json document = json::parse(compare::compare_json(comparison, -1, /*with_data=*/false));
  json charts = json::array();
  for (const compare::Pair& pair : comparison.pairs) {
    charts.push_back(pair_chart_json(comparison, pair, max_points));
  }
  return json{{"comparison", std::move(document)}, {"charts", std::move(charts)}};
}

absl::StatusOr<json> comparison_page(const std::vector<std::string>& inputs, std::size_t max_points,
                                     const ProgressFn& progress) {
  if (inputs.size() != 2) {
    return absl::InvalidArgumentError(
        fmt::format("a comparison page needs two inputs (A and B), got {}", inputs.size()));
  }
  const auto started = std::chrono::steady_clock::now();
  if (progress) {
    progress(fmt::format("comparing {} (B) with {} (A)", inputs[1], inputs[0]),
             /*transient=*/true);
  }
  compare::CompareRequest request;
  request.a = {inputs[0]};
  request.b = {inputs[1]};
  absl::StatusOr<compare::Comparison> comparison = compare::compare(request);
  if (!comparison.ok()) return comparison.status();
  if (progress) {
    const auto runs = [](std::size_t n) { return fmt::format("{} run{}", n, n == 1 ? "" : "s"); };
    progress(fmt::format(
                 "compared B ({}) with A ({}) in {:.1f} s", runs(comparison->b.runs.size()),
                 runs(comparison->a.runs.size()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()),
             /*transient=*/false);
  }
  return comparison_page_json(*comparison, max_points);
}

}  // namespace trainscope::report::detail
