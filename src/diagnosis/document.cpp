// The diagnosis document (one writer, one reader) and its texts.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "common/json_field.hpp"
#include "diagnosis/text.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/stats/format_numbers.hpp"

namespace trainscope::diagnosis {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // the writer keeps the fields' order
using ::trainscope::detail::Field;
using ::trainscope::detail::parse_document;

constexpr char kFormat[] = "trainscope.diagnosis";
constexpr int kVersion = 1;

// NaN and infinities are null (JSON has no such numbers); null reads as NaN.
ojson num(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

ojson interval_json(const Interval& i) {
  return {{"value", num(i.value)}, {"low", num(i.low)}, {"high", num(i.high)}};
}
Interval interval_from(const Field& f) {
  return Interval{f["value"].number(), f["low"].number(), f["high"].number()};
}

Device device_from(const Field& f) {
  const std::string name = f.string();
  if (name == "CPU") return Device::kCPU;
  if (name == "GPU") return Device::kGPU;
  f.fail(fmt::format("'{}', not CPU or GPU", name));
}

// An enum from its name in the document, by `parse`; the error names the field.
template <typename Parse>
auto enum_from(const Field& f, Parse parse) {
  auto value = parse(f.string());
  if (!value.ok()) f.fail(std::string(value.status().message()));
  return *value;
}

std::uint32_t u32_from(const Field& f) {
  const std::int64_t v = f.integer(0);
  if (v > std::numeric_limits<std::uint32_t>::max()) f.fail("too large");
  return static_cast<std::uint32_t>(v);
}

ojson scope_json(const Scope& s) {
  ojson phases = ojson::array();
  for (const PhaseRow& p : s.phases) {
    phases.push_back({{"phase", phase_name(p.phase)},
                      {"device", device_name(p.device)},
                      {"median_s", num(p.median_s)},
                      {"p95_s", num(p.p95_s)},
                      {"share", num(p.share)},
                      {"median_rank_s", num(p.median_rank_s)},
                      {"worst_rank_s", num(p.worst_rank_s)},
                      {"worst_rank", p.worst_rank},
                      {"skew", num(p.skew)}});
  }
  ojson labels = ojson::array();
  for (const Label& l : s.labels) {
    ojson one = {{"name", label_name(l.name)},    {"kind", label_kind_name(l.kind)},
                 {"quantity", l.quantity},        {"value", interval_json(l.value)},
                 {"threshold", num(l.threshold)}, {"threshold_name", l.threshold_name},
                 {"evidence", l.evidence},        {"next_step", l.next_step}};
    if (l.rank) one["rank"] = *l.rank;
    if (l.host) one["host"] = *l.host;
    if (l.device) one["device"] = device_name(*l.device);
    labels.push_back(std::move(one));
  }
  ojson collectives = ojson::array();
  for (const CollectiveRow& c : s.collectives) {
    ojson one = {{"key", c.key},         {"op", c.op},
                 {"group", c.group},     {"seconds", num(c.seconds)},
                 {"count", c.count},     {"median_s", num(c.median_s)},
                 {"matched", c.matched}, {"last_share", num(c.last_share)},
                 {"lag_s", num(c.lag_s)}};
    if (c.last_rank) one["last_rank"] = *c.last_rank;
    collectives.push_back(std::move(one));
  }
  return {{"name", s.name},
          {"steps", s.steps},
          {"warmup", s.warmup},
          {"steps_per_s", num(s.steps_per_s)},
          {"step_s", interval_json(s.step_s)},
          {"phases", std::move(phases)},
          {"labels", std::move(labels)},
          {"collectives", std::move(collectives)},
          {"notes", s.notes}};
}

Scope scope_from(const Field& f) {
  Scope s;
  s.name = f["name"].string();
  s.steps = f["steps"].unsigned_integer();
  s.warmup = f["warmup"].unsigned_integer();
  s.steps_per_s = f["steps_per_s"].number();
  s.step_s = interval_from(f["step_s"]);
  for (const Field& p : f["phases"].items()) {
    PhaseRow row;
    const Field name = p["phase"];
    absl::StatusOr<Phase> phase = parse_phase(name.string());
    if (!phase.ok()) name.fail(std::string(phase.status().message()));
    row.phase = *phase;
    row.device = device_from(p["device"]);
    row.median_s = p["median_s"].number();
    row.p95_s = p["p95_s"].number();
    row.share = p["share"].number();
    row.median_rank_s = p["median_rank_s"].number();
    row.worst_rank_s = p["worst_rank_s"].number();
    row.worst_rank = u32_from(p["worst_rank"]);
    row.skew = p["skew"].number();
    s.phases.push_back(row);
  }
  for (const Field& l : f["labels"].items()) {
    Label label;
    label.name = enum_from(l["name"], parse_label_name);
    label.kind = enum_from(l["kind"], parse_label_kind);
    label.quantity = l["quantity"].string();
    label.value = interval_from(l["value"]);
    label.threshold = l["threshold"].number();
    label.threshold_name = l["threshold_name"].string();
    label.evidence = l["evidence"].string();
    label.next_step = l["next_step"].string();
    if (std::optional<Field> rank = l.find("rank")) label.rank = u32_from(*rank);
    if (std::optional<Field> host = l.find("host")) label.host = host->string();
    if (std::optional<Field> device = l.find("device")) label.device = device_from(*device);
    s.labels.push_back(std::move(label));
  }
  if (std::optional<Field> collectives = f.find("collectives")) {  // version 1 before issue 39
    for (const Field& c : collectives->items()) {
      CollectiveRow row;
      row.key = c["key"].string();
      row.op = c["op"].string();
      row.group = c["group"].string();
      row.seconds = c["seconds"].number();
      row.count = c["count"].unsigned_integer();
      row.median_s = c["median_s"].number();
      row.matched = c["matched"].unsigned_integer();
      row.last_share = c["last_share"].number();
      row.lag_s = c["lag_s"].number();
      if (std::optional<Field> rank = c.find("last_rank")) row.last_rank = u32_from(*rank);
      s.collectives.push_back(std::move(row));
    }
  }
  s.notes = f["notes"].strings();
  return s;
}

// The ledger (trainscope/steps/ledger.hpp): its figures by their names, NaN as null.
ojson ledger_json(const steps::Ledger& l) {
  ojson ranks = ojson::array();
  for (const steps::RankLedger& r : l.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"steps", r.steps},
                     {"seconds", num(r.seconds)},
                     {"samples", num(r.samples)},
                     {"tokens", num(r.tokens)},
                     {"samples_per_s", num(r.samples_per_s)},
                     {"tokens_per_s", num(r.tokens_per_s)},
                     {"achieved_flops", num(r.achieved_flops)},
                     {"mfu", num(r.mfu)}});
  }
  return {{"steps", l.steps},
          {"samples_per_s", num(l.samples_per_s)},
          {"tokens_per_s", num(l.tokens_per_s)},
          {"flops_per_step", num(l.flops_per_step)},
          {"flops_source", l.flops_source},
          {"achieved_flops", num(l.achieved_flops)},
          {"peak_flops", num(l.peak_flops)},
          {"peak_source", l.peak_source},
          {"device", l.device},
          {"dtype", l.dtype},
          {"mfu", num(l.mfu)},
          {"seconds", num(l.seconds)},
          {"energy_j", num(l.energy_j)},
          {"cpu_energy_j", num(l.cpu_energy_j)},
          {"gpu_energy_j", num(l.gpu_energy_j)},
          {"gpus", l.gpus},
          {"energy_per_step_j", num(l.energy_per_step_j)},
          {"energy_per_1k_tokens_j", num(l.energy_per_1k_tokens_j)},
          {"cost", num(l.cost)},
          {"co2_g", num(l.co2_g)},
          {"notes", l.notes},
          {"ranks", std::move(ranks)},
          {"line", steps::format_ledger_line(l)}};
}

steps::Ledger ledger_from(const Field& f) {
  steps::Ledger l;
  for (const Field& r : f["ranks"].items()) {
    steps::RankLedger row;
    row.rank = u32_from(r["rank"]);
    row.steps = r["steps"].unsigned_integer();
    row.seconds = r["seconds"].number();
    row.samples = r["samples"].number();
    row.tokens = r["tokens"].number();
    row.samples_per_s = r["samples_per_s"].number();
    row.tokens_per_s = r["tokens_per_s"].number();
    row.achieved_flops = r["achieved_flops"].number();
    row.mfu = r["mfu"].number();
    l.ranks.push_back(row);
  }
  l.steps = f["steps"].unsigned_integer();
  l.samples_per_s = f["samples_per_s"].number();
  l.tokens_per_s = f["tokens_per_s"].number();
  l.flops_per_step = f["flops_per_step"].number();
  l.flops_source = f["flops_source"].string();
  l.achieved_flops = f["achieved_flops"].number();
  l.peak_flops = f["peak_flops"].number();
  l.peak_source = f["peak_source"].string();
  l.device = f["device"].string();
  l.dtype = f["dtype"].string();
  l.mfu = f["mfu"].number();
  l.seconds = f["seconds"].number();
  l.energy_j = f["energy_j"].number();
  // Documents written before the GPU energy: the CPU's alone.
  if (std::optional<Field> cpu = f.find("cpu_energy_j")) {
    l.cpu_energy_j = cpu->number();
    l.gpu_energy_j = f["gpu_energy_j"].number();
    l.gpus = u32_from(f["gpus"]);
  } else {
    l.cpu_energy_j = l.energy_j;
  }
  l.energy_per_step_j = f["energy_per_step_j"].number();
  l.energy_per_1k_tokens_j = f["energy_per_1k_tokens_j"].number();
  l.cost = f["cost"].number();
  l.co2_g = f["co2_g"].number();
  l.notes = f["notes"].strings();
  return l;
}

Diagnosis from_document(const Field& root) {
  const std::string format = root["format"].string();
  if (format != kFormat) root["format"].fail(fmt::format("'{}', not {}", format, kFormat));
  const int version = root["version"].int_at_least(1);
  if (version > kVersion) {
    root["version"].fail(
        fmt::format("{} is newer than this trainscope reads ({})", version, kVersion));
  }
  Diagnosis d;
  d.run_dir = root["run_dir"].string();
  d.run_id = root["run_id"].string();
  d.run_name = root["run_name"].string();
  d.status = enum_from(root["status"], parse_run_status);
  d.start_time_ms = root["start_time_ms"].integer(0);
  d.elapsed_ms = root["elapsed_ms"].integer(0);
  d.world_size = u32_from(root["world_size"]);
  for (const Field& r : root["ranks"].items()) {
    d.ranks.push_back(RankNow{u32_from(r["rank"]), r["host"].string(),
                              enum_from(r["status"], parse_process_status),
                              r["steps"].unsigned_integer()});
    RankNow& now = d.ranks.back();
    // Version 1 documents before the per-rank window have none (NaN).
    if (const std::optional<Field> w = r.find("window")) {
      now.step_p50_s = (*w)["step_p50_s"].number();
      now.step_p95_s = (*w)["step_p95_s"].number();
      now.steps_per_s = (*w)["steps_per_s"].number();
      const Field shares = (*w)["phase_share"];
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        const std::string name(phase_name(static_cast<Phase>(p)));
        if (const std::optional<Field> v = shares.find(name)) now.phase_share[p] = v->number();
      }
    }
    if (const std::optional<Field> v = r.find("cpu_pct")) now.cpu_pct = v->number();
    if (const std::optional<Field> v = r.find("rss_mb")) now.rss_mb = v->number();
    if (const std::optional<Field> v = r.find("gpu_mem_mb")) now.gpu_mem_mb = v->number();
  }
  d.hosts = root["hosts"].strings();
  d.window_steps = root["window_steps"].unsigned_integer();
  if (const std::optional<Field> share = root.find("read_share")) d.read_share = share->number();
  d.window = scope_from(root["window"]);
  d.run = scope_from(root["run"]);
  for (const Field& k : root["keys"].items()) {
    KeyRow row;
    row.key = k["key"].string();
    row.device = device_from(k["device"]);
    row.count = k["count"].unsigned_integer();
    row.window_count = k["window_count"].unsigned_integer();
    row.rate_per_s = k["rate_per_s"].number();
    row.p50_s = k["p50_s"].number();
    row.p95_s = k["p95_s"].number();
    row.share = k["share"].number();
    row.run_median_s = k["run_median_s"].number();
    row.run_median_low_s = k["run_median_low_s"].number();
    row.run_median_high_s = k["run_median_high_s"].number();
    row.run_p95_s = k["run_p95_s"].number();
    if (const std::optional<Field> callers = k.find("callers")) row.callers = callers->string();
    if (const std::optional<Field> every = k.find("sampled_every")) {
      row.sampled_every = static_cast<std::uint32_t>(every->unsigned_integer());
    }
    d.keys.push_back(std::move(row));
  }
  for (const Field& h : root["host_now"].items()) {
    HostNow now;
    now.host = h["host"].string();
    now.time_ms = h["time_ms"].integer(0);
    now.cpu_util_pct = h["cpu_util_pct"].number();
    now.mem_used_pct = h["mem_used_pct"].number();
    now.swap_used_mb = h["swap_used_mb"].number();
    for (const Field& g : h["gpus"].items()) {
      // A GPU's fields are named as the quantities the NVML source writes.
      now.gpus.push_back(GpuNow{g["index"].int_at_least(0), g[host::kGpuUtilQuantity].number(),
                                g[host::kGpuMemUsedQuantity].number(),
                                g[host::kGpuMemTotalQuantity].number()});
    }
    // Absent in older documents, and where unknown.
    for (auto [name, share] :
         {std::pair{"contention", &now.contention}, std::pair{"step_wait", &now.step_wait}}) {
      if (const std::optional<Field> c = h.find(name)) {
        share->share = (*c)["share"].number();
        share->low = (*c)["low"].number();
        share->high = (*c)["high"].number();
        share->readings = static_cast<std::size_t>((*c)["readings"].int_at_least(0));
      }
    }
    d.host_now.push_back(std::move(now));
  }
  if (const std::optional<Field> found = root.find("auto")) {
    d.auto_found.mode = (*found)["mode"].string();
    d.auto_found.steps = (*found)["steps"].string();
    d.auto_found.found = (*found)["found"].string();
  }
  if (const std::optional<Field> ledger = root.find("ledger")) d.ledger = ledger_from(*ledger);
  if (const std::optional<Field> captures = root.find("captures")) {
    for (const Field& c : captures->items()) {
      Capture capture{u32_from(c["rank"]), c["step"].integer(0), c["path"].string(), std::nullopt};
      if (const std::optional<Field> label = c.find("label")) {
        capture.label = enum_from(*label, parse_label_name);
      }
      d.captures.push_back(std::move(capture));
    }
  }
  return d;
}

using text::pct;  // diagnosis/text.hpp
using text::secs;
std::string duration(std::int64_t ms) {
  const std::int64_t s = ms / 1000;
  if (s >= 3600) return fmt::format("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
}

// The label's kind, with its device where judged on the GPU ("gpu: backward").
std::string kind_text(const Label& l) {
  const std::string_view kind = label_kind_name(l.kind);
  return l.device == Device::kGPU ? fmt::format("gpu: {}", kind) : std::string(kind);
}

std::string label_text(const Label& l) {
  std::string out(label_name(l.name));
  std::vector<std::string> parts;
  if (l.kind != LabelKind::kNone) parts.push_back(kind_text(l));
  if (l.rank) parts.push_back(fmt::format("rank {}", *l.rank));
  if (l.host) parts.push_back(*l.host);
  if (!parts.empty()) out += fmt::format("({})", fmt::join(parts, ", "));
  return out;
}

void phase_table(const Scope& s, std::string* out) {
  if (s.phases.empty()) return;
  *out += fmt::format("  {:<12} {:<4} {:>10} {:>10} {:>7} {:>10} {:>11} {:>6}\n", "phase", "dev",
                      "median", "p95", "share", "worst", "worst rank", "skew");
  for (const PhaseRow& p : s.phases) {
    *out += fmt::format("  {:<12} {:<4} {:>10} {:>10} {:>7} {:>10} {:>11} {:>6}\n",
                        phase_name(p.phase), device_name(p.device), secs(p.median_s), secs(p.p95_s),
                        pct(p.share), secs(p.worst_rank_s), p.worst_rank, pct(p.skew));
  }
}

}  // namespace

std::string Diagnosis::headline() const {
  const Scope& s = status == RunStatus::kRunning ? window : run;
  std::vector<std::string> parts;
  for (const Label& l : s.labels) parts.push_back(label_text(l));
  return parts.empty() ? std::string(label_name(LabelName::kNoData))
                       : fmt::format("{}", fmt::join(parts, ", "));
}

std::string diagnosis_json(const Diagnosis& d, int indent) {
  ojson ranks = ojson::array();
  for (const RankNow& r : d.ranks) {
    ojson shares = ojson::object();
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      shares[std::string(phase_name(static_cast<Phase>(p)))] = num(r.phase_share[p]);
    }
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"status", process_status_name(r.status)},
                     {"steps", r.steps},
                     {"window",
                      {{"step_p50_s", num(r.step_p50_s)},
                       {"step_p95_s", num(r.step_p95_s)},
                       {"steps_per_s", num(r.steps_per_s)},
                       {"phase_share", std::move(shares)}}},
                     {"cpu_pct", num(r.cpu_pct)},
                     {"rss_mb", num(r.rss_mb)},
                     {"gpu_mem_mb", num(r.gpu_mem_mb)}});
  }
  ojson keys = ojson::array();
  for (const KeyRow& k : d.keys) {
    keys.push_back({{"key", k.key},
                    {"device", device_name(k.device)},
                    {"count", k.count},
                    {"window_count", k.window_count},
                    {"rate_per_s", num(k.rate_per_s)},
                    {"p50_s", num(k.p50_s)},
                    {"p95_s", num(k.p95_s)},
                    {"share", num(k.share)},
                    {"run_median_s", num(k.run_median_s)},
                    {"run_median_low_s", num(k.run_median_low_s)},
                    {"run_median_high_s", num(k.run_median_high_s)},
                    {"run_p95_s", num(k.run_p95_s)}});
    if (!k.callers.empty()) keys.back()["callers"] = k.callers;
    if (k.sampled_every > 1) keys.back()["sampled_every"] = k.sampled_every;
  }
  ojson hosts = ojson::array();
  for (const HostNow& h : d.host_now) {
    ojson gpus = ojson::array();
    for (const GpuNow& g : h.gpus) {
      gpus.push_back({{"index", g.index},
                      {host::kGpuUtilQuantity, num(g.util_pct)},
                      {host::kGpuMemUsedQuantity, num(g.mem_used_mb)},
                      {host::kGpuMemTotalQuantity, num(g.mem_total_mb)}});
    }
    hosts.push_back({{"host", h.host},
                     {"time_ms", h.time_ms},
                     {"cpu_util_pct", num(h.cpu_util_pct)},
                     {"mem_used_pct", num(h.mem_used_pct)},
                     {"swap_used_mb", num(h.swap_used_mb)},
                     {"gpus", std::move(gpus)}});
    for (auto [name, share] :
         {std::pair{"contention", &h.contention}, std::pair{"step_wait", &h.step_wait}}) {
      if (share->known()) {
        hosts.back()[name] = {{"share", num(share->share)},
                              {"low", num(share->low)},
                              {"high", num(share->high)},
                              {"readings", share->readings}};
      }
    }
  }
  ojson doc = {{"format", kFormat},
               {"version", kVersion},
               {"run_dir", d.run_dir},
               {"run_id", d.run_id},
               {"run_name", d.run_name},
               {"status", run_status_name(d.status)},
               {"start_time_ms", d.start_time_ms},
               {"elapsed_ms", d.elapsed_ms},
               {"world_size", d.world_size},
               {"ranks", std::move(ranks)},
               {"hosts", d.hosts},
               {"headline", d.headline()},
               {"window_steps", d.window_steps},
               {"read_share", num(d.read_share)},
               {"window", scope_json(d.window)},
               {"run", scope_json(d.run)},
               {"keys", std::move(keys)},
               {"host_now", std::move(hosts)}};
  if (d.ledger) doc["ledger"] = ledger_json(*d.ledger);  // the Follower's (docs/ledger.md)
  if (!d.captures.empty()) {  // anomaly captures (trainscope/diagnosis/hang.hpp)
    ojson captures = ojson::array();
    for (const Capture& c : d.captures) {
      ojson one = {{"rank", c.rank}, {"step", c.step}, {"path", c.path}};
      if (c.label) one["label"] = std::string(label_name(*c.label));  // asked by a label
      captures.push_back(std::move(one));
    }
    doc["captures"] = std::move(captures);
  }
  if (!d.auto_found.mode.empty()) {  // (a copy for --auto runs only)
    ojson with_auto = doc;
    with_auto["auto"] = {
        {"mode", d.auto_found.mode}, {"steps", d.auto_found.steps}, {"found", d.auto_found.found}};
    return with_auto.dump(indent, ' ', false, ojson::error_handler_t::replace);
  }
  return doc.dump(indent, ' ', false, ojson::error_handler_t::replace);
}

absl::StatusOr<Diagnosis> parse_diagnosis(std::string_view text, std::string_view source) {
  return parse_document<Diagnosis>(text, source, "diagnosis", from_document);
}

absl::StatusOr<Diagnosis> read_diagnosis(const std::string& path) {
  absl::StatusOr<std::string> text = ::trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_diagnosis(*text, path);
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string out = fmt::format(
      "run {}{}: {}, {} elapsed, {} rank{}, {} host{}\n",
      d.run_name.empty() ? d.run_id : d.run_name,
      d.run_name.empty() || d.run_name == d.run_id ? "" : fmt::format(" ({})", d.run_id),
      run_status_name(d.status), duration(d.elapsed_ms), d.ranks.size(),
      d.ranks.size() == 1 ? "" : "s", d.hosts.size(), d.hosts.size() == 1 ? "" : "s");
  out += fmt::format("{}\n", d.run_dir);
  if (const std::string found = auto_found_text(d.auto_found); !found.empty()) {
    out += found + "\n";
  }
  for (const Capture& c : d.captures) {
    if (c.label) {
      out += fmt::format("rank {}: {} appeared by step {}: the steps after it are captured in {}\n",
                         c.rank, label_name(*c.label), c.step, c.path);
      continue;
    }
    out += fmt::format(
        "rank {}: step {} was slow (past 5x the rolling p99): the steps after it "
        "are captured in {}\n",
        c.rank, c.step, c.path);
  }
  if (d.ledger) out += steps::format_ledger_line(*d.ledger) + "\n";
  for (const KeyRow& k : d.keys) {
    if (!k.callers.empty() && k.device == Device::kCPU) {
      out += fmt::format(
          "{}: its rows come from {} (one key, several modules: its statistics "
          "mix their calls)\n",
          k.key, k.callers);
    }
  }
  for (const KeyRow& k : d.keys) {  // one line for the layers' backward keys
    if (k.sampled_every <= 1) continue;
    out += fmt::format(
        "layer backward keys ({}, ...): timed on 1 step in {} (--auto=layers, "
        "TRAINSCOPE_LAYER_BACKWARD_EVERY): their counts, rates and shares are those steps' "
        "only\n",
        k.key, k.sampled_every);
    break;
  }
  if (d.read_share < 1) {
    out += fmt::format(
        "sampled: {} of the region rows read (the run appends faster than the read budget); "
        "the window is exact, the run scope and counts rest on the rows read\n",
        pct(d.read_share));
  }
  for (const Scope* s : {&d.run, &d.window}) {
    out += fmt::format(
        "\n{} ({} steps{}{}):\n", s->name == "run" ? "Over the run" : "Over the last window",
        s->steps, s->warmup ? fmt::format(", {} warm-up steps dropped", s->warmup) : "",
        std::isfinite(s->step_s.value)
            ? fmt::format(", {:.3g} steps/s, step {}", s->steps_per_s, secs(s->step_s.value))
            : "");
    for (const Label& l : s->labels) {
      out +=
          fmt::format("  {}\n      {}\n      next: {}\n", label_text(l), l.evidence, l.next_step);
    }
    phase_table(*s, &out);
    for (const CollectiveRow& c : s->collectives) {
      out += fmt::format("  collective {} on {}: {} rows, median {}", c.op, c.group, c.count,
                         secs(c.median_s));
      if (c.last_rank) {
        out += fmt::format("; last to enter: rank {} in {} of {} (by {}, median)", *c.last_rank,
                           pct(c.last_share), c.matched, secs(c.lag_s));
      }
      out += "\n";
    }
    for (const std::string& note : s->notes) out += fmt::format("  note: {}\n", note);
  }
  return out;
}

namespace {

std::string number(double value) { return fmt::format("{:.3g}", value); }

// "compute, rank 1: lag_s 0.0123 [0.0101, 0.0145]": what the label names and
// its estimate with the 95% interval (the evidence line when it has no interval).
std::string label_tag_value(const Label& label) {
  std::vector<std::string> who;
  if (label.kind != LabelKind::kNone) who.push_back(kind_text(label));
  if (label.rank) who.push_back(fmt::format("rank {}", *label.rank));
  if (label.host) who.push_back(*label.host);
  std::string out;
  for (const std::string& w : who) out += (out.empty() ? "" : ", ") + w;
  if (!out.empty()) out += ": ";
  const Interval& v = label.value;
  const bool interval = std::isfinite(v.low) && std::isfinite(v.high);
  if (!std::isfinite(v.value) || (!interval && !label.evidence.empty())) {
    return out + label.evidence;
  }
  out += fmt::format("{} {}", label.quantity.empty() ? "value" : label.quantity, number(v.value));
  if (interval) out += fmt::format(" [{}, {}]", number(v.low), number(v.high));
  return out;
}

// "STRAGGLER" -> "trainscope.diagnosis.straggler".
std::string label_tag_key(std::string_view name) {
  std::string key = "trainscope.diagnosis.";
  for (char c : name) {
    key += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return key;
}

// The tags of the run's diagnosis (--help's footer lists them): the headline,
// the label names, and one short tag per label name (several labels of one
// name, e.g. two stragglers, joined by "; ").
}  // namespace

std::map<std::string, std::string> diagnosis_tags(const Diagnosis& d) {
  // The scope headline() names: the run's, the window's while the run goes on.
  const Scope& scope = d.status == RunStatus::kRunning ? d.window : d.run;
  std::map<std::string, std::string> tags;
  tags["trainscope.diagnosis"] = d.headline();
  std::string names;
  for (const Label& label : scope.labels) {
    const std::string_view name = label_name(label.name);
    std::string& value = tags[label_tag_key(name)];
    if (value.empty()) names += (names.empty() ? "" : ",") + std::string(name);
    value += (value.empty() ? "" : "; ") + label_tag_value(label);
  }
  tags["trainscope.diagnosis.labels"] = names;
  return tags;
}

std::string auto_found_text(const AutoFound& found) {
  if (found.mode.empty()) return "";
  if (found.steps.empty()) {
    return "--auto found no training step: no training DataLoader fetch, optimizer step or "
           "backward (time each step as BATCH by hand, or map a key with --phase step=KEY)";
  }
  return fmt::format("--auto: {}", found.found.empty() ? found.steps : found.found);
}

std::string format_run_summary(const Diagnosis& d) {
  const Scope& s = d.run;
  // CRASHED when a rank crashed (as the report's badge), else the run's status.
  const bool crashed = std::any_of(d.ranks.begin(), d.ranks.end(),
                                   [](const RankNow& r) { return r.status.crashed; });
  std::string out = fmt::format("trainscope: run {} {} after {}, {} steps", d.run_id,
                                process_status_name(ProcessStatus{d.status, crashed}),
                                duration(d.elapsed_ms), s.steps + s.warmup);
  if (s.warmup > 0) {
    out += fmt::format(" ({} warm-up steps dropped from the statistics: {} counted)", s.warmup,
                       s.steps);
  }
  if (std::isfinite(s.step_s.value)) {
    out += fmt::format(" ({:.3g} steps/s)", s.steps_per_s);
  }
  out += "\n";
  if (const std::string found = auto_found_text(d.auto_found); !found.empty()) {
    out += fmt::format("  {}\n", found);
  }
  std::size_t shown = 0;
  for (const KeyRow& k : d.keys) {
    if (shown == 6) break;
    if (k.count == 0) continue;
    ++shown;
    out += fmt::format(
        "  {:<16} {:<3} median {:>9}{}  n={}{}{}\n", k.key, device_name(k.device),
        secs(k.run_median_s),
        std::isfinite(k.run_median_low_s)
            ? fmt::format(" [{}, {}]", secs(k.run_median_low_s), secs(k.run_median_high_s))
            : std::string(),
        k.count, k.callers.empty() ? "" : fmt::format("  (mixes {})", k.callers),
        k.sampled_every > 1 ? fmt::format("  (timed on 1 step in {})", k.sampled_every) : "");
  }
  for (const PhaseRow& p : s.phases) {
    if (p.phase == Phase::kDataWait && p.device == Device::kCPU) {
      out += fmt::format("  data wait {} of the step\n", pct(p.share));
    }
  }
  {  // Communication and syncs, where timed (docs/steps.md).
    std::vector<std::string> parts;
    for (const PhaseRow& p : s.phases) {
      if (p.device == Device::kCPU &&
          (p.phase == Phase::kComm || p.phase == Phase::kCommExposed || p.phase == Phase::kSync)) {
        parts.push_back(fmt::format("{} {}", phase_name(p.phase), pct(p.share)));
      }
    }
    if (!parts.empty()) out += fmt::format("  {} of the step\n", fmt::join(parts, ", "));
  }
  // The efficiency ledger, where the run recorded work (docs/ledger.md).
  if (d.ledger && !d.ledger->ranks.empty()) {
    out += fmt::format("  {}\n", steps::format_ledger_line(*d.ledger, /*notes=*/false));
  }
  out += fmt::format("  diagnosis: {}\n", d.headline());
  for (const Label& l : s.labels) {
    out += fmt::format("    {}: {}\n", label_name(l.name), l.evidence);
  }
  out += fmt::format("  run: {}\n  more: trainscope diagnose {}   trainscope report {}\n",
                     d.run_dir, d.run_dir, d.run_dir);
  return out;
}

}  // namespace trainscope::diagnosis
