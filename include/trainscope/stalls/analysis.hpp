// Data stalls: how long a training loop waits for its data, from a run's
// region rows (the live method), and the arithmetic of DS-Analyzer's
// differential method over its runs (synthetic, cold cache, warm cache), with
// what-ifs on cache size, loader workers and GPU count. The differential
// analysis itself (its runs, its conclusions, stalls.json) is
// trainscope/stalls/differential.hpp. docs/stalls.md describes the method.
#ifndef TRAINSCOPE_STALLS_ANALYSIS_HPP_
#define TRAINSCOPE_STALLS_ANALYSIS_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::stalls {

// The region keys the timed loader records (bindings/python/trainscope/_stalls.py).
inline constexpr char kPassKey[] = "loader_epoch";
inline constexpr char kIterationKey[] = "iteration";
inline constexpr char kWaitKey[] = "IO";

// The params the timed loaders log once per run.
// Tags of a run whose loader was timed (the loader's facts, kept out of the
// user's params, where a sweep's study looks for the params that vary). Runs
// recorded before 0.1.0 had them as params "stalls.batch_size", "stalls.mode":
// readers take either.
inline constexpr char kBatchSizeParam[] = "trainscope.stalls.batch_size";
inline constexpr char kLegacyBatchSizeParam[] = "stalls.batch_size";
inline constexpr char kModeParam[] = "trainscope.stalls.mode";

// TensorFlow's input-pipeline classes of the data-wait share.
std::string input_bound_class(double share);  // "not", "moderately", "highly"
int input_bound_class_index(double share);    // 0 not, 1 moderately, 2 highly

// One pass over the loader (an epoch), or the whole run.
struct PassStalls {
  int index = 0;      // 1-based; 0 for the run
  double wall_s = 0;  // the pass's time (analyze_run: its steps' periods)
  double wait_s = 0;  // time in the loader's __next__ (analyze_run: its steps' data wait)
  double share = 0;   // wait_s / wall_s
  std::size_t batches = 0;
  double wait_p50_s = 0, wait_p95_s = 0, wait_max_s = 0;
  double startup_wait_share = 0;  // of wait_s, in the pass's first batches
  bool bunched = false;           // waits bunched at the start rather than spread out
};

// How many first batches of a pass count as its start: a tenth, at least 2.
std::size_t startup_batches(std::size_t batches);
// A pass's figures from its per-batch waits and its wall time.
PassStalls pass_stalls(const std::vector<double>& waits_s, double wall_s);

// The metrics of a pass the timed loaders (C++ and Python) log into the run,
// step = pass number; and, at the W + N limit, the batches handed out. The
// loader's wait share is its waits (the pass's first included) over the
// pass's own time, measured without steps: another quantity than the
// data-wait share of the steps (docs/steps.md), hence another name.
inline constexpr char kLoaderWaitShareMetric[] = "stalls/loader_wait_share";
inline constexpr char kInputBoundClassMetric[] = "stalls/input_bound_class";
inline constexpr char kWaitP50Metric[] = "stalls/wait_p50_ms";
inline constexpr char kWaitP95Metric[] = "stalls/wait_p95_ms";
inline constexpr char kWaitMaxMetric[] = "stalls/wait_max_ms";
inline constexpr char kStartupWaitShareMetric[] = "stalls/startup_wait_share";
inline constexpr char kBatchesMetric[] = "stalls/batches";
inline constexpr char kHandedOutMetric[] = "stalls/handed_out";
// A pass's metrics, in the order above (the class as its index).
std::vector<std::pair<std::string, double>> pass_metrics(const PassStalls& p);

// One rank's run-wide figures.
struct RankStalls {
  std::uint32_t rank = 0;
  PassStalls total;
};

struct RunStalls {
  std::string run_dir;
  std::string status;      // the run's
  std::uint32_t rank = 0;  // the rank the passes and series are of (the lowest)
  std::vector<PassStalls> passes;
  PassStalls total;
  std::vector<double> iteration_s;  // "iteration" rows, in order (the timed loader's)
  std::vector<std::int64_t> iteration_start_ns;
  std::vector<double> wait_s;  // every wait, in order
  std::vector<std::int64_t> wait_start_ns;
  // The rank's steps (the steps room's: trainscope/steps/steps.hpp): start,
  // period, data wait (the step thread's wait overlapping the period).
  std::vector<std::int64_t> step_start_ns;
  std::vector<double> step_period_s;
  std::vector<double> step_wait_s;
  std::optional<int> batch_size;  // param stalls.batch_size
  std::string pattern;            // "none", "spread" or "bunched at pass starts"
  // Every rank with IO rows, lowest first (the first is `total` again).
  std::vector<RankStalls> ranks;
  // What check_run found wrong that leaves the run readable (a regions file
  // cut short, a damaged summary: trainscope/run/run_check.hpp), naming the file.
  std::vector<std::string> warnings;
};

// The live analysis of a run directory: passes and series of the lowest
// rank, and every rank's run-wide figures (`ranks`). Passes come from the
// timed loader's loader_epoch rows, else EPOCH rows, else the run is one
// pass. A pass's wall time and wait are its steps' periods and data waits
// (the steps that start in it, past the rank's warm-up: steps/warmup.hpp;
// docs/steps.md), so its share is the diagnosis' and compare's; a rank
// without steps: its IO rows over the pass's time. The waits' percentiles
// and start-up share are the IO rows'. NotFound when the run has no IO rows.
absl::StatusOr<RunStalls> analyze_run(const std::string& run_dir);

// The live analysis as a JSON object's text: run_dir, status, passes (pass,
// wall_s, wait_s, data_wait_share, input_bound, batches, wait_p50_s,
// wait_p95_s, wait_max_s, startup_wait_share, bunched), run (the same for the
// whole run), pattern, batch_size when known, rank, and ranks (each rank's
// run-wide figures with its "rank"). `trainscope stalls RUN_DIR
// --json` prints it (indent 1), report pages and stalls.json embed it: one
// field list for all. `indent` < 0: compact.
std::string run_stalls_json(const RunStalls& run, int indent = -1);

// The live analysis as `trainscope stalls RUN_DIR` prints it: a table of the
// passes and the run, the class and pattern, and each rank's share.
std::string format_run_stalls(const RunStalls& run);

// Time of `iterations` iterations after `warmup` from per-iteration times,
// with a 95% confidence interval (normal, from their spread).
struct Timing {
  double total_s = 0;
  double ci_half_s = 0;  // total_s +- this
  std::size_t iterations = 0;
  double mean_s() const { return iterations ? total_s / iterations : 0; }
};
absl::StatusOr<Timing> measured_time(const std::vector<double>& iteration_s, std::size_t warmup,
                                     std::size_t iterations);

// The live data-wait share over the steps measured_time() counts (W to
// W + N): their data wait over their periods. 0 without as many steps.
double measured_wait_share(const RunStalls& run, std::size_t warmup, std::size_t iterations);

// DS-Analyzer's arithmetic on T1 (synthetic), T2 (cold) and T3 (warm).
struct Differential {
  Timing synthetic, cold, warm;
  int batch_size = 0;
  double ingestion_rate = 0;  // samples/s: N B / T1
  double prep_rate = 0;       // N B / T3
  double fetch_rate = 0;      // N B / (T2 - T3); 0 when T2 <= T3 (no fetch stall measurable)
  double prep_stall_s = 0, fetch_stall_s = 0;  // T3 - T1, T2 - T3
  double prep_share = 0, fetch_share = 0;      // of T2
  double prep_share_ci = 0, fetch_share_ci = 0;
  // The live method on the cold run, over the same iterations, against the
  // differential prep + fetch share: they measure one stall two ways.
  double live_wait_share = 0;
  bool agree = true;      // within 5 points
  std::string reconcile;  // which to trust and why, when they do not agree
};
Differential differential(const Timing& synthetic, const Timing& cold, const Timing& warm,
                          int batch_size, double cold_live_wait_share);

// Throughput (samples/s) when `cached` (0..1) of the dataset is in the page
// cache. Per sample, the warm run's time a = T3/(N B) (prep and compute, the
// sample read from memory) and the extra time to read it from disk instead,
// b(c) = (1 - c) S (1/disk - 1/memory), with S the bytes read per sample and
// the measured bandwidths, combine as (a^k + b^k)^(1/k), never faster than
// ingestion. k is how far the loader overlaps reading with the rest: 1 when
// not at all (one worker: read, then prepare), larger as workers overlap
// them (k -> infinity: the slower of the two); it is fitted so the model
// gives the cold run's T2 at its resident share. Without a disk rate the
// extra time is the measured fetch stall, linear in the uncached share.
struct CachePoint {
  double cached = 0;
  double samples_per_s = 0;
};
struct CacheModel {
  double warm_s = 0;  // a, per sample
  double disk_extra_s =
      0;  // b at c = 0, per sample (fitted scale when the bandwidths disagree with T2)
  double ingestion_s = 0;          // per sample
  double overlap_k = 1;            // 1: reading adds to prep; large: overlapped
  std::string basis;               // how disk_extra_s and k were found
  std::vector<CachePoint> points;  // c = 0, 0.1, ..., 1
  double samples_per_s(double cached) const;
};
CacheModel cache_what_if(const Differential& d, double bytes_per_sample, double disk_mb_s,
                         double memory_mb_s, double cold_resident_share = 0);

// Prep rate against loader workers, from warm runs at several worker counts.
struct WorkerRun {
  int workers = 0;
  double samples_per_s = 0;  // N B / T3 of that warm run
  double wait_share = 0;     // its live data-wait share
};
struct WorkerFit {
  double per_worker_rate = 0;  // samples/s each worker adds while prep-bound
  int cores = 0;               // workers beyond this add nothing
  int fitted_runs = 0;         // the prep-bound runs the fit used
  int workers_to_keep_up = 0;  // fewest workers whose prep rate reaches ingestion; 0: none <= cores
  std::vector<std::pair<int, double>> predicted;  // workers -> samples/s, 1..cores
};
// NotFound when no run was prep-bound (nothing to fit).
absl::StatusOr<WorkerFit> worker_what_if(const std::vector<WorkerRun>& runs, double ingestion_rate,
                                         int cores);
// Predicted throughput with `workers` loader workers.
double predict_throughput(const WorkerFit& fit, int workers, double ingestion_rate);

// With k GPUs per node the ingestion rate scales k-fold while the loader (its
// prep and its fetching) is shared: throughput min(k ingestion, loader rate),
// data-bound from k = loader rate / ingestion. The loader's rate is measured
// alone (the `loader` run: batches taken as soon as they are ready, no
// compute), since the warm run's N B / T3 cannot exceed ingestion; with the
// dataset uncached it is slower by the cache model's disk time.
struct GpuWhatIf {
  double loader_rate = 0;                 // samples/s, warm cache
  double loader_rate_cold = 0;            // samples/s, nothing cached
  double gpus_until_data_bound = 0;       // warm cache
  double gpus_until_data_bound_cold = 0;  // nothing cached
  std::string basis;
  std::vector<std::pair<int, double>> predicted;  // k -> samples/s (warm), k = 1..8
};
// `loader_rate` 0 (no loader run): the prep rate instead, a lower bound.
GpuWhatIf gpu_what_if(const Differential& d, double loader_rate, const CacheModel& cache);

}  // namespace trainscope::stalls

#endif  // TRAINSCOPE_STALLS_ANALYSIS_HPP_
