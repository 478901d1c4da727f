// The inputs of `trainscope sweep`: each reader turns one kind of sweep file
// into a Plan (plan.hpp).
//
//   radT's experiment CSV   read_radt_csv / write_radt_status (progress written back)
//   radT's / W&B's YAML     read_sweep_yaml (grid, or random with a seed)
//   Furcate's JSON config   read_furcate_json (cartesian product of top-level lists)
//   a grid on the CLI       grid_plan ("--grid batch_size=32,64 --repeat 3")
//   any of the files        read_plan (by extension)
//
// Errors name the file and its line (CSV) or key (JSON, YAML). Job ids are
// stable (the same input gives the same ids) and unique within a plan. Each
// reader that takes a path has a parse_* form over the text (`name` is what
// messages call it), used by the fuzz targets.
#ifndef TRAINSCOPE_SWEEP_INPUTS_HPP_
#define TRAINSCOPE_SWEEP_INPUTS_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/sweep/plan.hpp"

namespace trainscope::sweep {

// --- radT's experiment CSV --------------------------------------------------
//
// Columns (any order, names trimmed): Experiment, Workload, [Name,] Status,
// Run, Devices, Collocation, File, Listeners, Params. Without a Name column a
// row may carry one field more than the header: the field after Workload is
// then its Name (radT's README example). Job per row: command {"python",
// File}, params from Params, group per (Experiment, Workload) in order of
// first appearance, devices from Devices ("0+1"), collocation "-" / "mps" /
// a MIG profile, listeners (lower case, radT's names), source "path:line",
// id "e<Experiment>-w<Workload>-<Name or r<n>>".
struct RadtReadOptions {
  // radT skips a workload whose every row is FINISHED, or FAILED unless
  // --rerun; true: rerun the FAILED ones. include_done keeps every row.
  bool rerun = false;
  bool include_done = false;
};
absl::StatusOr<Plan> read_radt_csv(const std::string& path, const RadtReadOptions& options = {});
absl::StatusOr<Plan> parse_radt_csv(std::string_view text, std::string_view name,
                                    const RadtReadOptions& options = {});
// The line (1-based) a Job of read_radt_csv came from (its source "path:line").
absl::StatusOr<int> radt_line(const Job& job);
// Writes Status and Run of the row that starts at `line` (as radT does after
// each workload), atomically, every other byte of the file unchanged.
absl::Status write_radt_status(const std::string& path, int line, std::string_view status,
                               std::string_view run_id);
// The same for several rows in one atomic rewrite. A line where no row
// starts is an error naming path:line; the other rows are written all the same.
struct RadtRowStatus {
  int line = 0;
  std::string status;
  std::string run_id;
};
absl::Status write_radt_statuses(const std::string& path, const std::vector<RadtRowStatus>& rows);

// --- radT's / W&B's YAML sweep ----------------------------------------------
//
// radT: name, experiment, collocation, devices, listeners, file, method
// (grid|random), parameters {k: {values: [...]}}, status (finished runs are
// skipped). W&B: program, method, parameters {k: {values|value|distribution,
// min, max}}, run_cap. `program` (from the command line) replaces the file's
// program when not empty. random: `count` or `run_cap` samples drawn with
// `seed`; without either, a shuffled grid when every parameter is discrete.
absl::StatusOr<Plan> read_sweep_yaml(const std::string& path,
                                     const std::vector<std::string>& program,
                                     std::uint64_t seed = 0);
absl::StatusOr<Plan> parse_sweep_yaml(std::string_view text, std::string_view name,
                                      const std::vector<std::string>& program,
                                      std::uint64_t seed = 0);

// --- Furcate's JSON config --------------------------------------------------
//
// Every top-level list expands into the cartesian product; scalars and
// objects pass through (lists inside objects, meta's too, stay lists).
// meta.exclude_configs drops every config matching all key/values of an
// entry (an entry matching nothing is a warning); meta.max_threads gives
// Plan.max_parallel, meta.allow_cpu Plan.allow_cpu. Job: params (meta left
// out), config_json (the whole config), id = Furcate's folder name.
absl::StatusOr<Plan> read_furcate_json(const std::string& path,
                                       const std::vector<std::string>& program);
absl::StatusOr<Plan> parse_furcate_json(std::string_view text, std::string_view name,
                                        const std::vector<std::string>& program);

// --- A grid on the command line ---------------------------------------------
//
// grid_specs: "key=v1,v2,..." each; the cartesian product, first spec
// outermost, each combination `repeat` times (ids end in -r<k> when repeat > 1).
// The plan's name (the default sweep directory's) identifies the grid and the
// program: "grid-<keys joined by '-'>-<8 hex digits of a stable hash of the
// keys, values and program>" ("grid-batch_size-lr-a328c9f1"), the same for
// any --repeat (more repetitions add to the sweep), so another grid or
// program gets another directory.
absl::StatusOr<Plan> grid_plan(const std::vector<std::string>& grid_specs, int repeat,
                               const std::vector<std::string>& program);

// By extension: .csv (program must be empty: radT names it in File),
// .yaml / .yml, .json.
absl::StatusOr<Plan> read_plan(const std::string& path, const std::vector<std::string>& program);

// The most jobs one input may expand to (a typo in a grid must not exhaust memory).
inline constexpr std::size_t kMaxPlanJobs = 100000;

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_INPUTS_HPP_
