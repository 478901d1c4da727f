// The inputs of a report (internal): what each given path is (a run, a
// sweep, a directory of runs), and the data of a study page (several runs)
// with its scaling study.
#ifndef TRAINSCOPE_SRC_REPORT_STUDY_HPP_
#define TRAINSCOPE_SRC_REPORT_STUDY_HPP_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/run_data.hpp"

namespace trainscope::report::detail {

// One run of a study: its directory, or none for a sweep job that has not run.
struct StudyRun {
  std::string dir;     // empty: the job never started
  std::string job;     // the sweep job's id; empty outside a sweep
  std::string status;  // the job's status when it has no run (QUEUED, ...)
  std::vector<std::pair<std::string, std::string>> params;  // the job's, when it has no run
};

struct Inputs {
  std::vector<StudyRun> runs;
  bool single_run = false;  // exactly one input, and it is a run directory
  std::string sweep_name;   // the first sweep's name
  std::vector<std::string> sweep_dirs;
  // Differential stalls analyses (`trainscope stalls --dataset`: stalls.json
  // beside runs/), given as inputs.
  std::vector<std::string> stalls_dirs;
};

// Classifies every input: a run directory (run.json), a sweep directory
// (sweep.json: its jobs' runs, under <dir>/runs/ when the recorded path is
// gone), a stalls analysis (stalls.json: its runs under <dir>/runs/), or a
// directory holding runs one level down or in its runs/. Errors name the input.
absl::StatusOr<Inputs> classify_inputs(const std::vector<std::string>& inputs);

// The study page's data: one row per run (read with every row), the params,
// the keys, the scaling study against `scaling_parameter` ("" = auto,
// "none" = off), and the stalls analyses: those given and those the runs'
// trainscope.stalls.analysis tags name (stalls_analysis_json each).
absl::StatusOr<nlohmann::json> study_json(const Inputs& inputs,
                                          const std::string& scaling_parameter,
                                          const ProgressFn& progress);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_STUDY_HPP_
