// The comparison page of a report (internal): `trainscope report A B --compare`
// draws trainscope::compare::compare's answer, from the compare room's one JSON
// writer (the document `trainscope compare --json` prints) and, per pair, the
// per-step series of A and B of its step key, downsampled as every report series.
#ifndef TRAINSCOPE_SRC_REPORT_COMPARE_PAGE_HPP_
#define TRAINSCOPE_SRC_REPORT_COMPARE_PAGE_HPP_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/run_data.hpp"
#include "trainscope/compare/compare.hpp"

namespace trainscope::report::detail {

// What the page draws: {"comparison": the document of `trainscope compare --json`
// (no series), "charts": one per pair, null where the pair has no region series:
// {"name", "device", "overall" (the overall row's key, else the first region
// row's), "a", "b": envelope_json of the pair's runs of that side one after
// another (x: the step's index on its side) with "runs" and "run_starts"}}.
nlohmann::json comparison_page_json(const compare::Comparison& comparison, std::size_t max_points);

// Compares inputs[0] (A) with inputs[1] (B), each a side spec of `trainscope compare`
// (a run, a glob, a folder of runs, a saved comparison), and returns the page's data.
// InvalidArgument unless there are exactly two inputs; compare::compare's errors as
// they are (they name the side and the run).
absl::StatusOr<nlohmann::json> comparison_page(const std::vector<std::string>& inputs,
                                               std::size_t max_points, const ProgressFn& progress);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_COMPARE_PAGE_HPP_
