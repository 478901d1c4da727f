// `trainscope compare A B`: is B faster than A, by how much, and can CI trust
// the answer. The comparison of runs, above the run store and the diagnosis's
// key map; the statistics themselves are stats/compare.hpp's.
//
//   gather_side     a side from run directories, globs, folders of runs (a sweep),
//                   a filter over a root (search_runs' syntax), or a saved
//                   comparison (its data, as a baseline)
//   compare_sides   per key and device, and per metric: medians, the ratio B/A with
//                   its interval, p-value and verdict; an overall verdict; warnings
//                   (host load, hardware, software, keys on one side only); a sweep
//                   on each side is matched configuration by configuration
//   document        compare_json (one writer) / parse_comparison (one reader)
//   format          the table people read, sorted by effect
//
// docs/compare.md describes the command and docs/compare-statistics.md the method.
#ifndef TRAINSCOPE_COMPARE_COMPARE_HPP_
#define TRAINSCOPE_COMPARE_COMPARE_HPP_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/stats/compare.hpp"

namespace trainscope::compare {

using stats::kNaN;

// The derived metrics every comparison has where the data allows, and the kinds of row.
inline constexpr char kThroughput[] = "throughput";  // steps/s: the inverse of the step time
inline constexpr char kDataWait[] = "data-wait";     // data wait (IO) over the step, per step
// Tokens per second of each step with work (docs/ledger.md: work/tokens over the period).
inline constexpr char kTokensPerSecond[] = "tokens/s";
// The MFU of each step with work (docs/ledger.md: FLOPs per step over the period and
// the device's peak), where the run counted its FLOPs and has a peak.
inline constexpr char kMfu[] = "mfu";
// The steps room's communication and sync phases, seconds per step (docs/steps.md).
inline constexpr char kComm[] = "comm";
inline constexpr char kCommExposed[] = "comm_exposed";
inline constexpr char kSync[] = "sync";
// The GPU busy share of each step (steps::RankSteps::gpu_busy_shares), where GPU-timed.
inline constexpr char kGpuBusy[] = "gpu-busy";
// The step key's time less the step thread's run-queue wait in it (docs/steps.md:
// cpu wait), seconds per step: the step as it would have run with a CPU
// whenever it wanted one. Where the runs recorded the wait (a timer with
// TimerOptions::step_wait attached to the run).
inline constexpr char kStepLessWait[] = "step-less-wait";

// What a series (and its row) measures: a region key's durations, or a metric's
// values (kThroughput, kDataWait, a logged or sampled metric).
enum class SeriesKind : std::uint8_t { kRegion, kMetric };
// "region", "metric" (the documents' names).
std::string_view series_kind_name(SeriesKind kind) noexcept;
// Its inverse; InvalidArgument naming the text.
absl::StatusOr<SeriesKind> parse_series_kind(std::string_view name);

// One run of a side, with what the warnings compare.
struct SideRun {
  std::string dir;
  std::string id;
  std::string name;
  RunStatus status = RunStatus::kRunning;
  std::map<std::string, std::string> params;
  // Other processes' share of the host's CPUs while the run's steps ran (mean
  // over those host samples of the host's busy share minus the job's; all
  // samples when none falls there); NaN without samples.
  double other_cpu_share = kNaN;
  // The contention share of the run's ranks (the one Options::rank picks)
  // while its steps ran (docs/steps.md: the share of the time its threads
  // wanted a CPU that they waited for one); NaN in runs recorded before the
  // run-queue wait was sampled.
  double contention_share = kNaN;
  // Their step threads' step wait share (docs/steps.md: steps::step_wait_share);
  // NaN where not recorded.
  double step_wait_share = kNaN;
  // "cpu_model, N cores, M MB" (+ GPUs where recorded); "" without environment.json.
  std::string hardware;
  // Package pins (pip freeze), "" where not recorded.
  std::vector<std::string> packages;
  // Keys whose rows come from several modules (--auto's tags
  // trainscope.auto.callers.<key>): key -> "Generator, Discriminator".
  std::map<std::string, std::string> key_callers;
  // --auto=layers: the layers' backward keys are timed on one step in this many
  // (the tag steps::kLayerBackwardEveryTag; 1: every step, or no such keys).
  std::uint32_t layer_backward_every = 1;
};

// A measured quantity of a side, one series per run (same order as Side::runs;
// an empty series where a run lacks it). Regions: durations in seconds in the
// order the steps ran (per occurrence the slowest rank's, or one rank's);
// metrics: values in time order.
struct Series {
  std::string name;  // region key, kThroughput/kDataWait, or a metric key
  SeriesKind kind = SeriesKind::kRegion;
  std::string device;  // "CPU" or "GPU" for regions, "" for metrics
  std::vector<std::vector<double>> runs;
};

struct Side {
  std::string label;  // what the user gave ("runs/base", "base.json", "params.workers = 0")
  std::vector<SideRun> runs;
  std::vector<Series> series;
};

struct GatherOptions {
  // The rank whose regions are compared; nullopt: for each occurrence of a key,
  // the slowest rank's (the pace of a synchronous job).
  std::optional<std::uint32_t> rank;
  // Metrics to gather besides the regions: metric keys the runs logged
  // (log_metric) or their hosts sampled (system/...). kThroughput and kDataWait
  // are derived and always present where the data allows.
  std::vector<std::string> metrics;
};

// A side from `specs`, each one of: a run directory; a glob of them ("runs/base-*");
// a folder whose subfolders are runs (repetitions or a sweep); a saved
// comparison (FILE.json: its B side, FILE.json:a its A side) as a baseline.
// Errors (NotFound/InvalidArgument) name the spec and what is wrong: no such
// path, a damaged run, a glob or folder without runs, a saved comparison
// without its data.
absl::StatusOr<Side> gather_side(const std::vector<std::string>& specs,
                                 const GatherOptions& options = {});
// The runs under `root` (root itself or its subfolders, as search_runs) that
// match `filter` (search_runs' syntax: "params.workers = 0 and status = 'FINISHED'").
absl::StatusOr<Side> gather_filtered(const std::string& root, std::string_view filter,
                                     const GatherOptions& options = {});

// How much one job's median step varies from run to run (per run, relative):
// what a single run per side cannot show, so compare_steps' intervals include
// it. Fitted on 60 A/A pairs of a small PyTorch job made at different times on
// a 2-core VM (bench/compare_calibration.py --held-out; 0.5% before, fitted on
// 20 back-to-back pairs, called 12% of new pairs slower or faster) and checked
// on other pairs (docs/compare-statistics.md); a steadier job may give less
// (--run-noise), repetitions measure it.
inline constexpr double kDefaultRunNoise = 0.015;

struct CompareOptions {
  stats::CompareOptions stats = [] {
    stats::CompareOptions o;
    o.run_noise = kDefaultRunNoise;
    return o;
  }();
  // Region keys (and metric names) whose comparison is shown; empty: all found
  // on both sides. Also what --fail-if-slower checks (empty: the overall verdict).
  std::vector<std::string> keys;
  // A warning when the two sides' other-process CPU shares differ by more than this.
  double host_load_difference = 0.10;
};

// One compared quantity.
struct Row {
  std::string name;
  SeriesKind kind = SeriesKind::kRegion;
  std::string device;       // "CPU"/"GPU" or ""
  stats::Comparison stats;  // stats.verdict: the row's verdict (verdict_name says it)
  // Over each side's steps after warm-up (all runs pooled): the tail, where a
  // stall shows when the medians agree.
  double p99_a = kNaN, p99_b = kNaN, max_a = kNaN, max_b = kNaN;
  // A stall or other tail difference, named; "" when the tails agree.
  std::string note;
};

// A and B (or one configuration of two sweeps) compared.
struct Pair {
  std::string config;  // "" or "lr=0.1, workers=2" (the params the configurations share)
  std::vector<std::string> runs_a, runs_b;
  std::vector<Row> rows;  // by effect, largest |log ratio| first; undecidable last
  // On the step time (BATCH, else the timed loader's iteration), else the
  // geometric mean of the CPU region keys' ratios.
  Row overall;
  std::string overall_basis;
  // Each side's contention share (the mean of its runs'); NaN when a run lacks it.
  double contention_a = kNaN, contention_b = kNaN;
  // Each side's step wait share (SideRun::step_wait_share, the mean of its runs');
  // NaN when a run lacks it.
  double step_wait_a = kNaN, step_wait_b = kNaN;
  std::vector<std::string> warnings;
};

struct Comparison {
  std::string label_a, label_b;
  double threshold = 0.02;
  double confidence = 0.95;
  std::vector<Pair> pairs;
  // What concerns the whole comparison: configurations on one side only.
  std::vector<std::string> warnings;
  // The data compared, so that a saved comparison can be a side (a baseline).
  Side a, b;
};

// Compares A with B: one pair, or one per configuration when both sides are
// sweeps (runs that differ in params other than those that tell A from B).
// InvalidArgument for bad options, a side without runs, or sides with no
// quantity in common; a comparison that cannot decide is a verdict
// (inconclusive, with how many more steps or runs), not an error.
absl::StatusOr<Comparison> compare_sides(Side a, Side b, const CompareOptions& options = {});

// A row's verdict as people and the document read it: for times slower,
// faster, same or inconclusive; for metrics higher (kSlower), lower (kFaster),
// same or inconclusive.
std::string_view verdict_name(const Row& row) noexcept;

// What `trainscope compare` and Python's trainscope.compare ask: the sides as
// specs (gather_side), or as filters over a root (gather_filtered; then a and
// b stay empty), and the options.
struct CompareRequest {
  std::vector<std::string> a, b;
  std::string root;
  std::string filter_a, filter_b;
  GatherOptions gather;
  CompareOptions options;
};
// Gathers both sides and compares them: the one call of the command and of
// Python. Errors name the side ("A: runs/x: no such run directory").
absl::StatusOr<Comparison> compare(const CompareRequest& request);

// --fail-if-slower PCT: the rows that fail it (the selected keys', or the
// overall row and the tokens/s row when none is selected): a time's interval's
// lower bound is above 1 + PCT/100; a throughput's (kTokensPerSecond, and
// kThroughput when selected: lower is slower) upper bound is below
// 1 / (1 + PCT/100). Empty: pass.
std::vector<std::string> failing_rows(const Comparison& comparison,
                                      const std::vector<std::string>& keys, double pct);

// The document: {"format": "trainscope.compare", "version": 1, ...}; with_data
// adds each side's series (needed to use the file as a baseline).
std::string compare_json(const Comparison& comparison, int indent = -1, bool with_data = true);
// `source` names the text in errors; errors name the key.
absl::StatusOr<Comparison> parse_comparison(std::string_view text, std::string_view source);
absl::StatusOr<Comparison> read_comparison(const std::string& path);
// Writes the document with its data to `path` (atomically): a baseline.
absl::Status write_comparison(const Comparison& comparison, const std::string& path);
// Whether the comparison of `request` may be saved to `path` (`--save`,
// Python's save=), before anything is compared: InvalidArgument naming it
// when it is a saved comparison read as one of the sides (saving would
// replace the baseline compared against), AlreadyExists when the file exists
// and `overwrite` is false (`--force`, force=True).
absl::Status check_save_path(const CompareRequest& request, const std::string& path,
                             bool overwrite);

// The table people read: per pair its overall verdict, the rows by effect,
// notes and warnings.
std::string format_comparison(const Comparison& comparison);

}  // namespace trainscope::compare

#endif  // TRAINSCOPE_COMPARE_COMPARE_HPP_
