// `trainscope report <run-dir or sweep-dir>... -o page.html`: one
// self-contained HTML page (trainscope/report/report.hpp).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/report/report.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace report_cmd {

constexpr char kReportDescription[] =
    "Writes one HTML file that opens offline in any browser (the charting library and the\n"
    "data are embedded). One run directory gives a run page: its diagnosis at the top (the\n"
    "labels of `trainscope diagnose` with their evidence and next step, the step's phases\n"
    "over the last steps and the run), status, command, params, environment, statistics of\n"
    "every key (CPU and GPU, medians with 95% CIs), distributions, region times and hardware\n"
    "metrics over the run, ranks and the slowest rank per step, metrics, and the data stalls\n"
    "of a run that timed its loader (IO regions). Several runs, a sweep directory\n"
    "(sweep.json) or a directory of runs give a study page: one sortable, filterable row per\n"
    "run, each key against each param, runs side by side, and a scaling model of every key\n"
    "against a numeric param. The directory of a `trainscope stalls --dataset` analysis\n"
    "(stalls.json) adds its differential breakdown and what-ifs.\n"
    "With --compare the two inputs are A and B of `trainscope compare` (runs, globs,\n"
    "folders of runs, sweeps, a saved comparison) and the page is the comparison: per\n"
    "configuration the overall verdict with its interval, warnings, every quantity's\n"
    "medians, B/A, interval, p and verdict, the step times of A and B, and a forest\n"
    "chart of the ratios with the +-threshold band (docs/compare.md).\n";

constexpr char kReportFooter[] =
    "Statistics use every row; time series are drawn from at most --max-points points each\n"
    "(min and max per bucket, so no spike is lost).\n"
    "Exit status: 0 written, 1 an input could not be read or the page not written, 2 bad usage.\n";

}  // namespace report_cmd

int report_command(const std::vector<std::string>& argv) {
  using namespace report_cmd;  // NOLINT(build/namespaces): this file's own names
  CommandLine line(
      {"report",
       "trainscope report <run-dir | sweep-dir | dir of runs | stalls-dir>... [-o page.html] "
       "[--title T] [--scaling PARAM|none] [--max-points N] [--quiet]\n"
       "       trainscope report A B --compare [-o page.html] [--title T] [--max-points N]",
       kReportDescription, kReportFooter});
  std::optional<std::string> output;
  std::optional<std::string> title;
  std::optional<std::string> scaling;
  std::size_t max_points = report::ReportOptions{}.max_points;
  bool quiet = false;
  bool compare = false;
  std::vector<std::string> inputs;
  line.add_value("-o,--output", "FILE",
                 "the page to write (replaced atomically; default: ./<run or sweep\n"
                 "name>.html, ./<B>-vs-<A>.html with --compare)",
                 &output);
  line.add_value("--title", "TEXT", "default: the run's or sweep's name; with --compare \"B vs A\"",
                 &title);
  line.add_value("--scaling", "PARAM",
                 "the param of the scaling study (default: the one numeric param\n"
                 "that varies across the runs); none: no scaling study. Speedup,\n"
                 "efficiency and cost only for a param named here (ranks, GPUs, nodes)",
                 &scaling);
  line.add_value("--max-points", "N",
                 fmt::format("points per time series on the page (default {})", max_points),
                 [&](const std::string& value) {
                   max_points = static_cast<std::size_t>(whole_number("--max-points", value, 16));
                 });
  line.add_flag("--compare", "the comparison page of A and B (the two inputs)", &compare);
  line.add_flag("-q,--quiet", "no progress on stderr", &quiet);
  line.add_positionals("input", &inputs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(argv)) return *done;
  if (compare && inputs.size() != 2) {
    return line.usage_error(
        fmt::format("a comparison page needs two inputs (A and B), got {}", inputs.size()));
  }
  if (inputs.empty()) return line.usage_error("missing a run directory or sweep directory");
  if (compare && scaling) return line.usage_error("--scaling is for study pages, not --compare");

  report::ReportOptions options;
  options.inputs = inputs;
  options.title = title.value_or("");
  options.scaling_parameter = scaling.value_or("");
  options.max_points = max_points;
  options.compare = compare;
  if (!quiet) options.progress = report::progress_printer(stderr, ::isatty(STDERR_FILENO) != 0);
  if (!output) {  // ./<run name>.html, ./<sweep name>.html, ./<B>-vs-<A>.html
    absl::StatusOr<std::string> path = report::default_page_path(options);
    if (!path.ok()) {
      std::fprintf(stderr, "trainscope report: %s\n", std::string(path.status().message()).c_str());
      return kExitFailed;
    }
    output = *path;
  }
  const absl::Status status = report::write_report(options, *output);
  if (!status.ok()) {
    if (!quiet && ::isatty(STDERR_FILENO) != 0) std::fputc('\n', stderr);
    std::fprintf(stderr, "trainscope report: %s\n", std::string(status.message()).c_str());
    return kExitFailed;
  }
  std::printf("wrote %s\n", output->c_str());
  return kExitOk;
}

}  // namespace trainscope::cli
