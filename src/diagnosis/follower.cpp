// The follower: reads a run directory from where it stopped and keeps, per
// rank, its steps with their phases (a window of the last K exact steps and a
// history that merges pairs past a cap), per key a run-long series and recent
// samples, per host its readings. diagnose() hands them to conclude().
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "diagnosis/statistics.hpp"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/detail/sample_series.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::diagnosis {
namespace {

using stats::kNaN;
constexpr std::uint64_t kReadBytes = std::uint64_t{4} << 20;  // per read call
constexpr std::size_t kRecentPerKey = 8192;
constexpr std::size_t kExactPerKey = 65536;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct PhaseRowRef {
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  Phase phase = Phase::kRest;
  bool gpu = false;
  std::uint32_t key_id = 0;  // KeyTrack::id
};

// A CPU row longer than the step it belongs to (a duration no timer makes:
// INT64_MAX, a clock jump): left out of the step, and named in a warning.
struct ImpossibleRow {
  std::uint32_t key_id = 0;
  std::int64_t duration_ns = 0;
  std::int64_t step = 0;
  double period_s = 0;
};

void add_row(StepSample* s, const PhaseRowRef& row) {
  const double seconds = static_cast<double>(row.duration_ns) * 1e-9;
  (row.gpu ? s->gpu_s : s->cpu_s)[static_cast<std::size_t>(row.phase)] += seconds;
}

void merge_into(StepSample* into, const StepSample& s) {
  into->period_s += s.period_s;
  into->steps += s.steps;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    into->cpu_s[p] += s.cpu_s[p];
    into->gpu_s[p] += s.gpu_s[p];
  }
}

struct RankTrack {
  std::uint32_t rank = 0;
  std::string host;
  ProcessStatus status;  // RUNNING
  std::uint64_t offset = 0;
  std::string step_key;
  std::uint32_t step_thread = 0;
  std::array<bool, kPhaseCount> cpu_measured{};
  std::array<bool, kPhaseCount> gpu_measured{};
  bool open = false;
  bool closed = false;  // the run ended and the open step was closed
  StepSample current;   // the open step (period unknown until the next starts)
  std::int64_t current_end_ns = 0;
  std::vector<PhaseRowRef> pending;  // rows of the open step or after it
  std::vector<StepSample> history;   // merged past the cap
  std::uint32_t merge_width = 1;
  std::deque<StepSample> window;  // exact, the last K
  std::uint64_t steps = 0;        // finalized steps
  std::int64_t last_end_ns = 0;
  std::vector<std::pair<std::int64_t, double>> rss;  // time_ms, MB
  std::map<std::int64_t, double> gpu_mem;            // time_ms -> MB over devices
  std::vector<std::uint64_t> dropped_late;
  std::uint64_t read_bytes = 0;     // of the region file
  std::uint64_t step_rows = 0;      // step rows read
  std::uint64_t skipped_bytes = 0;  // of the region file, not read
  bool after_skip = false;
  std::uint64_t steps_at_skip = 0;
  // Late rows that start before this joined no step read (the first step
  // after a skip starts here).
  std::int64_t late_floor_ns = std::numeric_limits<std::int64_t>::min();
  // Rows of each key read (by KeyTrack::id), for check_run.
  std::vector<std::uint64_t> key_rows;
  std::uint64_t impossible_rows = 0;
  ImpossibleRow first_impossible;

  // Adds `row` to step `s` unless it is a CPU row longer than the whole step.
  void add_checked(StepSample* s, const PhaseRowRef& row) {
    if (!row.gpu && static_cast<double>(row.duration_ns) * 1e-9 > s->period_s * (1 + 1e-9)) {
      if (impossible_rows++ == 0) {
        first_impossible = ImpossibleRow{row.key_id, row.duration_ns, s->step, s->period_s};
      }
      return;
    }
    add_row(s, row);
  }

  double bytes_per_step() const {
    return step_rows ? static_cast<double>(read_bytes) / static_cast<double>(step_rows) : 0.0;
  }

  // The rows of `bytes` are not read: the open step and the rows waiting for
  // it are dropped (never finalized with a period that spans the gap), and
  // the step count moves on by the steps those bytes held (on_step corrects
  // it from the next BATCH row's own number).
  void skip(std::uint64_t bytes) {
    skipped_bytes += bytes;
    steps_at_skip = steps + (open ? 1 : 0);
    open = false;
    pending.clear();
    current = StepSample{};
    const double per_step = bytes_per_step();
    if (per_step > 0) {
      steps += static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) / per_step));
    }
    after_skip = true;
    late_floor_ns = std::numeric_limits<std::int64_t>::max();  // until the next step
  }

  // A late row of an already finalized step (a GPU row collected after the
  // next step ended): into history and window by its start.
  void add_late(const PhaseRowRef& row) {
    if (row.start_ns < late_floor_ns) return;  // of a step skipped
    auto by_start = [](const StepSample& s, std::int64_t t) { return s.start_ns <= t; };
    auto h = std::partition_point(history.begin(), history.end(),
                                  [&](const StepSample& s) { return by_start(s, row.start_ns); });
    if (h == history.begin()) return;
    auto w = std::partition_point(window.begin(), window.end(),
                                  [&](const StepSample& s) { return by_start(s, row.start_ns); });
    // Held to the window's step (exact) when it is there, else to the history's.
    const std::uint64_t before = impossible_rows;
    if (w != window.begin()) {
      add_checked(&*std::prev(w), row);
      if (impossible_rows == before) add_row(&*std::prev(h), row);
    } else {
      add_checked(&*std::prev(h), row);
    }
  }

  void finalize(StepSample s, std::size_t window_steps, std::size_t max_history) {
    window.push_back(s);
    while (window.size() > window_steps) window.pop_front();
    if (!history.empty() && history.back().steps < merge_width) {
      merge_into(&history.back(), s);
    } else {
      history.push_back(s);
    }
    ++steps;
    if (history.size() >= max_history) {
      std::vector<StepSample> merged;
      merged.reserve(history.size() / 2 + 1);
      for (std::size_t i = 0; i < history.size(); i += 2) {
        StepSample m = history[i];
        if (i + 1 < history.size()) merge_into(&m, history[i + 1]);
        merged.push_back(m);
      }
      history = std::move(merged);
      merge_width *= 2;
    }
  }

  // A new step row: closes the open step at its start.
  // `index`: the step's own number (a BATCH row's), or -1.
  void on_step(std::int64_t start_ns, std::int64_t duration_ns, std::int64_t index,
               std::size_t window_steps, std::size_t max_history) {
    ++step_rows;
    if (after_skip) {
      after_skip = false;
      late_floor_ns = start_ns;
      // Its own number, unless that goes back (another process's BATCH count).
      if (index >= 0 && static_cast<std::uint64_t>(index) >= steps_at_skip) {
        steps = static_cast<std::uint64_t>(index);
      }
    }
    if (open) {
      current.period_s = static_cast<double>(start_ns - current.start_ns) * 1e-9;
      if (current.period_s <= 0) {
        current.period_s = static_cast<double>(current_end_ns - current.start_ns) * 1e-9;
      }
      take_pending(start_ns);
      finalize(current, window_steps, max_history);
    } else {
      // Rows before the first step belong to no step.
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [&](const PhaseRowRef& r) { return r.start_ns < start_ns; }),
                    pending.end());
    }
    open = true;
    current = StepSample{};
    current.step = static_cast<std::int64_t>(steps);
    current.start_ns = start_ns;
    current_end_ns = start_ns + duration_ns;
  }

  // Pending rows that start before `until` go to the open step (its period known).
  void take_pending(std::int64_t until) {
    std::vector<PhaseRowRef> keep;
    for (const PhaseRowRef& r : pending) {
      if (r.start_ns < until) {
        add_checked(&current, r);
      } else {
        keep.push_back(r);
      }
    }
    pending = std::move(keep);
  }

  void close(std::size_t window_steps, std::size_t max_history) {
    if (closed) return;
    closed = true;
    if (!open) return;
    current.period_s = static_cast<double>(current_end_ns - current.start_ns) * 1e-9;
    take_pending(current_end_ns + 1);
    finalize(current, window_steps, max_history);
    open = false;
  }

  // The rank's step at a wall-clock time (fractional), or NaN before its first step.
  double step_at(std::int64_t time_ns) const {
    auto it = std::partition_point(history.begin(), history.end(),
                                   [&](const StepSample& s) { return s.start_ns <= time_ns; });
    if (it == history.begin()) return kNaN;
    const StepSample& s = *std::prev(it);
    const double into =
        s.period_s > 0 ? static_cast<double>(time_ns - s.start_ns) * 1e-9 / s.period_s : 0.0;
    return static_cast<double>(s.step) + std::min(1.0, into) * s.steps;
  }
};

// What a key means to the diagnosis, resolved once per key.
constexpr int kNoRole = -1;
constexpr int kStepRole = -2;

struct KeyTrack {
  std::string key;
  Device device = Device::kCPU;
  std::uint32_t id = 0;  // in the order first read
  int role = kNoRole;    // kStepRole, a Phase, or kNoRole
  bool batch = false;    // BATCH: its rows' `step` is its own number
  std::uint64_t count = 0;
  stats::detail::SampleSeries run{0, kExactPerKey, 0.01};    // FollowOptions::key_run_stats
  std::deque<std::pair<std::int64_t, std::int64_t>> recent;  // start_ns, duration_ns
  // The run's statistics, computed again once the count grew by a twentieth.
  mutable TimeStats stats;
  mutable std::uint64_t stats_count = 0;
  mutable std::int64_t stats_ms = 0;
};

struct HostTrack {
  std::string host;
  std::uint64_t offset = 0;
  std::map<std::int64_t, HostReading> readings;  // by time
  std::map<std::int64_t, double> job_cpu;        // time -> sum of proc.cpu_pct (% of one core)
  int cores = 0;
  std::map<int, bool> core_seen;
  HostNow now;
};

// "system/gpu.<i>.<rest>" -> i, rest.
bool consume_prefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool to_int(std::string_view s, int* out) {
  return absl::SimpleAtoi(absl::string_view(s.data(), s.size()), out);
}

bool gpu_key(std::string_view key, int* index, std::string_view* rest) {
  if (!consume_prefix(&key, "system/gpu.")) return false;
  const std::size_t dot = key.find('.');
  if (dot == std::string_view::npos) return false;
  if (!to_int(key.substr(0, dot), index)) return false;
  *rest = key.substr(dot + 1);
  return true;
}

}  // namespace

struct Follower::State {
  std::string dir;
  FollowOptions options;
  RunInfo info;
  std::uint32_t world_size = 0;
  bool in_progress = true;
  std::vector<std::string> hosts;
  std::map<std::uint32_t, RankTrack> ranks;
  std::array<absl::flat_hash_map<std::string, KeyTrack>, 2> keys;  // by device
  std::vector<std::pair<std::string, Device>> key_names;           // by KeyTrack::id
  std::map<std::string, HostTrack> host_tracks;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::int64_t last_poll_ms = 0;
  // Forgets all that was read (another run at the path; an ended run read
  // whole again); bytes_read() goes on counting.
  void restart();
  // Bytes of rank t's newest rows, at least `keep`, that hold the window's
  // steps (and the open one, and a twentieth more): ever larger tails from
  // `keep` on (doubling) until their step rows do, or the unread rows end.
  std::uint64_t window_keep(const RunReader& reader, const RankTrack& t, std::uint64_t keep) const;
  mutable std::optional<Scope> run_cache;  // see diagnose()
  mutable std::size_t run_cache_steps = 0;
  mutable std::int64_t run_cache_ms = 0;

  void feed(RankTrack* t, const RegionView& row) {
    ++rows;
    t->last_end_ns = std::max(t->last_end_ns, row.start_unix_ns + row.duration_ns);
    auto& by_key = keys[row.device == Device::kGPU ? 1 : 0];
    const absl::string_view key(row.key.data(), row.key.size());
    auto found = by_key.find(key);
    if (found == by_key.end()) {
      found = by_key.emplace(std::string(row.key), KeyTrack{}).first;
      KeyTrack& k = found->second;
      k.key = std::string(row.key);
      k.device = row.device;
      k.id = static_cast<std::uint32_t>(key_names.size());
      key_names.emplace_back(k.key, k.device);
      if (options.keys.is_step(row.key)) {
        k.role = kStepRole;
        k.batch = row.key == "BATCH";  // TimeType::BATCH, whose completions `step` counts
      } else if (const std::optional<Phase> phase = options.keys.phase_of(row.key)) {
        k.role = static_cast<int>(*phase);
      }
    }
    KeyTrack& k = found->second;
    ++k.count;
    if (t->key_rows.size() <= k.id) t->key_rows.resize(k.id + 1);
    ++t->key_rows[k.id];
    if (options.key_run_stats) k.run.add(row.duration_ns);
    k.recent.emplace_back(row.start_unix_ns, row.duration_ns);
    if (k.recent.size() > kRecentPerKey) k.recent.pop_front();

    if (k.role == kStepRole) {
      if (row.device != Device::kCPU) return;  // GPU step rows time no step
      if (t->step_key.empty()) {
        t->step_key = k.key;
        t->step_thread = row.thread;
      }
      // The rank keeps the first step key it recorded, on its thread.
      if (row.key == t->step_key && row.thread == t->step_thread) {
        t->on_step(row.start_unix_ns, row.duration_ns, k.batch ? row.step : -1,
                   options.window_steps, options.max_history_steps);
      }
      return;
    }
    if (k.role == kNoRole) return;
    const auto phase = static_cast<Phase>(k.role);
    const bool gpu = row.device == Device::kGPU;
    (gpu ? t->gpu_measured : t->cpu_measured)[static_cast<std::size_t>(phase)] = true;
    PhaseRowRef ref{row.start_unix_ns, row.duration_ns, phase, gpu, k.id};
    if (t->open && row.start_unix_ns < t->current.start_ns) {
      t->add_late(ref);
    } else {
      t->pending.push_back(ref);
      if (t->pending.size() > 1'000'000) t->pending.erase(t->pending.begin());
    }
  }

  void feed_host(HostTrack* h, const MetricPoint& m) {
    ++rows;
    std::string_view key = m.key;
    const double v = m.value;
    HostNow& now = h->now;
    now.host = h->host;
    now.time_ms = std::max(now.time_ms, m.timestamp_ms);
    int gpu = 0;
    std::string_view rest;
    if (key == "system/cpu.util_pct") {
      h->readings[m.timestamp_ms].cpu_util_pct = v;
      h->readings[m.timestamp_ms].time_ms = m.timestamp_ms;
      now.cpu_util_pct = v;
    } else if (consume_prefix(&key, "system/cpu.")) {
      int core = 0;
      if (to_int(key.substr(0, key.find('.')), &core) && !h->core_seen[core]) {
        h->core_seen[core] = true;
        ++h->cores;
      }
    } else if (key == "system/proc.cpu_pct") {
      h->job_cpu[m.timestamp_ms] += v;
    } else if (key == "system/mem.used_pct") {
      now.mem_used_pct = v;
    } else if (key == "system/swap.used_mb") {
      h->readings[m.timestamp_ms].swap_used_mb = v;
      h->readings[m.timestamp_ms].time_ms = m.timestamp_ms;
      now.swap_used_mb = v;
    } else if (key == "system/proc.rss_mb") {
      rank_for(m.rank).rss.emplace_back(m.timestamp_ms, v);
    } else if (gpu_key(key, &gpu, &rest)) {
      if (rest == "proc.mem_used_mb") {
        rank_for(m.rank).gpu_mem[m.timestamp_ms] += v;
        return;
      }
      auto it = std::find_if(now.gpus.begin(), now.gpus.end(),
                             [gpu](const GpuNow& g) { return g.index == gpu; });
      if (it == now.gpus.end()) {
        now.gpus.push_back(GpuNow{gpu});
        std::sort(now.gpus.begin(), now.gpus.end(),
                  [](const GpuNow& a, const GpuNow& b) { return a.index < b.index; });
        it = std::find_if(now.gpus.begin(), now.gpus.end(),
                          [gpu](const GpuNow& g) { return g.index == gpu; });
      }
      if (rest == "util_pct") it->util_pct = v;
      if (rest == "mem_used_mb") it->mem_used_mb = v;
      if (rest == "mem_total_mb") it->mem_total_mb = v;
    }
  }

  // Readings of a process tree that is no single rank's (one launcher running
  // several ranks) count for the lowest rank: the job's.
  RankTrack& rank_for(std::uint32_t rank) {
    if (rank == kNoRank) {
      if (ranks.empty()) return orphan;
      return ranks.begin()->second;
    }
    RankTrack& t = ranks[rank];
    t.rank = rank;
    return t;
  }
  RankTrack orphan;
};

Follower::Follower(std::unique_ptr<State> state) : state_(std::move(state)) {}
Follower::Follower(Follower&&) noexcept = default;
Follower& Follower::operator=(Follower&&) noexcept = default;
Follower::~Follower() = default;

absl::StatusOr<Follower> Follower::Open(std::string run_dir, FollowOptions options) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status();
  if (options.window_steps == 0) {
    return absl::InvalidArgumentError("the window must hold at least one step");
  }
  options.max_history_steps = std::max<std::size_t>(options.max_history_steps, 64);
  auto state = std::make_unique<State>();
  state->dir = std::move(run_dir);
  state->options = std::move(options);
  state->info = reader->info();
  return Follower(std::move(state));
}

const std::string& Follower::run_dir() const noexcept { return state_->dir; }
bool Follower::in_progress() const noexcept { return state_->in_progress; }
std::uint64_t Follower::bytes_read() const noexcept { return state_->bytes; }
std::uint64_t Follower::rows_read() const noexcept { return state_->rows; }
std::uint64_t Follower::bytes_skipped() const noexcept {
  std::uint64_t total = 0;
  for (const auto& [rank, t] : state_->ranks) total += t.skipped_bytes;
  return total;
}

namespace {

// Each rank's share of a poll's read budget (bytes), water-filled: a rank with
// less unread than an even share of what is left reads all of it and leaves
// the rest to the others, so empty and small ranks take nothing from the
// large ones. Only ranks that cannot read all they have are listed: none when
// all that is unread fits the budget (nothing is sampled).
std::map<std::uint32_t, double> budget_shares(
    std::vector<std::pair<std::uint64_t, std::uint32_t>> unread, double budget) {
  std::map<std::uint32_t, double> out;
  double total = 0;
  for (const auto& [bytes, rank] : unread) total += static_cast<double>(bytes);
  if (total <= budget) return out;
  std::sort(unread.begin(), unread.end());
  double left = budget;
  for (std::size_t i = 0; i < unread.size(); ++i) {
    const double share = left / static_cast<double>(unread.size() - i);
    const auto bytes = static_cast<double>(unread[i].first);
    if (bytes <= share) {
      left -= bytes;
      continue;
    }
    out[unread[i].second] = share;
    left -= share;
  }
  return out;
}

}  // namespace

void Follower::State::restart() {
  std::string keep_dir = std::move(dir);
  FollowOptions keep_options = std::move(options);
  const std::uint64_t keep_bytes = bytes;
  *this = State{};
  dir = std::move(keep_dir);
  options = std::move(keep_options);
  bytes = keep_bytes;
}

std::uint64_t Follower::State::window_keep(const RunReader& reader, const RankTrack& t,
                                           std::uint64_t keep) const {
  const double want = 1.05 * static_cast<double>(options.window_steps + 1);
  for (keep = std::max<std::uint64_t>(keep, 4096);; keep *= 2) {
    absl::StatusOr<std::uint64_t> from = reader.regions_tail_offset(t.rank, t.offset, keep);
    if (!from.ok() || *from <= t.offset) return keep;
    double steps = 0;
    for (std::uint64_t offset = *from;;) {
      absl::StatusOr<RunReader::Scan> scan =
          reader.scan_regions(t.rank, offset, kReadBytes, [&](const RegionView& row) {
            if (row.device == Device::kCPU &&
                (t.step_key.empty() ? options.keys.is_step(row.key) : row.key == t.step_key)) {
              ++steps;
            }
          });
      if (!scan.ok() || scan->next_offset <= offset || scan->rows == 0) break;
      offset = scan->next_offset;
    }
    if (steps >= want) return keep;
  }
}

absl::Status Follower::poll() {
  State& s = *state_;
  absl::StatusOr<RunReader> reader = RunReader::Open(s.dir);
  if (!reader.ok()) return reader.status();
  // Another run in the directory (deleted and created again at the same
  // path): what was read is of the old one, so it starts over.
  const bool another_run =
      reader->info().id != s.info.id || reader->info().start_time_ms != s.info.start_time_ms;
  // An ended run appends no more: it is read whole, also what a live poll
  // skipped (then read again from the start), so that the view converges to
  // `trainscope diagnose`'s.
  if (another_run || (!reader->in_progress() && bytes_skipped() > 0)) s.restart();
  s.info = reader->info();
  s.world_size = reader->world_size();
  s.hosts = reader->hosts();
  s.in_progress = reader->in_progress();
  const std::int64_t previous_poll_ms = s.last_poll_ms;
  s.last_poll_ms = now_ms();
  // The read budget of this poll: its share of the seconds since the last one,
  // shared by the ranks after what each has unread (budget_shares).
  std::map<std::uint32_t, double> shares;
  if (s.options.read_budget_bytes_per_s > 0 && s.in_progress) {
    const double budget_s =
        previous_poll_ms == 0
            ? 1.0
            : std::clamp(static_cast<double>(s.last_poll_ms - previous_poll_ms) * 1e-3, 0.05, 10.0);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> unread;
    for (const RunFile& file : reader->files()) {
      if (file.kind != RunFileKind::kRegions) continue;
      auto t = s.ranks.find(file.rank);
      const std::uint64_t offset = t == s.ranks.end() ? 0 : t->second.offset;
      unread.emplace_back(file.size_bytes > offset ? file.size_bytes - offset : 0, file.rank);
    }
    shares = budget_shares(std::move(unread), s.options.read_budget_bytes_per_s * budget_s);
  }
  for (const RankState& state : reader->ranks()) {
    RankTrack& t = s.ranks[state.rank.rank];
    t.rank = state.rank.rank;
    t.host = state.host;
    t.status = ProcessStatus{state.status, state.crashed};
    if (auto share = shares.find(t.rank); share != shares.end()) {
      // Its share of the budget, and at least the window's steps, the open one
      // and a twentieth more (steps vary in size): from its rows' size per
      // step, or, before any step was read, by counting the newest rows' steps.
      auto keep = static_cast<std::uint64_t>(share->second);
      const double per_step = t.bytes_per_step();
      keep = per_step > 0
                 ? std::max(keep,
                            static_cast<std::uint64_t>(
                                1.05 * static_cast<double>(s.options.window_steps + 1) * per_step))
                 : s.window_keep(*reader, t, keep);
      absl::StatusOr<std::uint64_t> resume = reader->regions_tail_offset(t.rank, t.offset, keep);
      if (resume.ok() && *resume > t.offset) {
        t.skip(*resume - t.offset);
        t.offset = *resume;
      }
    }
    while (true) {
      absl::StatusOr<RunReader::Scan> scan = reader->scan_regions(
          t.rank, t.offset, kReadBytes, [&s, &t](const RegionView& row) { s.feed(&t, row); });
      if (absl::IsNotFound(scan.status())) break;
      if (!scan.ok()) return scan.status();
      s.bytes += scan->next_offset - t.offset;
      t.read_bytes += scan->next_offset - t.offset;
      const bool advanced = scan->next_offset > t.offset;
      t.offset = scan->next_offset;
      if (!advanced || scan->rows == 0) break;
    }
  }
  for (const std::string& host : s.hosts) {
    HostTrack& h = s.host_tracks[host];
    h.host = host;
    while (true) {
      absl::StatusOr<Chunk<MetricPoint>> chunk =
          reader->read_host_metrics(host, h.offset, kReadBytes);
      if (!chunk.ok()) return chunk.status();
      for (const MetricPoint& m : chunk->rows) s.feed_host(&h, m);
      s.bytes += chunk->next_offset - h.offset;
      const bool advanced = chunk->next_offset > h.offset;
      h.offset = chunk->next_offset;
      if (!advanced || chunk->rows.empty()) break;
    }
  }
  // A rank that ended (or crashed) records no more steps: its open step closes
  // with its own duration, also while other ranks or the launcher still run.
  for (auto& [rank, t] : s.ranks) {
    if (!s.in_progress || !t.status.running()) {
      t.close(s.options.window_steps, s.options.max_history_steps);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunProblem>> Follower::check() const {
  const State& s = *state_;
  absl::StatusOr<RunReader> reader = RunReader::Open(s.dir);
  if (!reader.ok()) return reader.status();
  // The rows of each rank read whole, as this follower counted them: check_run
  // reads only the files of the others.
  RegionCounts counted;
  for (const auto& [rank, t] : s.ranks) {
    if (t.skipped_bytes > 0 || t.read_bytes == 0) continue;
    std::vector<RegionCount>& rows = counted[rank];
    for (std::size_t id = 0; id < t.key_rows.size(); ++id) {
      if (t.key_rows[id] == 0) continue;
      rows.push_back(RegionCount{s.key_names[id].first, s.key_names[id].second, t.key_rows[id]});
    }
  }
  return check_run(*reader, &counted);
}

Diagnosis Follower::diagnose() const {
  const State& s = *state_;
  const Thresholds& th = s.options.thresholds;
  const auto warmup = static_cast<std::int64_t>(std::max(0.0, th.warmup_steps));
  Diagnosis d;
  d.run_dir = s.dir;
  d.run_id = s.info.id;
  d.run_name = s.info.name;
  d.status = s.info.status;
  d.start_time_ms = s.info.start_time_ms;
  const std::int64_t end_ms = s.in_progress || s.info.end_time_ms == 0
                                  ? (s.last_poll_ms ? s.last_poll_ms : now_ms())
                                  : s.info.end_time_ms;
  d.elapsed_ms = std::max<std::int64_t>(0, end_ms - s.info.start_time_ms);
  d.world_size = s.world_size;
  d.hosts = s.hosts;
  d.window_steps = s.options.window_steps;
  {
    double read = 0, skipped = 0;
    for (const auto& [rank, t] : s.ranks) {
      read += static_cast<double>(t.read_bytes);
      skipped += static_cast<double>(t.skipped_bytes);
    }
    d.read_share = skipped > 0 ? read / (read + skipped) : 1.0;
  }

  std::size_t history_steps = 0;
  for (const auto& [rank, t] : s.ranks) history_steps += t.steps;
  // The run scope costs what the history holds: while the run goes on it is
  // concluded again only once the history grew by a twentieth (or ended), so
  // following a run costs what it appends.
  const std::int64_t now = s.last_poll_ms ? s.last_poll_ms : now_ms();
  const bool need_run =
      !s.run_cache || !s.in_progress ||
      (static_cast<double>(history_steps) >= 1.05 * static_cast<double>(s.run_cache_steps) + 1 &&
       static_cast<double>(now - s.run_cache_ms) >= s.options.run_refresh_s * 1000.0);
  Inputs window, run;
  std::int64_t window_start_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_end_ns = 0;
  for (const auto& entry : s.ranks) {
    const std::uint32_t rank = entry.first;
    const RankTrack& t = entry.second;
    d.ranks.push_back(RankNow{rank, t.host, t.status, t.steps + (t.open ? 1 : 0)});
    last_end_ns = std::max(last_end_ns, t.last_end_ns);
    RankInput base;
    base.rank = rank;
    base.host = t.host;
    base.step_key = t.step_key;
    base.cpu_measured = t.cpu_measured;
    base.gpu_measured = t.gpu_measured;
    RankInput w = base, r = base;
    auto with_rest = [](StepSample x) {
      double measured = 0;
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        if (static_cast<Phase>(p) != Phase::kRest) measured += x.cpu_s[p];
      }
      x.cpu_s[static_cast<std::size_t>(Phase::kRest)] = std::max(0.0, x.period_s - measured);
      return x;
    };
    for (const StepSample& x : t.window) {
      if (x.step >= warmup) w.steps.push_back(with_rest(x));
    }
    if (need_run) {
      for (const StepSample& x : t.history) {
        if (x.step >= warmup) r.steps.push_back(with_rest(x));
      }
    }
    if (!w.steps.empty()) window_start_ns = std::min(window_start_ns, w.steps.front().start_ns);
    const std::int64_t w_start =
        w.steps.empty() ? std::numeric_limits<std::int64_t>::max() : w.steps.front().start_ns;
    const std::int64_t r_start =
        r.steps.empty() ? std::numeric_limits<std::int64_t>::max() : r.steps.front().start_ns;
    auto add_reading = [&](std::int64_t time_ms, double value, bool device) {
      const std::int64_t ns = time_ms * 1'000'000;
      // A reading after the rank's last row measured a process tree that may be
      // gone (0 MB once it exited): it is no point of the rank's steps.
      if (ns > t.last_end_ns) return;
      const double step = t.step_at(ns);
      if (std::isnan(step)) return;
      const Reading reading{step, value, time_ms};
      if (ns >= r_start) (device ? r.gpu_mem_mb : r.rss_mb).push_back(reading);
      if (ns >= w_start) (device ? w.gpu_mem_mb : w.rss_mb).push_back(reading);
    };
    for (const auto& [time_ms, mb] : t.rss) add_reading(time_ms, mb, false);
    for (const auto& [time_ms, mb] : t.gpu_mem) add_reading(time_ms, mb, true);
    window.ranks.push_back(std::move(w));
    run.ranks.push_back(std::move(r));
  }
  for (const auto& [name, h] : s.host_tracks) {
    HostInput all{name, {}}, recent{name, {}};
    for (const auto& [time_ms, reading] : h.readings) {
      HostReading x = reading;
      x.time_ms = time_ms;
      auto cpu = h.job_cpu.find(time_ms);
      if (cpu != h.job_cpu.end() && h.cores > 0) x.job_cpu_pct = cpu->second / h.cores;
      all.readings.push_back(x);
      if (time_ms * 1'000'000 >= window_start_ns) recent.readings.push_back(x);
    }
    if (!all.readings.empty()) run.hosts.push_back(std::move(all));
    if (!recent.readings.empty()) window.hosts.push_back(std::move(recent));
    if (h.now.time_ms != 0) d.host_now.push_back(h.now);
  }
  // What the run is, for advice that fits it: --auto, and whether a GPU was seen.
  RunFacts facts;
  const auto tag = [&s](const std::string& key) {
    const auto it = s.info.tags.find(key);
    return it == s.info.tags.end() ? std::string() : it->second;
  };
  d.auto_found =
      AutoFound{tag("trainscope.auto"), tag("trainscope.auto.steps"), tag("trainscope.auto.found")};
  facts.auto_instrumented = !d.auto_found.mode.empty();
  facts.gpu_seen = false;
  for (const auto& [rank, t] : s.ranks) {
    for (bool measured : t.gpu_measured) facts.gpu_seen = facts.gpu_seen || measured;
    facts.gpu_seen = facts.gpu_seen || !t.gpu_mem.empty();
  }
  for (const HostNow& h : d.host_now) facts.gpu_seen = facts.gpu_seen || !h.gpus.empty();
  window.facts = run.facts = facts;
  d.window = conclude(window, th, "window");
  if (need_run) {
    s.run_cache = conclude(run, th, "run");
    s.run_cache_steps = history_steps;
    s.run_cache_ms = now;
  }
  d.run = *s.run_cache;
  std::size_t most = 0;
  for (const auto& [rank, t] : s.ranks) most = std::max<std::size_t>(most, t.steps);
  d.window.warmup = d.run.warmup = std::min<std::size_t>(static_cast<std::size_t>(warmup), most);

  // Keys: the window is the window's steps' span (the last minute before any step).
  if (window_start_ns == std::numeric_limits<std::int64_t>::max()) {
    window_start_ns = last_end_ns - std::int64_t{60} * 1'000'000'000;
  }
  const double wall_s = std::max(1e-9, static_cast<double>(last_end_ns - window_start_ns) * 1e-9);
  const double ranks = std::max<double>(1.0, static_cast<double>(s.ranks.size()));
  for (const auto& by_key : s.keys)
    for (const auto& [id, k] : by_key) {
      KeyRow row;
      row.key = k.key;
      row.device = k.device;
      row.count = k.count;
      std::vector<double> durations;
      double sum = 0;
      std::int64_t first = 0;
      for (const auto& [start, duration] : k.recent) {
        if (start < window_start_ns) continue;
        if (durations.empty()) first = start;
        durations.push_back(static_cast<double>(duration) * 1e-9);
        sum += static_cast<double>(duration) * 1e-9;
      }
      row.window_count = durations.size();
      // When the recent samples do not reach back to the window's start, their own span.
      const bool capped =
          k.recent.size() == kRecentPerKey && k.recent.front().first > window_start_ns;
      const double span_s =
          capped ? std::max(1e-9, static_cast<double>(last_end_ns - first) * 1e-9) : wall_s;
      row.rate_per_s = static_cast<double>(durations.size()) / span_s;
      row.p95_s = stats::quantile(durations, 0.95);
      row.p50_s = stats::quantile(std::move(durations), 0.5);
      row.share = sum / span_s / ranks;
      if (!s.options.key_run_stats) {
        row.run_median_s = row.run_median_low_s = row.run_median_high_s = row.run_p95_s = kNaN;
        d.keys.push_back(std::move(row));
        continue;
      }
      // As the run scope: again once grown by a twentieth, at most every run_refresh_s.
      if (k.stats_count == 0 || !s.in_progress ||
          (static_cast<double>(k.run.count()) >= 1.05 * static_cast<double>(k.stats_count) + 1 &&
           static_cast<double>(now - k.stats_ms) >= s.options.run_refresh_s * 1000.0)) {
        k.stats_ms = now;
        k.stats = k.run.stats();
        k.stats_count = k.run.count();
      }
      const TimeStats& st = k.stats;
      row.run_median_s = st.median;
      row.run_median_low_s = st.median_ci_low;
      row.run_median_high_s = st.median_ci_high;
      row.run_p95_s = st.p95;
      d.keys.push_back(std::move(row));
    }
  for (KeyRow& row : d.keys) row.callers = tag("trainscope.auto.callers." + row.key);
  std::sort(d.keys.begin(), d.keys.end(), [](const KeyRow& a, const KeyRow& b) {
    return a.share != b.share ? a.share > b.share : a.key < b.key;
  });
  for (const auto& [rank, t] : s.ranks) {
    if (t.impossible_rows == 0) continue;
    const ImpossibleRow& first = t.first_impossible;
    d.warnings.push_back(fmt::format(
        "{}/regions-{}.csv: {} CPU row{} of rank {} last{} longer than the whole step {} "
        "belong{} to (a clock jump or a damaged file?), left out of the step's phases: the "
        "first, {}, lasts {} s in step {} of {} s",
        s.dir, rank, t.impossible_rows, t.impossible_rows == 1 ? "" : "s", rank,
        t.impossible_rows == 1 ? "s" : "", t.impossible_rows == 1 ? "it" : "they",
        t.impossible_rows == 1 ? "s" : "", s.key_names[first.key_id].first,
        static_cast<double>(first.duration_ns) * 1e-9, first.step, first.period_s));
  }
  return d;
}

absl::StatusOr<Diagnosis> diagnose_run(const std::string& run_dir, const FollowOptions& options) {
  absl::StatusOr<Follower> follower = Follower::Open(run_dir, options);
  if (!follower.ok()) return follower.status();
  if (absl::Status polled = follower->poll(); !polled.ok()) return polled;
  // A finished run is held to its summaries (run_check.hpp): lost rows are an error.
  absl::StatusOr<std::vector<RunProblem>> problems = follower->check();
  if (!problems.ok()) return problems.status();
  if (absl::Status lost = run_problems_error(*problems); !lost.ok()) return lost;
  Diagnosis out = follower->diagnose();
  std::vector<std::string> warnings = run_problem_warnings(*problems);
  warnings.insert(warnings.end(), out.warnings.begin(), out.warnings.end());
  out.warnings = std::move(warnings);
  return out;
}

}  // namespace trainscope::diagnosis
