// A run's steps and host load, derived once for every analysis (the
// diagnosis, compare, stalls, the report, `trainscope top`, the end-of-run
// summary, Python's Run.steps): per rank the steps, each with its period, its
// phases on the CPU and on the GPU, its data wait and the region keys' sums;
// per host the job's CPU, other processes' CPU, cores and swap. Each quantity
// has one definition, here (docs/steps.md):
//
//   step        a row of the rank's step key (KeyMap::step_keys: the first one
//               the rank recorded, on the thread it recorded it on)
//   period      from the step's start to the next step's start; the last
//               step's (and one whose next starts no later) its own duration
//   phase       the time of the phase's rows (KeyMap) that start in the
//               period; a CPU row longer than the whole period is left out
//               and counted (RankSteps::impossible_rows)
//   comm        all communication: the collectives' rows (COMM/<op>/<group>,
//               entered to completed, overlapping other phases or not), or,
//               in a step with none, the COMM rows
//   comm_exposed  the communication the step waits for: COMM rows (a
//               collective the loop waits in) and COMM_EXPOSED rows (the part
//               of DDP's all-reduce after backward's compute)
//   sync        the host's waits for the device (SYNC rows)
//   gpu busy    the GPU-timed time of the compute phases' rows (h2d, forward,
//               backward, optimizer) that start in the period: each row's
//               device duration (its events' elapsed time on its stream), summed
//               (they run one after another on the stream). Measured busy
//               (gpu_union_s): the union of those rows' device intervals
//               [gpu_start, gpu_start + duration), per stream and over all
//               streams (device busy: time any stream ran a timed region),
//               where every such row of the step has a device start
//   rest        the period minus data wait, h2d, forward, backward,
//               optimizer, sync and the COMM rows (the phases that lie
//               outside each other), at least 0
//   data wait   the time of the data-wait rows of the step thread that
//               overlaps the period (a wait before the first step is in no
//               step: the run's start-up)
//   key sum     per key the time of its rows that start in the period, summed
//               (a key called twice a step, by two callers, is one value)
//   job CPU     per host at each of its CPU readings, the sum over the job's
//               process trees (each launcher's, by the rank it measured) of
//               their CPU reading covering that time, in % of all cores
//   other CPU   the host's CPU busy minus the job's, at least 0
//   cores       the launcher's environment record's `cores` for the host,
//               else the number of per-core readings
//   cpu wait    per step, the step thread's run-queue wait (time runnable
//               but not running) while its step row ran: the row's
//               cpu_wait_ns (a timer attached to a run reads it for each
//               BATCH, TimerOptions::step_wait); 0 where the row has none
//   contention  per rank over a time range, the run-queue wait of its process
//   share       tree's threads (system/proc.cpu_wait_pct: seconds waited, summed
//               over the threads, per second) averaged over the readings of
//               the range (pooled over ranks), at most 1: the share of the
//               step the job's threads waited for a CPU; with a 95% interval
//
// StepReader reads a run incrementally (what was appended since the last
// poll, within a read budget for a live follower); read_steps() reads a
// finished or running run at once with every step exact.
#ifndef TRAINSCOPE_STEPS_STEPS_HPP_
#define TRAINSCOPE_STEPS_STEPS_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/run/run_status.hpp"

namespace trainscope::steps {

// ---------------------------------------------------------------------------
// Keys by meaning

// The parts of a step. kRest is what the step's time holds beyond the
// measured phases (computed, never a key of its own).
enum class Phase : std::uint8_t {
  kDataWait,
  kHostToDevice,
  kForward,
  kBackward,
  kOptimizer,
  kComm,
  kCommExposed,
  kSync,
  kRest,
};
inline constexpr std::size_t kPhaseCount = 9;
// "data_wait", "h2d", "forward", "backward", "optimizer", "comm", "comm_exposed",
// "sync", "rest".
std::string_view phase_name(Phase phase) noexcept;
// A phase by its name (also "io", "input" for data_wait); InvalidArgument naming it.
absl::StatusOr<Phase> parse_phase(std::string_view name);
// Compute phases: host-to-device, forward, backward, optimizer.
bool is_compute(Phase phase) noexcept;

// `trainscope run --auto=layers`: a layer's backward (layer/<path>/backward) is timed on one
// step in K, K the run's tag kLayerBackwardEveryTag (docs/auto.md): its per-step values are
// those steps' only, and its share of the time 1/K of what it is. K for `key` in a run whose
// tag has `tag_value` (empty: none; 1 for every key but a layer backward one).
inline constexpr std::string_view kLayerBackwardEveryTag = "trainscope.auto.layer_backward_every";
std::uint32_t sampled_every(std::string_view key, std::string_view tag_value) noexcept;

// The keys the auto-instrumentation records (and users may time by hand).
inline constexpr char kOptimizerKey[] = "OPTIMIZER";  // Optimizer.step
inline constexpr char kHostToDeviceKey[] = "H2D";     // batch to device

// A module call that owns no parameter to train (a loss, a metric), timed by
// --auto apart from the model's FORWARD: in the forward phase.
inline constexpr char kLossKey[] = "LOSS";
// Communication (trainscope._torch_comm): COMM a collective the loop called
// (the time it waits in it), COMM/<op>/<group> every collective entered to
// completed (DDP's bucket all-reduces too: the comm phase), COMM_EXPOSED the
// part of DDP's all-reduce that backward waits for; SYNC a host's wait for
// the device (.item(), torch.cuda.synchronize, ...).
inline constexpr char kCommKey[] = "COMM";
inline constexpr char kCollectivePrefix[] = "COMM/";
inline constexpr char kCommExposedKey[] = "COMM_EXPOSED";
inline constexpr char kSyncKey[] = "SYNC";
// A collective's key ("COMM/all_reduce/world").
bool is_collective_key(std::string_view key) noexcept;

// Which region keys mean what. Defaults: step BATCH, else the timed loader's
// `iteration`; data_wait IO; h2d H2D; forward FORWARD and LOSS; backward
// BACKWARD; optimizer OPTIMIZER; comm COMM (and every COMM/ key: comm's
// definition above); comm_exposed COMM_EXPOSED (and COMM); sync SYNC.
struct KeyMap {
  std::vector<std::string> step_keys;  // the first one a rank recorded is its step
  std::array<std::vector<std::string>, kPhaseCount> phase_keys;  // kRest stays empty

  // Adds "PHASE=KEY" (also "step=KEY"): `--phase optimizer=opt_step`. The key
  // then means that phase only. InvalidArgument naming the spec.
  absl::Status map(std::string_view spec);
  std::optional<Phase> phase_of(std::string_view key) const;
  bool is_step(std::string_view key) const;
};
KeyMap default_key_map();

// ---------------------------------------------------------------------------
// Steps

// One step of one rank (or, in a long run's history, `steps` consecutive
// steps merged: times are then sums).
struct Step {
  std::int64_t step = 0;      // the rank's step index, from 0
  std::int64_t start_ns = 0;  // Unix ns
  double period_s = 0;        // see the top of this file
  std::uint32_t steps = 1;
  // Per phase (kDataWait: the data wait). kRest is left 0 here: rest_s() and
  // with_rest() compute it.
  std::array<double, kPhaseCount> cpu_s{};
  std::array<double, kPhaseCount> gpu_s{};  // GPU-timed time of the phase's regions

  // Communication's parts (comm's and comm_exposed's definitions above): the
  // COMM rows (in rest's sum), the collectives' rows (COMM/...), COMM_EXPOSED.
  double comm_waited_s = 0;
  double collectives_s = 0;
  double ddp_exposed_s = 0;
  // The GPU busy time (see the top of this file): GPU-timed compute rows.
  double gpu_busy_s = 0;
  // The measured GPU busy time (see the top of this file): the union of the
  // GPU-timed compute rows' device intervals, over every stream; known where
  // every such row of the step has a device start. Rows without one: of runs
  // recorded before device starts, of another device than the rank's
  // reference, or collected after their step left the builder's window.
  double gpu_union_s = 0;
  std::uint32_t gpu_rows_placed = 0;
  std::uint32_t gpu_rows_unplaced = 0;
  // The step thread's run-queue wait in the step (see the top of this file:
  // cpu wait); known where RankSteps::cpu_wait_measured.
  double cpu_wait_s = 0;
  bool gpu_union_known() const { return gpu_rows_placed > 0 && gpu_rows_unplaced == 0; }

  double data_wait_s() const { return cpu_s[static_cast<std::size_t>(Phase::kDataWait)]; }
  // The period beyond the measured CPU phases that lie outside each other, >= 0.
  double rest_s() const;
  // cpu_s[kComm] and cpu_s[kCommExposed] from the parts above.
  void settle_comm();
};
// `step` with cpu_s[kRest] = rest_s().
Step with_rest(Step step);

// One region key's time in one step (or, in RankSteps::unstepped, one row
// in no step).
struct KeySum {
  std::uint32_t key = 0;  // index into the reader's keys()
  double seconds = 0;
  std::uint32_t rows = 0;
  std::int64_t start_ns = 0;  // of its first row
};

// A CPU row longer than the whole step it belongs to (a duration no timer
// makes: INT64_MAX, a clock jump): left out of the step's phases.
struct ImpossibleRow {
  std::uint32_t key = 0;  // index into the reader's keys()
  std::int64_t duration_ns = 0;
  std::int64_t step = 0;
  double period_s = 0;
};

// One collective key's rows of a rank (COMM/<op>/<group>), in the order the
// rank recorded them: the n-th row of a key is the same collective on every
// rank (each rank enters a group's collectives in one order).
struct CollectiveRows {
  std::uint32_t key = 0;    // index into the reader's keys()
  std::uint64_t count = 0;  // rows read
  double seconds = 0;       // their summed time
  // The last kKeptRows rows: (start Unix ns, duration ns); the first is the
  // key's row number count - rows.size().
  static constexpr std::size_t kKeptRows = 1024;
  std::deque<std::pair<std::int64_t, std::int64_t>> rows;
};

struct RankSteps {
  std::uint32_t rank = 0;
  std::string host;
  ProcessStatus status;  // the rank's (crashed when it is gone); RUNNING at first
  std::string step_key;  // empty: the rank recorded no step key
  std::uint32_t step_thread = 0;
  std::array<bool, kPhaseCount> cpu_measured{};  // a row of the phase was read
  std::array<bool, kPhaseCount> gpu_measured{};
  bool cpu_wait_measured = false;  // a step row with its cpu wait was read
  // Every finalized step in order (past StepOptions::max_history_steps
  // neighbours merged in pairs, then in fours, ...), and the last
  // window_steps of them, exact.
  std::vector<Step> history;
  std::deque<Step> window;
  std::uint32_t merge_width = 1;
  std::uint64_t steps = 0;  // finalized steps (after a skipped read: counted on)
  bool open = false;        // a step is open (its period unknown until the next starts)
  std::int64_t last_end_ns = 0;
  // The end of the last step row read (0: none): a rank whose step has not
  // ended since long is hung (trainscope/diagnosis/hang.hpp).
  std::int64_t last_step_end_ns = 0;
  // Per step of `history` the keys' sums (StepOptions::key_sums: history is
  // then never merged), and the rows in no step (before the first, after the
  // last, of a rank without steps; read_steps: of the open step), one each.
  std::vector<std::vector<KeySum>> key_sums;
  std::vector<KeySum> unstepped;
  // Per collective key, its rows (CPU), in the order first read.
  std::vector<CollectiveRows> collectives;
  // The rank's process tree: resident MB, GPU memory MB summed over devices,
  // CPU in % of one core; by time (ms).
  std::vector<std::pair<std::int64_t, double>> rss_mb;
  std::map<std::int64_t, double> gpu_mem_mb;
  // The devices its process tree used (a system/gpu.<i>.proc reading).
  std::set<int> gpus;
  std::map<std::int64_t, double> cpu_pct;
  // Its threads' run-queue wait, % of one core, by time (ms); empty in runs
  // recorded before it was sampled.
  std::map<std::int64_t, double> cpu_wait_pct;
  // Reading.
  std::uint64_t read_bytes = 0;     // of the region file
  std::uint64_t skipped_bytes = 0;  // of the region file, not read (the read budget)
  std::uint64_t step_rows = 0;
  std::vector<std::uint64_t> key_rows;  // rows read per key (check_run)
  std::uint64_t impossible_rows = 0;
  ImpossibleRow first_impossible;

  // Steps so far, the open one included.
  std::uint64_t step_count() const { return steps + (open ? 1 : 0); }
  // The rank's step at a wall-clock time (fractional), NaN before its first step.
  double step_at(std::int64_t time_ns) const;
  // Each step's GPU busy share, in history's order (compare's per-step rows): the union
  // of its GPU-timed compute rows' device intervals over its period where every step of
  // the rank with such rows knows it, else those rows' spans (gpu_busy_s), at most 1;
  // empty where the rank has no GPU-timed compute row. The diagnosis pools the same two
  // sources over its scope, NVML before the spans (docs/diagnosis.md, GPU-IDLE).
  std::vector<double> gpu_busy_shares() const;
};

// ---------------------------------------------------------------------------
// Host load

// The contention share (see the top of this file) of `ranks`' process trees
// over the readings taken in [from_ms, to_ms], pooled. `share` NaN without a
// reading (a run recorded before the wait was sampled); the interval (Student's
// t over the readings) needs two.
struct ContentionShare {
  double share = std::numeric_limits<double>::quiet_NaN();  // 0..1
  double low = std::numeric_limits<double>::quiet_NaN();    // 95%, clamped to 0..1
  double high = std::numeric_limits<double>::quiet_NaN();
  std::size_t readings = 0;
  bool known() const { return readings > 0; }
};
ContentionShare contention_share(const std::vector<const RankSteps*>& ranks,
                                 std::int64_t from_ms = std::numeric_limits<std::int64_t>::min(),
                                 std::int64_t to_ms = std::numeric_limits<std::int64_t>::max());

// The step wait share (see the top of this file: cpu wait): the seconds the
// step threads of `ranks` waited for a CPU in their steps over those steps'
// periods, pooled over the steps of their history that start at or after
// from_ns, of ranks whose step rows carry the wait (RankSteps::
// cpu_wait_measured). `readings`: the steps; `share` NaN without one. The
// interval (two steps or more): the ratio's, Student's t over the steps.
ContentionShare step_wait_share(const std::vector<const RankSteps*>& ranks,
                                std::int64_t from_ns = std::numeric_limits<std::int64_t>::min());

// A host's reading at one time (its CPU reading's).
struct HostSample {
  std::int64_t time_ms = 0;
  double cpu_util_pct = std::numeric_limits<double>::quiet_NaN();  // % of all cores
  double job_cpu_pct = std::numeric_limits<double>::quiet_NaN();   // % of all cores, the job's
  double swap_used_mb = std::numeric_limits<double>::quiet_NaN();
  double steal_pct = std::numeric_limits<double>::quiet_NaN();  // % of all cores, a VM's
  // Other processes' CPU, % of all cores: busy minus the job's, >= 0; NaN
  // when either is unknown.
  double other_cpu_pct() const;
};

struct GpuNow {
  int index = 0;
  double util_pct = std::numeric_limits<double>::quiet_NaN();
  double mem_used_mb = std::numeric_limits<double>::quiet_NaN();
  double mem_total_mb = std::numeric_limits<double>::quiet_NaN();
};
// A host's latest hardware readings.
struct HostNow {
  std::string host;
  std::int64_t time_ms = 0;
  double cpu_util_pct = std::numeric_limits<double>::quiet_NaN();
  double mem_used_pct = std::numeric_limits<double>::quiet_NaN();
  double swap_used_mb = std::numeric_limits<double>::quiet_NaN();
  std::vector<GpuNow> gpus;
  // The contention share of the host's ranks over the readings of the last
  // kRecentContentionMs before time_ms, and their step threads' step wait
  // share over the steps that started then.
  ContentionShare contention;
  ContentionShare step_wait;
};
inline constexpr std::int64_t kRecentContentionMs = 10'000;

struct HostLoad {
  std::string host;
  int cores = 0;                    // 0: unknown (the job's CPU is then NaN)
  std::vector<HostSample> samples;  // in time order
  // Per device, NVML's utilization (% of the time a kernel ran), by time (ms).
  std::map<int, std::map<std::int64_t, double>> gpu_util_pct;
  // The CPU's cumulative energy (host::kRaplEnergyMetric, joules), by time
  // (ms): the ledger's energy (trainscope/steps/ledger.hpp).
  std::vector<std::pair<std::int64_t, double>> rapl_energy_j;
  // Per device, NVML's cumulative energy (host::kGpuEnergyQuantity, joules),
  // by time (ms), and the devices a rank's process tree held memory on (the
  // job's GPUs): the ledger's GPU energy.
  std::map<int, std::vector<std::pair<std::int64_t, double>>> gpu_energy_j;
  std::set<int> job_gpus;
  HostNow now;
};

// ---------------------------------------------------------------------------
// Reading

struct StepOptions {
  KeyMap keys = default_key_map();
  std::size_t window_steps = 100;  // RankSteps::window
  // Past this many steps a rank's history merges neighbouring steps in pairs
  // (memory stays flat; the window is always exact). At least 64.
  std::size_t max_history_steps = std::size_t{1} << 18;
  // Per step the keys' sums (RankSteps::key_sums); the history is then never merged.
  bool key_sums = false;
  // A live run that appends more than this (bytes of region rows per second
  // of polling, all ranks together; 0: no limit) is sampled rather than read
  // whole: at each poll, when the rows not read yet exceed the poll's budget,
  // each rank's newest rows are read (its share of the budget after what the
  // others have unread: a rank with less reads all of it; and at least what
  // holds the window's steps) and the rows before them skipped; a rank's
  // step numbers after a skip rest on its BATCH rows' own numbers (else on
  // the bytes skipped). An ended run is read whole.
  double read_budget_bytes_per_s = 0;
};

struct RunSteps;

class StepReader {
 public:
  // NotFound / InvalidArgument naming the directory when it is no run.
  static absl::StatusOr<StepReader> Open(std::string run_dir, StepOptions options = {});
  StepReader(StepReader&&) noexcept;
  StepReader& operator=(StepReader&&) noexcept;
  ~StepReader();

  // Reads what the run appended since the last poll (a cut last line is left
  // for the next). An error names the file; what was read before is kept.
  // Another run in the directory (another id or start) is read from its
  // start; an ended run is read whole (what a sampled poll skipped is read
  // again once it ends). A rank that ended closes its last step.
  absl::Status poll();
  absl::Status poll(const RunReader& reader);
  // check_run (trainscope/run/run_check.hpp) on the run as of now, with the
  // rows this reader counted of the ranks it read whole.
  absl::StatusOr<std::vector<RunProblem>> check() const;

  // Every region row read, after the steps took it (`key`: its index into
  // keys()); `restart` when what was read is forgotten (another run at the path).
  struct Observer {
    std::function<void(const RegionView& row, std::uint32_t key)> row;
    std::function<void()> restart;
  };
  void observe(Observer observer);

  const std::string& run_dir() const noexcept;
  const StepOptions& options() const noexcept;
  const RunInfo& info() const noexcept;  // as of the last poll
  std::uint32_t world_size() const noexcept;
  const std::vector<std::string>& host_names() const noexcept;
  bool in_progress() const noexcept;
  std::int64_t last_poll_ms() const noexcept;  // 0 before the first poll
  std::uint64_t bytes_read() const noexcept;   // over all polls
  std::uint64_t bytes_skipped() const noexcept;
  std::uint64_t rows_read() const noexcept;
  // Region keys by index, in the order first read, with their device.
  const std::vector<std::pair<std::string, Device>>& keys() const noexcept;
  // Every rank read, in rank order (valid until the next poll).
  std::vector<const RankSteps*> ranks() const;
  // Per host its samples (the job's CPU joined at each) and latest readings.
  std::vector<HostLoad> hosts() const;

 private:
  friend absl::StatusOr<RunSteps> read_steps(const RunReader& reader, const KeyMap& keys);
  struct State;
  explicit StepReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A run at once (as it is now), every step exact, the keys' sums kept.
struct RunSteps {
  RunInfo info;
  std::vector<std::pair<std::string, Device>> keys;
  std::vector<RankSteps> ranks;  // in rank order
  std::vector<HostLoad> hosts;
  // Warnings about rows left out (RankSteps::impossible_rows), naming the file.
  std::vector<std::string> warnings;
};
absl::StatusOr<RunSteps> read_steps(const RunReader& reader,
                                    const KeyMap& keys = default_key_map());

// The warning for a rank's rows longer than their step, naming the file; empty when none.
std::string impossible_rows_warning(const std::string& run_dir, const RankSteps& rank,
                                    const std::vector<std::pair<std::string, Device>>& keys);

}  // namespace trainscope::steps

#endif  // TRAINSCOPE_STEPS_STEPS_HPP_
