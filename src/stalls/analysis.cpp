#include "trainscope/stalls/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"
#include "stalls/stalls_json.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/steps/steps.hpp"
#include "trainscope/steps/warmup.hpp"

namespace trainscope::stalls {
namespace {

struct Window {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

constexpr double kZ95 = 1.959963984540054;

}  // namespace

namespace {

// A pass's share from its steps: their data wait over their periods (the
// waits' percentiles and start-up share stay the IO rows').
void with_step_shares(PassStalls* p, double wait_s, double wall_s, std::size_t waits) {
  p->wall_s = wall_s;
  p->wait_s = wait_s;
  p->share = wall_s > 0 ? wait_s / wall_s : 0;
  p->bunched = p->share >= 0.05 && p->startup_wait_share >= 0.5 && startup_batches(waits) < waits;
}

}  // namespace

std::string input_bound_class(double share) {
  static const char* const kClasses[] = {"not", "moderately", "highly"};
  return kClasses[input_bound_class_index(share)];
}

int input_bound_class_index(double share) {
  if (share < 0.05) return 0;
  return share < 0.20 ? 1 : 2;
}

std::size_t startup_batches(std::size_t batches) {
  return std::min(batches, std::max<std::size_t>(2, batches / 10));
}

PassStalls pass_stalls(const std::vector<double>& waits_s, double wall_s) {
  PassStalls p;
  p.wall_s = wall_s;
  p.batches = waits_s.size();
  p.wait_s = std::accumulate(waits_s.begin(), waits_s.end(), 0.0);
  p.share = wall_s > 0 ? p.wait_s / wall_s : 0;
  if (!waits_s.empty()) {  // the statistics every key gets (type-7 quantiles)
    const TimeStats stats = compute_time_stats(waits_s);
    p.wait_p50_s = stats.median;
    p.wait_p95_s = stats.p95;
    p.wait_max_s = stats.max;
  }
  const std::size_t first = startup_batches(waits_s.size());
  const double startup = std::accumulate(waits_s.begin(), waits_s.begin() + first, 0.0);
  p.startup_wait_share = p.wait_s > 0 ? startup / p.wait_s : 0;
  // Bunched: most of the wait in a tenth of the batches, and enough of it to matter.
  p.bunched = p.share >= 0.05 && p.startup_wait_share >= 0.5 && first < waits_s.size();
  return p;
}

std::vector<std::pair<std::string, double>> pass_metrics(const PassStalls& p) {
  return {{kLoaderWaitShareMetric, p.share},
          {kInputBoundClassMetric, input_bound_class_index(p.share)},
          {kWaitP50Metric, p.wait_p50_s * 1e3},
          {kWaitP95Metric, p.wait_p95_s * 1e3},
          {kWaitMaxMetric, p.wait_max_s * 1e3},
          {kStartupWaitShareMetric, p.startup_wait_share},
          {kBatchesMetric, static_cast<double>(p.batches)}};
}

std::string run_stalls_json(const RunStalls& r, int indent) {
  return detail::run_stalls_to_json(r).dump(indent);
}

std::string format_run_stalls(const RunStalls& r) {
  const auto pct = [](double share) { return stats::format_share(share); };
  std::string out =
      fmt::format("{} ({}){}\n", r.run_dir, r.status,
                  r.ranks.size() > 1 ? fmt::format(", passes of rank {}", r.rank) : std::string());
  out += fmt::format("  {:>5} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}\n", "pass", "time",
                     "waiting", "share", "batches", "p50 wait", "p95 wait", "at start");
  const auto row = [&](const std::string& name, const PassStalls& p) {
    out += fmt::format("  {:>5} {:>9.3f}s {:>9.3f}s {:>8} {:>8} {:>8.2f}ms {:>8.2f}ms {:>9}\n",
                       name, p.wall_s, p.wait_s, pct(p.share), p.batches, p.wait_p50_s * 1e3,
                       p.wait_p95_s * 1e3, pct(p.startup_wait_share));
  };
  for (const PassStalls& p : r.passes) row(std::to_string(p.index), p);
  row("run", r.total);
  out += fmt::format("  input-bound: {} ({} of the time waiting for data); waits: {}\n",
                     input_bound_class(r.total.share), pct(r.total.share), r.pattern);
  if (r.ranks.size() > 1) {
    // In a data-parallel job every step waits for the rank that waits longest.
    const RankStalls* most = &r.ranks.front();
    std::vector<std::string> shares;
    for (const RankStalls& k : r.ranks) {
      shares.push_back(fmt::format("rank {} {}", k.rank, pct(k.total.share)));
      if (k.total.share > most->total.share) most = &k;
    }
    out += fmt::format("  per rank: {}", fmt::join(shares, ", "));
    out += fmt::format("; rank {} waits most ({} input-bound)\n", most->rank,
                       input_bound_class(most->total.share));
  }
  return out;
}

namespace {

// One rank's live analysis into `out` (run_dir, status, batch_size set):
// its passes' shares from its steps (the steps room's data wait over the
// period, summed over the steps that start in the pass), the waits' own
// figures (percentiles, start-up share) from its IO rows.
absl::Status analyze_rank(const RunReader& reader, const steps::RankSteps* stepped,
                          std::uint32_t rank, RunStalls* out_ptr) {
  RunStalls& out = *out_ptr;
  const std::string& run_dir = out.run_dir;
  out.rank = rank;
  absl::StatusOr<Chunk<RegionRow>> rows = reader.read_regions(rank);
  if (!rows.ok()) return rows.status();
  std::vector<Window> passes, epochs;
  std::vector<std::pair<std::int64_t, double>> iterations;
  std::vector<std::pair<std::int64_t, double>> waits;  // start, seconds
  for (const RegionRow& row : rows->rows) {
    if (row.device != Device::kCPU) continue;
    const double seconds = static_cast<double>(row.duration_ns) * 1e-9;
    if (row.key == kWaitKey) {
      waits.emplace_back(row.start_unix_ns, seconds);
    } else if (row.key == kIterationKey) {
      iterations.emplace_back(row.start_unix_ns, seconds);
    } else if (row.key == kPassKey) {
      passes.push_back({row.start_unix_ns, row.start_unix_ns + row.duration_ns});
    } else if (row.key == "EPOCH") {
      epochs.push_back({row.start_unix_ns, row.start_unix_ns + row.duration_ns});
    }
  }
  if (waits.empty()) {
    return absl::NotFoundError(
        run_dir + (rank == 0 ? std::string() : fmt::format(" (rank {})", rank)) +
        ": no IO regions: time the loader with `for batch in tmr.timed(loader):` "
        "(Python) or IO regions around each batch's fetch (C++)");
  }
  std::sort(waits.begin(), waits.end());
  for (const auto& w : waits) {
    out.wait_start_ns.push_back(w.first);
    out.wait_s.push_back(w.second);
  }
  std::sort(iterations.begin(), iterations.end());
  for (const auto& it : iterations) {
    out.iteration_start_ns.push_back(it.first);
    out.iteration_s.push_back(it.second);
  }
  const bool has_steps = stepped != nullptr && !stepped->history.empty();
  // One warm-up rule for every view (docs/steps.md): a pass's share leaves it out.
  const std::int64_t warmup = has_steps ? steps::warmup_steps(*stepped) : 0;
  if (has_steps) {
    for (const steps::Step& s : stepped->history) {
      out.step_start_ns.push_back(s.start_ns);
      out.step_period_s.push_back(s.period_s);
      out.step_wait_s.push_back(s.data_wait_s());
    }
  }
  std::vector<Window>& windows = passes.empty() ? epochs : passes;
  std::sort(windows.begin(), windows.end(),
            [](const Window& a, const Window& b) { return a.start_ns < b.start_ns; });
  if (windows.empty()) {
    // One pass: every step (a rank without steps: from the first wait to the
    // end of the last).
    Window all{waits.front().first, waits.back().first};
    all.end_ns += static_cast<std::int64_t>(waits.back().second * 1e9);
    if (has_steps) {
      all = {std::min(all.start_ns, stepped->history.front().start_ns),
             std::numeric_limits<std::int64_t>::max()};
    }
    windows.push_back(all);
  }
  double wall = 0, wait = 0;
  std::vector<double> all_waits;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const Window& window = windows[i];
    std::vector<double> in_pass;
    for (const auto& [start, seconds] : waits) {
      if (start >= window.start_ns && start < window.end_ns) in_pass.push_back(seconds);
    }
    PassStalls p =
        pass_stalls(in_pass, static_cast<double>(window.end_ns - window.start_ns) * 1e-9);
    if (has_steps) {
      // The pass's steps past the rank's warm-up: their periods and data waits.
      steps::DataWait pass;
      for (const steps::Step& step : stepped->history) {
        if (step.start_ns < window.start_ns || step.start_ns >= window.end_ns) continue;
        if (!steps::is_warmup(step, warmup)) pass.add(step);
      }
      with_step_shares(&p, pass.wait_s, pass.period_s, in_pass.size());
    }
    p.index = static_cast<int>(i + 1);
    wall += p.wall_s;
    wait += p.wait_s;
    all_waits.insert(all_waits.end(), in_pass.begin(), in_pass.end());
    out.passes.push_back(p);
  }
  out.total = pass_stalls(all_waits, wall);
  if (has_steps) with_step_shares(&out.total, wait, wall, all_waits.size());
  out.total.wait_s = wait;
  // Bunched when most passes' waits are: a run-wide startup share means little.
  std::size_t bunched = 0;
  for (const PassStalls& p : out.passes) bunched += p.bunched ? 1 : 0;
  out.total.bunched = bunched * 2 > out.passes.size();
  out.pattern = out.total.share < 0.05 ? "none"
                : out.total.bunched    ? "bunched at pass starts"
                                       : "spread";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunStalls> analyze_run(const std::string& run_dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::vector<RunProblem>> problems = check_run(*reader);
  if (!problems.ok()) return problems.status();
  if (absl::Status lost = run_problems_error(*problems); !lost.ok()) return lost;
  RunStalls out;
  out.warnings = run_problem_warnings(*problems);
  out.run_dir = run_dir;
  out.status = std::string(run_status_name(reader->info().status));
  const auto& info = reader->info();
  const std::string* size_text = nullptr;
  if (auto tag = info.tags.find(kBatchSizeParam); tag != info.tags.end()) {
    size_text = &tag->second;
  } else if (auto param = info.params.find(kLegacyBatchSizeParam);  // older runs
             param != info.params.end()) {
    size_text = &param->second;
  }
  if (size_text != nullptr) {
    int size = 0;
    if (absl::SimpleAtoi(*size_text, &size) && size > 0) out.batch_size = size;
  }
  if (reader->ranks().empty()) {
    return absl::NotFoundError(run_dir + ": no rank recorded anything (no IO regions to analyze)");
  }
  // The steps, as every view has them (docs/steps.md).
  absl::StatusOr<steps::RunSteps> stepped = steps::read_steps(*reader);
  if (!stepped.ok()) return stepped.status();
  const auto steps_of = [&stepped](std::uint32_t rank) -> const steps::RankSteps* {
    for (const steps::RankSteps& r : stepped->ranks)
      if (r.rank == rank) return &r;
    return nullptr;
  };
  const std::uint32_t lowest = reader->ranks().front().rank.rank;
  if (absl::Status first = analyze_rank(*reader, steps_of(lowest), lowest, &out); !first.ok()) {
    return first;
  }
  // Every rank's run-wide figures: in a data-parallel job the step waits for
  // the rank that waits longest.
  out.ranks.push_back({out.rank, out.total});
  for (std::size_t i = 1; i < reader->ranks().size(); ++i) {
    RunStalls other;
    other.run_dir = run_dir;
    const std::uint32_t rank = reader->ranks()[i].rank.rank;
    if (analyze_rank(*reader, steps_of(rank), rank, &other).ok()) {
      out.ranks.push_back({other.rank, other.total});
    }
  }
  return out;
}

absl::StatusOr<Timing> measured_time(const std::vector<double>& iteration_s, std::size_t warmup,
                                     std::size_t iterations) {
  if (iterations == 0) return absl::InvalidArgumentError("no iterations to measure");
  if (iteration_s.size() < warmup + iterations) {
    return absl::FailedPreconditionError("the run has " + std::to_string(iteration_s.size()) +
                                         " iterations, " + std::to_string(warmup + iterations) +
                                         " needed (warm-up " + std::to_string(warmup) + " + " +
                                         std::to_string(iterations) + ")");
  }
  const auto begin = iteration_s.begin() + static_cast<std::ptrdiff_t>(warmup);
  const auto end = begin + static_cast<std::ptrdiff_t>(iterations);
  Timing t;
  t.iterations = iterations;
  t.total_s = std::accumulate(begin, end, 0.0);
  const double mean = t.total_s / static_cast<double>(iterations);
  double ss = 0;
  for (auto it = begin; it != end; ++it) ss += (*it - mean) * (*it - mean);
  const double sd = iterations > 1 ? std::sqrt(ss / static_cast<double>(iterations - 1)) : 0;
  t.ci_half_s = kZ95 * sd * std::sqrt(static_cast<double>(iterations));
  return t;
}

double measured_wait_share(const RunStalls& run, std::size_t warmup, std::size_t iterations) {
  if (iterations == 0 || run.step_period_s.size() < warmup + iterations) return 0;
  double time = 0, wait = 0;
  for (std::size_t i = warmup; i < warmup + iterations; ++i) {
    time += run.step_period_s[i];
    wait += run.step_wait_s[i];
  }
  return time > 0 ? wait / time : 0;
}

Differential differential(const Timing& synthetic, const Timing& cold, const Timing& warm,
                          int batch_size, double cold_live_wait_share) {
  Differential d;
  d.synthetic = synthetic;
  d.cold = cold;
  d.warm = warm;
  d.batch_size = batch_size;
  const double samples = static_cast<double>(cold.iterations) * batch_size;
  const double t1 = synthetic.total_s, t2 = cold.total_s, t3 = warm.total_s;
  d.ingestion_rate = t1 > 0 ? samples / t1 : 0;
  d.prep_rate = t3 > 0 ? samples / t3 : 0;
  d.fetch_rate = t2 > t3 ? samples / (t2 - t3) : 0;
  d.prep_stall_s = std::max(0.0, t3 - t1);
  d.fetch_stall_s = std::max(0.0, t2 - t3);
  if (t2 > 0) {
    d.prep_share = d.prep_stall_s / t2;
    d.fetch_share = d.fetch_stall_s / t2;
    d.prep_share_ci = std::hypot(warm.ci_half_s, synthetic.ci_half_s) / t2;
    d.fetch_share_ci = std::hypot(cold.ci_half_s, warm.ci_half_s) / t2;
  }
  d.live_wait_share = cold_live_wait_share;
  const double differential_share = d.prep_share + d.fetch_share;
  d.agree = std::abs(differential_share - cold_live_wait_share) <= 0.05;
  if (!d.agree) {
    if (differential_share > cold_live_wait_share) {
      d.reconcile =
          "the differential share is larger: loading slows the training step itself (loader "
          "workers compete with it for CPU or memory bandwidth), which the time spent waiting "
          "in the loader cannot show; trust the differential share for what removing the data "
          "cost would gain, the live share for time blocked in the loader";
    } else {
      d.reconcile =
          "the live share is larger: the loop waits for batches that the synthetic run's "
          "compute would have overlapped (waits bunched at pass starts, or a step shorter than "
          "its variation); trust the live share for this run, the differential share for the "
          "steady state";
    }
  }
  return d;
}

double CacheModel::samples_per_s(double cached) const {
  const double extra = std::max(0.0, 1 - cached) * disk_extra_s;
  double per_sample = warm_s;
  if (extra > 0) {
    per_sample =
        std::isinf(overlap_k)
            ? std::max(warm_s, extra)
            : std::pow(std::pow(warm_s, overlap_k) + std::pow(extra, overlap_k), 1 / overlap_k);
  }
  per_sample = std::max(per_sample, ingestion_s);
  return per_sample > 0 ? 1 / per_sample : 0;
}

CacheModel cache_what_if(const Differential& d, double bytes_per_sample, double disk_mb_s,
                         double memory_mb_s, double cold_resident_share) {
  CacheModel m;
  if (d.ingestion_rate <= 0 || d.prep_rate <= 0) return m;
  const double samples = static_cast<double>(d.cold.iterations) * d.batch_size;
  m.ingestion_s = 1 / d.ingestion_rate;
  m.warm_s = 1 / d.prep_rate;
  const double cold_s = samples > 0 ? d.cold.total_s / samples : 0;
  const double uncached = std::clamp(1 - cold_resident_share, 0.05, 1.0);
  double extra = 0;  // at the cold run's uncached share
  if (bytes_per_sample > 0 && disk_mb_s > 0) {
    extra = uncached * bytes_per_sample *
            (1 / (disk_mb_s * 1e6) - (memory_mb_s > 0 ? 1 / (memory_mb_s * 1e6) : 0));
  }
  const double a = m.warm_s;
  if (extra <= 0 || cold_s <= a) {
    // No disk rate (or a cold run no slower than the warm one): the measured
    // fetch stall, added.
    m.disk_extra_s = std::max(0.0, cold_s - a) / uncached;
    m.overlap_k = 1;
    m.basis = extra <= 0 ? "no disk read rate: the fetch stall per sample, in proportion to the "
                           "uncached share"
                         : "the cold run was no slower than the warm one";
  } else if (a + extra <= cold_s) {
    // Reading did not overlap at all, and took longer than the bandwidths say.
    m.overlap_k = 1;
    m.disk_extra_s = (cold_s - a) / uncached;
    m.basis =
        "reading adds to prep (k = 1); the cold run's stall is longer than the disk's rate "
        "implies, so the stall sets the scale";
  } else if (std::max(a, extra) >= cold_s) {
    // Fully overlapped, and the cold run was faster than the bandwidths say.
    m.overlap_k = std::numeric_limits<double>::infinity();
    m.disk_extra_s = std::min(extra, cold_s) / uncached;
    m.basis = "reading fully overlaps prep (the slower of the two)";
  } else {
    // (a^k + extra^k)^(1/k) = cold_s: decreasing in k; bisect on log k.
    double lo = 0, hi = 8;  // k = e^lo .. e^hi
    for (int i = 0; i < 100; ++i) {
      const double k = std::exp((lo + hi) / 2);
      const double t = std::pow(std::pow(a, k) + std::pow(extra, k), 1 / k);
      (t > cold_s ? lo : hi) = (lo + hi) / 2;
    }
    m.overlap_k = std::exp((lo + hi) / 2);
    m.disk_extra_s = extra / uncached;
    m.basis = "the measured disk and memory rates, with k fitted to the cold run";
  }
  for (int i = 0; i <= 10; ++i) {
    const double cached = i / 10.0;
    m.points.push_back({cached, m.samples_per_s(cached)});
  }
  return m;
}

absl::StatusOr<WorkerFit> worker_what_if(const std::vector<WorkerRun>& runs, double ingestion_rate,
                                         int cores) {
  WorkerFit fit;
  fit.cores = std::max(1, cores);
  // Prep-bound runs (waiting >= 5%) deliver what their workers can prepare:
  // rate = a * workers, least squares through the origin.
  double sxy = 0, sxx = 0;
  for (const WorkerRun& r : runs) {
    if (r.workers < 1 || r.wait_share < 0.05 || r.samples_per_s <= 0) continue;
    const double w = std::min(r.workers, fit.cores);
    sxy += w * r.samples_per_s;
    sxx += w * w;
    ++fit.fitted_runs;
  }
  if (fit.fitted_runs == 0) {
    return absl::NotFoundError(
        "no warm run with loader workers was prep-bound (data-wait share >= 5%): the loader "
        "keeps up at the worker counts measured, so more workers cannot help");
  }
  fit.per_worker_rate = sxy / sxx;
  for (int w = 1; w <= fit.cores; ++w) {
    const double rate = fit.per_worker_rate * w;
    fit.predicted.emplace_back(w, std::min(rate, ingestion_rate > 0 ? ingestion_rate : rate));
    if (fit.workers_to_keep_up == 0 && ingestion_rate > 0 && rate >= ingestion_rate) {
      fit.workers_to_keep_up = w;
    }
  }
  return fit;
}

double predict_throughput(const WorkerFit& fit, int workers, double ingestion_rate) {
  const double rate = fit.per_worker_rate * std::min(std::max(workers, 0), fit.cores);
  return ingestion_rate > 0 ? std::min(rate, ingestion_rate) : rate;
}

GpuWhatIf gpu_what_if(const Differential& d, double loader_rate, const CacheModel& cache) {
  GpuWhatIf g;
  if (d.ingestion_rate <= 0) return g;
  if (loader_rate > 0) {
    g.loader_rate = loader_rate;
    g.basis = "the loader's rate measured alone (warm cache, no compute)";
  } else {
    g.loader_rate = d.prep_rate;
    g.basis =
        "no loader run: the warm run's rate, a lower bound (it cannot exceed what the step takes)";
  }
  g.loader_rate_cold = g.loader_rate;
  if (cache.disk_extra_s > 0 && g.loader_rate > 0) {
    const double a = 1 / g.loader_rate, b = cache.disk_extra_s;
    const double k = cache.overlap_k;
    const double t =
        std::isinf(k) ? std::max(a, b) : std::pow(std::pow(a, k) + std::pow(b, k), 1 / k);
    g.loader_rate_cold = 1 / t;
  }
  g.gpus_until_data_bound = g.loader_rate / d.ingestion_rate;
  g.gpus_until_data_bound_cold = g.loader_rate_cold / d.ingestion_rate;
  for (int k = 1; k <= 8; ++k) {
    g.predicted.emplace_back(k, std::min(k * d.ingestion_rate, g.loader_rate));
  }
  return g;
}

}  // namespace trainscope::stalls
