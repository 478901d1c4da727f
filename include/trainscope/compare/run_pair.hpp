// `trainscope compare --run 'CMD_A' --run 'CMD_B'`: runs A and B itself,
// alternately (A B B A A B B A ..., so a drift of the machine cancels), each
// under `trainscope run` (launch()) into one directory, and compares them with
// the run as the unit, stopping as soon as the verdict is decided
// (docs/compare-statistics.md: a sequential test whose false-verdict rate is
// held by strict interim looks and a last look near the test's level).
#ifndef TRAINSCOPE_COMPARE_RUN_PAIR_HPP_
#define TRAINSCOPE_COMPARE_RUN_PAIR_HPP_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/compare/compare.hpp"

namespace trainscope::compare {

struct RunPairRequest {
  // Each command as a shell line, run by /bin/sh -c.
  std::string command_a, command_b;
  // The runs land in <dir>/a-<i>, <dir>/b-<i> (warm-up runs: warmup-a-<i>, ...).
  std::string dir;
  std::size_t repeat = 5;       // runs per side at most, at least 2
  std::size_t warmup_runs = 0;  // per side, run first (alternating) and not compared
  double max_time_s = 0;        // no run starts past this many seconds; 0: no limit
  CompareOptions options;       // options.stats.confidence: the whole test's
  bool tee = false;             // the commands' output to this terminal
  // Told before each run: "A", "B", "warm-up A", ... and its directory.
  std::function<void(const std::string& what, const std::string& dir)> progress;
};

struct RunPairResult {
  Comparison comparison;           // of the compared runs, at the look that stopped
  std::vector<std::string> order;  // "A"/"B" in the order they ran (warm-up left out)
  std::size_t looks = 0;           // comparisons made
  double look_confidence = 0;      // each look's confidence but the last's (look_levels)
  double final_confidence = 0;     // the confidence of the look after all runs
  std::string stop;                // why it stopped: decided, all runs, time
};

// The levels of a sequential test of `looks` looks whose chance of any false
// verdict stays within alpha = 1 - confidence (Haybittle-Peto): every look but
// the last at alpha_i = min(0.001, alpha / (2 (looks - 1))), so that only a
// clear difference stops early, and the last at alpha - (looks - 1) alpha_i,
// close to alpha itself (0.05, 7 looks: 0.001 and 0.044), by the union bound.
struct LookLevels {
  double interim_confidence = 0;
  double final_confidence = 0;
};
LookLevels look_levels(double confidence, std::size_t looks);

// The order of the i-th compared run (from 0): A B B A A B B A ...
char run_pair_side(std::size_t i);

// InvalidArgument for empty commands or repeat < 2; a command that exits
// non-zero is an error naming it and its run directory; what ran stays.
absl::StatusOr<RunPairResult> run_and_compare(const RunPairRequest& request);

}  // namespace trainscope::compare

#endif  // TRAINSCOPE_COMPARE_RUN_PAIR_HPP_
