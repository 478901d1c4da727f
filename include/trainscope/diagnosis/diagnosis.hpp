// A diagnosis of a run, live or finished: what its steps are made of (data
// wait, host-to-device, forward, backward, optimizer, communication, the rest)
// on every rank, and labels with their statistical evidence and a next step
// (INPUT-BOUND, COMPUTE-BOUND, WAIT-HEAVY, BALANCED, STRAGGLER, MEMORY-CREEP,
// THROUGHPUT-DRIFT, GPU-IDLE, HOST-PRESSURE, HANG, NO-DATA), over the last K steps
// and over the whole run. docs/diagnosis.md describes the method.
//
// The pieces, as every analysis (docs/architecture.md):
//   Follower          reads a run directory incrementally (each rank's regions
//                     and each host's readings from where it stopped), so a
//                     live run costs what it appends; builds the Inputs
//   conclude()        the pure step: Inputs -> Scope (phases, labels)
//   diagnose_run()    Follower::Open + poll + diagnose, once
//   diagnosis_json() / parse_diagnosis()   the one writer and reader of the
//                     document (`trainscope diagnose --json`, the report,
//                     Python's trainscope.diagnose)
#ifndef TRAINSCOPE_DIAGNOSIS_DIAGNOSIS_HPP_
#define TRAINSCOPE_DIAGNOSIS_DIAGNOSIS_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_status.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/stats/summary.hpp"
#include "trainscope/steps/ledger.hpp"
#include "trainscope/steps/steps.hpp"
#include "trainscope/steps/warmup.hpp"

namespace trainscope::diagnosis {

// ---------------------------------------------------------------------------
// Keys by meaning, steps and host readings: the steps room's (one definition
// for every analysis: trainscope/steps/steps.hpp, docs/steps.md).

using steps::default_key_map;
using steps::is_compute;
using steps::KeyMap;
using steps::kHostToDeviceKey;
using steps::kLossKey;
using steps::kOptimizerKey;
using steps::kPhaseCount;
using steps::parse_phase;
using steps::Phase;
using steps::phase_name;

// ---------------------------------------------------------------------------
// Thresholds: named after what they mean, overridable by name
// (`--threshold input_bound_share=0.3`, Python's thresholds={...}).

struct Thresholds {
  // INPUT-BOUND: the data-wait share of the step, its interval wholly above.
  double input_bound_share = 0.20;
  // COMPUTE-BOUND: the compute share (h2d, forward, backward, optimizer, or the
  // unattributed rest when none of them is timed), its interval wholly above.
  double compute_bound_share = 0.50;
  // WAIT-HEAVY: the communication the step waits for (comm_exposed), host
  // syncs and the unattributed rest of a step whose compute phases are timed,
  // its interval wholly above.
  double wait_heavy_share = 0.40;
  // COMM-BOUND: the communication the step waits for (comm_exposed) over the
  // step, its interval wholly above.
  double comm_bound_share = 0.20;
  // COMPUTE-BOUND's note (diagnose_run, from the ledger): the run's MFU below
  // this share of the device's peak (docs/ledger.md).
  double mfu_low = 0.30;
  // STRAGGLER: a rank's lag behind the median of the other ranks in one phase
  // group (input or compute), its interval wholly above this share of the step
  // and above straggler_min_lag_s.
  double straggler_lag_share = 0.05;
  double straggler_min_lag_s = 0.0005;
  // MEMORY-CREEP: growth per 1,000 steps (slope, interval wholly above) of
  // process RSS or device memory, and at least this share of the level.
  double memory_creep_mb_per_1k_steps = 1.0;
  double memory_creep_min_share_per_1k_steps = 0.005;
  // ... and grown by at least this much over the readings (the interval's low
  // slope times their span of steps): a few MB of warm-up growth is no creep.
  double memory_creep_min_growth_mb = 32.0;
  // THROUGHPUT-DRIFT: step time growing over the run by at least this share
  // (Sen's slope over block medians; Mann-Kendall trend test at drift_p_value).
  double throughput_drift_share = 0.10;
  double drift_p_value = 0.01;
  // GPU-IDLE: GPU-timed work over the step, its interval wholly below, while
  // the job is not input-bound.
  double gpu_idle_busy_share = 0.50;
  // LAUNCH-BOUND: a step compute-bound on the device whose GPU-timed phases'
  // CPU time (the host launching) is at least this share of their GPU time
  // (the device never ran ahead of the host), its interval wholly above, and,
  // where NVML readings measure it, the GPU busy share wholly below
  // launch_bound_busy_share.
  double launch_bound_cpu_gpu_ratio = 0.80;
  double launch_bound_busy_share = 0.50;
  // HOST-PRESSURE: the host's CPU busy at least this much (% of all cores)
  // with other processes taking at least other_cpu_share of all cores, or swap
  // in use growing by swap_growth_mb.
  double host_pressure_cpu_util_pct = 90.0;
  double host_pressure_other_cpu_share = 0.25;
  double host_pressure_swap_growth_mb = 64.0;
  // HOST-PRESSURE when the job's threads waited for a CPU more than this share
  // of the time (the contention share's interval above it).
  double host_pressure_contention_share = 0.10;
  // Fewer steps than this (per rank, after warm-up) is NO-DATA.
  double min_steps = 8;
  // Steps dropped at the start of the run before any statistic (warm-up:
  // steps::kWarmupSteps, the rule of every view, docs/steps.md).
  double warmup_steps = steps::kWarmupSteps;
  // HANG: a running rank whose step has not ended for longer than
  // max(hang_factor x its p99 step, hang_min_s) (trainscope/diagnosis/hang.hpp).
  double hang_factor = 10;
  double hang_min_s = 60;

  // Sets a threshold by name; InvalidArgument naming an unknown name or a
  // value that is negative or not finite.
  absl::Status set(std::string_view name, double value);
  // "NAME=VALUE".
  absl::Status set(std::string_view spec);
};
struct ThresholdInfo {
  std::string_view name;
  double Thresholds::*field;
  std::string_view meaning;
};
// Every threshold, in the order above (docs, `--help`, Python).
const std::vector<ThresholdInfo>& threshold_table();

// ---------------------------------------------------------------------------
// Measured inputs of the pure step

// One step of one rank (steps::Step: its period, phases and data wait).
using StepSample = steps::Step;

// A reading against the rank's step (fractional: between two steps).
struct Reading {
  double step = 0;
  double value = 0;
  std::int64_t time_ms = 0;
};

// One collective key's rows of a rank (steps::CollectiveRows, with its name).
struct CollectiveInput {
  std::string key;  // COMM/<op>/<group>
  std::uint64_t count = 0;
  double seconds = 0;
  std::deque<std::pair<std::int64_t, std::int64_t>> rows;  // (start Unix ns, duration ns)
};

struct RankInput {
  std::uint32_t rank = 0;
  std::string host;
  std::string step_key;  // empty: the rank recorded no step key
  std::array<bool, kPhaseCount> cpu_measured{};
  std::array<bool, kPhaseCount> gpu_measured{};
  std::vector<StepSample> steps;    // in step order
  std::vector<Reading> rss_mb;      // system/proc.rss_mb of the rank's process tree
  std::vector<Reading> gpu_mem_mb;  // system/gpu.<i>.proc.mem_used_mb, summed over devices
  // NVML's utilization of the rank's devices (% of the time a kernel ran),
  // averaged over them: the GPU busy share's measure where present.
  std::vector<Reading> gpu_util_pct;
  std::vector<CollectiveInput> collectives;  // the rank's last rows of each collective key
};

// A host's CPU busy, the job's CPU, swap at one time (steps::HostSample).
using HostReading = steps::HostSample;

struct HostInput {
  std::string host;
  std::vector<HostReading> readings;  // in time order
  // The contention share of the host's ranks over the scope (docs/steps.md);
  // unknown in runs recorded before the run-queue wait was sampled.
  steps::ContentionShare contention;
  // Their step threads' step wait share over the scope's steps (docs/steps.md);
  // unknown where the step rows carry no wait.
  steps::ContentionShare step_wait;
};

// What the run is, for advice that fits it.
struct RunFacts {
  bool auto_instrumented = false;  // `trainscope run --auto`: never advise it
  // A GPU was seen: GPU-timed regions or GPU readings. False: a CPU-only run
  // (no --nsys, no mixed precision in the advice).
  bool gpu_seen = true;
};

struct Inputs {
  std::vector<RankInput> ranks;
  std::vector<HostInput> hosts;
  RunFacts facts;
};

// ---------------------------------------------------------------------------
// The result

struct Interval {
  double value = std::numeric_limits<double>::quiet_NaN();
  double low = std::numeric_limits<double>::quiet_NaN();  // 95%
  double high = std::numeric_limits<double>::quiet_NaN();
};

// One phase on one device over a scope's steps.
struct PhaseRow {
  Phase phase = Phase::kRest;
  Device device = Device::kCPU;
  double median_s = 0;  // of every rank's steps
  double p95_s = 0;
  double share = 0;          // of the step time (sums over all ranks' steps)
  double median_rank_s = 0;  // the median over ranks of each rank's median
  double worst_rank_s = 0;   // the largest rank median
  std::uint32_t worst_rank = 0;
  double skew = 0;  // worst_rank_s / median_rank_s - 1 (0 with one rank)
};

// What a label says; its name (label_name) only in documents and text.
enum class LabelName : std::uint8_t {
  kBalanced,
  kInputBound,
  kComputeBound,
  kWaitHeavy,
  kStraggler,
  kMemoryCreep,
  kThroughputDrift,
  kGpuIdle,
  kHostPressure,
  kHang,
  kNoData,
  kCommBound,
  kLaunchBound,
};
// "BALANCED", "INPUT-BOUND", "COMPUTE-BOUND", "WAIT-HEAVY", "STRAGGLER",
// "MEMORY-CREEP", "THROUGHPUT-DRIFT", "GPU-IDLE", "HOST-PRESSURE", "HANG",
// "NO-DATA", "COMM-BOUND", "LAUNCH-BOUND".
std::string_view label_name(LabelName name) noexcept;
// Its inverse; InvalidArgument naming the text.
absl::StatusOr<LabelName> parse_label_name(std::string_view name);

// Which one of a label's name it is: COMPUTE-BOUND the largest compute phase
// (kHostToDevice ... kOptimizer, kRest when none is timed); STRAGGLER kInput
// or kCompute; MEMORY-CREEP kHost or kDevice; HOST-PRESSURE kCpu or kSwap;
// else kNone.
enum class LabelKind : std::uint8_t {
  kNone,
  kInput,
  kCompute,
  kHost,
  kDevice,
  kCpu,
  kSwap,
  kHostToDevice,
  kForward,
  kBackward,
  kOptimizer,
  kRest,
};
// "", "input", "compute", "host", "device", "cpu", "swap", and the phases'
// names ("h2d", "forward", "backward", "optimizer", "rest").
std::string_view label_kind_name(LabelKind kind) noexcept;
// Its inverse; InvalidArgument naming the text.
absl::StatusOr<LabelKind> parse_label_kind(std::string_view name);
// The kind that names a phase (kNone for data_wait and comm, no label's kind).
LabelKind label_kind_of(Phase phase) noexcept;

struct Label {
  LabelName name = LabelName::kNoData;
  LabelKind kind = LabelKind::kNone;
  std::optional<std::uint32_t> rank;  // STRAGGLER, MEMORY-CREEP, HANG
  std::optional<std::string> host;    // HOST-PRESSURE
  // COMPUTE-BOUND: kGPU when its phase was judged on the device's time
  // ("COMPUTE-BOUND(gpu: backward)"); else none.
  std::optional<Device> device;
  std::string quantity;  // what `value` is ("data-wait share", "lag_s", ...)
  Interval value;        // the estimate and its 95% interval
  // What the interval was held against, in the unit of `value` (STRAGGLER:
  // seconds, from the share of the step or the minimum lag), and the name in
  // Thresholds it comes from.
  double threshold = 0;
  std::string threshold_name;
  std::string evidence;   // one line: the numbers and the test
  std::string next_step;  // one line: what to try
};

// One collective (op and group) over the ranks' kept rows (the last
// steps::CollectiveRows::kKeptRows of each rank: both scopes show the same).
struct CollectiveRow {
  std::string key;  // COMM/<op>/<group>
  std::string op;
  std::string group;
  double seconds = 0;       // summed over ranks, over the run
  std::uint64_t count = 0;  // the most rows a rank recorded
  double median_s = 0;      // of every kept row
  // Arrival: of the collectives every rank recorded (the n-th row of each
  // rank), how many; the rank that entered last most often (none with one
  // rank), the share of them it entered last, and the median, over those, of
  // its start minus the median of the other ranks' starts.
  std::uint64_t matched = 0;
  std::optional<std::uint32_t> last_rank;
  double last_share = 0;
  double lag_s = 0;
};

struct Scope {
  std::string name;        // "window" or "run"
  std::size_t steps = 0;   // steps per rank used (the most any rank has)
  std::size_t warmup = 0;  // steps dropped at the run's start
  double steps_per_s = 0;  // the median rank's
  Interval step_s;         // mean step time (median rank), 95% interval
  std::vector<PhaseRow> phases;
  std::vector<Label> labels;               // the primary label first
  std::vector<CollectiveRow> collectives;  // by summed time, largest first
  // What could not be judged and why ("MEMORY-CREEP: no RSS readings: run
  // under `trainscope run`").
  std::vector<std::string> notes;

  const Label* find(LabelName name) const;
};

// One region key over the window (and its count over the run).
struct KeyRow {
  std::string key;
  Device device = Device::kCPU;
  std::uint64_t count = 0;         // over the run (the rows read: Diagnosis::read_share)
  std::uint64_t window_count = 0;  // in the window
  double rate_per_s = 0;           // in the window
  double p50_s = 0, p95_s = 0;     // in the window
  double share = 0;                // summed time over the window's wall time, per rank
  // Over the run: the median with its 95% interval (order statistics), p95.
  double run_median_s = 0, run_median_low_s = 0, run_median_high_s = 0, run_p95_s = 0;
  // The module classes the key's rows come from when they are more than one
  // (the run's tag trainscope.auto.callers.<key>: "Generator, Discriminator");
  // empty otherwise. Its statistics then mix both callers' calls.
  std::string callers;
  // Timed on one step in this many (a layer's backward under --auto=layers:
  // steps::sampled_every): count, rate and share are those steps' only.
  std::uint32_t sampled_every = 1;
};

// What `trainscope run --auto` found (the run's tags trainscope.auto,
// trainscope.auto.steps, trainscope.auto.found); mode empty: no --auto run.
struct AutoFound {
  std::string mode;   // "on", "layers", "layers=N"
  std::string steps;  // what ends a step: loader, optimizer, backward, hf, lightning; empty: none
  std::string found;  // the same in words, with what was not found
};
// "--auto: steps from backward (no training DataLoader, ...)", or "--auto found
// no step: ..." ; empty when the run is no --auto run.
std::string auto_found_text(const AutoFound& found);

// A host's latest hardware readings.
using GpuNow = steps::GpuNow;
using HostNow = steps::HostNow;

struct RankNow {
  std::uint32_t rank = 0;
  std::string host;
  ProcessStatus status;  // RUNNING, FINISHED, FAILED, KILLED, CRASHED
  std::uint64_t steps = 0;
  // The rank's own window (its last K steps after warm-up; NaN without one):
  // the step period's median and p95, steps per second (1 / the mean period)
  // and each phase's share of the summed periods (CPU time; kRest the rest;
  // NaN for a phase the rank never timed).
  // The Prometheus endpoint's per-rank figures (docs/prometheus.md).
  double step_p50_s = stats::kNaN;
  double step_p95_s = stats::kNaN;
  double steps_per_s = stats::kNaN;
  std::array<double, kPhaseCount> phase_share = [] {
    std::array<double, kPhaseCount> none;
    none.fill(stats::kNaN);  // every phase, comm_exposed and sync too (issue 39)
    return none;
  }();
  // The rank's process tree, its latest readings (NaN: none): CPU in % of one
  // core, resident MB, GPU memory MB summed over devices.
  double cpu_pct = stats::kNaN;
  double rss_mb = stats::kNaN;
  double gpu_mem_mb = stats::kNaN;
};

// A torch.profiler capture of the steps after one slower than anomaly_factor
// x the rolling p99 (bindings/python/trainscope/_anomaly.py), as the run holds it:
// captures/capture-r<rank>-s<step>.json (a Chrome trace).
struct Capture {
  std::uint32_t rank = 0;
  std::int64_t step = 0;  // the slow step, from 0; the capture holds the steps after it
  std::string path;       // relative to the run directory
  // The label whose appearance asked for it (capture-r<rank>-s<step>-<label>.json:
  // trainscope/diagnosis/capture_request.hpp; <step> the step it began after);
  // none: a slow step.
  std::optional<LabelName> label;
};

struct Diagnosis {
  std::string run_dir;
  // What is wrong with the data but leaves the run readable, naming the file
  // (not in the JSON document): CPU rows longer than their whole step, left
  // out of its phases (Follower::diagnose), and, from diagnose_run, what
  // check_run found (a regions file cut short, a damaged summary:
  // trainscope/run/run_check.hpp).
  std::vector<std::string> warnings;
  std::string run_id;
  std::string run_name;
  RunStatus status = RunStatus::kRunning;  // the run's (RunReader::info())
  std::int64_t start_time_ms = 0;
  std::int64_t elapsed_ms = 0;  // to the end, or to the last poll while running
  std::uint32_t world_size = 0;
  std::vector<RankNow> ranks;
  std::vector<std::string> hosts;
  std::size_t window_steps = 0;  // K
  Scope window;
  Scope run;
  // The share of the region rows appended that were read: 1 unless the run
  // appended faster than FollowOptions::read_budget_bytes_per_s (the run
  // scope and KeyRow::count then rest on a sample; the window is exact).
  double read_share = 1;
  std::vector<KeyRow> keys;  // by summed window time, largest first
  std::vector<HostNow> host_now;
  AutoFound auto_found;
  std::vector<Capture> captures;  // by rank, then step
  // The run's efficiency ledger (docs/ledger.md; a live Follower's concluded
  // again with the run scope, over the steps read), absent when it recorded
  // no work; in the JSON document as "ledger" (absent there too), in the text
  // as steps::format_ledger_line.
  std::optional<steps::Ledger> ledger;

  // The labels of the run scope (the window's while running) in one line:
  // "INPUT-BOUND, STRAGGLER(compute, rank 1)".
  std::string headline() const;
};

// ---------------------------------------------------------------------------
// The pure step

// Concludes a scope from its steps (already trimmed to the scope; warm-up
// already dropped) and readings.
Scope conclude(const Inputs& inputs, const Thresholds& thresholds, std::string_view name);

// The ledger's word on a scope's labels (Follower::diagnose, on the run scope): a
// COMPUTE-BOUND job whose MFU is below thresholds.mfu_low gets it said in its
// evidence and next step (the compute itself is far from the device's peak).
// Nothing without COMPUTE-BOUND or without an MFU.
void note_ledger(Scope& scope, const steps::Ledger& ledger, const Thresholds& thresholds);

// ---------------------------------------------------------------------------
// Measuring: following a run directory

// Following live (`trainscope top`, the launcher's hang watch): a run that
// appends more than this many bytes of region rows a second (about 70,000
// rows/s) is sampled (FollowOptions::read_budget_bytes_per_s), so that a live
// reader stays near 2% of one core however fast the run writes.
inline constexpr double kLiveReadBudget = 4.0 * 1024 * 1024;

struct FollowOptions {
  std::size_t window_steps = 100;  // K
  KeyMap keys = default_key_map();
  Thresholds thresholds;
  // Past this many steps a rank's history merges neighbouring steps in pairs
  // (memory stays flat; the window is always exact).
  std::size_t max_history_steps = std::size_t{1} << 18;
  // While the run goes on, the run scope and the keys' run statistics are
  // concluded again only once they grew by 5% and at least this many seconds
  // after the last time (the window is always fresh): `trainscope top` uses
  // 10, so following a long run costs what it appends.
  double run_refresh_s = 0;
  // A run that appends more than this (bytes of region rows per second of
  // polling, all ranks together; 0: no limit) is sampled rather than read
  // whole, so that following it costs a bounded share of a core: at each
  // poll, when the rows not read yet exceed the poll's budget, each rank's
  // newest rows are read (its share of the budget after what the others have
  // unread: a rank with less reads all of it; and at least what holds the
  // window's steps, counted in its rows) and the rows before them skipped. A
  // run whose unread rows fit the budget, and an ended run, are read whole.
  // The window stays exact; the run scope and the keys' run statistics then
  // rest on the rows read (Diagnosis::read_share), and a rank's step numbers
  // after a skip on its BATCH rows' own numbers (else on the bytes skipped).
  // `trainscope top` and the launcher's hang watch use kLiveReadBudget;
  // `trainscope diagnose` and the end of `trainscope run` read everything.
  double read_budget_bytes_per_s = 0;
  // Each key's run statistics (KeyRow::run_median_s ... run_p95_s; NaN when
  // false): `trainscope top` shows the window's and goes without them.
  bool key_run_stats = true;
  // diagnose_run's ledger line (trainscope/steps/ledger.hpp): the peak FLOP/s
  // of one device (`--peak-flops`), the prices and CO2 per kWh.
  steps::LedgerOptions ledger;
};

// The options of a live reader (`trainscope top`, the Prometheus endpoint): the
// run scope concluded again at most every 10 s (run_refresh_s), the window fresh
// at every refresh, kLiveReadBudget, a rank's history merged in pairs past
// kLiveHistorySteps (the run scope then costs what 2,048 steps a rank cost), and
// no key run statistics (a live view shows the window's).
inline constexpr std::size_t kLiveHistorySteps = 2048;
FollowOptions live_options();

class Follower {
 public:
  // NotFound / InvalidArgument naming the directory when it is no run.
  static absl::StatusOr<Follower> Open(std::string run_dir, FollowOptions options = {});
  Follower(Follower&&) noexcept;
  Follower& operator=(Follower&&) noexcept;
  ~Follower();

  // Reads what the run appended since the last poll (a cut last line is left
  // for the next). An error names the file; what was read before is kept.
  // Another run in the directory (another id or start: the directory was
  // deleted and created again) is followed from its start; an ended run is
  // read whole (what a sampled poll skipped is read again once it ends).
  absl::Status poll();
  // check_run (trainscope/run/run_check.hpp) on the run as of now, with the
  // rows this follower counted of the ranks it read whole: a rank that ended
  // with regions in its summary and none on disk is an error, a file cut
  // short or a damaged summary a warning. For every follower of a run alike
  // (diagnose_run, `trainscope top`).
  absl::StatusOr<std::vector<RunProblem>> check() const;
  Diagnosis diagnose() const;

  const std::string& run_dir() const noexcept;
  bool in_progress() const noexcept;             // as of the last poll
  std::uint64_t bytes_read() const noexcept;     // over all polls
  std::uint64_t bytes_skipped() const noexcept;  // region rows not read (read_budget_bytes_per_s)
  std::uint64_t rows_read() const noexcept;

 private:
  struct State;
  explicit Follower(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Open + poll + diagnose.
absl::StatusOr<Diagnosis> diagnose_run(const std::string& run_dir,
                                       const FollowOptions& options = {});

// ---------------------------------------------------------------------------
// The document: one writer, one reader

// {"format": "trainscope.diagnosis", "version": 1, ...}; indent < 0: compact.
std::string diagnosis_json(const Diagnosis& diagnosis, int indent = -1);
// `source` names the text in errors (a file name); errors name the key.
absl::StatusOr<Diagnosis> parse_diagnosis(std::string_view text, std::string_view source);
absl::StatusOr<Diagnosis> read_diagnosis(const std::string& path);

// `trainscope diagnose RUN` as text: the run line, the labels with evidence
// and next steps, the phase table of the window and the run.
std::string format_diagnosis(const Diagnosis& diagnosis);
// The run's tags for MLflow and W&B (`trainscope run` sets them before the
// run ends): trainscope.diagnosis (the headline), trainscope.diagnosis.labels
// ("INPUT-BOUND,STRAGGLER") and per label name trainscope.diagnosis.<name>
// (input_bound, straggler, ...: "compute, rank 1: lag_s 0.0123 [0.0101,
// 0.0145]", or the evidence line without an interval; labels of one name
// joined by "; "), of the scope headline() names.
std::map<std::string, std::string> diagnosis_tags(const Diagnosis& diagnosis);
// The compact end-of-run summary `trainscope run` prints on stderr: status,
// duration, steps, per-key medians with their intervals, data-wait share, the
// labels, where the run is.
std::string format_run_summary(const Diagnosis& diagnosis);

}  // namespace trainscope::diagnosis

#endif  // TRAINSCOPE_DIAGNOSIS_DIAGNOSIS_HPP_
