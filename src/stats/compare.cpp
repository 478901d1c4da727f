#include "trainscope/stats/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::stats {
namespace {

constexpr std::size_t kMserBatch = 5;

// --- Small numerics ----------------------------------------------------------

double median_of(const double* begin, const double* end) {
  std::vector<double> copy(begin, end);
  return median_in_place(&copy);
}

// SplitMix64 (Steele, Lea & Flood 2014): the same stream on every platform,
// unlike std:: distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by a multiply-shift (Lemire); the bias, below n / 2^64, is nil here.
  std::size_t below(std::size_t n) {
    return static_cast<std::size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  std::uint64_t state_;
};

// --- Validation ---------------------------------------------------------------

absl::Status check_options(const CompareOptions& o) {
  if (!(o.threshold > 0) || !std::isfinite(o.threshold))
    return absl::InvalidArgumentError(
        fmt::format("compare: threshold must be a positive fraction, not {}", o.threshold));
  if (!(o.confidence > 0 && o.confidence < 1))
    return absl::InvalidArgumentError(
        fmt::format("compare: confidence must lie in (0, 1), not {}", o.confidence));
  if (o.resamples < 100)
    return absl::InvalidArgumentError(
        fmt::format("compare: at least 100 bootstrap resamples, not {}", o.resamples));
  if (o.min_steps < 2)
    return absl::InvalidArgumentError(
        fmt::format("compare: min_steps must be at least 2, not {}", o.min_steps));
  if (o.min_runs < 2)
    return absl::InvalidArgumentError(
        fmt::format("compare: min_runs must be at least 2, not {}", o.min_runs));
  if (!(o.run_noise >= 0 && o.run_noise < 1))
    return absl::InvalidArgumentError(
        fmt::format("compare: run_noise must lie in [0, 1), not {}", o.run_noise));
  return absl::OkStatus();
}

absl::Status check_series(const std::vector<double>& series, const std::string& name) {
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (!std::isfinite(series[i]) || series[i] < 0)
      return absl::InvalidArgumentError(fmt::format(
          "compare: step {} of {} is {} (step times must be finite and >= 0)", i, name, series[i]));
  }
  return absl::OkStatus();
}

// --- Verdict and its sentence --------------------------------------------------

// Fills verdict, reason and more_a/more_b from ratio, low, high and n_a/n_b.
// `half_width_at(scale)` gives the log interval's half-width with scale times
// the observations per side.
template <typename HalfWidthAt>
void conclude(Comparison* c, const CompareOptions& o, const HalfWidthAt& half_width_at) {
  c->verdict = decide(c->low, c->high, o.threshold);
  const double level = o.confidence * 100;
  const std::string interval = fmt::format("{:.3g}% interval {:.4f} to {:.4f}, p = {:.2g}", level,
                                           c->low, c->high, c->p_value);
  switch (c->verdict) {
    case Verdict::kSame:
      c->reason = fmt::format("B/A = {:.4f}: the whole {} lies within +-{:g}%", c->ratio, interval,
                              o.threshold * 100);
      return;
    case Verdict::kSlower:
      c->reason = fmt::format("B is slower: B/A = {:.4f} ({}), {} to {}", c->ratio, interval,
                              format_change(c->low), format_change(c->high));
      return;
    case Verdict::kFaster:
      c->reason = fmt::format("B is faster: B/A = {:.4f} ({}), {} to {}", c->ratio, interval,
                              format_change(c->low), format_change(c->high));
      return;
    case Verdict::kInconclusive:
    case Verdict::kInconclusiveContention:
      break;
  }
  // Decided once the half-width h shrinks below max(|center|, margin - |center|)
  // (in logs): the interval then excludes 1 or fits inside the margin.
  const double lo = std::log(c->low), hi = std::log(c->high);
  const double center = std::fabs((lo + hi) / 2);
  const double margin = std::log1p(o.threshold);
  const double goal = std::max(center, margin - center);
  double scale = 1;
  for (int i = 0; i < 200 && half_width_at(scale) >= goal; ++i) scale *= 1.05;
  const auto more = [scale](std::size_t n) {
    return static_cast<std::size_t>(std::ceil(static_cast<double>(n) * (scale - 1)));
  };
  c->more_a = std::max<std::size_t>(1, more(c->n_a));
  c->more_b = std::max<std::size_t>(1, more(c->n_b));
  const char* unit = unit_name(c->unit);
  c->reason = fmt::format(
      "B/A = {:.4f}, but the {} is too wide to tell slower, faster or within +-{:g}%: about {} "
      "more {} for A and {} for B would decide it{}",
      c->ratio, interval, o.threshold * 100, c->more_a, unit, c->more_b,
      scale >= std::pow(1.05, 199) ? " (at least; the difference may be too close to the margin)"
                                   : "");
}

void inconclusive(Comparison* c, std::string reason) {
  c->verdict = Verdict::kInconclusive;
  c->reason = std::move(reason);
}

// --- Within-run bootstrap ---------------------------------------------------

// The block length of a side and the factor that corrects its bootstrap spread.
struct BlockChoice {
  std::size_t length = 1;
  double spread_factor = 1;
};
BlockChoice block_choice(const std::vector<double>& series);

// Medians of `resamples` moving-block bootstrap resamples of x (Kuensch 1989):
// ceil(n / block) blocks of `block` consecutive values, starting uniformly in
// [0, n - block], joined and cut to n. One selection per resample.
std::vector<double> block_bootstrap_medians(const std::vector<double>& x, std::size_t block,
                                            std::size_t resamples, std::uint64_t seed) {
  const std::size_t n = x.size();
  block = std::clamp<std::size_t>(block, 1, n);
  const std::size_t starts = n - block + 1;
  Rng rng(seed);
  std::vector<double> buffer(n);
  std::vector<double> medians(resamples);
  for (std::size_t r = 0; r < resamples; ++r) {
    for (std::size_t pos = 0; pos < n; pos += block) {
      const std::size_t start = rng.below(starts);
      const std::size_t len = std::min(block, n - pos);
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(start), len,
                  buffer.begin() + static_cast<std::ptrdiff_t>(pos));
    }
    medians[r] = median_in_place(&buffer);
  }
  return medians;
}

std::string no_spread_reason(const char* side, double value) {
  return fmt::format(
      "{}'s step times (after warm-up) are all equal ({:g}): no spread to draw an interval from",
      side, value);
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kSame:
      return "same";
    case Verdict::kFaster:
      return "faster";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kInconclusive:
      return "inconclusive";
    case Verdict::kInconclusiveContention:
      return "inconclusive (contention)";
  }
  return "inconclusive";
}

const char* unit_name(CompareUnit unit) { return unit == CompareUnit::kRuns ? "runs" : "steps"; }

std::size_t mser5_warmup(const std::vector<double>& series) {
  const std::size_t k = series.size() / kMserBatch;
  if (k < 4) return 0;
  const double clip_low = quantile(series, 0.01);
  const double clip_high = quantile(series, 0.99);
  std::vector<double> z(k);
  for (std::size_t j = 0; j < k; ++j) {
    double sum = 0;
    for (std::size_t i = j * kMserBatch; i < (j + 1) * kMserBatch; ++i)
      sum += std::clamp(series[i], clip_low, clip_high);
    z[j] = sum / kMserBatch;
  }
  // Centred on the overall mean so that the suffix sums of squares do not cancel.
  const double mean = std::accumulate(z.begin(), z.end(), 0.0) / static_cast<double>(k);
  double scale = 0;
  for (double& v : z) {
    scale = std::max(scale, std::fabs(v));
    v -= mean;
  }
  const double tolerance = 1e-12 * scale * scale;
  // Suffix sums from the back: S1, S2 over z[d, k).
  std::vector<double> s1(k + 1, 0.0), s2(k + 1, 0.0);
  for (std::size_t j = k; j-- > 0;) {
    s1[j] = s1[j + 1] + z[j];
    s2[j] = s2[j + 1] + z[j] * z[j];
  }
  std::size_t best_d = 0;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t d = 0; d <= k / 2; ++d) {
    const auto m = static_cast<double>(k - d);
    const double ss = std::max(0.0, s2[d] - s1[d] * s1[d] / m);
    const double mser = ss / (m * m);
    if (mser < best - tolerance) {
      best = mser;
      best_d = d;
    }
  }
  return best_d * kMserBatch;
}

std::size_t optimal_block_length(const std::vector<double>& series) {
  return block_choice(series).length;
}

namespace {

BlockChoice block_choice(const std::vector<double>& series) {
  const std::size_t n = series.size();
  if (n < 8) return {};
  // Mid-ranks, centred.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&series](std::size_t i, std::size_t j) { return series[i] < series[j]; });
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && series[order[j + 1]] == series[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2;
    for (std::size_t t = i; t <= j; ++t) x[order[t]] = rank;
    i = j + 1;
  }
  const double mean = (static_cast<double>(n) - 1) / 2;
  for (double& v : x) v -= mean;

  const double nd = static_cast<double>(n);
  const auto kn =
      std::max<std::size_t>(5, static_cast<std::size_t>(std::ceil(std::sqrt(std::log10(nd)))));
  const std::size_t m_max =
      std::min(n - 1, static_cast<std::size_t>(std::ceil(std::sqrt(nd))) + kn);
  std::vector<double> acv(m_max + 1);
  for (std::size_t lag = 0; lag <= m_max; ++lag) {
    double sum = 0;
    for (std::size_t i = lag; i < n; ++i) sum += x[i] * x[i - lag];
    acv[lag] = sum / nd;
  }
  if (!(acv[0] > 0)) return {};
  // M: twice the smallest lag after which kn autocorrelations in a row are insignificant.
  const double critical = 2 * std::sqrt(std::log10(nd) / nd);
  std::size_t big_m = m_max;
  for (std::size_t m = 0; m + kn <= m_max; ++m) {
    bool quiet = true;
    for (std::size_t j = 1; j <= kn && quiet; ++j)
      quiet = std::fabs(acv[m + j] / acv[0]) < critical;
    if (quiet) {
      big_m = std::min(m_max, 2 * std::max<std::size_t>(m, 1));
      break;
    }
  }
  // Flat-top (trapezoid) lag window.
  double g = 0, long_run = acv[0];
  for (std::size_t k = 1; k <= big_m; ++k) {
    const double t = static_cast<double>(k) / static_cast<double>(big_m);
    const double lambda = t <= 0.5 ? 1.0 : 2 * (1 - t);
    g += 2 * lambda * static_cast<double>(k) * acv[k];
    long_run += 2 * lambda * acv[k];
  }
  const double b_max = std::ceil(std::min(3 * std::sqrt(nd), nd / 3));
  if (!(long_run > 0)) return {};
  // Patton-Politis-White (2009): D = (4/3) g(0)^2 for the moving-block (and circular) bootstrap.
  const double d = 4.0 / 3.0 * long_run * long_run;
  const double b = std::cbrt(2 * g * g / d) * std::cbrt(nd);
  BlockChoice choice;
  choice.length = static_cast<std::size_t>(std::clamp(std::round(b), 1.0, b_max));
  // The block bootstrap's variance falls short by G / (l g(0)) to first order
  // (Kuensch 1989): the spread is scaled up by the inverse, the shortfall capped at half.
  const double shortfall =
      std::clamp(g / (static_cast<double>(choice.length) * long_run), 0.0, 0.5);
  choice.spread_factor = std::sqrt(1 / (1 - shortfall));
  return choice;
}

}  // namespace

Verdict decide(double low, double high, double threshold) {
  if (!(low <= high) || !(low > 0) || !std::isfinite(high) || !(threshold > 0))
    return Verdict::kInconclusive;
  if (low >= 1 / (1 + threshold) && high <= 1 + threshold) return Verdict::kSame;
  if (low > 1) return Verdict::kSlower;
  if (high < 1) return Verdict::kFaster;
  return Verdict::kInconclusive;
}

bool fails_if_slower(const Comparison& comparison, double pct) {
  return std::isfinite(comparison.low) && std::isfinite(pct) && comparison.low > 1 + pct / 100;
}

bool fails_if_lower(const Comparison& comparison, double pct) {
  return std::isfinite(comparison.high) && std::isfinite(pct) && pct >= 0 &&
         comparison.high < 1 / (1 + pct / 100);
}

absl::StatusOr<Comparison> compare_steps(const std::vector<double>& a, const std::vector<double>& b,
                                         const CompareOptions& options) {
  if (absl::Status s = check_options(options); !s.ok()) return s;
  if (absl::Status s = check_series(a, "A"); !s.ok()) return s;
  if (absl::Status s = check_series(b, "B"); !s.ok()) return s;

  Comparison c;
  c.unit = CompareUnit::kSteps;
  if (options.detect_warmup) {
    c.warmup_a = mser5_warmup(a);
    c.warmup_b = mser5_warmup(b);
  }
  const std::vector<double> xa(a.begin() + static_cast<std::ptrdiff_t>(c.warmup_a), a.end());
  const std::vector<double> xb(b.begin() + static_cast<std::ptrdiff_t>(c.warmup_b), b.end());
  c.n_a = xa.size();
  c.n_b = xb.size();
  c.median_a = median_of(xa.data(), xa.data() + xa.size());
  c.median_b = median_of(xb.data(), xb.data() + xb.size());
  if (c.median_a > 0) c.ratio = c.median_b / c.median_a;

  if (c.n_a < options.min_steps || c.n_b < options.min_steps) {
    c.more_a = options.min_steps - std::min(c.n_a, options.min_steps);
    c.more_b = options.min_steps - std::min(c.n_b, options.min_steps);
    inconclusive(&c, fmt::format("too few steps: A has {} and B {} after warm-up (dropped {} and "
                                 "{}); a comparison needs at least {} a side",
                                 c.n_a, c.n_b, c.warmup_a, c.warmup_b, options.min_steps));
    return c;
  }
  const auto [a_min, a_max] = std::minmax_element(xa.begin(), xa.end());
  const auto [b_min, b_max] = std::minmax_element(xb.begin(), xb.end());
  if (*a_min == *a_max) return inconclusive(&c, no_spread_reason("A", *a_min)), c;
  if (*b_min == *b_max) return inconclusive(&c, no_spread_reason("B", *b_min)), c;
  if (!(c.median_a > 0) || !(c.median_b > 0))
    return inconclusive(&c, "a median step time is 0: no ratio"), c;

  BlockChoice choice_a, choice_b;
  if (options.block_length != 0) {
    choice_a.length = std::min(options.block_length, c.n_a);
    choice_b.length = std::min(options.block_length, c.n_b);
  } else {
    choice_a = block_choice(xa);
    choice_b = block_choice(xb);
  }
  c.block_a = choice_a.length;
  c.block_b = choice_b.length;
  Rng seeds(options.seed);
  const std::vector<double> ma =
      block_bootstrap_medians(xa, c.block_a, options.resamples, seeds.next());
  const std::vector<double> mb =
      block_bootstrap_medians(xb, c.block_b, options.resamples, seeds.next());
  std::vector<double> log_ratio(options.resamples);
  for (std::size_t r = 0; r < options.resamples; ++r) {
    if (!(ma[r] > 0) || !(mb[r] > 0))
      return inconclusive(&c, "step times at 0 make resampled medians 0: no ratio"), c;
    // Each side's resampled log median, its deviation from the sample's scaled
    // by the side's spread correction.
    const double la =
        std::log(c.median_a) + choice_a.spread_factor * (std::log(ma[r]) - std::log(c.median_a));
    const double lb =
        std::log(c.median_b) + choice_b.spread_factor * (std::log(mb[r]) - std::log(c.median_b));
    log_ratio[r] = lb - la;
  }
  std::sort(log_ratio.begin(), log_ratio.end());
  const double alpha = 1 - options.confidence;
  c.low = std::exp(quantile_sorted(log_ratio, alpha / 2));
  c.high = std::exp(quantile_sorted(log_ratio, 1 - alpha / 2));
  // Two-sided p-value of log ratio = 0: twice the smaller bootstrap tail at 0,
  // (count + 1) / (R + 1) so that it is never 0.
  const auto below = static_cast<double>(std::upper_bound(log_ratio.begin(), log_ratio.end(), 0.0) -
                                         log_ratio.begin());
  const auto above = static_cast<double>(log_ratio.end() -
                                         std::lower_bound(log_ratio.begin(), log_ratio.end(), 0.0));
  const auto r1 = static_cast<double>(options.resamples) + 1;
  c.p_value = std::min(1.0, 2 * std::min(below + 1, above + 1) / r1);
  if (c.low == c.high)
    return inconclusive(&c, "the interval has no width: step times too coarse to resample"), c;

  const double half = (std::log(c.high) - std::log(c.low)) / 2;
  if (options.run_noise == 0) {
    conclude(&c, options, [half](double scale) { return half / std::sqrt(scale); });
    return c;
  }
  // The run-to-run term: each side's median is one draw of the job's, so the
  // log ratio gains a variance of 2 run_noise^2; its half-width joins each of
  // the bootstrap's in quadrature, and the p-value is the normal one of the
  // combined standard error.
  const double z = student_t_quantile(1 - alpha / 2, 1e12);
  const double noise = z * std::log1p(options.run_noise) * std::sqrt(2.0);
  const double center = std::log(c.ratio);
  const double lo = center - std::hypot(center - std::log(c.low), noise);
  const double hi = center + std::hypot(std::log(c.high) - center, noise);
  c.low = std::exp(lo);
  c.high = std::exp(hi);
  c.p_value = std::erfc(std::fabs(center) / ((hi - lo) / (2 * z)) / std::sqrt(2.0));
  // More steps shrink only the bootstrap's part: when the run-to-run term
  // alone keeps the interval from deciding, only repetitions can.
  const double margin = std::log1p(options.threshold);
  const double goal = std::max(std::fabs((lo + hi) / 2), margin - std::fabs((lo + hi) / 2));
  if (decide(c.low, c.high, options.threshold) == Verdict::kInconclusive && noise >= goal) {
    const double runs = std::ceil(2 * std::pow(noise / std::sqrt(2.0) / goal, 2) + 1);
    return inconclusive(
               &c, fmt::format(
                       "B/A = {:.4f}, but the {:.3g}% interval {:.4f} to {:.4f} (p = {:.2g}) is "
                       "too wide to tell slower, faster or within +-{:g}%, and more steps cannot "
                       "narrow it: one run a side varies by about {:g}% from run to run "
                       "(run_noise); about {:.0f} runs a side would decide it",
                       c.ratio, options.confidence * 100, c.low, c.high, c.p_value,
                       options.threshold * 100, options.run_noise * 100, std::max(2.0, runs))),
           c;
  }
  conclude(&c, options,
           [half, noise](double scale) { return std::hypot(half / std::sqrt(scale), noise); });
  return c;
}

absl::StatusOr<Comparison> compare_runs(const std::vector<std::vector<double>>& a,
                                        const std::vector<std::vector<double>>& b,
                                        const CompareOptions& options) {
  if (absl::Status s = check_options(options); !s.ok()) return s;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (absl::Status s = check_series(a[i], fmt::format("A's run {}", i)); !s.ok()) return s;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (absl::Status s = check_series(b[i], fmt::format("B's run {}", i)); !s.ok()) return s;

  Comparison c;
  c.unit = CompareUnit::kRuns;
  c.n_a = a.size();
  c.n_b = b.size();
  // Log medians of each side's runs; the first short or flat run is named.
  std::string problem;
  const auto log_medians = [&](const std::vector<std::vector<double>>& runs, const char* side,
                               std::size_t* warmup) {
    std::vector<double> logs;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const std::size_t drop = options.detect_warmup ? mser5_warmup(runs[i]) : 0;
      *warmup += drop;
      const std::size_t n = runs[i].size() - drop;
      const double median = median_of(runs[i].data() + drop, runs[i].data() + runs[i].size());
      if (problem.empty() && n < options.min_steps)
        problem = fmt::format(
            "{}'s run {} has {} steps after warm-up (dropped {}); each run needs "
            "at least {}",
            side, i, n, drop, options.min_steps);
      else if (problem.empty() && !(median > 0))
        problem = fmt::format("{}'s run {} has a median step time of 0", side, i);
      if (n > 0 && median > 0) logs.push_back(std::log(median));
    }
    return logs;
  };
  const std::vector<double> la = log_medians(a, "A", &c.warmup_a);
  const std::vector<double> lb = log_medians(b, "B", &c.warmup_b);
  const auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  if (!la.empty()) c.median_a = std::exp(mean(la));
  if (!lb.empty()) c.median_b = std::exp(mean(lb));
  if (!la.empty() && !lb.empty()) c.ratio = c.median_b / c.median_a;

  if (c.n_a < options.min_runs || c.n_b < options.min_runs) {
    c.more_a = options.min_runs - std::min(c.n_a, options.min_runs);
    c.more_b = options.min_runs - std::min(c.n_b, options.min_runs);
    return inconclusive(&c, fmt::format("too few runs: A has {} and B {}; the run unit needs at "
                                        "least {} a side",
                                        c.n_a, c.n_b, options.min_runs)),
           c;
  }
  if (!problem.empty()) return inconclusive(&c, problem), c;

  const double na = static_cast<double>(la.size()), nb = static_cast<double>(lb.size());
  const Welch w = welch(la, lb);
  const double se = w.se;
  if (!(se > 0))
    return inconclusive(&c,
                        "the runs' medians do not vary at all: no spread to draw an interval "
                        "from"),
           c;
  c.df = w.df;
  const double d = w.difference;
  const double tq = student_t_quantile(1 - (1 - options.confidence) / 2, c.df);
  c.low = std::exp(d - tq * se);
  c.high = std::exp(d + tq * se);
  c.p_value = std::min(1.0, 2 * student_t_cdf(-std::fabs(d) / se, c.df));
  // With scale times the runs: the standard error shrinks as 1/sqrt(scale) and
  // the degrees of freedom grow with the runs.
  const double df = c.df, total = na + nb, q = 1 - (1 - options.confidence) / 2;
  conclude(&c, options, [=](double scale) {
    const double df_scaled = std::max(1.0, df * (scale * total - 2) / (total - 2));
    return student_t_quantile(q, df_scaled) * se / std::sqrt(scale);
  });
  return c;
}

}  // namespace trainscope::stats
