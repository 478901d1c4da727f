// The comparison document (one writer, one reader) and its table.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "common/json_field.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/stats/format_numbers.hpp"

namespace trainscope::compare {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
using ::trainscope::detail::Field;
using ::trainscope::detail::parse_document;

constexpr char kFormat[] = "trainscope.compare";
constexpr int kVersion = 1;

ojson num(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

ojson row_json(const Row& r) {
  const stats::Comparison& c = r.stats;
  return {{"name", r.name},
          {"kind", series_kind_name(r.kind)},
          {"device", r.device},
          {"verdict", verdict_name(r)},
          {"unit", stats::unit_name(c.unit)},
          {"median_a", num(c.median_a)},
          {"median_b", num(c.median_b)},
          {"ratio", num(c.ratio)},
          {"low", num(c.low)},
          {"high", num(c.high)},
          {"p_value", num(c.p_value)},
          {"n_a", c.n_a},
          {"n_b", c.n_b},
          {"warmup_a", c.warmup_a},
          {"warmup_b", c.warmup_b},
          {"block_a", c.block_a},
          {"block_b", c.block_b},
          {"df", num(c.df)},
          {"more_a", c.more_a},
          {"more_b", c.more_b},
          {"reason", c.reason},
          {"p99_a", num(r.p99_a)},
          {"p99_b", num(r.p99_b)},
          {"max_a", num(r.max_a)},
          {"max_b", num(r.max_b)},
          {"note", r.note}};
}

SeriesKind kind_from(const Field& f) {
  absl::StatusOr<SeriesKind> kind = parse_series_kind(f.string());
  if (!kind.ok()) f.fail(std::string(kind.status().message()));
  return *kind;
}

Row row_from(const Field& f) {
  Row r;
  r.name = f["name"].string();
  r.kind = kind_from(f["kind"]);
  r.device = f["device"].string();
  stats::Comparison& c = r.stats;
  const std::string v = f["verdict"].string();
  if (v == "same")
    c.verdict = stats::Verdict::kSame;
  else if (v == "slower" || v == "higher")
    c.verdict = stats::Verdict::kSlower;
  else if (v == "faster" || v == "lower")
    c.verdict = stats::Verdict::kFaster;
  else if (v == "inconclusive")
    c.verdict = stats::Verdict::kInconclusive;
  else if (v == stats::verdict_name(stats::Verdict::kInconclusiveContention))
    c.verdict = stats::Verdict::kInconclusiveContention;
  else
    f["verdict"].fail(fmt::format("'{}' is no verdict", v));
  const std::string unit = f["unit"].string();
  if (unit != "steps" && unit != "runs")
    f["unit"].fail(fmt::format("'{}', not steps or runs", unit));
  c.unit = unit == "runs" ? stats::CompareUnit::kRuns : stats::CompareUnit::kSteps;
  c.median_a = f["median_a"].number();
  c.median_b = f["median_b"].number();
  c.ratio = f["ratio"].number();
  c.low = f["low"].number();
  c.high = f["high"].number();
  c.p_value = f["p_value"].number();
  c.n_a = f["n_a"].unsigned_integer();
  c.n_b = f["n_b"].unsigned_integer();
  c.warmup_a = f["warmup_a"].unsigned_integer();
  c.warmup_b = f["warmup_b"].unsigned_integer();
  c.block_a = f["block_a"].unsigned_integer();
  c.block_b = f["block_b"].unsigned_integer();
  c.df = f["df"].number();
  c.more_a = f["more_a"].unsigned_integer();
  c.more_b = f["more_b"].unsigned_integer();
  c.reason = f["reason"].string();
  r.p99_a = f["p99_a"].number();
  r.p99_b = f["p99_b"].number();
  r.max_a = f["max_a"].number();
  r.max_b = f["max_b"].number();
  r.note = f["note"].string();
  return r;
}

ojson side_json(const Side& s, bool with_data) {
  ojson runs = ojson::array();
  for (const SideRun& r : s.runs) {
    ojson one = {{"dir", r.dir},
                 {"id", r.id},
                 {"name", r.name},
                 {"status", run_status_name(r.status)},
                 {"params", r.params},
                 {"other_cpu_share", num(r.other_cpu_share)},
                 {"contention_share", num(r.contention_share)},
                 {"step_wait_share", num(r.step_wait_share)},
                 {"hardware", r.hardware},
                 {"key_callers", r.key_callers}};
    if (r.layer_backward_every > 1) one["layer_backward_every"] = r.layer_backward_every;
    if (with_data) one["packages"] = r.packages;
    runs.push_back(std::move(one));
  }
  ojson out = {{"label", s.label}, {"runs", std::move(runs)}};
  if (with_data) {
    ojson series = ojson::array();
    for (const Series& x : s.series) {
      ojson values = ojson::array();
      for (const std::vector<double>& run : x.runs) {
        ojson v = ojson::array();
        for (double d : run) v.push_back(num(d));
        values.push_back(std::move(v));
      }
      series.push_back({{"name", x.name},
                        {"kind", series_kind_name(x.kind)},
                        {"device", x.device},
                        {"runs", std::move(values)}});
    }
    out["series"] = std::move(series);
  }
  return out;
}

Side side_from(const Field& f) {
  Side s;
  s.label = f["label"].string();
  for (const Field& r : f["runs"].items()) {
    SideRun run;
    run.dir = r["dir"].string();
    run.id = r["id"].string();
    run.name = r["name"].string();
    const Field status = r["status"];
    absl::StatusOr<RunStatus> parsed = parse_run_status(status.string());
    if (!parsed.ok()) status.fail(std::string(parsed.status().message()));
    run.status = *parsed;
    for (const auto& [k, v] : r["params"].members()) run.params[k] = v.string();
    run.other_cpu_share = r["other_cpu_share"].number();
    if (const std::optional<Field> c = r.find("contention_share")) {  // older documents: none
      run.contention_share = c->number();
    }
    if (const std::optional<Field> w = r.find("step_wait_share")) run.step_wait_share = w->number();
    run.hardware = r["hardware"].string();
    if (const std::optional<Field> callers = r.find("key_callers")) {
      for (const auto& [k, v] : callers->members()) run.key_callers[k] = v.string();
    }
    if (const std::optional<Field> every = r.find("layer_backward_every")) {
      run.layer_backward_every = static_cast<std::uint32_t>(every->unsigned_integer());
    }
    if (std::optional<Field> p = r.find("packages")) run.packages = p->strings();
    s.runs.push_back(std::move(run));
  }
  if (std::optional<Field> series = f.find("series")) {
    for (const Field& x : series->items()) {
      Series one;
      one.name = x["name"].string();
      one.kind = kind_from(x["kind"]);
      one.device = x["device"].string();
      const std::vector<Field> runs = x["runs"].items();
      if (runs.size() != s.runs.size())
        x["runs"].fail(fmt::format("{} series for {} runs", runs.size(), s.runs.size()));
      for (const Field& run : runs) {
        std::vector<double> values;
        for (const Field& v : run.items()) {
          const double d = v.number();
          if (!std::isfinite(d) || d < 0) v.fail("not a finite value of at least 0");
          values.push_back(d);
        }
        one.runs.push_back(std::move(values));
      }
      s.series.push_back(std::move(one));
    }
  }
  return s;
}

Comparison from_document(const Field& root) {
  const Field format = root["format"];
  if (format.string() != kFormat)
    format.fail(fmt::format("'{}', not {}", format.string(), kFormat));
  const Field version = root["version"];
  if (version.int_at_least(1) > kVersion)
    version.fail(fmt::format("version {} is newer than this trainscope reads ({})",
                             version.int_at_least(1), kVersion));
  Comparison c;
  c.threshold = root["threshold"].number();
  c.confidence = root["confidence"].number();
  c.warnings = root["warnings"].strings();
  c.a = side_from(root["a"]);
  c.b = side_from(root["b"]);
  c.label_a = c.a.label;
  c.label_b = c.b.label;
  for (const Field& p : root["pairs"].items()) {
    Pair pair;
    pair.config = p["config"].string();
    pair.runs_a = p["runs_a"].strings();
    pair.runs_b = p["runs_b"].strings();
    pair.overall_basis = p["overall_basis"].string();
    pair.overall = row_from(p["overall"]);
    for (const Field& r : p["rows"].items()) pair.rows.push_back(row_from(r));
    if (const std::optional<Field> a = p.find("contention_a")) pair.contention_a = a->number();
    if (const std::optional<Field> b = p.find("contention_b")) pair.contention_b = b->number();
    if (const std::optional<Field> a = p.find("step_wait_a")) pair.step_wait_a = a->number();
    if (const std::optional<Field> b = p.find("step_wait_b")) pair.step_wait_b = b->number();
    pair.warnings = p["warnings"].strings();
    c.pairs.push_back(std::move(pair));
  }
  return c;
}

std::string value(double v, SeriesKind kind, const std::string& name) {
  if (!std::isfinite(v)) return "-";
  if (kind == SeriesKind::kMetric) {
    if (name == kThroughput || name == kTokensPerSecond) return fmt::format("{:.4g}/s", v);
    if (name == kDataWait || name == kGpuBusy) return stats::format_share(v);
    if (name == kComm || name == kCommExposed || name == kSync || name == kStepLessWait)
      return stats::format_seconds(v, 4);
    return fmt::format("{:.4g}", v);
  }
  return stats::format_seconds(v, 4);
}

std::string p_value(double p) {
  if (!std::isfinite(p)) return "-";
  return p < 0.001 ? "<0.001" : fmt::format("{:.3f}", p);
}

std::string verdict_line(const Row& r) {
  std::string out(verdict_name(r));
  if (r.stats.verdict == stats::Verdict::kInconclusive && (r.stats.more_a || r.stats.more_b))
    out += fmt::format(" (about {} more {} a side would decide)",
                       std::max(r.stats.more_a, r.stats.more_b), stats::unit_name(r.stats.unit));
  return out;
}

}  // namespace

std::string compare_json(const Comparison& c, int indent, bool with_data) {
  ojson pairs = ojson::array();
  for (const Pair& p : c.pairs) {
    ojson rows = ojson::array();
    for (const Row& r : p.rows) rows.push_back(row_json(r));
    pairs.push_back({{"config", p.config},
                     {"runs_a", p.runs_a},
                     {"runs_b", p.runs_b},
                     {"overall_basis", p.overall_basis},
                     {"overall", row_json(p.overall)},
                     {"rows", std::move(rows)},
                     {"contention_a", num(p.contention_a)},
                     {"contention_b", num(p.contention_b)},
                     {"step_wait_a", num(p.step_wait_a)},
                     {"step_wait_b", num(p.step_wait_b)},
                     {"warnings", p.warnings}});
  }
  const ojson doc = {{"format", kFormat},
                     {"version", kVersion},
                     {"threshold", num(c.threshold)},
                     {"confidence", num(c.confidence)},
                     {"warnings", c.warnings},
                     {"pairs", std::move(pairs)},
                     {"a", side_json(c.a, with_data)},
                     {"b", side_json(c.b, with_data)}};
  return doc.dump(indent, ' ', false, ojson::error_handler_t::replace);
}

absl::StatusOr<Comparison> parse_comparison(std::string_view text, std::string_view source) {
  return parse_document<Comparison>(text, source, "comparison", from_document);
}

absl::StatusOr<Comparison> read_comparison(const std::string& path) {
  absl::StatusOr<std::string> text = ::trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_comparison(*text, path);
}

absl::Status write_comparison(const Comparison& comparison, const std::string& path) {
  return ::trainscope::detail::write_file_atomically(
      path, compare_json(comparison, 1, /*with_data=*/true) + "\n");
}

std::string format_comparison(const Comparison& c) {
  std::string out = fmt::format("A: {}\nB: {}\n", c.label_a, c.label_b);
  out += fmt::format(
      "verdicts: same = the {:.3g}% interval of B/A inside +-{:.1f}%; slower/faster = the "
      "interval wholly above/below 1\n",
      100 * c.confidence, 100 * c.threshold);
  for (const std::string& w : c.warnings) out += fmt::format("warning: {}\n", w);
  for (const Pair& p : c.pairs) {
    out += "\n";
    if (!p.config.empty()) out += fmt::format("configuration {}\n", p.config);
    const Row& o = p.overall;
    out += fmt::format("overall ({}): {}  {} {}", p.overall_basis, verdict_line(o),
                       stats::format_change(o.stats.ratio),
                       stats::format_change_interval(o.stats.low, o.stats.high));
    if (o.stats.n_a > 0)
      out += fmt::format("  ({} {} A, {} B; warm-up dropped {} and {})", o.stats.n_a,
                         stats::unit_name(o.stats.unit), o.stats.n_b, o.stats.warmup_a,
                         o.stats.warmup_b);
    out += "\n";
    if (std::isfinite(p.contention_a) && std::isfinite(p.contention_b))
      out += fmt::format(
          "waited for a CPU (contention share): A {}, B {}{}\n",
          stats::format_share(p.contention_a), stats::format_share(p.contention_b),
          std::isfinite(p.step_wait_a) && std::isfinite(p.step_wait_b)
              ? fmt::format("; the step thread in its steps: A {}, B {}",
                            stats::format_share(p.step_wait_a), stats::format_share(p.step_wait_b))
              : std::string());
    if ((o.stats.verdict == stats::Verdict::kInconclusive ||
         o.stats.verdict == stats::Verdict::kInconclusiveContention) &&
        !o.stats.reason.empty())
      out += fmt::format("  {}\n", o.stats.reason);
    std::vector<std::vector<std::string>> table = {
        {"quantity", "A median", "B median", "B/A", "95% interval", "p", "verdict"}};
    table[0][4] = fmt::format("{:.3g}% interval", 100 * c.confidence);
    for (const Row& r : p.rows) {
      std::string name = r.name;
      if (r.device == "GPU") name += " (GPU)";
      table.push_back({name, value(r.stats.median_a, r.kind, r.name),
                       value(r.stats.median_b, r.kind, r.name), stats::format_change(r.stats.ratio),
                       stats::format_change_interval(r.stats.low, r.stats.high),
                       p_value(r.stats.p_value), verdict_line(r)});
    }
    std::vector<std::size_t> width(table[0].size(), 0);
    for (const auto& line : table)
      for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
    for (const auto& line : table) {
      std::string text = " ";
      for (std::size_t i = 0; i < line.size(); ++i)
        text += fmt::format(i == 0 ? " {:<{}}" : "  {:>{}}", line[i],
                            i + 1 == line.size() ? 0 : width[i]);
      out += text + "\n";
    }
    for (const Row& r : p.rows) {
      if (!r.note.empty()) out += fmt::format("note: {}\n", r.note);
      if ((r.stats.verdict == stats::Verdict::kInconclusive ||
           r.stats.verdict == stats::Verdict::kInconclusiveContention) &&
          !r.stats.reason.empty() && r.name != o.name)
        out += fmt::format("{}: {}\n", r.name, r.stats.reason);
    }
    for (const std::string& w : p.warnings) out += fmt::format("warning: {}\n", w);
  }
  return out;
}

}  // namespace trainscope::compare
