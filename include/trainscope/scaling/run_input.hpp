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
};

// Reads every run directory given (a directory holding runs is searched one
// level down, also for what is left of a run without its run.json). A run
// lacking a parameter or the selected key is an error naming the run and what
// is missing; runs that are still RUNNING, or ended FAILED or KILLED (their
// timings are not a measurement), a run given twice and a damaged run (that
// cannot be opened, that lost its region rows or holds a bad line:
// run_check.hpp) are skipped with a warning appended to `warnings` when it is
// not null, as are check_run's warnings of the runs used (a regions file cut
// short). Points are sorted by coordinate.
absl::StatusOr<MeasurementSet> read_runs(const std::vector<std::string>& paths,
                                         const RunSelection& selection,
                                         std::vector<std::string>* warnings = nullptr);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_RUN_INPUT_HPP_
