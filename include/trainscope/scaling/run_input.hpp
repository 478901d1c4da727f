// Measurements from the run store: one point per set of run params, runs with
// equal params are repetitions, ranks of one run aggregated (mean over ranks
// as Extra-Deep, or max = the slowest rank, ...).
#ifndef TRAINSCOPE_SCALING_RUN_INPUT_HPP_
#define TRAINSCOPE_SCALING_RUN_INPUT_HPP_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/scaling/measurement_set.hpp"

namespace trainscope::scaling {

enum class RankAggregation { kMean, kMax, kMin, kSum };

// "mean", "max", "min", "sum", any case.
absl::StatusOr<RankAggregation> parse_rank_aggregation(std::string_view name);

// What is measured in each run.
//   "BATCH"            region key; statistic `stat` of its durations (seconds)
//   "metric:loss"      a logged metric; statistic `stat` of its values
// stat: mean (default) | median | min | max | total | count | p95 | p99 |
//       last (metrics) | rate (count / total seconds, e.g. batches per second).
struct RunSelection {
  std::vector<std::string>
      parameters;  // run params used as model parameters, e.g. {"p", "batch_size"}
  std::string what = "BATCH";
  std::string stat = "mean";
  std::string device = "cpu";  // cpu | gpu, for region keys
  RankAggregation ranks = RankAggregation::kMean;
  double scale = 1.0;  // multiply every value (e.g. samples per batch for throughput)
  // One series per value of these run params (any text: "adam", "0.1"), each
  // with its Series::group; `trainscope model --by lr`.
  std::vector<std::string> by;
  // Run params whose values are repetitions (a seed swept on purpose): runs
  // that differ only in them are repetitions of one point. `--repetition`.
  std::vector<std::string> repetitions;
};

// Reads every run of `paths` (find_run_dirs: a run, a directory of runs, a
// sweep directory; also what is left of a run without its run.json). A run
// lacking a parameter, a `by` param or the selected key is an error naming
// the run and what is missing. Runs at one point (equal parameters and `by`
// values) are repetitions only when every other param is equal too, or named
// in `repetitions`: runs at one point that differ in another param (a sweep of
// batch_size and lr, modeled against batch_size alone) are an InvalidArgument
// error naming each such param with its values, two runs that differ, and the
// ways out (by, parameters, repetitions); a param missing from some runs
// differs from a set one. Otherwise: runs that are still RUNNING, or ended FAILED or KILLED (their
// timings are not a measurement), a run given twice and a damaged run (that
// cannot be opened, that lost its region rows or holds a bad line:
// run_check.hpp) are skipped with a warning appended to `warnings` when it is
// not null, as are check_run's warnings of the runs used (a regions file cut
// short). Points are sorted by coordinate; with `by`, one series per value
// (sorted: as numbers when both are, else as text).
absl::StatusOr<MeasurementSet> read_runs(const std::vector<std::string>& paths,
                                         const RunSelection& selection,
                                         std::vector<std::string>* warnings = nullptr);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_RUN_INPUT_HPP_
