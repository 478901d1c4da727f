// A against B: pairs (one, or one per configuration of two sweeps), rows per
// quantity, the overall verdict and the warnings.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "compare/contention.hpp"
#include "fmt/format.h"
#include "trainscope/compare/compare.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::compare {
namespace {

constexpr char kMissing[] = "(none)";

std::string param_of(const SideRun& run, const std::string& key) {
  auto it = run.params.find(key);
  return it == run.params.end() ? kMissing : it->second;
}

// The params that tell configurations apart: those that vary within a side
// (the ones constant within each side but different between them are what A
// and B are about, and match nothing).
std::vector<std::string> config_params(const Side& a, const Side& b) {
  std::set<std::string> keys;
  for (const Side* side : {&a, &b})
    for (const SideRun& run : side->runs)
      for (const auto& [k, v] : run.params) keys.insert(k);
  std::vector<std::string> varying;
  for (const std::string& key : keys) {
    std::set<std::string> va, vb;
    for (const SideRun& run : a.runs) va.insert(param_of(run, key));
    for (const SideRun& run : b.runs) vb.insert(param_of(run, key));
    if (va.size() > 1 || vb.size() > 1) varying.push_back(key);
  }
  return varying;
}

std::string config_of(const SideRun& run, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const std::string& key : keys)
    parts.push_back(fmt::format("{}={}", key, param_of(run, key)));
  return absl::StrJoin(parts, ", ");
}

const Series* find_series(const Side& side, SeriesKind kind, const std::string& name,
                          const std::string& device) {
  for (const Series& s : side.series)
    if (s.kind == kind && s.name == name && s.device == device) return &s;
  return nullptr;
}

// The runs' series of the given runs of a side that have data.
std::vector<std::vector<double>> runs_of(const Series& series,
                                         const std::vector<std::size_t>& idx) {
  std::vector<std::vector<double>> out;
  for (std::size_t i : idx)
    if (i < series.runs.size() && !series.runs[i].empty()) out.push_back(series.runs[i]);
  return out;
}

// Each run after its warm-up, pooled and sorted.
std::vector<double> pooled_tail(const std::vector<std::vector<double>>& runs, bool warmup) {
  std::vector<double> out;
  for (const std::vector<double>& r : runs) {
    const std::size_t drop = warmup ? stats::mser5_warmup(r) : 0;
    out.insert(out.end(), r.begin() + static_cast<std::ptrdiff_t>(drop), r.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A long step on one side the medians do not see: a stall, named.
std::string tail_note(const Row& row) {
  if (row.kind != SeriesKind::kRegion) return "";
  // Four times the side's p99, twice the other side's longest, and 10 ms past
  // the p99 at least (a blip of a microsecond key is no stall).
  const auto stalled = [](double max, double p99, double other_max) {
    return std::isfinite(max) && std::isfinite(p99) && max > 4 * p99 && max - p99 >= 0.01 &&
           (!std::isfinite(other_max) || max > 2 * other_max);
  };
  for (const bool b_side : {true, false}) {
    const double max = b_side ? row.max_b : row.max_a, p99 = b_side ? row.p99_b : row.p99_a;
    const double other = b_side ? row.max_a : row.max_b;
    if (stalled(max, p99, other))
      return fmt::format(
          "{}'s longest {} took {} against its p99 of {} ({}'s longest: {}): a stall "
          "(a checkpoint, evaluation, another tenant?) that the medians leave out",
          b_side ? "B" : "A", row.name, stats::format_seconds(max), stats::format_seconds(p99),
          b_side ? "A" : "B", stats::format_seconds(other));
  }
  return "";
}

absl::StatusOr<Row> compare_series(const Series& sa, const Series& sb,
                                   const std::vector<std::size_t>& ia,
                                   const std::vector<std::size_t>& ib,
                                   const CompareOptions& options) {
  Row row;
  row.name = sa.name;
  row.kind = sa.kind;
  row.device = sa.device;
  const std::vector<std::vector<double>> ra = runs_of(sa, ia), rb = runs_of(sb, ib);
  absl::StatusOr<stats::Comparison> c = ra.size() == 1 && rb.size() == 1
                                            ? stats::compare_steps(ra[0], rb[0], options.stats)
                                            : stats::compare_runs(ra, rb, options.stats);
  if (!c.ok())
    return absl::Status(
        c.status().code(),
        fmt::format("{}{}: {}", sa.name, sa.device.empty() ? "" : fmt::format(" ({})", sa.device),
                    std::string(c.status().message())));
  row.stats = std::move(*c);
  const std::vector<double> ta = pooled_tail(ra, options.stats.detect_warmup);
  const std::vector<double> tb = pooled_tail(rb, options.stats.detect_warmup);
  row.p99_a = stats::quantile_sorted(ta, 0.99);
  row.p99_b = stats::quantile_sorted(tb, 0.99);
  row.max_a = ta.empty() ? kNaN : ta.back();
  row.max_b = tb.empty() ? kNaN : tb.back();
  row.note = tail_note(row);
  return row;
}

// Without a step key: the geometric mean of the CPU keys' ratios, their log
// intervals combined as if independent (an approximation, said in the basis).
Row geometric_mean(const std::vector<Row>& rows, const CompareOptions& options,
                   std::string* basis) {
  Row overall;
  overall.name = "geometric mean";
  overall.kind = SeriesKind::kRegion;
  overall.device = "CPU";
  const double z = std::fabs(stats::student_t_quantile((1 - options.stats.confidence) / 2, 1e9));
  double sum = 0, var = 0;
  std::size_t k = 0;
  for (const Row& r : rows) {
    if (r.kind != SeriesKind::kRegion || r.device != "CPU") continue;
    if (!(r.stats.ratio > 0) || !(r.stats.low > 0) || !(r.stats.high > 0)) continue;
    sum += std::log(r.stats.ratio);
    const double se = (std::log(r.stats.high) - std::log(r.stats.low)) / (2 * z);
    var += se * se;
    ++k;
  }
  *basis = fmt::format(
      "geometric mean of {} CPU key{}' ratios (no step key; intervals combined as if the keys "
      "were independent)",
      k, k == 1 ? "" : "s");
  if (k == 0) {
    overall.stats.reason = "no CPU region key has a ratio with an interval on both sides";
    return overall;
  }
  const double m = sum / static_cast<double>(k), se = std::sqrt(var) / static_cast<double>(k);
  overall.stats.ratio = std::exp(m);
  overall.stats.low = std::exp(m - z * se);
  overall.stats.high = std::exp(m + z * se);
  overall.stats.verdict =
      stats::decide(overall.stats.low, overall.stats.high, options.stats.threshold);
  overall.stats.reason = *basis;
  return overall;
}

bool wanted(const std::vector<std::string>& keys, const std::string& name) {
  return keys.empty() || std::find(keys.begin(), keys.end(), name) != keys.end();
}

std::vector<std::string> side_warnings(const Side& a, const Side& b,
                                       const std::vector<std::size_t>& ia,
                                       const std::vector<std::size_t>& ib,
                                       const CompareOptions& options) {
  std::vector<std::string> out;
  const auto mean_load = [](const Side& s, const std::vector<std::size_t>& idx) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t i : idx)
      if (std::isfinite(s.runs[i].other_cpu_share)) sum += s.runs[i].other_cpu_share, ++n;
    return n == 0 ? kNaN : sum / static_cast<double>(n);
  };
  const double la = mean_load(a, ia), lb = mean_load(b, ib);
  if (std::isfinite(la) && std::isfinite(lb) && std::fabs(la - lb) > options.host_load_difference)
    out.push_back(fmt::format(
        "differently loaded hosts: other processes used {:.0f}% of A's host CPUs and {:.0f}% of "
        "B's while they ran; part of any difference may be the host's",
        100 * la, 100 * lb));
  const auto set_of = [](const Side& s, const std::vector<std::size_t>& idx, auto field) {
    std::set<std::string> out;
    for (std::size_t i : idx)
      if (!field(s.runs[i]).empty()) out.insert(field(s.runs[i]));
    return out;
  };
  const auto hardware = [](const SideRun& r) { return r.hardware; };
  const std::set<std::string> ha = set_of(a, ia, hardware), hb = set_of(b, ib, hardware);
  if (!ha.empty() && !hb.empty() && ha != hb)
    out.push_back(fmt::format("different hardware: A ran on {}, B on {}", absl::StrJoin(ha, " / "),
                              absl::StrJoin(hb, " / ")));
  // Software: packages pinned differently (the first runs' recorded freezes).
  const auto packages = [](const Side& s, const std::vector<std::size_t>& idx) {
    std::map<std::string, std::string> pins;
    for (std::size_t i : idx) {
      if (s.runs[i].packages.empty()) continue;
      for (const std::string& line : s.runs[i].packages) {
        const std::size_t at = line.find("==");
        pins[line.substr(0, at)] = at == std::string::npos ? line : line.substr(at + 2);
      }
      break;
    }
    return pins;
  };
  const std::map<std::string, std::string> pa = packages(a, ia), pb = packages(b, ib);
  if (!pa.empty() && !pb.empty()) {
    std::vector<std::string> diff;
    std::set<std::string> names;
    for (const auto& [k, v] : pa) names.insert(k);
    for (const auto& [k, v] : pb) names.insert(k);
    for (const std::string& name : names) {
      auto x = pa.find(name), y = pb.find(name);
      const std::string va = x == pa.end() ? "absent" : x->second;
      const std::string vb = y == pb.end() ? "absent" : y->second;
      if (va != vb) diff.push_back(fmt::format("{} {} -> {}", name, va, vb));
    }
    if (!diff.empty()) {
      const std::size_t shown = std::min<std::size_t>(diff.size(), 5);
      out.push_back(fmt::format(
          "different software: {} {} ({}{})", diff.size(),
          diff.size() == 1 ? "package differs" : "packages differ",
          absl::StrJoin(diff.begin(), diff.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
          diff.size() > shown ? ", ..." : ""));
    }
  }
  for (const auto& [side, idx, name] :
       {std::make_tuple(&a, &ia, "A"), std::make_tuple(&b, &ib, "B")})
    for (std::size_t i : *idx)
      if (side->runs[i].status != RunStatus::kFinished)
        out.push_back(fmt::format("{}'s run {} is {}: its steps so far are compared", name,
                                  side->runs[i].dir, run_status_name(side->runs[i].status)));
  return out;
}

absl::StatusOr<Pair> compare_pair(const Side& a, const Side& b, const std::vector<std::size_t>& ia,
                                  const std::vector<std::size_t>& ib,
                                  const CompareOptions& options) {
  Pair pair;
  for (std::size_t i : ia) pair.runs_a.push_back(a.runs[i].dir);
  for (std::size_t i : ib) pair.runs_b.push_back(b.runs[i].dir);
  std::vector<std::string> only_a, only_b;
  const auto label = [](const Series& s) {
    return s.device.empty() || s.device == "CPU" ? s.name
                                                 : fmt::format("{} ({})", s.name, s.device);
  };
  for (const Series& sa : a.series) {
    if (runs_of(sa, ia).empty()) continue;
    const Series* sb = find_series(b, sa.kind, sa.name, sa.device);
    if (sb == nullptr || runs_of(*sb, ib).empty()) {
      only_a.push_back(label(sa));
      continue;
    }
    absl::StatusOr<Row> row = compare_series(sa, *sb, ia, ib, options);
    if (!row.ok()) return row.status();
    pair.rows.push_back(std::move(*row));
  }
  for (const Series& sb : b.series) {
    if (runs_of(sb, ib).empty()) continue;
    const Series* sa = find_series(a, sb.kind, sb.name, sb.device);
    if (sa == nullptr || runs_of(*sa, ia).empty()) only_b.push_back(label(sb));
  }
  if (pair.rows.empty())
    return absl::InvalidArgumentError(
        fmt::format("A and B have no region key or metric in common (A: {}; B: {})",
                    only_a.empty() ? "none" : absl::StrJoin(only_a, ", "),
                    only_b.empty() ? "none" : absl::StrJoin(only_b, ", ")));
  // The overall verdict: the step time, else the geometric mean over keys.
  const diagnosis::KeyMap keys = diagnosis::default_key_map();
  bool found = false;
  for (const std::string& step : keys.step_keys) {
    for (const Row& row : pair.rows)
      if (row.kind == SeriesKind::kRegion && row.device == "CPU" && row.name == step) {
        pair.overall = row;
        pair.overall_basis = fmt::format("step time ({})", step);
        found = true;
        break;
      }
    if (found) break;
  }
  if (!found) pair.overall = geometric_mean(pair.rows, options, &pair.overall_basis);
  // CPU contention: each side's, and the verdicts it may have made.
  pair.contention_a = detail::side_contention(a, ia);
  pair.contention_b = detail::side_contention(b, ib);
  pair.step_wait_a = detail::side_step_wait(a, ia);
  pair.step_wait_b = detail::side_step_wait(b, ib);
  std::vector<std::string> contention_notes;
  if (detail::contention_differs(a, ia, b, ib, options.stats.confidence)) {
    // The step row: by each step's own wait where both sides recorded it, else
    // bounded by the shares.
    const auto less_wait = std::find_if(pair.rows.begin(), pair.rows.end(), [](const Row& r) {
      return r.kind == SeriesKind::kMetric && r.name == kStepLessWait;
    });
    std::optional<std::string> by_steps;
    if (less_wait != pair.rows.end() && found)
      by_steps =
          detail::apply_step_wait(pair.contention_a, pair.contention_b, *less_wait, &pair.overall);
    if (std::string note = by_steps
                               ? *by_steps
                               : detail::apply_contention(pair.contention_a, pair.contention_b,
                                                          options.stats.threshold, &pair.overall);
        !note.empty())
      contention_notes.push_back(std::move(note));
    for (Row& row : pair.rows) {
      if (row.kind != SeriesKind::kRegion || row.device != "CPU") continue;
      if (by_steps && row.name == pair.overall.name) {  // the step row: one verdict, the overall's
        row.stats.verdict = pair.overall.stats.verdict;
        row.stats.reason = pair.overall.stats.reason;
      } else {
        detail::apply_contention(pair.contention_a, pair.contention_b, options.stats.threshold,
                                 &row);
      }
    }
  }
  // Without readings (older runs) the verdict is today's; a difference found
  // says it could not be checked.
  const bool differs = pair.overall.stats.verdict == stats::Verdict::kSlower ||
                       pair.overall.stats.verdict == stats::Verdict::kFaster;
  if (differs && (!std::isfinite(pair.contention_a) || !std::isfinite(pair.contention_b)))
    contention_notes.push_back(fmt::format(
        "no CPU contention readings for {} (runs recorded before trainscope sampled the "
        "run-queue wait, or without sampling): the verdict cannot tell the code from waiting "
        "for a CPU",
        !std::isfinite(pair.contention_a) && !std::isfinite(pair.contention_b) ? "A and B"
        : !std::isfinite(pair.contention_a)                                    ? "A"
                                                                               : "B"));
  // The rows shown: the selected ones, by effect.
  std::vector<std::string> unknown;
  for (const std::string& key : options.keys)
    if (std::none_of(pair.rows.begin(), pair.rows.end(),
                     [&](const Row& r) { return r.name == key; }))
      unknown.push_back(key);
  if (!unknown.empty())
    return absl::InvalidArgumentError(
        fmt::format("no {} on both sides: {} (compared: {})",
                    unknown.size() == 1 ? "such key" : "such keys", absl::StrJoin(unknown, ", "),
                    absl::StrJoin(pair.rows, ", ",
                                  [](std::string* out, const Row& r) { out->append(r.name); })));
  pair.rows.erase(std::remove_if(pair.rows.begin(), pair.rows.end(),
                                 [&](const Row& r) { return !wanted(options.keys, r.name); }),
                  pair.rows.end());
  const auto effect = [](const Row& r) {
    return r.stats.ratio > 0 ? std::fabs(std::log(r.stats.ratio)) : -1.0;
  };
  std::stable_sort(pair.rows.begin(), pair.rows.end(),
                   [&](const Row& x, const Row& y) { return effect(x) > effect(y); });
  pair.warnings = side_warnings(a, b, ia, ib, options);
  for (std::string& note : contention_notes) pair.warnings.push_back(std::move(note));
  // A key whose rows come from several modules (a GAN's two models under one
  // FORWARD): its row compares their time per step (the steps room's key sums).
  for (const Row& row : pair.rows) {
    if (row.kind != SeriesKind::kRegion || row.device != "CPU") continue;
    for (const auto& [side, idx, name] : {std::tuple{&a, &ia, "A"}, std::tuple{&b, &ib, "B"}}) {
      for (std::size_t i : *idx) {
        const auto it = side->runs[i].key_callers.find(row.name);
        if (it == side->runs[i].key_callers.end()) continue;
        pair.warnings.push_back(fmt::format(
            "{} mixes the calls of {} in {}'s run {}: its row compares their sum per step",
            row.name, it->second, name,
            side->runs[i].name.empty() ? side->runs[i].id : side->runs[i].name));
        break;
      }
    }
  }
  // A layer's backward timed on one step in K (--auto=layers): its row compares those
  // steps' time, and its n counts them only. Said once per side.
  for (const auto& [side, name] : {std::pair{&a, "A"}, std::pair{&b, "B"}}) {
    for (const SideRun& run : side->runs) {
      const auto sampled = std::find_if(pair.rows.begin(), pair.rows.end(), [&](const Row& row) {
        return row.kind == SeriesKind::kRegion &&
               steps::sampled_every(row.name, std::to_string(run.layer_backward_every)) > 1;
      });
      if (sampled == pair.rows.end()) continue;
      pair.warnings.push_back(fmt::format(
          "layer backward keys ({}, ...) are timed on 1 step in {} in {}'s run {} "
          "(--auto=layers): their rows compare those steps only",
          sampled->name, run.layer_backward_every, name, run.name.empty() ? run.id : run.name));
      break;
    }
  }
  if (!only_a.empty())
    pair.warnings.push_back(
        fmt::format("only in A, not compared: {}", absl::StrJoin(only_a, ", ")));
  if (!only_b.empty())
    pair.warnings.push_back(
        fmt::format("only in B, not compared: {}", absl::StrJoin(only_b, ", ")));
  return pair;
}

absl::Status check_side(const Side& side, const char* name) {
  if (side.runs.empty()) return absl::InvalidArgumentError(fmt::format("{} has no runs", name));
  for (std::size_t i = 0; i < side.runs.size(); ++i) {
    const bool any = std::any_of(side.series.begin(), side.series.end(), [&](const Series& s) {
      return s.kind == SeriesKind::kRegion && i < s.runs.size() && !s.runs[i].empty();
    });
    if (!any)
      return absl::InvalidArgumentError(fmt::format(
          "{}'s run {} recorded no regions: nothing to compare (did the training time any "
          "step?)",
          name, side.runs[i].dir));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view series_kind_name(SeriesKind kind) noexcept {
  return kind == SeriesKind::kMetric ? "metric" : "region";
}

absl::StatusOr<SeriesKind> parse_series_kind(std::string_view name) {
  if (name == "region") return SeriesKind::kRegion;
  if (name == "metric") return SeriesKind::kMetric;
  return absl::InvalidArgumentError(fmt::format("'{}', not region or metric", name));
}

std::string_view verdict_name(const Row& row) noexcept {
  const stats::Verdict v = row.stats.verdict;
  if (row.kind == SeriesKind::kMetric) {
    if (v == stats::Verdict::kSlower) return "higher";
    if (v == stats::Verdict::kFaster) return "lower";
  }
  return stats::verdict_name(v);
}

absl::StatusOr<Comparison> compare_sides(Side a, Side b, const CompareOptions& options) {
  if (!(options.host_load_difference >= 0))
    return absl::InvalidArgumentError("host_load_difference must be at least 0");
  if (absl::Status s = check_side(a, "A"); !s.ok()) return s;
  if (absl::Status s = check_side(b, "B"); !s.ok()) return s;
  Comparison out;
  out.label_a = a.label;
  out.label_b = b.label;
  out.threshold = options.stats.threshold;
  out.confidence = options.stats.confidence;

  const std::vector<std::string> params = config_params(a, b);
  std::map<std::string, std::vector<std::size_t>> ca, cb;
  for (std::size_t i = 0; i < a.runs.size(); ++i) ca[config_of(a.runs[i], params)].push_back(i);
  for (std::size_t i = 0; i < b.runs.size(); ++i) cb[config_of(b.runs[i], params)].push_back(i);
  if (ca.size() == 1 || cb.size() == 1) {
    // Not two sweeps: every run of a side is a repetition.
    std::vector<std::size_t> ia(a.runs.size()), ib(b.runs.size());
    for (std::size_t i = 0; i < ia.size(); ++i) ia[i] = i;
    for (std::size_t i = 0; i < ib.size(); ++i) ib[i] = i;
    absl::StatusOr<Pair> pair = compare_pair(a, b, ia, ib, options);
    if (!pair.ok()) return pair.status();
    if (ca.size() > 1 || cb.size() > 1)
      pair->warnings.push_back(fmt::format(
          "{}'s runs differ in params ({}): compared as repetitions of one configuration",
          ca.size() > 1 ? "A" : "B", absl::StrJoin(params, ", ")));
    out.pairs.push_back(std::move(*pair));
  } else {
    for (const auto& [config, ia] : ca) {
      auto it = cb.find(config);
      if (it == cb.end()) {
        out.warnings.push_back(fmt::format("configuration {} only in A", config));
        continue;
      }
      absl::StatusOr<Pair> pair = compare_pair(a, b, ia, it->second, options);
      if (!pair.ok())
        return absl::Status(
            pair.status().code(),
            fmt::format("configuration {}: {}", config, std::string(pair.status().message())));
      pair->config = config;
      out.pairs.push_back(std::move(*pair));
    }
    for (const auto& [config, ib] : cb)
      if (!ca.count(config))
        out.warnings.push_back(fmt::format("configuration {} only in B", config));
    if (out.pairs.empty())
      return absl::InvalidArgumentError(
          fmt::format("the sweeps share no configuration (matched on {}): A has {}, B has {}",
                      absl::StrJoin(params, ", "), ca.begin()->first, cb.begin()->first));
  }
  out.a = std::move(a);
  out.b = std::move(b);
  return out;
}

absl::StatusOr<Comparison> compare(const CompareRequest& request) {
  const bool filtered = !request.filter_a.empty() || !request.filter_b.empty();
  if (filtered && (request.root.empty() || request.filter_a.empty() || request.filter_b.empty()))
    return absl::InvalidArgumentError(
        "filters need a root and a filter for each side (--root, --a, --b)");
  if (filtered && (!request.a.empty() || !request.b.empty()))
    return absl::InvalidArgumentError("give the sides as runs or as filters over a root, not both");
  if (!filtered && (request.a.empty() || request.b.empty()))
    return absl::InvalidArgumentError(
        "give both sides: A and B (runs, globs, folders or a saved comparison)");
  std::optional<Side> sides[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Side> side =
        filtered ? gather_filtered(request.root, i == 0 ? request.filter_a : request.filter_b,
                                   request.gather)
                 : gather_side(i == 0 ? request.a : request.b, request.gather);
    if (!side.ok())
      return absl::Status(side.status().code(), fmt::format("{}: {}", i == 0 ? "A" : "B",
                                                            std::string(side.status().message())));
    sides[i] = std::move(*side);
  }
  return compare_sides(std::move(*sides[0]), std::move(*sides[1]), request.options);
}

std::vector<std::string> failing_rows(const Comparison& comparison,
                                      const std::vector<std::string>& keys, double pct) {
  std::vector<std::string> out;
  for (const Pair& pair : comparison.pairs) {
    const std::string where = pair.config.empty() ? "" : fmt::format(" [{}]", pair.config);
    const auto decided = [](const Row& row) {
      return row.stats.verdict != stats::Verdict::kInconclusiveContention;
    };
    // A throughput row (lower is slower): tokens/s by default, steps/s when selected.
    const auto throughput = [&](const Row& row) {
      return row.kind == SeriesKind::kMetric &&
             (keys.empty() ? row.name == kTokensPerSecond
                           : (row.name == kTokensPerSecond || row.name == kThroughput) &&
                                 wanted(keys, row.name));
    };
    if (keys.empty() && decided(pair.overall) && stats::fails_if_slower(pair.overall.stats, pct))
      out.push_back(fmt::format("{}{}", pair.overall_basis, where));
    for (const Row& row : pair.rows) {
      if (!decided(row)) continue;
      if (throughput(row) && stats::fails_if_lower(row.stats, pct))
        out.push_back(fmt::format("{}{}", row.name, where));
      else if (!keys.empty() && row.kind == SeriesKind::kRegion && wanted(keys, row.name) &&
               stats::fails_if_slower(row.stats, pct))
        out.push_back(fmt::format("{}{}{}", row.name, row.device == "GPU" ? " (GPU)" : "", where));
    }
  }
  return out;
}

}  // namespace trainscope::compare
