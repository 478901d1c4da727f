// `trainscope compare A B`: is B faster than A, by how much, and can CI trust
// the answer (trainscope::compare::compare).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli.hpp"
#include "commands.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/compare/run_pair.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace compare_cmd {

constexpr char kDescription[] =
    "Compares B with A, each a run, a glob of runs or a folder of runs (repetitions:\n"
    "the run is then the unit), a sweep (configurations matched on their params), or\n"
    "a saved comparison (--save FILE; FILE.json is its B side, FILE.json:a its A):\n"
    "per region key and device, and per metric (throughput, data-wait share, and any\n"
    "--metric), the medians of A and B, the ratio B/A with its interval, a p-value and\n"
    "a verdict: slower / faster (the interval wholly above / below 1), same (inside\n"
    "+-threshold), inconclusive (with about how many more steps or runs would decide),\n"
    "inconclusive (contention) (the sides waited for a CPU differently enough to explain\n"
    "the difference: both shares named; never fails --fail-if-slower).\n"
    "Warm-up is detected and dropped; within a run the interval is a moving-block\n"
    "bootstrap, so dependent steps, drift and spikes do not fake significance.\n"
    "Warns when A and B ran on differently loaded hosts, other hardware or software.\n"
    "docs/compare.md describes the command, docs/compare-statistics.md the method.\n"
    "\n"
    "examples:\n"
    "  trainscope compare trainscope-runs/base trainscope-runs/new\n"
    "  trainscope compare 'runs/base-*' 'runs/new-*' --fail-if-slower 3\n"
    "  trainscope compare --root runs --a 'params.workers = 0' --b 'params.workers = 2'\n"
    "  trainscope compare RUN RUN2 --save ref.json; trainscope compare ref.json TODAY\n"
    "  trainscope compare --run 'python train.py' --run 'python train_new.py' --repeat 5\n";

constexpr char kFooter[] =
    "Exit status: 0 compared (whatever the verdicts), 1 --fail-if-slower: a selected\n"
    "key's interval lies wholly above 1 + PCT/100 (never for noise: an inconclusive\n"
    "comparison passes), 2 bad usage (also --save onto an input, or onto an existing\n"
    "file without --force), 3 the inputs cannot be compared (a missing or\n"
    "damaged run, no steps, nothing in common), with a message naming them.\n";

constexpr int kExitCannotCompare = 3;

// --run A --run B: the library runs and compares; this prints.
int run_pair(CommandLine& line, const std::vector<std::string>& commands,
             const compare::CompareRequest& request, compare::RunPairRequest pair_request,
             bool json, const std::optional<double>& fail_pct) {
  if (commands.size() != 2) return line.usage_error("--run twice: A's command, then B's");
  if (!request.a.empty() || !request.filter_a.empty() || !request.filter_b.empty())
    return line.usage_error("--run compares the runs it makes: give no other sides");
  pair_request.command_a = commands[0];
  pair_request.command_b = commands[1];
  pair_request.dir = request.root.empty() ? "trainscope-compare" : request.root;
  pair_request.options = request.options;
  pair_request.progress = [](const std::string& what, const std::string& dir) {
    std::fprintf(stderr, "trainscope compare: running %s (%s)\n", what.c_str(), dir.c_str());
  };
  absl::StatusOr<compare::RunPairResult> result = compare::run_and_compare(pair_request);
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope compare: %s\n",
                 std::string(result.status().message()).c_str());
    return kExitCannotCompare;
  }
  if (json) {
    std::fputs((compare::compare_json(result->comparison, 1, false) + "\n").c_str(), stdout);
  } else {
    std::printf(
        "ran %s; stopped: %s (%zu looks: at %.4g confidence before all runs, %.4g "
        "after)\n",
        absl::StrJoin(result->order, " ").c_str(), result->stop.c_str(), result->looks,
        result->look_confidence, result->final_confidence);
    std::fputs(compare::format_comparison(result->comparison).c_str(), stdout);
  }
  if (fail_pct) {
    const std::vector<std::string> failing =
        compare::failing_rows(result->comparison, request.options.keys, *fail_pct);
    if (!failing.empty()) {
      std::fprintf(stderr, "trainscope compare: slower than the %g%% allowed: %s\n", *fail_pct,
                   absl::StrJoin(failing, ", ").c_str());
      return kExitFailed;
    }
  }
  return kExitOk;
}

}  // namespace compare_cmd

int compare_command(const std::vector<std::string>& args) {
  using namespace compare_cmd;  // NOLINT(build/namespaces): this file's own names
  compare::CompareRequest request;
  std::vector<std::string> sides;
  bool json = false;
  std::optional<std::string> save;
  std::optional<double> fail_pct;
  CommandLine line({"compare", "trainscope compare A B [options]", kDescription, kFooter});
  line.add_value("--root", "DIR", "the runs' folder for --a and --b", &request.root);
  line.add_value("--a", "FILTER", "side A: runs under --root matching FILTER (search_runs' syntax)",
                 &request.filter_a);
  line.add_value("--b", "FILTER", "side B, likewise", &request.filter_b);
  line.add_value("--key", "KEY",
                 "compare (and gate on) only KEY; repeatable (default: every key and metric "
                 "on both sides, the gate on the overall verdict)",
                 [&](const std::string& v) { request.options.keys.push_back(v); });
  line.add_value("--metric", "NAME",
                 "also compare a logged metric (log_metric) or a host metric (system/...); "
                 "repeatable",
                 [&](const std::string& v) { request.gather.metrics.push_back(v); });
  line.add_value("--rank", "N", "compare rank N (default: per step the slowest rank's time)",
                 [&](const std::string& v) {
                   request.gather.rank = static_cast<std::uint32_t>(whole_number("--rank", v, 0));
                 });
  line.add_value(
      "--threshold", "PCT", "the margin of `same`, in percent (default 2)",
      [&](const std::string& v) {
        request.options.stats.threshold = number("--threshold", v, {0, 1000, true, false}) / 100;
      });
  line.add_value("--confidence", "LEVEL", "the intervals' level (default 0.95)",
                 [&](const std::string& v) {
                   request.options.stats.confidence = number("--confidence", v, {0, 1, true, true});
                 });
  line.add_value("--min-steps", "N", "fewest steps a side or run keeps after warm-up (default 50)",
                 [&](const std::string& v) {
                   request.options.stats.min_steps =
                       static_cast<std::size_t>(whole_number("--min-steps", v, 2));
                 });
  line.add_value("--resamples", "N", "bootstrap resamples (default 2000)",
                 [&](const std::string& v) {
                   request.options.stats.resamples =
                       static_cast<std::size_t>(whole_number("--resamples", v, 100));
                 });
  line.add_value(
      "--run-noise", "PCT",
      "how much one job's median varies from run to run, in percent, which one run "
      "a side cannot show (default 1.5; 0: none; several runs a side measure it)",
      [&](const std::string& v) {
        request.options.stats.run_noise = number("--run-noise", v, {0, 100, false, true}) / 100;
      });
  bool no_warmup = false;
  line.add_flag("--no-warmup", "keep every step (no warm-up detection)", &no_warmup);
  line.add_value("--fail-if-slower", "PCT",
                 "exit 1 when a selected key (or the overall step time, and tokens/s) is slower "
                 "by more than PCT percent with confidence: a time's interval's lower bound above "
                 "1 + PCT/100, a throughput's upper bound below 1 / (1 + PCT/100)",
                 [&](const std::string& v) {
                   fail_pct = number("--fail-if-slower", v, {0, 1e6, false, false});
                 });
  line.add_flag("--json", "print the comparison as JSON (without the series)", &json);
  line.add_value("--save", "FILE",
                 "also write the comparison with its data to FILE (a baseline; never onto "
                 "an input)",
                 &save);
  bool force = false;
  line.add_flag("--force", "let --save replace an existing FILE", &force);
  std::vector<std::string> run_commands;
  compare::RunPairRequest pair_request;
  line.add_value("--run", "CMD",
                 "run CMD (a shell line) as A, the second --run as B, alternately (A B B A ...) "
                 "under trainscope run into --root (default trainscope-compare), and compare "
                 "them, the run as the unit, stopping once decided",
                 [&](const std::string& v) { run_commands.push_back(v); });
  line.add_value("--repeat", "N", "with --run: at most N runs a side (default 5, at least 2)",
                 [&](const std::string& v) {
                   pair_request.repeat = static_cast<std::size_t>(whole_number("--repeat", v, 2));
                 });
  line.add_value("--warmup-runs", "K", "with --run: K runs a side first, not compared",
                 [&](const std::string& v) {
                   pair_request.warmup_runs =
                       static_cast<std::size_t>(whole_number("--warmup-runs", v, 0));
                 });
  line.add_value("--max-time", "S", "with --run: start no run after S seconds",
                 [&](const std::string& v) {
                   pair_request.max_time_s = number("--max-time", v, {0, 1e9, false, false});
                 });
  line.add_positionals("A B", &sides, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(args)) return *done;
  request.options.stats.detect_warmup = !no_warmup;
  if (!run_commands.empty())
    return run_pair(line, run_commands, request, pair_request, json, fail_pct);
  if (request.filter_a.empty() && request.filter_b.empty()) {
    if (sides.size() != 2) return line.usage_error("give A and B (or --root with --a and --b)");
    request.a = {sides[0]};
    request.b = {sides[1]};
  } else if (!sides.empty()) {
    return line.usage_error("give A and B as runs or as --a/--b filters, not both");
  }
  if (save) {
    if (const absl::Status ok = compare::check_save_path(request, *save, force); !ok.ok()) {
      return line.usage_error(std::string(ok.message()));
    }
  } else if (force) {
    return line.usage_error("--force is for --save FILE");
  }
  absl::StatusOr<compare::Comparison> result = compare::compare(request);
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope compare: %s\n",
                 std::string(result.status().message()).c_str());
    return kExitCannotCompare;
  }
  if (save) {
    const absl::Status written = compare::write_comparison(*result, *save);
    if (!written.ok()) {
      std::fprintf(stderr, "trainscope compare: %s\n", std::string(written.message()).c_str());
      return kExitCannotCompare;
    }
  }
  const std::string out = json ? compare::compare_json(*result, 1, /*with_data=*/false) + "\n"
                               : compare::format_comparison(*result);
  std::fputs(out.c_str(), stdout);
  if (fail_pct) {
    const std::vector<std::string> failing =
        compare::failing_rows(*result, request.options.keys, *fail_pct);
    if (!failing.empty()) {
      std::fprintf(stderr, "trainscope compare: slower than the %g%% allowed: %s\n", *fail_pct,
                   absl::StrJoin(failing, ", ").c_str());
      return kExitFailed;
    }
  }
  return kExitOk;
}

}  // namespace trainscope::cli
