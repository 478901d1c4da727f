// The pure step: a scope's steps and readings -> phases and labels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "diagnosis/statistics.hpp"
#include "diagnosis/text.hpp"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::diagnosis {
namespace {

using detail::mann_kendall;
using detail::mean_interval;
using detail::ratio_interval;
using detail::slope_hac;

using stats::kNaN;
using stats::median;
using stats::quantile;
constexpr std::size_t kIndex(Phase p) { return static_cast<std::size_t>(p); }

// The labels' sentences (diagnosis/text.hpp).
using text::pct;
using text::secs;
// `of`: what the interval is over (a host's shares are over its readings).
std::string pct_interval(const Interval& i, std::string_view of = "steps") {
  if (!std::isfinite(i.low)) return fmt::format("{} (no interval: too few {})", pct(i.value), of);
  return stats::format_share_interval(i.value, i.low, i.high, stats::kNotAvailable);
}

// A share of the step (or of the host's cores) with its interval, held in
// [0, 1], which no share leaves by construction: an interval bound that the
// normal approximation puts past either end (a share near 0 or 1) is clipped
// there; a value the data puts past 1 (regions that overlap, so that time is
// counted twice) is clipped too, and `what` is named in a note.
Interval clip_share(Interval i, std::string_view what, std::vector<std::string>* notes) {
  if (std::isfinite(i.value) && i.value > 1 + 1e-9 && notes != nullptr) {
    notes->push_back(fmt::format(
        "{}: {} of the step, more than the whole step (regions that overlap count their time "
        "twice): shown as 100%",
        what, pct(i.value)));
  }
  const auto clip = [](double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : x; };
  return Interval{clip(i.value), clip(i.low), clip(i.high)};
}

// ratio_interval of a share of the step, clipped (clip_share).
Interval share_interval(const std::vector<double>& num, const std::vector<double>& den,
                        std::string_view what, std::vector<std::string>* notes) {
  return clip_share(ratio_interval(num, den), what, notes);
}

// Per-step sums over ranks, keyed by step index: the pooled series of a scope.
struct Pooled {
  std::vector<double> period;
  std::vector<double> steps;
  std::array<std::vector<double>, kPhaseCount> cpu;
  std::array<std::vector<double>, kPhaseCount> gpu;
  std::vector<double> gpu_busy;   // Step::gpu_busy_s
  std::vector<double> gpu_union;  // Step::gpu_union_s
  bool gpu_union_known = true;    // in every step with GPU-timed compute rows
};

Pooled pool(const std::vector<const RankInput*>& ranks) {
  struct Sum {
    double period = 0, steps = 0, gpu_busy = 0, gpu_union = 0;
    bool union_known = true;
    std::array<double, kPhaseCount> cpu{}, gpu{};
  };
  std::map<std::int64_t, Sum> by_step;
  for (const RankInput* rank : ranks) {
    for (const StepSample& s : rank->steps) {
      Sum& sum = by_step[s.step];
      sum.period += s.period_s;
      sum.steps += s.steps;
      sum.gpu_busy += s.gpu_busy_s;
      sum.gpu_union += s.gpu_union_s;
      const bool gpu_rows = s.gpu_rows_placed + s.gpu_rows_unplaced > 0;
      sum.union_known &= !gpu_rows || s.gpu_union_known();
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        sum.cpu[p] += s.cpu_s[p];
        sum.gpu[p] += s.gpu_s[p];
      }
    }
  }
  Pooled out;
  for (const auto& [step, sum] : by_step) {
    out.period.push_back(sum.period);
    out.steps.push_back(sum.steps);
    out.gpu_busy.push_back(sum.gpu_busy);
    out.gpu_union.push_back(sum.gpu_union);
    out.gpu_union_known &= sum.union_known;
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      out.cpu[p].push_back(sum.cpu[p]);
      out.gpu[p].push_back(sum.gpu[p]);
    }
  }
  return out;
}

std::vector<double> sum_of(const Pooled& pooled, const std::vector<Phase>& phases, bool gpu) {
  std::vector<double> out(pooled.period.size(), 0.0);
  for (Phase p : phases) {
    const std::vector<double>& v = gpu ? pooled.gpu[kIndex(p)] : pooled.cpu[kIndex(p)];
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += v[i];
  }
  return out;
}

bool measured_anywhere(const std::vector<const RankInput*>& ranks, Phase p, bool gpu) {
  for (const RankInput* r : ranks) {
    if ((gpu ? r->gpu_measured : r->cpu_measured)[kIndex(p)]) return true;
  }
  return false;
}

bool measured_everywhere(const std::vector<const RankInput*>& ranks, Phase p) {
  for (const RankInput* r : ranks) {
    if (!r->cpu_measured[kIndex(p)]) return false;
  }
  return !ranks.empty();
}

// Per-step values (time / steps) of one phase of one rank.
std::vector<double> per_step(const RankInput& rank, Phase p, bool gpu) {
  std::vector<double> out;
  out.reserve(rank.steps.size());
  for (const StepSample& s : rank.steps) {
    const double v =
        p == Phase::kRest && !gpu ? s.cpu_s[kIndex(p)] : (gpu ? s.gpu_s : s.cpu_s)[kIndex(p)];
    out.push_back(v / std::max<std::uint32_t>(1, s.steps));
  }
  return out;
}

PhaseRow phase_row(const std::vector<const RankInput*>& ranks, Phase p, bool gpu,
                   const Pooled& pooled) {
  PhaseRow row;
  row.phase = p;
  row.device = gpu ? Device::kGPU : Device::kCPU;
  std::vector<double> all;
  std::vector<std::pair<double, std::uint32_t>> rank_medians;
  for (const RankInput* r : ranks) {
    std::vector<double> v = per_step(*r, p, gpu);
    all.insert(all.end(), v.begin(), v.end());
    rank_medians.emplace_back(median(v), r->rank);
  }
  row.median_s = median(all);
  row.p95_s = quantile(all, 0.95);
  double num = 0, den = 0;
  const std::vector<double>& v = gpu ? pooled.gpu[kIndex(p)] : pooled.cpu[kIndex(p)];
  for (std::size_t i = 0; i < v.size(); ++i) {
    num += v[i];
    den += pooled.period[i];
  }
  row.share = den > 0 ? std::clamp(num / den, 0.0, 1.0) : 0;  // see clip_share
  std::vector<double> medians;
  for (const auto& [m, rank] : rank_medians) medians.push_back(m);
  row.median_rank_s = median(medians);
  const auto worst = std::max_element(rank_medians.begin(), rank_medians.end());
  row.worst_rank_s = worst->first;
  row.worst_rank = worst->second;
  row.skew =
      ranks.size() > 1 && row.median_rank_s > 0 ? row.worst_rank_s / row.median_rank_s - 1 : 0.0;
  return row;
}

Label make_label(LabelName name, LabelKind kind, std::string quantity, Interval value,
                 double threshold, std::string threshold_name, std::string evidence,
                 std::string next_step) {
  Label l;
  l.name = name;
  l.kind = kind;
  l.quantity = std::move(quantity);
  l.value = value;
  l.threshold = threshold;
  l.threshold_name = std::move(threshold_name);
  l.evidence = std::move(evidence);
  l.next_step = std::move(next_step);
  return l;
}

bool above(const Interval& i, double threshold) {
  return std::isfinite(i.low) && i.low > threshold;
}
bool below(const Interval& i, double threshold) {
  return std::isfinite(i.high) && i.high < threshold;
}

// Per step, each rank's value minus the median of the other ranks' (steps
// every rank has), for values[rank][step].
std::vector<std::vector<double>> lags_of(
    const std::vector<std::map<std::int64_t, double>>& values) {
  const std::size_t n = values.size();
  std::vector<std::vector<double>> lags(n);
  std::vector<double> at(n), others;
  others.reserve(n);
  for (const auto& [step, first] : values[0]) {
    bool all = true;
    for (std::size_t r = 0; r < n && all; ++r) {
      const auto it = values[r].find(step);
      all = it != values[r].end();
      if (all) at[r] = it->second;
    }
    if (!all) continue;
    for (std::size_t r = 0; r < n; ++r) {
      others.clear();
      for (std::size_t q = 0; q < n; ++q) {
        if (q != r) others.push_back(at[q]);
      }
      lags[r].push_back(at[r] - stats::median_in_place(&others));
    }
  }
  return lags;
}

// STRAGGLER: a rank that lags the median of the other ranks in a phase (an
// interval wholly above the threshold) while it is behind them at that point
// of the step (its lag summed over this phase and the earlier ones, also
// wholly above half the threshold). A rank that waits for a straggler shows
// an excess too, but later in the step (in the collective, or DDP's
// backward), after the straggler's excess, so it is not behind there: the
// rule tells the cause from the wait. Of the phases that qualify, the largest
// lag wins. Phases in step order: data_wait, h2d, forward, backward,
// optimizer (the rest when no compute phase is timed); never comm.
void find_straggler(const std::vector<const RankInput*>& ranks, const Thresholds& t,
                    double mean_step_s, bool compute_timed, Scope* scope) {
  if (ranks.size() < 2) return;
  std::vector<Phase> candidates = {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward,
                                   Phase::kBackward, Phase::kOptimizer};
  if (!compute_timed) candidates.push_back(Phase::kRest);
  const double threshold = std::max(t.straggler_min_lag_s, t.straggler_lag_share * mean_step_s);
  std::vector<std::map<std::int64_t, double>> cumulative(ranks.size());
  std::optional<Label> best;
  for (Phase p : candidates) {
    if (p != Phase::kRest && !measured_everywhere(ranks, p)) continue;
    std::vector<std::map<std::int64_t, double>> phase(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      for (const StepSample& s : ranks[r]->steps) {
        // Backward's wait for DDP's last bucket (comm_exposed) is another rank's
        // lag seen at the collective, not this rank's compute.
        const double own = p == Phase::kBackward
                               ? std::max(0.0, s.cpu_s[kIndex(p)] - s.ddp_exposed_s)
                               : s.cpu_s[kIndex(p)];
        const double v = own / std::max<std::uint32_t>(1, s.steps);
        phase[r][s.step] = v;
        cumulative[r][s.step] += v;
      }
    }
    const std::vector<std::vector<double>> lags = lags_of(phase);
    const std::vector<std::vector<double>> behind = lags_of(cumulative);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const Interval lag = mean_interval(lags[r]);
      if (!above(lag, threshold) || !above(mean_interval(behind[r]), threshold / 2)) continue;
      if (best && best->value.value >= lag.value) continue;
      const bool input = p == Phase::kDataWait;
      const double lost = mean_step_s > 0 ? lag.value / mean_step_s : kNaN;
      Label label = make_label(
          LabelName::kStraggler, input ? LabelKind::kInput : LabelKind::kCompute, "lag_s", lag,
          threshold,
          t.straggler_lag_share * mean_step_s >= t.straggler_min_lag_s ? "straggler_lag_share"
                                                                       : "straggler_min_lag_s",
          fmt::format("rank {} spends {} [{}, {}] more per step in {} than the median of the "
                      "other ranks over {} steps; the others lose about {} of every step "
                      "waiting for it",
                      ranks[r]->rank, secs(lag.value), secs(lag.low), secs(lag.high), phase_name(p),
                      lags[r].size(), pct(lost)),
          input ? fmt::format("rank {} waits longer for its data: check its loader workers, disk "
                              "and page cache (trainscope stalls), or uneven shards",
                              ranks[r]->rank)
                : fmt::format("rank {} is slower in {}: check its device and host (clocks, other "
                              "tenants, throttling) and uneven work per rank",
                              ranks[r]->rank, phase_name(p)));
      label.rank = ranks[r]->rank;
      best = std::move(label);
    }
  }
  if (best) scope->labels.push_back(std::move(*best));
}

// Per collective key: its time over the ranks and, of the collectives every
// rank recorded (the n-th kept row of each: ranks keep their last rows, so
// the rows are matched from the end), which rank entered last how often and
// by how much (its start minus the median of the other ranks' starts).
std::vector<CollectiveRow> collective_rows(const std::vector<const RankInput*>& ranks) {
  std::map<std::string, std::vector<const CollectiveInput*>> by_key;
  for (const RankInput* r : ranks) {
    for (const CollectiveInput& c : r->collectives) by_key[c.key].push_back(&c);
  }
  std::vector<CollectiveRow> out;
  for (const auto& [key, inputs] : by_key) {
    CollectiveRow row;
    row.key = key;
    const std::string_view rest =
        std::string_view(key).substr(std::string_view(steps::kCollectivePrefix).size());
    const std::size_t slash = rest.rfind('/');
    row.op = std::string(rest.substr(0, slash));
    row.group =
        slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash + 1));
    std::vector<double> all;
    for (const CollectiveInput* c : inputs) {
      row.seconds += c->seconds;
      row.count = std::max(row.count, c->count);
      for (const auto& [start, duration] : c->rows)
        all.push_back(static_cast<double>(duration) * 1e-9);
    }
    row.median_s = median(all);
    if (inputs.size() == ranks.size() && ranks.size() > 1) {
      // The n-th collective of every rank: the row count - k of each, k = 1.. .
      std::uint64_t common = std::numeric_limits<std::uint64_t>::max();
      for (const CollectiveInput* c : inputs) {
        // Rows a rank has not recorded yet (a live run) are at the end: match
        // up to the fewest rows any rank has.
        common = std::min<std::uint64_t>(common, c->count);
      }
      std::uint64_t first = 0;
      for (const CollectiveInput* c : inputs) {
        first = std::max<std::uint64_t>(first, c->count - c->rows.size());
      }
      std::map<std::size_t, std::vector<double>> lags;  // by rank index: lags when last
      std::vector<double> starts(inputs.size()), others;
      for (std::uint64_t n = first; n < common; ++n) {
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          const CollectiveInput* c = inputs[i];
          starts[i] = static_cast<double>(c->rows[n - (c->count - c->rows.size())].first) * 1e-9;
        }
        const std::size_t last = static_cast<std::size_t>(
            std::max_element(starts.begin(), starts.end()) - starts.begin());
        others.clear();
        for (std::size_t i = 0; i < starts.size(); ++i) {
          if (i != last) others.push_back(starts[i]);
        }
        lags[last].push_back(starts[last] - stats::median_in_place(&others));
        ++row.matched;
      }
      std::size_t most = 0;
      for (const auto& [index, v] : lags) {
        if (v.size() > most) {
          most = v.size();
          row.last_rank = ranks[index]->rank;
          row.last_share = static_cast<double>(v.size()) / static_cast<double>(row.matched);
          row.lag_s = median(v);
        }
      }
    }
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(),
            [](const CollectiveRow& a, const CollectiveRow& b) { return a.seconds > b.seconds; });
  return out;
}

// The device's view of a step (issue 39): where compute phases are GPU-timed,
// the device's time is their time. Per pooled step, over the compute phases
// GPU-timed on some rank: their CPU time (the host launching) and their GPU
// time, and the device's time beyond the host's (the host's wait for the
// device, which lands in sync or the rest: compute, not waiting).
struct DeviceView {
  std::vector<Phase> gpu_timed;
  std::vector<double> launch_cpu, launch_gpu, device_excess;
};

DeviceView device_view(const std::vector<const RankInput*>& ranks, const Pooled& pooled) {
  DeviceView v;
  for (Phase p : {Phase::kHostToDevice, Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    if (measured_anywhere(ranks, p, true)) v.gpu_timed.push_back(p);
  }
  v.launch_cpu = sum_of(pooled, v.gpu_timed, false);
  v.launch_gpu = sum_of(pooled, v.gpu_timed, true);
  v.device_excess.assign(pooled.period.size(), 0.0);
  for (Phase p : v.gpu_timed) {
    for (std::size_t i = 0; i < v.device_excess.size(); ++i) {
      v.device_excess[i] += std::max(0.0, pooled.gpu[kIndex(p)][i] - pooled.cpu[kIndex(p)][i]);
    }
  }
  return v;
}

// A phase's time per pooled step on the device that judges it: the GPU's
// where it is GPU-timed.
const std::vector<double>& judged(const Pooled& pooled, const DeviceView& v, Phase p) {
  const bool gpu = std::find(v.gpu_timed.begin(), v.gpu_timed.end(), p) != v.gpu_timed.end();
  return gpu ? pooled.gpu[kIndex(p)] : pooled.cpu[kIndex(p)];
}

// The GPU busy share of the step, and what measures it: the union of the
// GPU-timed compute rows' device intervals (Step::gpu_union_s over the period,
// batch means) where every step has it, else NVML's utilization readings over
// the scope (at least kMinBusyReadings, the mean with Student's t interval),
// else the GPU-timed compute rows' spans (Step::gpu_busy_s). Unknown (NaN)
// without any.
constexpr std::size_t kMinBusyReadings = 4;
enum class BusySource { kNone, kDeviceUnion, kNvml, kEventSpans };
struct GpuBusy {
  Interval share;
  BusySource from = BusySource::kNone;
  bool nvml = false;  // NVML's readings, whichever source the share is from
  Interval nvml_share;
  std::size_t readings = 0;
  std::string source() const {
    switch (from) {
      case BusySource::kDeviceUnion:
        return "measured: the union of the GPU-timed phases' device intervals over all streams";
      case BusySource::kNvml:
        return fmt::format("NVML utilization, {} readings", readings);
      default:
        return "GPU-timed phases: event spans, gaps between kernels count as busy";
    }
  }
};

GpuBusy gpu_busy(const std::vector<const RankInput*>& ranks, const Pooled& pooled,
                 const DeviceView& v, std::vector<std::string>* notes) {
  GpuBusy b;
  std::vector<double> util;
  for (const RankInput* r : ranks) {
    for (const Reading& reading : r->gpu_util_pct) {
      if (std::isfinite(reading.value)) util.push_back(reading.value / 100.0);
    }
  }
  if (util.size() >= kMinBusyReadings) {
    b.nvml = true;
    b.readings = util.size();
    b.nvml_share = clip_share(mean_interval(util), "", nullptr);
  }
  if (!v.gpu_timed.empty() && pooled.gpu_union_known &&
      std::any_of(pooled.gpu_union.begin(), pooled.gpu_union.end(),
                  [](double u) { return u > 0; })) {
    b.from = BusySource::kDeviceUnion;
    b.share = share_interval(pooled.gpu_union, pooled.period, "GPU-timed work", notes);
  } else if (b.nvml) {
    b.from = BusySource::kNvml;
    b.share = b.nvml_share;
  } else if (!v.gpu_timed.empty()) {
    b.from = BusySource::kEventSpans;
    b.share = share_interval(pooled.gpu_busy, pooled.period, "GPU-timed work", notes);
  }
  return b;
}

// LAUNCH-BOUND: compute-bound on a device that waits on the host: the
// GPU-timed phases' CPU time is close to their GPU time (the host launching
// paces the device) and, where NVML measures it, the GPU is seldom busy.
Label launch_bound_label(const DeviceView& device, const Interval& ratio, const GpuBusy& busy,
                         const Interval& compute_share, const Thresholds& t) {
  std::vector<std::string_view> phases;
  for (Phase p : device.gpu_timed) phases.push_back(phase_name(p));
  return make_label(
      LabelName::kLaunchBound, LabelKind::kNone, "cpu_gpu_ratio", ratio,
      t.launch_bound_cpu_gpu_ratio, "launch_bound_cpu_gpu_ratio",
      fmt::format("the host spends {} of the GPU-timed phases' device time launching them ({}); "
                  "compute takes {} of the step; GPU busy {}",
                  pct_interval(ratio), fmt::join(phases, ", "), pct_interval(compute_share),
                  std::isfinite(busy.share.value)
                      ? fmt::format("{} ({})", pct_interval(busy.share), busy.source())
                      : std::string("not measured")),
      "the GPU waits for the host to launch its kernels: capture the step in CUDA graphs, "
      "torch.compile (mode=\"reduce-overhead\"), fuse small operations or use larger batches");
}

// COMM-BOUND: the step waits for communication; names the collective with
// the most time and, where one rank enters it last most of the time, that rank.
Label comm_bound(const std::vector<CollectiveRow>& collectives, const Interval& exposed,
                 const Pooled& pooled, const Thresholds& t, double mean_step_s) {
  const Interval all = share_interval(pooled.cpu[kIndex(Phase::kComm)], pooled.period, "", nullptr);
  std::string biggest = "no collective timed (COMM rows only)";
  std::string next =
      "the step waits for communication: overlap it with compute (DDP's buckets: "
      "bucket_cap_mb, no find_unused_parameters), send less (a compression "
      "communication hook, fewer or larger collectives) or a faster interconnect";
  std::optional<std::uint32_t> late;
  if (!collectives.empty()) {
    const CollectiveRow& c = collectives.front();
    biggest = fmt::format("most of it in {} on group {} ({} rows, median {})", c.op, c.group,
                          c.count, secs(c.median_s));
    // A rank named late: last in three of four collectives (two ranks: one
    // in two by chance), by a straggler's lag (find_straggler's threshold).
    const double lag_threshold =
        std::max(t.straggler_min_lag_s, t.straggler_lag_share * mean_step_s);
    if (c.last_rank && c.last_share >= 0.75 && c.lag_s > lag_threshold) {
      late = c.last_rank;
      biggest += fmt::format("; rank {} enters it last in {} of {} (by {}, median)", *c.last_rank,
                             pct(c.last_share), c.matched, secs(c.lag_s));
      next = fmt::format(
          "the others wait for rank {} at {}: find what delays it before the "
          "collective (its data, compute or host), then overlap what is left",
          *c.last_rank, c.op);
    }
  }
  Label label =
      make_label(LabelName::kCommBound, LabelKind::kNone, "comm_exposed_share", exposed,
                 t.comm_bound_share, "comm_bound_share",
                 fmt::format("the step waits for communication {} of its time (comm_exposed; all "
                             "communication {}); {}",
                             pct_interval(exposed), pct(all.value), biggest),
                 next);
  label.rank = late;
  return label;
}

void find_memory_creep(const std::vector<const RankInput*>& ranks, const Thresholds& t,
                       Scope* scope) {
  for (const bool device : {false, true}) {
    bool any = false;
    std::optional<Label> worst;
    for (const RankInput* r : ranks) {
      const std::vector<Reading>& readings = device ? r->gpu_mem_mb : r->rss_mb;
      if (readings.size() < 6) continue;
      any = true;
      std::vector<double> x, y;
      for (const Reading& reading : readings) {
        x.push_back(reading.step / 1000.0);
        y.push_back(reading.value);
      }
      const detail::Slope fit = slope_hac(x, y);
      const double threshold = std::max(t.memory_creep_mb_per_1k_steps,
                                        t.memory_creep_min_share_per_1k_steps * fit.mean_y);
      if (!above(fit.slope, threshold)) continue;
      const double span_1k = x.back() - x.front();  // thousands of steps
      if (fit.slope.low * span_1k < t.memory_creep_min_growth_mb) continue;
      // Growth that stops is warm-up (DataLoader workers filling their pages,
      // caches, the allocator's pools), not creep: the second half of the
      // readings must grow too, at the threshold's rate and surely above zero.
      const std::size_t half = x.size() / 2;
      const detail::Slope late =
          slope_hac(std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(half), x.end()),
                    std::vector<double>(y.begin() + static_cast<std::ptrdiff_t>(half), y.end()));
      if (!(late.slope.value >= threshold && above(late.slope, 0.0))) {
        scope->notes.push_back(fmt::format(
            "MEMORY-CREEP: {} of rank {} grew {:.3g} MB per 1,000 steps over the run but "
            "{:.3g} MB [{:.3g}, {:.3g}] over the second half of the readings: warm-up "
            "(DataLoader workers, caches), not creep",
            device ? "device memory" : "process RSS", r->rank, fit.slope.value, late.slope.value,
            late.slope.low, late.slope.high));
        continue;
      }
      if (worst && worst->value.value >= fit.slope.value) continue;
      Label label = make_label(
          LabelName::kMemoryCreep, device ? LabelKind::kDevice : LabelKind::kHost,
          "mb_per_1k_steps", fit.slope, threshold, "memory_creep_mb_per_1k_steps",
          fmt::format("{} of rank {} grows {:.3g} MB [{:.3g}, {:.3g}] per 1,000 steps (least "
                      "squares over {} readings, Newey-West interval; level {:.0f} MB), "
                      "{:.3g} MB [{:.3g}, {:.3g}] over their second half",
                      device ? "device memory" : "process RSS", r->rank, fit.slope.value,
                      fit.slope.low, fit.slope.high, fit.n, fit.mean_y, late.slope.value,
                      late.slope.low, late.slope.high),
          device ? "device memory grows every step: look for tensors kept across steps (losses "
                   "kept without .item(), growing caches), or the allocator's fragmentation"
                 : "host memory grows every step: look for objects kept across steps (lists of "
                   "losses or batches, caches without bounds, leaks in native code)");
      label.rank = r->rank;
      worst = std::move(label);
    }
    if (worst) {
      scope->labels.push_back(std::move(*worst));
    } else if (!any && !device) {
      scope->notes.push_back(
          "MEMORY-CREEP: too few process RSS readings (they come from `trainscope run`'s "
          "hardware sampling)");
    }
  }
}

void find_drift(const Pooled& pooled, const Thresholds& t, Scope* scope) {
  std::vector<double> per_step;
  for (std::size_t i = 0; i < pooled.period.size(); ++i) {
    if (pooled.steps[i] > 0) per_step.push_back(pooled.period[i] / pooled.steps[i]);
  }
  const std::size_t blocks = std::min<std::size_t>(20, per_step.size() / 5);
  if (blocks < 6) {
    scope->notes.push_back("THROUGHPUT-DRIFT: too few steps for a trend test (30 at least)");
    return;
  }
  std::vector<double> block_medians;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * per_step.size() / blocks;
    const std::size_t end = (b + 1) * per_step.size() / blocks;
    block_medians.push_back(
        median(std::vector<double>(per_step.begin() + begin, per_step.begin() + end)));
  }
  const detail::Trend trend = mann_kendall(block_medians);
  // The fitted level at the first block, and the change over the scope.
  std::vector<double> residual_levels;
  for (std::size_t b = 0; b < blocks; ++b) {
    residual_levels.push_back(block_medians[b] - trend.sen_slope.value * static_cast<double>(b));
  }
  const double start = median(residual_levels);
  const double span = static_cast<double>(blocks - 1);
  Interval drift;
  if (start > 0) {
    drift.value = trend.sen_slope.value * span / start;
    drift.low = trend.sen_slope.low * span / start;
    drift.high = trend.sen_slope.high * span / start;
  }
  if (trend.p_increasing < t.drift_p_value && drift.value >= t.throughput_drift_share) {
    scope->labels.push_back(make_label(
        LabelName::kThroughputDrift, LabelKind::kNone, "step_time_growth", drift,
        t.throughput_drift_share, "throughput_drift_share",
        fmt::format("the step time grows {} [{}, {}] over {} steps (Sen's slope over {} block "
                    "medians, from {} per step; Mann-Kendall p = {:.2g})",
                    pct(drift.value), pct(drift.low), pct(drift.high), per_step.size(), blocks,
                    secs(start), trend.p_increasing),
        "steps get slower as the run goes on: look for work that grows per step (growing "
        "lists, logging, checkpoints), memory pressure or thermal throttling"));
  }
}

void find_host_pressure(const Inputs& inputs, const Thresholds& t, Scope* scope) {
  for (const HostInput& host : inputs.hosts) {
    std::vector<double> util, others;
    double swap_first = kNaN, swap_last = kNaN;
    for (const HostReading& r : host.readings) {
      if (std::isfinite(r.cpu_util_pct)) {
        util.push_back(r.cpu_util_pct);
        if (const double other = r.other_cpu_pct(); std::isfinite(other)) {
          others.push_back(other / 100.0);
        }
      }
      if (std::isfinite(r.swap_used_mb)) {
        if (std::isnan(swap_first)) swap_first = r.swap_used_mb;
        swap_last = r.swap_used_mb;
      }
    }
    const double util_median = median(util);
    const Interval other = clip_share(mean_interval(others), "", nullptr);
    const steps::ContentionShare& waited = host.contention;
    const Interval contention{waited.share, waited.low, waited.high};
    // The thread that times the steps: its own wait in them, beside the tree's.
    const steps::ContentionShare& stepped = host.step_wait;
    const Interval step_wait{stepped.share, stepped.low, stepped.high};
    const std::string step_thread =
        stepped.known() ? fmt::format("the thread that times the steps waited {} of its {} steps",
                                      pct_interval(step_wait), stepped.readings)
                        : std::string();
    constexpr const char* kShortOfCpu =
        "the job is short of CPU: other processes, or more of the job's own threads (loader "
        "workers, intra-op threads) than cores; move them, pin the job's cores, or use fewer "
        "threads";
    if (above(contention, t.host_pressure_contention_share)) {
      Label label = make_label(
          LabelName::kHostPressure, LabelKind::kCpu, "contention_share", contention,
          t.host_pressure_contention_share, "host_pressure_contention_share",
          fmt::format("the job's threads on host {} waited for a CPU {} of the time ({} "
                      "readings of the kernel's run-queue wait){}; the host is {} busy, "
                      "other processes take {} of its cores",
                      host.host, pct_interval(contention, "readings"), waited.readings,
                      step_thread.empty() ? "" : "; " + step_thread,
                      stats::format_percent(util_median), pct_interval(other, "readings")),
          kShortOfCpu);
      label.host = host.host;
      scope->labels.push_back(std::move(label));
    } else if (above(step_wait, t.host_pressure_contention_share)) {
      // The process tree's per-second share can stay low (most of its threads
      // sleep) while the one thread the steps wait on queues for a CPU.
      Label label = make_label(
          LabelName::kHostPressure, LabelKind::kCpu, "step_wait_share", step_wait,
          t.host_pressure_contention_share, "host_pressure_contention_share",
          fmt::format("on host {} {} (the kernel's run-queue wait at each step's start and end)"
                      "{}; the host is {} busy, other processes take {} of its cores",
                      host.host, step_thread,
                      waited.known() ? "; the job's threads waited " +
                                           pct_interval(contention, "readings") + " of the time"
                                     : std::string(),
                      stats::format_percent(util_median), pct_interval(other, "readings")),
          kShortOfCpu);
      label.host = host.host;
      scope->labels.push_back(std::move(label));
    } else if (util.size() >= 4 && util_median >= t.host_pressure_cpu_util_pct &&
               above(other, t.host_pressure_other_cpu_share)) {
      Label label = make_label(
          LabelName::kHostPressure, LabelKind::kCpu, "other_cpu_share", other,
          t.host_pressure_other_cpu_share, "host_pressure_other_cpu_share",
          fmt::format("host {} is {} busy (median of {} readings) and other processes take "
                      "{} of all its cores",
                      host.host, stats::format_percent(util_median), util.size(),
                      pct_interval(other, "readings")),
          "other processes compete for this host's CPU: move them, pin the job's cores, or use "
          "fewer loader workers");
      label.host = host.host;
      scope->labels.push_back(std::move(label));
    } else if (std::isfinite(swap_first) &&
               swap_last - swap_first > t.host_pressure_swap_growth_mb) {
      Label label = make_label(
          LabelName::kHostPressure, LabelKind::kSwap, "swap_growth_mb",
          Interval{swap_last - swap_first, kNaN, kNaN}, t.host_pressure_swap_growth_mb,
          "host_pressure_swap_growth_mb",
          fmt::format("host {} swaps: swap in use grew {:.0f} MB (from {:.0f} to {:.0f} MB)",
                      host.host, swap_last - swap_first, swap_first, swap_last),
          "the host is out of memory and swaps: fewer loader workers, smaller prefetch, or "
          "more memory");
      label.host = host.host;
      scope->labels.push_back(std::move(label));
    }
  }
  if (inputs.hosts.empty()) {
    scope->notes.push_back(
        "HOST-PRESSURE: no host readings (they come from `trainscope run`'s hardware sampling)");
  }
}

}  // namespace

const Label* Scope::find(LabelName name) const {
  for (const Label& l : labels) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

Scope conclude(const Inputs& inputs, const Thresholds& t, std::string_view name) {
  Scope scope;
  scope.name = std::string(name);
  std::vector<const RankInput*> ranks;
  std::size_t most = 0;
  bool any_step_key = false;
  for (const RankInput& r : inputs.ranks) {
    std::size_t steps = 0;
    for (const StepSample& s : r.steps) steps += s.steps;
    most = std::max(most, steps);
    any_step_key = any_step_key || !r.step_key.empty();
    if (static_cast<double>(steps) >= std::max(1.0, t.min_steps)) ranks.push_back(&r);
  }
  scope.steps = most;
  if (ranks.empty()) {
    const bool auto_run = inputs.facts.auto_instrumented;
    const std::string why =
        inputs.ranks.empty() ? "no rank has recorded yet"
        : !any_step_key
            ? (auto_run ? "no step key: --auto found no training step yet (no training "
                          "DataLoader fetch, optimizer step or backward)"
                        : "no step key: time each step as BATCH (or iterate tmr.timed(loader), "
                          "or map a key with --phase step=KEY)")
            : fmt::format("{} steps, fewer than min_steps = {:g}", most, t.min_steps);
    // Never advise what the run already did: an --auto run is told what --auto
    // needs and what else maps a step.
    scope.labels.push_back(make_label(
        LabelName::kNoData, LabelKind::kNone, "steps",
        Interval{static_cast<double>(most), kNaN, kNaN}, t.min_steps, "min_steps", why,
        auto_run ? "let it run longer, or, where the loop has no DataLoader, optimizer or "
                   "backward that it sees, time each step as BATCH by hand (or map a key with "
                   "--phase step=KEY)"
                 : "time steps (BATCH, tmr.timed(loader), or `trainscope run --auto`) and their "
                   "phases (IO, FORWARD, BACKWARD, OPTIMIZER, COMM)"));
    return scope;
  }

  const Pooled pooled = pool(ranks);
  // The step time: the median rank's mean.
  std::vector<std::pair<double, const RankInput*>> means;
  for (const RankInput* r : ranks) {
    double period = 0, steps = 0;
    for (const StepSample& s : r->steps) {
      period += s.period_s;
      steps += s.steps;
    }
    means.emplace_back(period / steps, r);
  }
  std::sort(means.begin(), means.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const RankInput* median_rank = means[(means.size() - 1) / 2].second;
  {
    std::vector<double> period, steps;
    for (const StepSample& s : median_rank->steps) {
      period.push_back(s.period_s);
      steps.push_back(s.steps);
    }
    scope.step_s = ratio_interval(period, steps);
    scope.steps_per_s = scope.step_s.value > 0 ? 1.0 / scope.step_s.value : 0.0;
  }
  const double mean_step_s = scope.step_s.value;

  // Phase table.
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    const auto phase = static_cast<Phase>(p);
    if (phase == Phase::kRest || measured_anywhere(ranks, phase, false)) {
      scope.phases.push_back(phase_row(ranks, phase, false, pooled));
    }
    if (phase != Phase::kRest && measured_anywhere(ranks, phase, true)) {
      scope.phases.push_back(phase_row(ranks, phase, true, pooled));
    }
  }

  // The primary label.
  std::vector<Phase> compute;
  for (Phase p : {Phase::kHostToDevice, Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    if (measured_anywhere(ranks, p, false)) compute.push_back(p);
  }
  const bool compute_timed = !compute.empty();
  const bool wait_timed = measured_anywhere(ranks, Phase::kDataWait, false);
  std::vector<std::string>* notes = &scope.notes;
  const Interval wait =
      share_interval(pooled.cpu[kIndex(Phase::kDataWait)], pooled.period, "the data wait", notes);
  // Where compute phases are GPU-timed, the device's time judges them, and the
  // host's wait for the device (in sync or the rest) is compute, not waiting.
  const DeviceView device = device_view(ranks, pooled);
  std::vector<double> compute_time(pooled.period.size(), 0.0);
  for (Phase p : compute_timed ? compute : std::vector<Phase>{Phase::kRest}) {
    const std::vector<double>& v = judged(pooled, device, p);
    for (std::size_t i = 0; i < v.size(); ++i) compute_time[i] += v[i];
  }
  const Interval compute_share =
      share_interval(compute_time, pooled.period, "the compute phases", notes);
  std::vector<double> waited =
      sum_of(pooled, {Phase::kCommExposed, Phase::kSync, Phase::kRest}, false);
  for (std::size_t i = 0; i < waited.size(); ++i) {
    waited[i] = std::max(0.0, waited[i] - device.device_excess[i]);
  }
  const Interval wait_heavy =
      share_interval(waited, pooled.period, "communication waited for, syncs and the rest", notes);
  const GpuBusy busy = gpu_busy(ranks, pooled, device, notes);
  // LAUNCH-BOUND's test: the host launching for (nearly) all of the device's time.
  const Interval launch_ratio =
      device.gpu_timed.empty() ? Interval{} : ratio_interval(device.launch_cpu, device.launch_gpu);
  const bool launch_bound = above(launch_ratio, t.launch_bound_cpu_gpu_ratio) &&
                            (!busy.nvml || below(busy.nvml_share, t.launch_bound_busy_share));
  const bool exposed_timed = measured_anywhere(ranks, Phase::kCommExposed, false);
  const Interval exposed = share_interval(pooled.cpu[kIndex(Phase::kCommExposed)], pooled.period,
                                          "the communication waited for", notes);
  scope.collectives = collective_rows(ranks);
  bool input_bound = false;
  if (!wait_timed) {
    scope.notes.push_back(
        inputs.facts.auto_instrumented
            ? "INPUT-BOUND: the data wait is not timed (no IO region): --auto found no training "
              "DataLoader (batches made in the loop have no wait of their own to time)"
            : "INPUT-BOUND: the data wait is not timed (no IO region): time the loader with "
              "tmr.timed(loader) or --auto");
  }
  if (wait_timed && above(wait, t.input_bound_share)) {
    input_bound = true;
    scope.labels.push_back(make_label(
        LabelName::kInputBound, LabelKind::kNone, "data_wait_share", wait, t.input_bound_share,
        "input_bound_share",
        fmt::format("the step waits for data {} of its time (over {} steps, batch-means "
                    "interval)",
                    pct_interval(wait), pooled.period.size()),
        inputs.facts.gpu_seen
            ? "the loader cannot keep up: more DataLoader workers, pin_memory and prefetching, a "
              "faster store or a cached dataset (`trainscope stalls --dataset` splits fetch from "
              "prep)"
            : "the loader cannot keep up: more DataLoader workers and prefetching, a faster "
              "store or a cached dataset (`trainscope stalls --dataset` splits fetch from "
              "prep)"));
  } else if (exposed_timed && above(exposed, t.comm_bound_share)) {
    scope.labels.push_back(comm_bound(scope.collectives, exposed, pooled, t, mean_step_s));
  } else if (compute_timed && above(wait_heavy, t.wait_heavy_share)) {
    scope.labels.push_back(make_label(
        LabelName::kWaitHeavy, LabelKind::kNone, "wait_share", wait_heavy, t.wait_heavy_share,
        "wait_heavy_share",
        fmt::format(
            "communication waited for, syncs and untimed work take {} of the step (comm_exposed "
            "{}, sync {}, rest {})",
            pct_interval(wait_heavy), pct(exposed.value),
            pct(share_interval(pooled.cpu[kIndex(Phase::kSync)], pooled.period, "", nullptr).value),
            pct(share_interval(pooled.cpu[kIndex(Phase::kRest)], pooled.period, "", nullptr)
                    .value)),
        "time goes to waiting, not compute: overlap communication with backward (DDP buckets), "
        "look for a straggling rank and for host syncs (.item(), prints) in the step"));
  } else if (above(compute_share, t.compute_bound_share)) {
    Phase largest = compute_timed ? compute.front() : Phase::kRest;
    double largest_sum = -1;
    for (Phase p : compute_timed ? compute : std::vector<Phase>{Phase::kRest}) {
      double s = 0;
      for (double v : judged(pooled, device, p)) s += v;
      if (s > largest_sum) {
        largest_sum = s;
        largest = p;
      }
    }
    const bool on_gpu = std::find(device.gpu_timed.begin(), device.gpu_timed.end(), largest) !=
                        device.gpu_timed.end();
    if (on_gpu && launch_bound) {
      scope.labels.push_back(launch_bound_label(device, launch_ratio, busy, compute_share, t));
    } else {
      scope.labels.push_back(make_label(
          LabelName::kComputeBound, label_kind_of(largest), "compute_share", compute_share,
          t.compute_bound_share, "compute_bound_share",
          fmt::format(
              "compute takes {} of the step, most of it in {} ({}{}){}",
              pct_interval(compute_share), phase_name(largest),
              pct(share_interval(judged(pooled, device, largest), pooled.period, "", nullptr)
                      .value),
              on_gpu ? " on the GPU" : "",
              wait_timed ? fmt::format("; data wait {}", pct(wait.value))
                         : std::string("; data wait not timed")),
          inputs.facts.gpu_seen
              ? fmt::format("the step is compute-bound in {}: profile it (trainscope run --nsys), "
                            "try mixed precision, a larger batch or a faster kernel",
                            phase_name(largest))
              : fmt::format("the step is compute-bound in {} on the CPU (no GPU seen): profile it "
                            "(torch.profiler, py-spy), check the threads (torch.get_num_threads), "
                            "try a larger batch, a smaller model or a GPU",
                            phase_name(largest))));
      if (on_gpu) scope.labels.back().device = Device::kGPU;
    }
  } else {
    scope.labels.push_back(make_label(
        LabelName::kBalanced, LabelKind::kNone, "compute_share", compute_share,
        t.compute_bound_share, "compute_bound_share",
        fmt::format("no part dominates: compute {}, data wait {}, communication and rest {}",
                    pct_interval(compute_share), pct(wait.value), pct(wait_heavy.value)),
        "nothing stands out; measure a change against this run with trainscope compare"));
  }

  find_straggler(ranks, t, mean_step_s, compute_timed, &scope);
  find_memory_creep(ranks, t, &scope);
  find_drift(pooled, t, &scope);

  // GPU-IDLE: the measured GPU busy share (NVML, else the GPU-timed rows).
  if (!std::isfinite(busy.share.value)) {
    scope.notes.push_back(inputs.facts.gpu_seen
                              ? "GPU-IDLE: no GPU-timed phases (FORWARD, BACKWARD, ... with "
                                "gpu=True)"
                              : "GPU-IDLE: no GPU seen (a CPU-only run)");
  } else {
    const bool launch_label = scope.labels.front().name == LabelName::kLaunchBound;
    if (!input_bound && !launch_label && below(busy.share, t.gpu_idle_busy_share)) {
      scope.labels.push_back(make_label(
          LabelName::kGpuIdle, LabelKind::kNone, "gpu_busy_share", busy.share,
          t.gpu_idle_busy_share, "gpu_idle_busy_share",
          fmt::format("the GPU is busy {} of the step ({}) while the job is not input-bound",
                      pct_interval(busy.share), busy.source()),
          "the GPU waits for the host: move work to the GPU, overlap copies (pin_memory, "
          "non_blocking), fewer host syncs, CUDA graphs or a larger batch"));
    }
  }
  find_host_pressure(inputs, t, &scope);
  return scope;
}

}  // namespace trainscope::diagnosis
