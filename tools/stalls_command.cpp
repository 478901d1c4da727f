// `trainscope stalls RUN_DIR` (the live data-wait share of a run) and
// `trainscope stalls --dataset PATH -- command...` (DS-Analyzer's differential
// analysis over a synthetic, a cold-cache and a warm-cache run, with what-ifs).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/differential.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace stalls_cmd {

using namespace trainscope::stalls;

constexpr char kDescription[] =
    "With a run directory: how long the run waited for its data (the IO regions of\n"
    "`for batch in tmr.timed(loader):`), per pass over the loader and for the run,\n"
    "classed as TensorFlow's input-pipeline analyzer does (under 5% not input-bound,\n"
    "5-20% moderately, 20% or more highly), and whether the waits are spread out (a\n"
    "slow pipeline) or bunched at pass starts (worker start-up, cache misses).\n"
    "\n"
    "With --dataset and a command: DS-Analyzer's differential analysis, without\n"
    "root. The command runs four times, each a run of one analysis directory:\n"
    "synthetic (the timed loader hands out its first batch again and again: pure\n"
    "compute), cold (the dataset's files evicted from the page cache with\n"
    "posix_fadvise, checked with mincore), warm (the files read in first) and\n"
    "loader (warm, the loader alone: batches taken as soon as they are ready, none\n"
    "handed to the loop); each stops cleanly after --warmup + --iterations\n"
    "batches. Then prep and fetch\n"
    "stalls with confidence intervals, the rates, and what-ifs on cache size,\n"
    "loader workers (--vary num_workers=2,4: more warm runs, the value passed as\n"
    "`--num_workers 2`) and GPUs per node.\n"
    "\n"
    "examples:\n"
    "  trainscope stalls trainscope-runs/<run-id>\n"
    "  trainscope stalls --dataset /data/imagenet/train --iterations 100 -- python train.py\n"
    "  trainscope stalls --dataset data/ --vary num_workers=1,2,4 --json -- python train.py\n";

struct Args {
  std::vector<std::string> positionals;
  std::vector<std::string> command;
  std::optional<std::string> dataset;
  int iterations = 50;
  int warmup = 5;
  std::string vary_key;
  std::vector<int> vary_values;
  std::string dir;
  bool json = false;
};

std::optional<Args> parse(const std::vector<std::string>& raw, int* exit_code) {
  Args args;
  std::vector<std::string> options = raw;
  if (auto dash = std::find(raw.begin(), raw.end(), "--"); dash != raw.end()) {
    options.assign(raw.begin(), dash);
    args.command.assign(dash + 1, raw.end());
  }
  CommandLine line({"stalls",
                    "trainscope stalls RUN_DIR [--json]\n"
                    "       trainscope stalls --dataset PATH [options] -- command...",
                    kDescription, ""});
  line.add_value("--dataset", "PATH", "the files the loader reads (a directory or a file)",
                 &args.dataset);
  line.add_value("--iterations", "N", "measured iterations per run (default 50)",
                 [&](const std::string& v) { args.iterations = count("--iterations", v, 1); });
  line.add_value("--warmup", "W", "iterations before the measured ones (default 5)",
                 [&](const std::string& v) { args.warmup = count("--warmup", v, 0); });
  line.add_value(
      "--vary", "KEY=V1,V2",
      "more warm runs, one per value, with `--KEY V` appended to the command\n"
      "(loader workers: the what-if on CPU count)",
      [&](const std::string& v) {
        const std::size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0) {
          bad_value("--vary needs KEY=V1,V2 (e.g. num_workers=2,4), got '" + v + "'");
        }
        args.vary_key = v.substr(0, eq);
        args.vary_values.clear();
        for (absl::string_view item : absl::StrSplit(v.substr(eq + 1), ',')) {
          args.vary_values.push_back(count("--vary " + args.vary_key, std::string(item), 0));
        }
      });
  line.add_value("--dir", "DIR",
                 "the analysis directory (default ./trainscope-stalls/<time>): its runs\n"
                 "go under DIR/runs/, the analysis into DIR/stalls.json",
                 &args.dir);
  line.add_flag("--json", "print the analysis as JSON", &args.json);
  line.add_positionals("RUN_DIR", &args.positionals, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(options)) {
    *exit_code = *done;
    return std::nullopt;
  }
  const auto usage = [&](const std::string& message) {
    *exit_code = line.usage_error(message);
    return std::nullopt;
  };
  if (args.dataset) {
    if (args.command.empty()) return usage("--dataset needs a command after `--`");
    if (!args.positionals.empty()) return usage("give either RUN_DIR or --dataset, not both");
    if (args.iterations < args.warmup) {
      return usage(
          fmt::format("--iterations {} is smaller than --warmup {}: measure at least as "
                      "many iterations as are thrown away",
                      args.iterations, args.warmup));
    }
  } else {
    if (args.positionals.size() != 1) return usage("give one RUN_DIR, or --dataset and a command");
    if (!args.command.empty()) return usage("a command needs --dataset");
  }
  return args;
}

int analyze_one(const Args& args) {
  absl::StatusOr<RunStalls> stalls = analyze_run(args.positionals.front());
  if (!stalls.ok()) {
    std::fprintf(stderr, "trainscope stalls: %s\n", std::string(stalls.status().message()).c_str());
    return kExitFailed;
  }
  for (const std::string& w : stalls->warnings) {
    std::fprintf(stderr, "trainscope stalls: warning: %s\n", w.c_str());
  }
  const std::string out =
      args.json ? run_stalls_json(*stalls, 1) + "\n" : format_run_stalls(*stalls);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int analyze_differential(const Args& args) {
  DifferentialOptions options;
  options.command = args.command;
  options.dataset = *args.dataset;
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.vary_key = args.vary_key;
  options.vary_values = args.vary_values;
  options.dir = args.dir;
  options.progress = [](const std::string& line) {
    std::fprintf(stderr, "trainscope stalls: %s\n", line.c_str());
  };
  absl::StatusOr<DifferentialAnalysis> analysis = run_differential(options);
  if (!analysis.ok()) {
    std::fprintf(stderr, "trainscope stalls: %s\n",
                 std::string(analysis.status().message()).c_str());
    return absl::IsInvalidArgument(analysis.status()) ? kExitUsage : kExitFailed;
  }
  const std::string out = args.json ? differential_json(*analysis) + "\n"
                                    : format_differential(*analysis, args.command);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace stalls_cmd

int stalls_command(const std::vector<std::string>& raw_args) {
  using namespace stalls_cmd;  // NOLINT(build/namespaces): this file's own names
  int exit_code = kExitOk;
  const std::optional<Args> args = parse(raw_args, &exit_code);
  if (!args) return exit_code;
  return args->dataset ? analyze_differential(*args) : analyze_one(*args);
}

}  // namespace trainscope::cli
