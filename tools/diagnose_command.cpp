// `trainscope diagnose RUN [--json]`: what a run's steps are made of and what
// holds it back (trainscope::diagnosis::diagnose_run), live or finished.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace diagnose_cmd {

constexpr char kDescription[] =
    "Diagnoses a run, while it runs or after it ended: each step of each rank is\n"
    "split into its phases (data wait IO, host-to-device H2D, FORWARD, BACKWARD,\n"
    "OPTIMIZER, COMM (comm: every collective; comm_exposed: what the step waits\n"
    "for), SYNC and the rest of the step, BATCH or the timed loader's\n"
    "iteration), over the last K steps and over the whole run (after warm-up),\n"
    "with each phase's median, p95, share of the step, worst rank and skew, and\n"
    "per collective the rank that arrives last. Then labels, each with its\n"
    "numbers, a 95% interval and a next step:\n"
    "  INPUT-BOUND, COMM-BOUND (the collective), COMPUTE-BOUND (the phase; gpu:\n"
    "  the device's time where GPU-timed), LAUNCH-BOUND, WAIT-HEAVY, BALANCED,\n"
    "  STRAGGLER (input or compute; the rank and its lag), MEMORY-CREEP (RSS or\n"
    "  device memory per 1,000 steps), THROUGHPUT-DRIFT (trend test), GPU-IDLE,\n"
    "  HOST-PRESSURE (other processes, swap), NO-DATA.\n"
    "docs/diagnosis.md describes the method and every threshold.\n"
    "\n"
    "examples:\n"
    "  trainscope diagnose trainscope-runs/<run-id>\n"
    "  trainscope diagnose RUN --json --window 200\n"
    "  trainscope diagnose RUN --phase optimizer=opt_step --threshold input_bound_share=0.3\n";

constexpr char kFooter[] =
    "Exit status: 0 diagnosed (whatever the labels), 1 the run cannot be read,\n"
    "2 bad usage.\n";

}  // namespace diagnose_cmd

int diagnose_command(const std::vector<std::string>& args) {
  using namespace diagnose_cmd;  // NOLINT(build/namespaces): this file's own names
  diagnosis::FollowOptions options;
  std::vector<std::string> runs;
  bool json = false;
  CommandLine line({"diagnose", "trainscope diagnose RUN_DIR [options]", kDescription, kFooter});
  add_diagnosis_options(&line, &options);
  line.add_flag("--json", "print the diagnosis as JSON (the document's one writer)", &json);
  add_ledger_options(&line, &options.ledger);
  line.add_positionals("RUN_DIR", &runs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(args)) return *done;
  if (runs.size() != 1) return line.usage_error("give one RUN_DIR");
  absl::StatusOr<diagnosis::Diagnosis> result = diagnosis::diagnose_run(runs.front(), options);
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope diagnose: %s\n",
                 std::string(result.status().message()).c_str());
    return kExitFailed;
  }
  for (const std::string& w : result->warnings) {
    std::fprintf(stderr, "trainscope diagnose: warning: %s\n", w.c_str());
  }
  const std::string out =
      json ? diagnosis::diagnosis_json(*result, 1) + "\n" : diagnosis::format_diagnosis(*result);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace trainscope::cli
