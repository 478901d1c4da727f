#include "trainscope/prometheus/exposition.hpp"

#include <cmath>
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/export/run_record.hpp"
#include "trainscope/run/run_status.hpp"
#include "trainscope/steps/ledger.hpp"

namespace trainscope::prometheus {
namespace {

using diagnosis::Diagnosis;
using diagnosis::Label;
using diagnosis::LabelName;
using diagnosis::RankNow;
using Labels = std::vector<std::pair<std::string, std::string>>;

// The exposition's own labels: a param label may not take their names.
constexpr std::string_view kOwnLabels[] = {"run",    "run_name", "rank", "host",  "phase",    "gpu",
                                           "status", "label",    "kind", "scope", "quantile", "le"};

bool is_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The text format: # HELP text escapes \ and newline.
std::string escape_help(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name,
                   escape_help(help), name, type);
  }
  // A sample of the current family; a value that is not finite is no sample
  // (unknown is absent, never NaN on a dashboard).
  void sample(const Labels& labels, double value) {
    if (!std::isfinite(value)) return;
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      bool first = true;
      for (const auto& [name, label_value] : labels) {
        if (!first) out_ += ',';
        first = false;
        fmt::format_to(std::back_inserter(out_), "{}=\"{}\"", name,
                       escape_label_value(label_value));
      }
      out_ += '}';
    }
    fmt::format_to(std::back_inserter(out_), " {}\n", value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

Labels run_labels(const RunMetrics& r) {
  Labels labels{{"run", r.diagnosis.run_id}, {"run_name", r.diagnosis.run_name}};
  for (const auto& param : r.params) labels.push_back(param);
  return labels;
}

Labels with(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

bool on_host(const RunMetrics& r, const std::string& host) {
  return r.only_host.empty() || host == r.only_host;
}

// A family of per-rank samples: `emit` gives each rank's (extra labels, value).
using RankEmit = std::function<void(const Labels&, double)>;
void per_rank(Writer* w, const std::vector<RunMetrics>& runs, std::string_view name,
              std::string_view type, std::string_view help,
              const std::function<void(const RankNow&, const RankEmit&)>& values) {
  w->family(name, type, help);
  for (const RunMetrics& r : runs) {
    const Labels base = run_labels(r);
    for (const RankNow& rank : r.diagnosis.ranks) {
      if (!on_host(r, rank.host)) continue;
      const Labels labels = with(with(base, "rank", std::to_string(rank.rank)), "host", rank.host);
      values(rank, [&](const Labels& extra, double value) {
        Labels all = labels;
        all.insert(all.end(), extra.begin(), extra.end());
        w->sample(all, value);
      });
    }
  }
}

void per_gpu(Writer* w, const std::vector<RunMetrics>& runs, std::string_view name,
             std::string_view help, double scale, double diagnosis::GpuNow::*field) {
  w->family(name, "gauge", help);
  for (const RunMetrics& r : runs) {
    const Labels base = run_labels(r);
    for (const diagnosis::HostNow& host : r.diagnosis.host_now) {
      if (!on_host(r, host.host)) continue;
      for (const diagnosis::GpuNow& gpu : host.gpus) {
        w->sample(with(with(base, "host", host.host), "gpu", std::to_string(gpu.index)),
                  gpu.*field * scale);
      }
    }
  }
}

// A family of the ledger's per-rank figures (docs/ledger.md): ranks with work only.
void per_rank_ledger(Writer* w, const std::vector<RunMetrics>& runs, std::string_view name,
                     std::string_view help, double steps::RankLedger::*field) {
  w->family(name, "gauge", help);
  for (const RunMetrics& r : runs) {
    if (!r.diagnosis.ledger) continue;
    const Labels base = run_labels(r);
    for (const RankNow& rank : r.diagnosis.ranks) {
      if (!on_host(r, rank.host)) continue;
      for (const steps::RankLedger& row : r.diagnosis.ledger->ranks) {
        if (row.rank != rank.rank) continue;
        w->sample(with(with(base, "rank", std::to_string(rank.rank)), "host", rank.host),
                  row.*field);
      }
    }
  }
}

// A family of the ledger's job-wide figures.
void run_ledger(Writer* w, const std::vector<RunMetrics>& runs, std::string_view name,
                std::string_view help, double steps::Ledger::*field) {
  w->family(name, "gauge", help);
  for (const RunMetrics& r : runs) {
    if (r.diagnosis.ledger) w->sample(run_labels(r), *r.diagnosis.ledger.*field);
  }
}

// The scope the headline names: the window while the run goes on, else the run.
const diagnosis::Scope& headline_scope(const Diagnosis& d) {
  return d.status == RunStatus::kRunning ? d.window : d.run;
}

// The readings' _mb: 10^6 bytes (docs/hardware-metrics.md).
constexpr double kMB = 1e6;

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

absl::StatusOr<std::vector<ParamLabel>> parse_param_labels(std::string_view list) {
  std::vector<ParamLabel> out;
  std::set<std::string> seen;
  const std::vector<std::string> entries = absl::StrSplit(std::string(list), ',');
  for (const std::string& entry : entries) {
    std::string param(entry);
    absl::StripAsciiWhitespace(&param);
    if (param.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("--prometheus-labels '{}': an empty param name", list));
    }
    std::string label = param;
    for (char& c : label) {
      if (!is_label_char(c)) c = '_';
    }
    if ((label[0] >= '0' && label[0] <= '9') || label.rfind("__", 0) == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "--prometheus-labels: param '{}' makes the label '{}', which Prometheus does not take "
          "(a label starts with a letter or one '_')",
          param, label));
    }
    for (std::string_view own : kOwnLabels) {
      if (label == own) {
        return absl::InvalidArgumentError(fmt::format(
            "--prometheus-labels: param '{}' would take the label '{}', which the exposition "
            "uses itself",
            param, label));
      }
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(fmt::format(
          "--prometheus-labels: the label '{}' is named twice (param '{}')", label, param));
    }
    out.push_back(ParamLabel{param, std::move(label)});
  }
  return out;
}

std::string exposition(const std::vector<RunMetrics>& runs) {
  Writer w;
  // ---- per run
  w.family("trainscope_run_info", "gauge",
           "A run the endpoint follows: 1, with its status (RUNNING, FINISHED, FAILED, KILLED).");
  for (const RunMetrics& r : runs) {
    w.sample(with(run_labels(r), "status", std::string(run_status_name(r.diagnosis.status))), 1);
  }
  w.family("trainscope_run_elapsed_seconds", "gauge",
           "Time since the run started (to its end once it ended).");
  for (const RunMetrics& r : runs) w.sample(run_labels(r), r.diagnosis.elapsed_ms / 1000.0);
  w.family("trainscope_run_ranks", "gauge", "The ranks of the run (all hosts).");
  for (const RunMetrics& r : runs) {
    w.sample(run_labels(r), static_cast<double>(r.diagnosis.ranks.size()));
  }
  w.family("trainscope_diagnosis_info", "gauge",
           "The run's diagnosis (trainscope diagnose): 1 per label of the window while the run "
           "goes on, of the whole run once it ended; kind and rank where the label has them.");
  for (const RunMetrics& r : runs) {
    const diagnosis::Scope& scope = headline_scope(r.diagnosis);
    const Labels base = with(run_labels(r), "scope", scope.name);
    if (scope.labels.empty()) {
      w.sample(
          with(with(with(base, "label", std::string(label_name(LabelName::kNoData))), "kind", ""),
               "rank", ""),
          1);
    }
    for (const Label& l : scope.labels) {
      w.sample(with(with(with(base, "label", std::string(label_name(l.name))), "kind",
                         std::string(label_kind_name(l.kind))),
                    "rank", l.rank ? std::to_string(*l.rank) : std::string()),
               1);
    }
  }
  w.family("trainscope_straggler_rank", "gauge",
           "The straggler rank (its number) in a phase group (kind: input or compute), while "
           "the diagnosis says STRAGGLER.");
  for (const RunMetrics& r : runs) {
    for (const Label& l : headline_scope(r.diagnosis).labels) {
      if (l.name != LabelName::kStraggler || !l.rank) continue;
      w.sample(with(run_labels(r), "kind", std::string(label_kind_name(l.kind))),
               static_cast<double>(*l.rank));
    }
  }
  w.family("trainscope_straggler_lag_seconds", "gauge",
           "How far the straggler rank lags behind the median of the other ranks per step.");
  for (const RunMetrics& r : runs) {
    for (const Label& l : headline_scope(r.diagnosis).labels) {
      if (l.name != LabelName::kStraggler || !l.rank) continue;
      w.sample(with(with(run_labels(r), "kind", std::string(label_kind_name(l.kind))), "rank",
                    std::to_string(*l.rank)),
               l.value.value);
    }
  }
  run_ledger(&w, runs, "trainscope_run_tokens_per_second",
             "Tokens per second of the job (the ledger: its ranks' summed), over the steps with "
             "work so far.",
             &steps::Ledger::tokens_per_s);
  run_ledger(&w, runs, "trainscope_run_samples_per_second",
             "Samples per second of the job (the ledger: its ranks' summed), over the steps "
             "with work so far.",
             &steps::Ledger::samples_per_s);
  run_ledger(&w, runs, "trainscope_run_mfu_ratio",
             "Model FLOPs utilisation of the job (the ledger: its ranks' mean), achieved FLOP/s "
             "over one device's peak.",
             &steps::Ledger::mfu);
  w.family("trainscope_diagnosis_read_ratio", "gauge",
           "The share of the run's region rows the endpoint read (1 unless the run writes "
           "faster than its read budget: the window stays exact).");
  for (const RunMetrics& r : runs) w.sample(run_labels(r), r.diagnosis.read_share);

  // ---- per rank
  per_rank(&w, runs, "trainscope_rank_info", "gauge",
           "A rank of the run: 1, with its status (RUNNING, FINISHED, FAILED, KILLED, CRASHED).",
           [](const RankNow& rank, const RankEmit& emit) {
             emit({{"status", std::string(process_status_name(rank.status))}}, 1);
           });
  per_rank(
      &w, runs, "trainscope_steps_total", "counter", "Steps the rank has made.",
      [](const RankNow& rank, const RankEmit& emit) { emit({}, static_cast<double>(rank.steps)); });
  per_rank(&w, runs, "trainscope_step_p50_seconds", "gauge",
           "The median step time of the rank's window (its last K steps after warm-up).",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.step_p50_s); });
  per_rank(&w, runs, "trainscope_step_p95_seconds", "gauge",
           "The 95th percentile step time of the rank's window.",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.step_p95_s); });
  per_rank(&w, runs, "trainscope_steps_per_second", "gauge",
           "Steps per second over the rank's window (1 / its mean step time).",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.steps_per_s); });
  per_rank(
      &w, runs, "trainscope_step_phase_ratio", "gauge",
      "Each phase's share of the rank's step time over its window (data_wait, h2d, "
      "forward, backward, optimizer, comm, comm_exposed, sync, rest); a phase the rank does "
      "not time is absent.",
      [](const RankNow& rank, const RankEmit& emit) {
        for (std::size_t p = 0; p < diagnosis::kPhaseCount; ++p) {
          emit({{"phase", std::string(diagnosis::phase_name(static_cast<diagnosis::Phase>(p)))}},
               rank.phase_share[p]);
        }
      });
  per_rank(&w, runs, "trainscope_process_cpu_ratio", "gauge",
           "CPU use of the rank's process tree, in cores (1 = one core busy).",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.cpu_pct / 100.0); });
  per_rank(&w, runs, "trainscope_process_resident_memory_bytes", "gauge",
           "Resident memory of the rank's process tree.",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.rss_mb * kMB); });
  per_rank(&w, runs, "trainscope_process_gpu_memory_bytes", "gauge",
           "GPU memory the rank's process tree holds, summed over its devices.",
           [](const RankNow& rank, const RankEmit& emit) { emit({}, rank.gpu_mem_mb * kMB); });

  per_rank_ledger(&w, runs, "trainscope_tokens_per_second",
                  "Tokens per second of the rank (the ledger), over its steps with work so far.",
                  &steps::RankLedger::tokens_per_s);
  per_rank_ledger(&w, runs, "trainscope_samples_per_second",
                  "Samples per second of the rank (the ledger), over its steps with work so far.",
                  &steps::RankLedger::samples_per_s);
  per_rank_ledger(&w, runs, "trainscope_mfu_ratio",
                  "Model FLOPs utilisation of the rank (the ledger): its achieved FLOP/s over "
                  "one device's peak.",
                  &steps::RankLedger::mfu);

  // ---- per GPU of the run's hosts
  per_gpu(&w, runs, "trainscope_gpu_utilization_ratio",
          "GPU utilisation (NVML: the share of time a kernel ran).", 0.01,
          &diagnosis::GpuNow::util_pct);
  per_gpu(&w, runs, "trainscope_gpu_memory_used_bytes", "GPU memory in use (all processes).", kMB,
          &diagnosis::GpuNow::mem_used_mb);
  per_gpu(&w, runs, "trainscope_gpu_memory_total_bytes", "GPU memory in all.", kMB,
          &diagnosis::GpuNow::mem_total_mb);
  return w.take();
}

}  // namespace trainscope::prometheus
