// `trainscope report`: one self-contained HTML page (Chart.js and the data
// embedded, no server, no network when opened) for a run, for several runs
// or a sweep, for a scaling study across runs, and for a comparison of two
// sides (`trainscope report A B --compare`).
//
//   trainscope::report::ReportOptions options;
//   options.inputs = {"trainscope-runs/5378fc5b2fff80241b02fae439831f4e"};
//   absl::Status written = trainscope::report::write_report(options, "run.html");
//
// One run directory gives a run page: status, command, params, environment,
// its diagnosis at the top (trainscope/diagnosis/diagnosis.hpp's diagnose_run:
// the labels with their evidence and next step, the step's phases over the
// last steps and over the run), the statistics of every key (CPU and GPU,
// medians with their confidence intervals), distributions, region times over time with a rolling
// median and p95, hardware metrics on the same time axis, per-rank comparison and the slowest rank
// per step, user metrics, and its data stalls when it timed its loader (IO regions:
// trainscope/stalls/analysis.hpp's analyze_run). Several inputs, a sweep directory (sweep.json), a
// stalls analysis (stalls.json of `trainscope stalls --dataset`, its runs in runs/) or a directory
// of runs give a study page: one row per run, each key against each parameter, runs side by side,
// the scaling model of every key against a numeric parameter (trainscope/scaling/) and the
// differential stall breakdown of an analysis.
//
// With `compare`, the two inputs are A and B of `trainscope compare`
// (trainscope/compare/compare.hpp; each a run, a glob, a folder of runs or a
// sweep, or a saved comparison) and the page is the comparison: per pair
// (configuration) the overall verdict with its interval and basis, the warnings,
// the table of every compared quantity (medians, B/A, interval, p, verdict) with
// the stalls noted, the step key's per-step times of A and B, and a forest chart
// of every ratio with its interval and the +-threshold band of `same`.
//
// Statistics are computed on every row. Time series are shown downsampled to
// at most `max_points` points per series by an envelope (min and max of each
// bucket of consecutive rows, so no spike is lost) and the page says so.
#ifndef TRAINSCOPE_REPORT_REPORT_HPP_
#define TRAINSCOPE_REPORT_REPORT_HPP_

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope::report {

struct ReportOptions {
  // Run directories (run.json), sweep directories (sweep.json), stalls
  // analyses (stalls.json) and directories holding runs one level down or in
  // their runs/. One run: a run page; else a study page. With `compare`: A and B.
  std::vector<std::string> inputs;
  // Default: the run's name, the sweep's name, "data stalls DIR" or "trainscope study".
  std::string title;
  // The x parameter of the scaling study (a run param with numeric values).
  // Empty: the one param that varies across the finished runs, if exactly one
  // does, with at least 3 numeric values; "none": no scaling study.
  std::string scaling_parameter;
  // Points per time series shown (at least 16); statistics use every row.
  std::size_t max_points = 2000;
  // The comparison page: `inputs` are exactly A and B (side specs of `trainscope
  // compare`: a run directory, a glob, a folder of runs, a saved comparison
  // FILE.json or FILE.json:a), compared with compare::compare's defaults.
  // Default title: "B vs A" (the sides as given).
  bool compare = false;
  // Called from the calling thread while inputs are read: `transient` lines
  // are passing states (a live percentage), the others are worth keeping.
  std::function<void(const std::string& text, bool transient)> progress;
};

// The page, as HTML text. Errors name the input and what is wrong with it
// (not a run, a sweep or a directory of runs; a damaged file and its line).
// With `compare`: InvalidArgument "a comparison page needs two inputs (A and B),
// got N", else compare::compare's errors as they are (naming the side and run).
absl::StatusOr<std::string> render_report(const ReportOptions& options);

// Where `trainscope report` writes the page when no -o is given: in the
// current directory, "<run name>.html" for one run, "<sweep name>.html" for a
// sweep, "<B>-vs-<A>.html" for a comparison, else "<first input's name>.html"
// (characters outside [A-Za-z0-9._-] made '_'). A trainscope page there is
// replaced; AlreadyExists for any other file of that name. Errors: classify's,
// naming the input.
absl::StatusOr<std::string> default_page_path(const ReportOptions& options);

// render_report() written to `path`, replaced atomically.
absl::Status write_report(const ReportOptions& options, const std::string& path);

// A rendered page written to `path`: a temporary file next to it (".report-*"),
// fsynced, renamed over `path` and the directory fsynced, so readers (and the
// disk after a power loss) see the old page or the new one, never a part.
absl::Status write_report_page(const std::string& html, const std::string& path);

// A ReportOptions::progress that prints to `out`: one line rewritten in
// place when `terminal`, else plain lines ("report: ...") for kept lines only.
std::function<void(const std::string& text, bool transient)> progress_printer(std::FILE* out,
                                                                              bool terminal);

// The charting library the page embeds: "Chart.js 3.9.1", or empty when this
// build has none (render_report then fails with what to install).
std::string chart_library();

}  // namespace trainscope::report

#endif  // TRAINSCOPE_REPORT_REPORT_HPP_
