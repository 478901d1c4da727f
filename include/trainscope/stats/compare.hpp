// The statistics of `trainscope compare`: is B faster than A, by how much, and
// is the answer trustworthy. Pure functions on step times in seconds (any
// positive unit works: only ratios come out). docs/compare-statistics.md argues
// every rule here and gives the figures the tests measure.
//
//   warm-up        mser5_warmup: MSER-5 truncation point (White 1997), at most half
//   one run/side   compare_steps: ratio of medians B/A, moving-block bootstrap of
//                  each side (Kuensch 1989), block length by Politis-White 2004
//                  with the Patton-Politis-White 2009 correction
//   runs/side      compare_runs: the run is the unit; ratio of the geometric means of
//                  the runs' medians, Welch t interval on their logs
//   verdict        decide: same / slower / faster / inconclusive against +-threshold
//   CI gate        fails_if_slower: the interval's lower bound above 1 + PCT/100
#ifndef TRAINSCOPE_STATS_COMPARE_HPP_
#define TRAINSCOPE_STATS_COMPARE_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::stats {

// kInconclusiveContention: the sides' CPU contention (the share of the time
// their threads waited for a CPU) differs by more than the interval allows and
// removing the waiting time changes the verdict (compare::compare_sides sets it).
enum class Verdict { kSame, kFaster, kSlower, kInconclusive, kInconclusiveContention };
// "same", "faster", "slower", "inconclusive", "inconclusive (contention)".
const char* verdict_name(Verdict verdict);

// What one observation of the comparison is: a step of a run (compare_steps) or
// a whole run (compare_runs).
enum class CompareUnit { kSteps, kRuns };
// "steps", "runs".
const char* unit_name(CompareUnit unit);

struct CompareOptions {
  // The equivalence margin t: `same` when the whole interval lies in [1/(1+t), 1+t].
  double threshold = 0.02;
  // Two-sided confidence level of the interval.
  double confidence = 0.95;
  // Bootstrap resamples per comparison (compare_steps; cost linear in it and in n).
  std::size_t resamples = 2000;
  // The bootstrap's seed: equal inputs and options give equal results, everywhere.
  std::uint64_t seed = 0x7472616e73636f70;  // "transcop"
  // Drop each series' (each run's) warm-up by MSER-5 before comparing.
  bool detect_warmup = true;
  // Fewest steps a side (compare_steps) or a run (compare_runs) must keep after
  // its warm-up; fewer make the comparison inconclusive.
  std::size_t min_steps = 50;
  // Fewest runs per side for compare_runs (the Welch interval needs a spread).
  std::size_t min_runs = 2;
  // Block length of the bootstrap; 0 chooses it per side (optimal_block_length).
  std::size_t block_length = 0;
  // compare_steps only: how much one job's median step time varies from run to
  // run (relative standard deviation per run: process placement, clocks,
  // caches, other tenants), which the steps of one run cannot show. Added to
  // the bootstrap interval (in logs, in quadrature: z * run_noise * sqrt(2));
  // 0 adds nothing. compare_runs measures it instead.
  double run_noise = 0.0;
};

struct Comparison {
  CompareUnit unit = CompareUnit::kSteps;
  // Median step time of each side after its warm-up; for the run unit the
  // geometric mean of the runs' medians. NaN when a side has no data.
  double median_a = kNaN;
  double median_b = kNaN;
  // median_b / median_a with its interval (at `confidence`) and the two-sided
  // p-value of ratio = 1. NaN where the data cannot give them.
  double ratio = kNaN;
  double low = kNaN;
  double high = kNaN;
  double p_value = kNaN;
  // Observations per side after warm-up: steps (kSteps) or runs (kRuns).
  std::size_t n_a = 0;
  std::size_t n_b = 0;
  // Steps dropped as warm-up per side (summed over the runs for kRuns).
  std::size_t warmup_a = 0;
  std::size_t warmup_b = 0;
  // Bootstrap block length per side (kSteps; 0 for kRuns).
  std::size_t block_a = 0;
  std::size_t block_b = 0;
  // Welch-Satterthwaite degrees of freedom (kRuns; NaN for kSteps).
  double df = kNaN;
  Verdict verdict = Verdict::kInconclusive;
  // For kInconclusive: about how many more steps (kSteps) or runs (kRuns) each
  // side needs to decide, from the interval's half-width shrinking as 1/sqrt(n)
  // at the present ratio; 0 otherwise.
  std::size_t more_a = 0;
  std::size_t more_b = 0;
  // One sentence: the verdict's grounds, or what was missing.
  std::string reason;
};

// MSER-5: the number of leading steps to drop as warm-up. The series is cut
// into batch means of 5 (a partial last batch is left out); the truncation d
// (in batches, at most half of them) minimises the marginal standard error
// sum_{j>d} (Z_j - mean_d)^2 / (k - d)^2. Before batching, values are clipped
// to the series' 1st and 99th percentiles so that a lone stall (a checkpoint)
// cannot pull the truncation up to it. Returns a multiple of 5, at most n / 2;
// 0 for fewer than 4 batches.
std::size_t mser5_warmup(const std::vector<double>& series);

// Block length for a moving-block bootstrap of `series` (Politis & White 2004,
// corrected by Patton, Politis & White 2009; flat-top lag window), computed on
// the series' ranks so that spikes do not dominate the autocovariances. At
// least 1, at most min(3 sqrt(n), n / 3); 1 for a series without spread.
std::size_t optimal_block_length(const std::vector<double>& series);

// One run per side: the ratio of the medians of b and a after their warm-up,
// with a moving-block bootstrap percentile interval on the log ratio (each
// side's spread corrected for the bootstrap's first-order variance shortfall
// when the block length is automatic) and the bootstrap p-value. Errors
// (InvalidArgument) for bad options or a negative or non-finite step time;
// degenerate data (empty, too short, constant) is an inconclusive result.
absl::StatusOr<Comparison> compare_steps(const std::vector<double>& a, const std::vector<double>& b,
                                         const CompareOptions& options = {});

// Several runs per side (each a series of step times): each run's median after
// its warm-up, the ratio of the geometric means of those medians, a Welch t
// interval on their logs. Errors and degenerate data as compare_steps.
absl::StatusOr<Comparison> compare_runs(const std::vector<std::vector<double>>& a,
                                        const std::vector<std::vector<double>>& b,
                                        const CompareOptions& options = {});

// The verdict of an interval [low, high] of the ratio B/A with margin threshold:
// kSame when it lies inside [1/(1+threshold), 1+threshold], else kSlower when
// low > 1, kFaster when high < 1, else kInconclusive (also for NaN bounds).
Verdict decide(double low, double high, double threshold);

// `--fail-if-slower PCT`: true only when the interval's lower bound exceeds
// 1 + pct/100 (so noise never fails a build); false without an interval.
bool fails_if_slower(const Comparison& comparison, double pct);
// The same gate for a throughput (tokens/s, steps/s: lower is slower): true
// only when the interval's upper bound is below 1 / (1 + pct/100), the
// inverse of fails_if_slower's bound; false without an interval.
bool fails_if_lower(const Comparison& comparison, double pct);

}  // namespace trainscope::stats

#endif  // TRAINSCOPE_STATS_COMPARE_HPP_
