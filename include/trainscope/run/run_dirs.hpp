// "A set of runs" as every command and function that takes one reads it: a
// run directory, a directory holding runs, or a directory whose runs/ holds
// them (a sweep, a stalls analysis). One resolver, used by `trainscope
// model`, the scaling room and Python's trainscope._core.find_run_dirs.
#ifndef TRAINSCOPE_RUN_RUN_DIRS_HPP_
#define TRAINSCOPE_RUN_RUN_DIRS_HPP_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope {

// The parent directory of runs when none is named: RunOptions::root's default
// (new runs go there) and where `trainscope top` without an argument looks.
inline constexpr std::string_view kDefaultRunsRoot = "trainscope-runs";
// The environment variable that overrides it.
inline constexpr std::string_view kRunsRootEnv = "TRAINSCOPE_RUNS_ROOT";
// TRAINSCOPE_RUNS_ROOT when set and not empty, else kDefaultRunsRoot (relative
// to the working directory). The one place this rule is decided.
std::string default_runs_root();

// The run directories `paths` name, in order. Each path is
//   - a run (holds_run_files: its run.json, or what is left of a run without
//     it, so that a reader skips a damaged run by name): itself;
//   - a directory holding runs one level down: those, sorted by name;
//   - a directory whose runs/ holds them (a sweep directory, a stalls
//     analysis, a sweep copied without its sweep.json): those, sorted.
// Errors name the path: InvalidArgument "no run directories given" for no
// path, NotFound "P: no such run directory", InvalidArgument "P: not a
// directory", NotFound "P: not a run (no run.json), and neither P nor P/runs
// has a run directory" for a directory that holds no run, or the errno
// status of a directory that cannot be listed. A run named twice (directly
// and through its folder) is returned twice: readers skip it by its id.
absl::StatusOr<std::vector<std::string>> find_run_dirs(const std::vector<std::string>& paths);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_DIRS_HPP_
