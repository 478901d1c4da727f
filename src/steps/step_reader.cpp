// The step reader: reads a run directory from where it stopped (each rank's
// regions into its StepBuilder, each host's readings), within a read budget
// for a live run; the host load joined at each host's CPU readings.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "steps/step_builder.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {
namespace {

using stats::kNaN;
constexpr std::uint64_t kReadBytes = std::uint64_t{4} << 20;  // per read call

bool consume_prefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool to_int(std::string_view s, int* out) {
  return absl::SimpleAtoi(absl::string_view(s.data(), s.size()), out);
}

// host::kGpuMetricPrefix <i> "." <rest> -> i, rest.
bool gpu_key(std::string_view key, int* index, std::string_view* rest) {
  if (!consume_prefix(&key, host::kGpuMetricPrefix)) return false;
  const std::size_t dot = key.find('.');
  if (dot == std::string_view::npos) return false;
  if (!to_int(key.substr(0, dot), index)) return false;
  *rest = key.substr(dot + 1);
  return true;
}

// What a key means to the steps, resolved once per key.
constexpr int kNoRole = -1;
constexpr int kStepRole = -2;

struct KeyInfo {
  std::uint32_t id = 0;
  int role = kNoRole;       // kStepRole, a Phase, or kNoRole
  bool batch = false;       // BATCH: its rows' `step` is its own number
  bool collective = false;  // COMM/<op>/<group>: in the comm phase, its rows kept
};

struct HostTrack {
  std::string host;
  std::uint64_t offset = 0;
  std::map<std::int64_t, HostSample> readings;  // by time (cpu util, swap)
  // The job's process trees' CPU (% of one core), by the rank they measured
  // (kNoRank: a launcher of several ranks), by time; rows of one time summed.
  std::map<std::uint32_t, std::map<std::int64_t, double>> job_cpu;
  std::set<int> cores_seen;
  std::map<int, std::map<std::int64_t, double>> gpu_util;  // HostLoad::gpu_util_pct
  int recorded_cores = 0;                                  // the environment record's
  // HostLoad::rapl_energy_j, gpu_energy_j, job_gpus
  std::vector<std::pair<std::int64_t, double>> rapl_energy_j;
  std::map<int, std::vector<std::pair<std::int64_t, double>>> gpu_energy_j;
  std::set<int> job_gpus;
  HostNow now;
};

// A process tree's CPU at `time_ms`: its reading whose interval (from its
// previous reading) holds that time; none (NaN) when it was not sampled then.
double cpu_at(const std::map<std::int64_t, double>& series, std::int64_t time_ms) {
  auto it = series.lower_bound(time_ms);
  if (it == series.end()) return kNaN;
  if (it->first == time_ms) return it->second;
  const std::int64_t interval = it == series.begin() ? 1000 : it->first - std::prev(it)->first;
  return it->first - time_ms <= interval ? it->second : kNaN;
}

}  // namespace

double Step::rest_s() const {
  // The phases that lie outside each other: comm and comm_exposed overlap
  // backward (DDP's all-reduce), so of them only the COMM rows count.
  double measured = comm_waited_s;
  for (Phase p : {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward, Phase::kBackward,
                  Phase::kOptimizer, Phase::kSync}) {
    measured += cpu_s[static_cast<std::size_t>(p)];
  }
  return std::max(0.0, period_s - measured);
}

void Step::settle_comm() {
  cpu_s[static_cast<std::size_t>(Phase::kComm)] = collectives_s > 0 ? collectives_s : comm_waited_s;
  cpu_s[static_cast<std::size_t>(Phase::kCommExposed)] = comm_waited_s + ddp_exposed_s;
}

Step with_rest(Step step) {
  step.cpu_s[static_cast<std::size_t>(Phase::kRest)] = step.rest_s();
  return step;
}

double HostSample::other_cpu_pct() const {
  if (!std::isfinite(cpu_util_pct) || !std::isfinite(job_cpu_pct)) return kNaN;
  return std::max(0.0, cpu_util_pct - job_cpu_pct);
}

double RankSteps::step_at(std::int64_t time_ns) const {
  auto it = std::partition_point(history.begin(), history.end(),
                                 [&](const Step& s) { return s.start_ns <= time_ns; });
  if (it == history.begin()) return kNaN;
  const Step& s = *std::prev(it);
  const double into =
      s.period_s > 0 ? static_cast<double>(time_ns - s.start_ns) * 1e-9 / s.period_s : 0.0;
  return static_cast<double>(s.step) + std::min(1.0, into) * s.steps;
}

std::vector<double> RankSteps::gpu_busy_shares() const {
  bool any = false, union_known = true;
  for (const Step& s : history) {
    if (s.gpu_rows_placed + s.gpu_rows_unplaced == 0 && !(s.gpu_busy_s > 0)) continue;
    any = true;
    union_known = union_known && s.gpu_union_known();
  }
  std::vector<double> out;
  if (!any) return out;
  for (const Step& s : history) {
    if (!(s.period_s > 0)) continue;
    out.push_back(std::min(1.0, (union_known ? s.gpu_union_s : s.gpu_busy_s) / s.period_s));
  }
  return out;
}

struct StepReader::State {
  std::string dir;
  StepOptions options;
  RunInfo info;
  std::uint32_t world_size = 0;
  bool in_progress = true;
  std::vector<std::string> hosts;
  std::map<std::uint32_t, detail::StepBuilder> builders;
  std::array<absl::flat_hash_map<std::string, KeyInfo>, 2> key_info;  // by device
  std::vector<std::pair<std::string, Device>> keys;                   // by id
  std::map<std::string, HostTrack> host_tracks;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::int64_t last_poll_ms = 0;
  Observer observer;

  detail::StepBuilder& builder(std::uint32_t rank) {
    auto it = builders.find(rank);
    if (it == builders.end()) {
      it = builders
               .emplace(rank, detail::StepBuilder(options.window_steps, options.max_history_steps,
                                                  options.key_sums))
               .first;
      it->second.out().rank = rank;
    }
    return it->second;
  }

  void restart() {
    std::string keep_dir = std::move(dir);
    StepOptions keep_options = std::move(options);
    Observer keep_observer = std::move(observer);
    const std::uint64_t keep_bytes = bytes;
    *this = State{};
    dir = std::move(keep_dir);
    options = std::move(keep_options);
    observer = std::move(keep_observer);
    bytes = keep_bytes;
    if (observer.restart) observer.restart();
  }

  const KeyInfo& key_of(const RegionView& row) {
    auto& by_key = key_info[row.device == Device::kGPU ? 1 : 0];
    const absl::string_view name(row.key.data(), row.key.size());
    auto found = by_key.find(name);
    if (found == by_key.end()) {
      KeyInfo k;
      k.id = static_cast<std::uint32_t>(keys.size());
      keys.emplace_back(std::string(row.key), row.device);
      if (options.keys.is_step(row.key)) {
        k.role = kStepRole;
        k.batch = row.key == "BATCH";  // TimeType::BATCH, whose completions `step` counts
      } else if (const std::optional<Phase> phase = options.keys.phase_of(row.key)) {
        k.role = static_cast<int>(*phase);
        k.collective = *phase == Phase::kComm && is_collective_key(row.key);
      }
      found = by_key.emplace(std::string(row.key), k).first;
    }
    return found->second;
  }

  static void keep_collective(RankSteps* t, std::uint32_t key, const RegionView& row) {
    auto it = std::find_if(t->collectives.begin(), t->collectives.end(),
                           [key](const CollectiveRows& c) { return c.key == key; });
    if (it == t->collectives.end()) {
      t->collectives.push_back(CollectiveRows{});
      it = std::prev(t->collectives.end());
      it->key = key;
    }
    ++it->count;
    it->seconds += static_cast<double>(row.duration_ns) * 1e-9;
    it->rows.emplace_back(row.start_unix_ns, row.duration_ns);
    if (it->rows.size() > CollectiveRows::kKeptRows) it->rows.pop_front();
  }

  void feed(detail::StepBuilder* b, const RegionView& row) {
    ++rows;
    RankSteps& t = b->out();
    const std::int64_t end =
        row.duration_ns > std::numeric_limits<std::int64_t>::max() - row.start_unix_ns
            ? std::numeric_limits<std::int64_t>::max()
            : row.start_unix_ns + row.duration_ns;
    t.last_end_ns = std::max(t.last_end_ns, end);
    const KeyInfo& k = key_of(row);
    if (t.key_rows.size() <= k.id) t.key_rows.resize(k.id + 1);
    ++t.key_rows[k.id];
    const bool step_row =
        k.role == kStepRole && row.device == Device::kCPU &&
        (t.step_key.empty() || (row.key == t.step_key && row.thread == t.step_thread));
    if (step_row) {
      // The rank keeps the first step key it recorded, on its thread.
      if (t.step_key.empty()) {
        t.step_key = std::string(row.key);
        t.step_thread = row.thread;
      }
      b->on_step(row.start_unix_ns, row.duration_ns, k.batch ? row.step : -1, k.id,
                 row.cpu_wait_ns);
    } else {
      // A GPU step row, or another step key, times no step: a key of no phase.
      const int phase = k.role >= 0 ? k.role : -1;
      detail::PendingRow pending{
          row.start_unix_ns,          end,       row.duration_ns, k.id, phase,
          row.device == Device::kGPU, row.thread};
      pending.collective = k.collective;
      pending.gpu_start_ns = row.gpu_start_ns;
      if (k.collective && row.device == Device::kCPU) keep_collective(&t, k.id, row);
      b->on_row(pending);
    }
    if (observer.row) observer.row(row, k.id);
  }

  // Readings of a process tree that is no single rank's (one launcher running
  // several ranks) count for the lowest rank: the job's.
  RankSteps* rank_for(std::uint32_t rank) {
    if (rank == kNoRank) {
      if (builders.empty()) return nullptr;
      return &builders.begin()->second.out();
    }
    return &builder(rank).out();
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
    if (key == host::kCpuStealMetric) {
      h->readings[m.timestamp_ms].steal_pct = v;
      h->readings[m.timestamp_ms].time_ms = m.timestamp_ms;
    } else if (key == host::kCpuUtilMetric) {
      h->readings[m.timestamp_ms].cpu_util_pct = v;
      h->readings[m.timestamp_ms].time_ms = m.timestamp_ms;
      now.cpu_util_pct = v;
    } else if (consume_prefix(&key, host::kCpuMetricPrefix)) {
      int core = 0;
      if (to_int(key.substr(0, key.find('.')), &core)) h->cores_seen.insert(core);
    } else if (key == host::kProcCpuMetric) {
      h->job_cpu[m.rank][m.timestamp_ms] += v;
      if (RankSteps* r = rank_for(m.rank)) r->cpu_pct[m.timestamp_ms] += v;
    } else if (key == host::kMemUsedPctMetric) {
      now.mem_used_pct = v;
    } else if (key == host::kSwapUsedMbMetric) {
      h->readings[m.timestamp_ms].swap_used_mb = v;
      h->readings[m.timestamp_ms].time_ms = m.timestamp_ms;
      now.swap_used_mb = v;
    } else if (key == host::kProcCpuWaitMetric) {
      if (RankSteps* r = rank_for(m.rank)) r->cpu_wait_pct[m.timestamp_ms] += v;
    } else if (key == host::kRaplEnergyMetric) {
      h->rapl_energy_j.emplace_back(m.timestamp_ms, v);
    } else if (key == host::kProcRssMbMetric) {
      if (RankSteps* r = rank_for(m.rank)) r->rss_mb.emplace_back(m.timestamp_ms, v);
    } else if (gpu_key(key, &gpu, &rest)) {
      if (rest == host::kGpuProcMemUsedQuantity) {
        if (RankSteps* r = rank_for(m.rank)) {
          r->gpu_mem_mb[m.timestamp_ms] += v;
          r->gpus.insert(gpu);
        }
        if (v > 0) h->job_gpus.insert(gpu);
        return;
      }
      if (rest == host::kGpuEnergyQuantity) h->gpu_energy_j[gpu].emplace_back(m.timestamp_ms, v);
      auto it = std::find_if(now.gpus.begin(), now.gpus.end(),
                             [gpu](const GpuNow& g) { return g.index == gpu; });
      if (it == now.gpus.end()) {
        now.gpus.push_back(GpuNow{gpu});
        std::sort(now.gpus.begin(), now.gpus.end(),
                  [](const GpuNow& a, const GpuNow& b) { return a.index < b.index; });
        it = std::find_if(now.gpus.begin(), now.gpus.end(),
                          [gpu](const GpuNow& g) { return g.index == gpu; });
      }
      if (rest == host::kGpuUtilQuantity) {
        it->util_pct = v;
        h->gpu_util[gpu][m.timestamp_ms] = v;
      }
      if (rest == host::kGpuMemUsedQuantity) it->mem_used_mb = v;
      if (rest == host::kGpuMemTotalQuantity) it->mem_total_mb = v;
    }
  }

  // The cores of each host from its launcher's environment record (a run
  // recorded before launchers had their own: the one record, for every host).
  void read_cores(const RunReader& reader) {
    bool missing = false;
    for (auto& [name, h] : host_tracks) missing = missing || h.recorded_cores == 0;
    if (!missing) return;
    for (const LauncherState& launcher : reader.launchers()) {
      auto h = host_tracks.find(launcher.host);
      if (h == host_tracks.end() || h->second.recorded_cores > 0) continue;
      absl::StatusOr<EnvironmentRecord> env = reader.environment_record(launcher);
      if (env.ok() && env->cores > 0) h->second.recorded_cores = env->cores;
    }
    if (reader.launchers().empty()) {
      absl::StatusOr<EnvironmentRecord> env = reader.environment_record();
      if (env.ok() && env->cores > 0) {
        for (auto& [name, h] : host_tracks) h.recorded_cores = env->cores;
      }
    }
  }

  std::uint64_t window_keep(const RunReader& reader, const RankSteps& t, std::uint64_t keep) const;
};

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

double bytes_per_step(const RankSteps& t) {
  return t.step_rows ? static_cast<double>(t.read_bytes) / static_cast<double>(t.step_rows) : 0.0;
}

}  // namespace

// Bytes of rank t's newest rows, at least `keep`, that hold the window's
// steps (and the open one, and a twentieth more): ever larger tails from
// `keep` on (doubling) until their step rows do, or the unread rows end.
std::uint64_t StepReader::State::window_keep(const RunReader& reader, const RankSteps& t,
                                             std::uint64_t keep) const {
  const double want = 1.05 * static_cast<double>(options.window_steps + 1);
  const std::uint64_t offset_now = t.read_bytes + t.skipped_bytes;
  for (keep = std::max<std::uint64_t>(keep, 4096);; keep *= 2) {
    absl::StatusOr<std::uint64_t> from = reader.regions_tail_offset(t.rank, offset_now, keep);
    if (!from.ok() || *from <= offset_now) return keep;
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

StepReader::StepReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
StepReader::StepReader(StepReader&&) noexcept = default;
StepReader& StepReader::operator=(StepReader&&) noexcept = default;
StepReader::~StepReader() = default;

absl::StatusOr<StepReader> StepReader::Open(std::string run_dir, StepOptions options) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status();
  if (options.window_steps == 0) {
    return absl::InvalidArgumentError("the window must hold at least one step");
  }
  options.max_history_steps = std::max<std::size_t>(options.max_history_steps, 64);
  if (options.key_sums) options.max_history_steps = std::numeric_limits<std::size_t>::max();
  auto state = std::make_unique<State>();
  state->dir = std::move(run_dir);
  state->options = std::move(options);
  state->info = reader->info();
  return StepReader(std::move(state));
}

void StepReader::observe(Observer observer) { state_->observer = std::move(observer); }
const std::string& StepReader::run_dir() const noexcept { return state_->dir; }
const StepOptions& StepReader::options() const noexcept { return state_->options; }
const RunInfo& StepReader::info() const noexcept { return state_->info; }
std::uint32_t StepReader::world_size() const noexcept { return state_->world_size; }
const std::vector<std::string>& StepReader::host_names() const noexcept { return state_->hosts; }
bool StepReader::in_progress() const noexcept { return state_->in_progress; }
std::int64_t StepReader::last_poll_ms() const noexcept { return state_->last_poll_ms; }
std::uint64_t StepReader::bytes_read() const noexcept { return state_->bytes; }
std::uint64_t StepReader::rows_read() const noexcept { return state_->rows; }
std::uint64_t StepReader::bytes_skipped() const noexcept {
  std::uint64_t total = 0;
  for (const auto& [rank, b] : state_->builders) total += b.out().skipped_bytes;
  return total;
}
const std::vector<std::pair<std::string, Device>>& StepReader::keys() const noexcept {
  return state_->keys;
}
std::vector<const RankSteps*> StepReader::ranks() const {
  std::vector<const RankSteps*> out;
  out.reserve(state_->builders.size());
  for (const auto& [rank, b] : state_->builders) out.push_back(&b.out());
  return out;
}

absl::Status StepReader::poll() {
  absl::StatusOr<RunReader> reader = RunReader::Open(state_->dir);
  if (!reader.ok()) return reader.status();
  return poll(*reader);
}

absl::Status StepReader::poll(const RunReader& reader) {
  State& s = *state_;
  // Another run in the directory (deleted and created again at the same
  // path): what was read is of the old one, so it starts over.
  const bool another_run =
      reader.info().id != s.info.id || reader.info().start_time_ms != s.info.start_time_ms;
  // An ended run appends no more: it is read whole, also what a live poll
  // skipped (then read again from the start).
  if (another_run || (!reader.in_progress() && bytes_skipped() > 0)) s.restart();
  s.info = reader.info();
  s.world_size = reader.world_size();
  s.hosts = reader.hosts();
  s.in_progress = reader.in_progress();
  const std::int64_t previous_poll_ms = s.last_poll_ms;
  s.last_poll_ms = trainscope::detail::unix_now_ms();
  // The read budget of this poll: its share of the seconds since the last one,
  // shared by the ranks after what each has unread (budget_shares).
  std::map<std::uint32_t, double> shares;
  if (s.options.read_budget_bytes_per_s > 0 && s.in_progress) {
    const double budget_s =
        previous_poll_ms == 0
            ? 1.0
            : std::clamp(static_cast<double>(s.last_poll_ms - previous_poll_ms) * 1e-3, 0.05, 10.0);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> unread;
    for (const RunFile& file : reader.files()) {
      if (file.kind != RunFileKind::kRegions) continue;
      auto b = s.builders.find(file.rank);
      const std::uint64_t offset =
          b == s.builders.end() ? 0 : b->second.out().read_bytes + b->second.out().skipped_bytes;
      unread.emplace_back(file.size_bytes > offset ? file.size_bytes - offset : 0, file.rank);
    }
    shares = budget_shares(std::move(unread), s.options.read_budget_bytes_per_s * budget_s);
  }
  for (const RankState& state : reader.ranks()) {
    detail::StepBuilder& b = s.builder(state.rank.rank);
    RankSteps& t = b.out();
    t.host = state.host;
    t.status = ProcessStatus{state.status, state.crashed};
    std::uint64_t offset = t.read_bytes + t.skipped_bytes;
    if (auto share = shares.find(t.rank); share != shares.end()) {
      // Its share of the budget, and at least the window's steps, the open one
      // and a twentieth more (steps vary in size): from its rows' size per
      // step, or, before any step was read, by counting the newest rows' steps.
      auto keep = static_cast<std::uint64_t>(share->second);
      const double per_step = bytes_per_step(t);
      keep = per_step > 0
                 ? std::max(keep,
                            static_cast<std::uint64_t>(
                                1.05 * static_cast<double>(s.options.window_steps + 1) * per_step))
                 : s.window_keep(reader, t, keep);
      absl::StatusOr<std::uint64_t> resume = reader.regions_tail_offset(t.rank, offset, keep);
      if (resume.ok() && *resume > offset) {
        b.skip(*resume - offset);
        offset = *resume;
      }
    }
    while (true) {
      absl::StatusOr<RunReader::Scan> scan = reader.scan_regions(
          t.rank, offset, kReadBytes, [&s, &b](const RegionView& row) { s.feed(&b, row); });
      if (absl::IsNotFound(scan.status())) break;
      if (!scan.ok()) return scan.status();
      s.bytes += scan->next_offset - offset;
      t.read_bytes += scan->next_offset - offset;
      const bool advanced = scan->next_offset > offset;
      offset = scan->next_offset;
      if (!advanced || scan->rows == 0) break;
    }
  }
  for (const std::string& host : s.hosts) {
    HostTrack& h = s.host_tracks[host];
    h.host = host;
    while (true) {
      absl::StatusOr<Chunk<MetricPoint>> chunk =
          reader.read_host_metrics(host, h.offset, kReadBytes);
      if (!chunk.ok()) return chunk.status();
      for (const MetricPoint& m : chunk->rows) s.feed_host(&h, m);
      s.bytes += chunk->next_offset - h.offset;
      const bool advanced = chunk->next_offset > h.offset;
      h.offset = chunk->next_offset;
      if (!advanced || chunk->rows.empty()) break;
    }
  }
  s.read_cores(reader);
  // A rank that ended (or crashed) records no more steps: its open step closes
  // with its own duration, also while other ranks or the launcher still run.
  for (auto& [rank, b] : s.builders) {
    if (!s.in_progress || !b.out().status.running()) b.close();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunProblem>> StepReader::check() const {
  const State& s = *state_;
  absl::StatusOr<RunReader> reader = RunReader::Open(s.dir);
  if (!reader.ok()) return reader.status();
  // The rows of each rank read whole, as this reader counted them: check_run
  // reads only the files of the others.
  RegionCounts counted;
  for (const auto& [rank, b] : s.builders) {
    const RankSteps& t = b.out();
    if (t.skipped_bytes > 0 || t.read_bytes == 0) continue;
    std::vector<RegionCount>& rows = counted[rank];
    for (std::size_t id = 0; id < t.key_rows.size(); ++id) {
      if (t.key_rows[id] == 0) continue;
      rows.push_back(RegionCount{s.keys[id].first, s.keys[id].second, t.key_rows[id]});
    }
  }
  return check_run(*reader, &counted);
}

std::vector<HostLoad> StepReader::hosts() const {
  std::vector<HostLoad> out;
  for (const auto& [name, h] : state_->host_tracks) {
    HostLoad load;
    load.host = name;
    load.cores = h.recorded_cores > 0 ? h.recorded_cores : static_cast<int>(h.cores_seen.size());
    load.now = h.now;
    load.gpu_util_pct = h.gpu_util;
    load.rapl_energy_j = h.rapl_energy_j;
    load.gpu_energy_j = h.gpu_energy_j;
    load.job_gpus = h.job_gpus;
    std::vector<const RankSteps*> on_host;
    for (const RankSteps* r : ranks()) {
      if (r->host == name) on_host.push_back(r);
    }
    load.now.contention = contention_share(on_host, h.now.time_ms - kRecentContentionMs);
    load.now.step_wait =
        step_wait_share(on_host, (h.now.time_ms - kRecentContentionMs) * 1'000'000);
    for (const auto& [time_ms, reading] : h.readings) {
      HostSample x = reading;
      x.time_ms = time_ms;
      if (load.cores > 0 && !h.job_cpu.empty()) {
        double job = 0;
        bool any = false;
        for (const auto& [source, series] : h.job_cpu) {
          const double v = cpu_at(series, time_ms);
          if (std::isfinite(v)) {
            job += v;
            any = true;
          }
        }
        if (any) x.job_cpu_pct = job / load.cores;
      }
      load.samples.push_back(x);
    }
    out.push_back(std::move(load));
  }
  return out;
}

std::string impossible_rows_warning(const std::string& run_dir, const RankSteps& t,
                                    const std::vector<std::pair<std::string, Device>>& keys) {
  if (t.impossible_rows == 0) return {};
  const ImpossibleRow& first = t.first_impossible;
  const std::uint64_t n = t.impossible_rows;
  return fmt::format(
      "{}/regions-{}.csv: {} CPU row{} of rank {} last{} longer than the whole step {} "
      "belong{} to (a clock jump or a damaged file?), left out of the step's phases: the "
      "first, {}, lasts {} s in step {} of {} s",
      run_dir, t.rank, n, n == 1 ? "" : "s", t.rank, n == 1 ? "s" : "", n == 1 ? "it" : "they",
      n == 1 ? "s" : "", first.key < keys.size() ? keys[first.key].first : std::string("?"),
      static_cast<double>(first.duration_ns) * 1e-9, first.step, first.period_s);
}

absl::StatusOr<RunSteps> read_steps(const RunReader& reader, const KeyMap& keys) {
  StepOptions options;
  options.keys = keys;
  options.window_steps = 1;
  options.key_sums = true;
  options.max_history_steps = std::numeric_limits<std::size_t>::max();
  auto state = std::make_unique<StepReader::State>();
  state->dir = reader.dir();
  state->options = std::move(options);
  state->info = reader.info();
  StepReader steps(std::move(state));
  if (absl::Status polled = steps.poll(reader); !polled.ok()) return polled;
  for (auto& [rank, b] : steps.state_->builders) {
    if (b.out().open) {  // a running rank's open step: its rows are in no step yet
      RankSteps& t = b.out();
      t.unstepped.insert(t.unstepped.end(), b.open_keys().begin(), b.open_keys().end());
    }
    b.flush_unstepped();
  }
  RunSteps out;
  out.info = steps.info();
  out.keys = steps.keys();
  for (const RankSteps* t : steps.ranks()) {
    out.ranks.push_back(*t);
    std::string warning = impossible_rows_warning(reader.dir(), *t, out.keys);
    if (!warning.empty()) out.warnings.push_back(std::move(warning));
  }
  out.hosts = steps.hosts();
  return out;
}

}  // namespace trainscope::steps
