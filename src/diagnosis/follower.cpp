// The follower: the steps room's reader (each rank's steps with their phases,
// a window of the last K exact steps and a history that merges pairs past a
// cap; each host's load), plus per key a run-long series and recent samples.
// diagnose() hands them to conclude().
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
#include <utility>
#include <vector>

#include "diagnosis/statistics.hpp"
#include "fmt/format.h"
#include "trainscope/common/clock.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/detail/sample_series.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/steps/ledger.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::diagnosis {
namespace {

using stats::kNaN;
constexpr std::size_t kRecentPerKey = 8192;
constexpr std::size_t kExactPerKey = 65536;

// One region key's statistics (by the step reader's key index).
struct KeyTrack {
  std::uint64_t count = 0;
  stats::detail::SampleSeries run{0, kExactPerKey, 0.01};    // FollowOptions::key_run_stats
  std::deque<std::pair<std::int64_t, std::int64_t>> recent;  // start_ns, duration_ns
  // The run's statistics, computed again once the count grew by a twentieth.
  mutable TimeStats stats;
  mutable std::uint64_t stats_count = 0;
  mutable std::int64_t stats_ms = 0;
};

steps::StepOptions step_options(const FollowOptions& options) {
  steps::StepOptions out;
  out.keys = options.keys;
  out.window_steps = options.window_steps;
  out.max_history_steps = options.max_history_steps;
  out.read_budget_bytes_per_s = options.read_budget_bytes_per_s;
  return out;
}

// A rank's own window figures (RankNow): its steps (with_rest, warm-up
// dropped) and its process tree's latest readings. A phase it never timed: NaN.
void fill_rank_window(const std::vector<StepSample>& window, const steps::RankSteps& t,
                      RankNow* now) {
  if (!t.cpu_pct.empty()) now->cpu_pct = t.cpu_pct.rbegin()->second;
  if (!t.rss_mb.empty()) now->rss_mb = t.rss_mb.back().second;
  if (!t.gpu_mem_mb.empty()) now->gpu_mem_mb = t.gpu_mem_mb.rbegin()->second;
  if (window.empty()) return;
  std::vector<double> periods;
  std::array<double, kPhaseCount> sums{};
  double total = 0;
  std::uint64_t count = 0;
  for (const StepSample& x : window) {
    // A merged step (history) holds x.steps steps; the window's are exact.
    periods.push_back(x.period_s / x.steps);
    total += x.period_s;
    count += x.steps;
    for (std::size_t p = 0; p < kPhaseCount; ++p) sums[p] += x.cpu_s[p];
  }
  now->step_p50_s = stats::quantile(periods, 0.5);
  now->step_p95_s = stats::quantile(std::move(periods), 0.95);
  now->steps_per_s = total > 0 ? static_cast<double>(count) / total : kNaN;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    // A phase the rank never timed has no share (kRest always has one).
    const bool timed = t.cpu_measured[p] || p == static_cast<std::size_t>(Phase::kRest);
    now->phase_share[p] = timed && total > 0 ? std::clamp(sums[p] / total, 0.0, 1.0) : kNaN;
  }
}

}  // namespace

struct Follower::State {
  explicit State(steps::StepReader r) : reader(std::move(r)) {}
  steps::StepReader reader;
  // The work of the ranks' steps (the ledger's, docs/ledger.md), read beside the steps.
  steps::WorkReader work;
  mutable std::optional<steps::Ledger> ledger_cache;  // with run_cache
  FollowOptions options;
  std::vector<KeyTrack> keys;              // by the reader's key index
  mutable std::optional<Scope> run_cache;  // see diagnose()
  mutable std::size_t run_cache_steps = 0;
  mutable std::int64_t run_cache_ms = 0;

  void observe() {
    steps::StepReader::Observer observer;
    observer.row = [this](const RegionView& row, std::uint32_t key) {
      if (keys.size() <= key) keys.resize(key + 1);
      KeyTrack& k = keys[key];
      ++k.count;
      if (options.key_run_stats) k.run.add(row.duration_ns);
      k.recent.emplace_back(row.start_unix_ns, row.duration_ns);
      if (k.recent.size() > kRecentPerKey) k.recent.pop_front();
    };
    observer.restart = [this]() {
      keys.clear();
      work.restart();
      ledger_cache.reset();
      run_cache.reset();
      run_cache_steps = 0;
      run_cache_ms = 0;
    };
    reader.observe(std::move(observer));
  }
};

Follower::Follower(std::unique_ptr<State> state) : state_(std::move(state)) {}
Follower::Follower(Follower&&) noexcept = default;
Follower& Follower::operator=(Follower&&) noexcept = default;
Follower::~Follower() = default;

absl::StatusOr<Follower> Follower::Open(std::string run_dir, FollowOptions options) {
  absl::StatusOr<steps::StepReader> reader =
      steps::StepReader::Open(std::move(run_dir), step_options(options));
  if (!reader.ok()) return reader.status();
  auto state = std::make_unique<State>(*std::move(reader));
  state->options = std::move(options);
  state->options.max_history_steps = state->reader.options().max_history_steps;
  state->observe();
  return Follower(std::move(state));
}

const std::string& Follower::run_dir() const noexcept { return state_->reader.run_dir(); }
bool Follower::in_progress() const noexcept { return state_->reader.in_progress(); }
std::uint64_t Follower::bytes_read() const noexcept { return state_->reader.bytes_read(); }
std::uint64_t Follower::rows_read() const noexcept { return state_->reader.rows_read(); }
std::uint64_t Follower::bytes_skipped() const noexcept { return state_->reader.bytes_skipped(); }

absl::Status Follower::poll() {
  State& s = *state_;
  absl::StatusOr<RunReader> reader = RunReader::Open(s.reader.run_dir());
  if (!reader.ok()) return reader.status();
  if (absl::Status polled = s.reader.poll(*reader); !polled.ok()) return polled;
  if (absl::Status polled = s.work.poll(*reader); !polled.ok()) return polled;
  s.work.compact(s.reader.ranks());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunProblem>> Follower::check() const { return state_->reader.check(); }

Diagnosis Follower::diagnose() const {
  const State& s = *state_;
  const steps::StepReader& reader = s.reader;
  const RunInfo& info = reader.info();
  const std::vector<const steps::RankSteps*> ranks_read = reader.ranks();
  const std::vector<std::pair<std::string, Device>>& keys = reader.keys();
  const std::int64_t last_poll_ms = reader.last_poll_ms();
  const bool in_progress = reader.in_progress();
  const Thresholds& th = s.options.thresholds;
  const auto warmup = static_cast<std::int64_t>(std::max(0.0, th.warmup_steps));
  Diagnosis d;
  d.run_dir = reader.run_dir();
  d.run_id = info.id;
  d.run_name = info.name;
  d.status = info.status;
  d.start_time_ms = info.start_time_ms;
  const std::int64_t end_ms =
      in_progress || info.end_time_ms == 0
          ? (last_poll_ms ? last_poll_ms : trainscope::detail::unix_now_ms())
          : info.end_time_ms;
  d.elapsed_ms = std::max<std::int64_t>(0, end_ms - info.start_time_ms);
  d.world_size = reader.world_size();
  d.hosts = reader.host_names();
  d.window_steps = s.options.window_steps;
  {
    double read = 0, skipped = 0;
    for (const steps::RankSteps* t : ranks_read) {
      read += static_cast<double>(t->read_bytes);
      skipped += static_cast<double>(t->skipped_bytes);
    }
    d.read_share = skipped > 0 ? read / (read + skipped) : 1.0;
  }

  std::size_t history_steps = 0;
  for (const steps::RankSteps* t : ranks_read) history_steps += t->steps;
  // The run scope costs what the history holds: while the run goes on it is
  // concluded again only once the history grew by a twentieth (or ended), so
  // following a run costs what it appends.
  const std::int64_t now = last_poll_ms ? last_poll_ms : trainscope::detail::unix_now_ms();
  const bool need_run =
      !s.run_cache || !in_progress ||
      (static_cast<double>(history_steps) >= 1.05 * static_cast<double>(s.run_cache_steps) + 1 &&
       static_cast<double>(now - s.run_cache_ms) >= s.options.run_refresh_s * 1000.0);
  Inputs window, run;
  std::int64_t window_start_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_end_ns = 0;
  const std::vector<steps::HostLoad> hosts = reader.hosts();
  for (const steps::RankSteps* rank_steps : ranks_read) {
    const steps::RankSteps& t = *rank_steps;
    const std::uint32_t rank = t.rank;
    d.ranks.push_back(RankNow{rank, t.host, t.status, t.step_count()});
    last_end_ns = std::max(last_end_ns, t.last_end_ns);
    RankInput base;
    base.rank = rank;
    base.host = t.host;
    base.step_key = t.step_key;
    base.cpu_measured = t.cpu_measured;
    base.gpu_measured = t.gpu_measured;
    for (const steps::CollectiveRows& c : t.collectives) {
      base.collectives.push_back(CollectiveInput{keys.at(c.key).first, c.count, c.seconds, c.rows});
    }
    RankInput w = base, r = base;
    using steps::with_rest;
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
    auto add_reading = [&](std::int64_t time_ms, double value,
                           std::vector<Reading> RankInput::*series) {
      const std::int64_t ns = time_ms * 1'000'000;
      // A reading after the rank's last row measured a process tree that may be
      // gone (0 MB once it exited): it is no point of the rank's steps.
      if (ns > t.last_end_ns) return;
      const double step = t.step_at(ns);
      if (std::isnan(step)) return;
      const Reading reading{step, value, time_ms};
      if (ns >= r_start) (r.*series).push_back(reading);
      if (ns >= w_start) (w.*series).push_back(reading);
    };
    for (const auto& [time_ms, mb] : t.rss_mb) add_reading(time_ms, mb, &RankInput::rss_mb);
    for (const auto& [time_ms, mb] : t.gpu_mem_mb) {
      add_reading(time_ms, mb, &RankInput::gpu_mem_mb);
    }
    // NVML's utilization of the rank's devices, averaged over them per reading.
    std::map<std::int64_t, std::pair<double, int>> util;
    for (const steps::HostLoad& h : hosts) {
      if (h.host != t.host) continue;
      for (int gpu : t.gpus) {
        const auto series = h.gpu_util_pct.find(gpu);
        if (series == h.gpu_util_pct.end()) continue;
        for (const auto& [time_ms, pct] : series->second) {
          util[time_ms].first += pct;
          ++util[time_ms].second;
        }
      }
    }
    for (const auto& [time_ms, sum] : util) {
      add_reading(time_ms, sum.first / sum.second, &RankInput::gpu_util_pct);
    }
    fill_rank_window(w.steps, t, &d.ranks.back());
    window.ranks.push_back(std::move(w));
    run.ranks.push_back(std::move(r));
  }
  for (const steps::HostLoad& h : hosts) {
    HostInput all{h.host, {}, {}}, recent{h.host, {}, {}};
    std::vector<const steps::RankSteps*> on_host;
    for (const steps::RankSteps* t : reader.ranks()) {
      if (t->host == h.host) on_host.push_back(t);
    }
    all.contention = steps::contention_share(on_host);
    recent.contention = steps::contention_share(on_host, window_start_ns / 1'000'000);
    all.step_wait = steps::step_wait_share(on_host);
    recent.step_wait = steps::step_wait_share(on_host, window_start_ns);
    for (const HostReading& x : h.samples) {
      all.readings.push_back(x);
      if (x.time_ms * 1'000'000 >= window_start_ns) recent.readings.push_back(x);
    }
    if (!all.readings.empty()) run.hosts.push_back(std::move(all));
    if (!recent.readings.empty()) window.hosts.push_back(std::move(recent));
    if (h.now.time_ms != 0) d.host_now.push_back(h.now);
  }
  // What the run is, for advice that fits it: --auto, and whether a GPU was seen.
  RunFacts facts;
  const auto tag = [&info](const std::string& key) {
    const auto it = info.tags.find(key);
    return it == info.tags.end() ? std::string() : it->second;
  };
  d.auto_found =
      AutoFound{tag("trainscope.auto"), tag("trainscope.auto.steps"), tag("trainscope.auto.found")};
  facts.auto_instrumented = !d.auto_found.mode.empty();
  facts.gpu_seen = false;
  for (const steps::RankSteps* t : ranks_read) {
    for (bool measured : t->gpu_measured) facts.gpu_seen = facts.gpu_seen || measured;
    facts.gpu_seen = facts.gpu_seen || !t->gpu_mem_mb.empty();
  }
  for (const HostNow& h : d.host_now) facts.gpu_seen = facts.gpu_seen || !h.gpus.empty();
  window.facts = run.facts = facts;
  d.window = conclude(window, th, "window");
  if (need_run) {
    s.run_cache = conclude(run, th, "run");
    s.run_cache_steps = history_steps;
    s.run_cache_ms = now;
    // The ledger (docs/ledger.md), as often as the run scope: over every step with work read.
    s.ledger_cache = steps::conclude_ledger(info, ranks_read, s.work.work(), s.options.ledger,
                                            steps::energy_series(hosts));
  }
  d.run = *s.run_cache;
  if (s.ledger_cache && !s.ledger_cache->ranks.empty()) {
    note_ledger(d.run, *s.ledger_cache, th);
    d.ledger = s.ledger_cache;
  }
  // HANG (trainscope/diagnosis/hang.hpp): judged at this poll, first in both scopes. A job
  // ended for a hang (`--on-hang kill`) is judged at its end, its stopped ranks alive until then.
  const bool ended_for_hang = tag("trainscope.end_reason") == "hang";
  if (in_progress || ended_for_hang) {
    std::vector<RankProgress> progress;
    for (const steps::RankSteps* t : ranks_read) {
      progress.push_back(progress_of(*t));
      if (ended_for_hang) {
        progress.back().alive =
            t->status.running() || t->status.crashed || t->status.recorded == RunStatus::kKilled;
      }
    }
    const std::int64_t judged_ms = in_progress || info.end_time_ms == 0 ? now : info.end_time_ms;
    std::vector<Label> hangs;
    for (const HungRank& h : find_hung(progress, judged_ms * 1'000'000, th)) {
      hangs.push_back(hang_label(h, th, ended_for_hang));
    }
    // Where the hung ranks are, from their dumps (`trainscope dump`); a bad one is a warning.
    if (!hangs.empty()) add_dump_evidence(&hangs, read_dumps(d.run_dir, &d.warnings));
    d.window.labels.insert(d.window.labels.begin(), hangs.begin(), hangs.end());
    d.run.labels.insert(d.run.labels.begin(), hangs.begin(), hangs.end());
  }
  std::size_t most = 0;
  for (const steps::RankSteps* t : ranks_read) most = std::max<std::size_t>(most, t->steps);
  d.window.warmup = d.run.warmup = std::min<std::size_t>(static_cast<std::size_t>(warmup), most);

  // Keys: the window is the window's steps' span (the last minute before any step).
  if (window_start_ns == std::numeric_limits<std::int64_t>::max()) {
    window_start_ns = last_end_ns - std::int64_t{60} * 1'000'000'000;
  }
  const double wall_s = std::max(1e-9, static_cast<double>(last_end_ns - window_start_ns) * 1e-9);
  const double ranks = std::max<double>(1.0, static_cast<double>(ranks_read.size()));
  for (std::size_t id = 0; id < s.keys.size(); ++id) {
    const KeyTrack& k = s.keys[id];
    if (k.count == 0) continue;
    KeyRow row;
    row.key = reader.keys()[id].first;
    row.device = reader.keys()[id].second;
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
    if (k.stats_count == 0 || !in_progress ||
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
  const std::string layer_backward_every(tag(std::string(steps::kLayerBackwardEveryTag)));
  for (KeyRow& row : d.keys)
    row.sampled_every = steps::sampled_every(row.key, layer_backward_every);
  std::sort(d.keys.begin(), d.keys.end(), [](const KeyRow& a, const KeyRow& b) {
    return a.share != b.share ? a.share > b.share : a.key < b.key;
  });
  d.captures = find_captures(d.run_dir);  // trainscope/diagnosis/hang.hpp
  for (const steps::RankSteps* t : ranks_read) {
    std::string warning = steps::impossible_rows_warning(reader.run_dir(), *t, reader.keys());
    if (!warning.empty()) d.warnings.push_back(std::move(warning));
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

FollowOptions live_options() {
  FollowOptions options;
  options.run_refresh_s = 10;
  options.read_budget_bytes_per_s = kLiveReadBudget;
  options.max_history_steps = kLiveHistorySteps;
  options.key_run_stats = false;
  return options;
}

}  // namespace trainscope::diagnosis
