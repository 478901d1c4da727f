// The efficiency ledger (trainscope/steps/ledger.hpp, docs/ledger.md).
#include "trainscope/steps/ledger.hpp"

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainscope/hardware/gpu/peak_flops.hpp"
#include "trainscope/run/step_work.hpp"
#include "trainscope/stats/format_numbers.hpp"

namespace trainscope::steps {
namespace {

std::optional<double> number_param(const std::map<std::string, std::string>& params,
                                   std::string_view key) {
  auto it = params.find(std::string(key));
  if (it == params.end()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::string text_param(const std::map<std::string, std::string>& params, std::string_view key) {
  auto it = params.find(std::string(key));
  return it == params.end() ? std::string() : it->second;
}

// Per step index: samples and tokens (summed when logged twice).
struct StepFigures {
  double samples = 0;
  double tokens = 0;
  bool has_tokens = false;
};

std::map<std::int64_t, StepFigures> work_by_step(const std::vector<MetricPoint>& metrics) {
  std::map<std::int64_t, StepFigures> out;
  for (const MetricPoint& point : metrics) {
    if (point.key == kStepSamplesMetric) {
      out[point.step].samples += point.value;
    } else if (point.key == kStepTokensMetric) {
      StepFigures& figures = out[point.step];
      figures.tokens += point.value;
      figures.has_tokens = true;
    }
  }
  return out;
}

// The peak of one device and where it comes from; notes why there is none.
std::pair<double, std::string> peak_of(const RunInfo& info, const LedgerOptions& options,
                                       std::vector<std::string>& notes) {
  if (options.peak_flops) return {*options.peak_flops, "--peak-flops"};
  const std::string device = text_param(info.params, kStepDeviceParam);
  const std::string dtype_name = text_param(info.params, kStepDtypeParam);
  if (!device.empty() && device != "cpu") {
    const nvml::GpuPeak* row = nvml::find_gpu_peak(device);
    const std::optional<nvml::PeakDtype> dtype = nvml::parse_peak_dtype(dtype_name);
    if (row == nullptr) {
      notes.push_back(
          absl::StrCat("no peak for ", device, ": not in the GPU table (give --peak-flops)"));
    } else if (!dtype) {
      notes.push_back(
          absl::StrCat("no peak: data type '", dtype_name, "' unknown (give --peak-flops)"));
    } else if (std::optional<double> peak = nvml::gpu_peak_flops(device, *dtype)) {
      return {*peak,
              absl::StrCat(std::string(row->model), " ", std::string(nvml::peak_dtype_name(*dtype)),
                           " dense, ", std::string(row->source))};
    } else {
      notes.push_back(absl::StrCat("no peak: ", std::string(row->model), " has no ",
                                   std::string(nvml::peak_dtype_name(*dtype)),
                                   " unit in the table"));
    }
    return {kNoRate, ""};
  }
  if (std::optional<double> peak = number_param(info.params, kPeakFlopsParam); peak && *peak > 0) {
    return {*peak, text_param(info.params, kPeakSourceParam)};
  }
  notes.push_back("no peak FLOP/s: no device recorded and no measured peak (give --peak-flops)");
  return {kNoRate, ""};
}

// "1.23 T" for 1.23e12: three significant digits and an SI prefix.
std::string si(double value) {
  if (!std::isfinite(value)) return std::string(stats::kNotAvailable);
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e15, " P"}, {1e12, " T"}, {1e9, " G"}, {1e6, " M"}, {1e3, " k"}};
  for (const auto& [scale, prefix] : kPrefixes) {
    if (std::abs(value) >= scale) return absl::StrFormat("%.3g%s", value / scale, prefix);
  }
  return absl::StrFormat("%.3g ", value);
}

}  // namespace

Ledger conclude_ledger(const RunSteps& steps, const std::vector<std::vector<MetricPoint>>& metrics,
                       const LedgerOptions& options) {
  Ledger out;
  const RunInfo& info = steps.info;
  out.device = text_param(info.params, kStepDeviceParam);
  out.dtype = text_param(info.params, kStepDtypeParam);
  if (std::optional<double> flops = number_param(info.params, kStepFlopsParam);
      flops && *flops > 0) {
    out.flops_per_step = *flops;
    out.flops_source = text_param(info.params, kStepFlopsSourceParam);
  } else if (auto tag = info.tags.find(std::string(kFlopsNoteTag)); tag != info.tags.end()) {
    out.notes.push_back(absl::StrCat("FLOPs ", tag->second));
  } else {
    out.notes.push_back("FLOPs not counted (no FLOP count recorded)");
  }
  const std::optional<double> counted_step = number_param(info.params, kStepFlopsStepParam);
  std::tie(out.peak_flops, out.peak_source) = peak_of(info, options, out.notes);

  double samples_per_s = 0, tokens_per_s = 0, achieved = 0, mfu_sum = 0;
  std::size_t with_tokens = 0, with_mfu = 0;
  for (std::size_t i = 0; i < steps.ranks.size(); ++i) {
    const RankSteps& rank = steps.ranks[i];
    if (i >= metrics.size()) break;
    const std::map<std::int64_t, StepFigures> work = work_by_step(metrics[i]);
    if (work.empty()) continue;
    RankLedger row;
    row.rank = rank.rank;
    double tokens = 0;
    bool has_tokens = false;
    for (const Step& step : rank.history) {
      double step_samples = 0, step_tokens = 0;
      bool found = false;
      bool counted = false;
      for (std::int64_t index = step.step; index < step.step + step.steps; ++index) {
        if (counted_step && static_cast<double>(index) == *counted_step) counted = true;
        auto it = work.find(index);
        if (it == work.end()) continue;
        found = true;
        step_samples += it->second.samples;
        step_tokens += it->second.tokens;
        has_tokens = has_tokens || it->second.has_tokens;
      }
      if (!found || counted) continue;
      row.steps += step.steps;
      row.seconds += step.period_s;
      row.samples += step_samples;
      tokens += step_tokens;
    }
    if (row.steps == 0 || row.seconds <= 0) continue;
    row.samples_per_s = row.samples / row.seconds;
    if (has_tokens) {
      row.tokens = tokens;
      row.tokens_per_s = tokens / row.seconds;
      tokens_per_s += row.tokens_per_s;
      ++with_tokens;
    }
    if (std::isfinite(out.flops_per_step)) {
      row.achieved_flops = out.flops_per_step * static_cast<double>(row.steps) / row.seconds;
      achieved += row.achieved_flops;
      if (std::isfinite(out.peak_flops) && out.peak_flops > 0) {
        row.mfu = row.achieved_flops / out.peak_flops;
        mfu_sum += row.mfu;
        ++with_mfu;
      }
    }
    samples_per_s += row.samples_per_s;
    out.steps += row.steps;
    out.ranks.push_back(row);
  }
  if (out.ranks.empty()) {
    out.notes.insert(out.notes.begin(),
                     "no work recorded: no step has samples or tokens (trainscope run --auto, "
                     "or trainscope.log_step_work)");
    return out;
  }
  out.samples_per_s = samples_per_s;
  if (with_tokens > 0) out.tokens_per_s = tokens_per_s;
  if (std::isfinite(out.flops_per_step)) out.achieved_flops = achieved;
  if (with_mfu > 0) out.mfu = mfu_sum / static_cast<double>(with_mfu);
  return out;
}

absl::StatusOr<Ledger> read_ledger(const RunReader& reader, const LedgerOptions& options) {
  absl::StatusOr<RunSteps> steps = read_steps(reader);
  if (!steps.ok()) return steps.status();
  std::vector<std::vector<MetricPoint>> metrics;
  for (const RankSteps& rank : steps->ranks) {
    std::vector<MetricPoint> work;
    std::uint64_t offset = 0;
    for (;;) {
      absl::StatusOr<Chunk<MetricPoint>> chunk = reader.read_metrics(rank.rank, offset);
      if (!chunk.ok()) return chunk.status();
      for (MetricPoint& point : chunk->rows) {
        if (point.key == kStepSamplesMetric || point.key == kStepTokensMetric) {
          work.push_back(std::move(point));
        }
      }
      if (chunk->next_offset == offset || chunk->rows.empty()) break;
      offset = chunk->next_offset;
    }
    metrics.push_back(std::move(work));
  }
  return conclude_ledger(*steps, metrics, options);
}

std::string format_ledger_line(const Ledger& ledger) {
  std::vector<std::string> parts;
  if (std::isfinite(ledger.tokens_per_s)) parts.push_back(si(ledger.tokens_per_s) + "tokens/s");
  if (std::isfinite(ledger.samples_per_s)) {
    parts.push_back(si(ledger.samples_per_s) + "samples/s");
  }
  if (std::isfinite(ledger.achieved_flops)) {
    parts.push_back(si(ledger.achieved_flops) + "FLOP/s achieved");
  }
  if (std::isfinite(ledger.mfu)) {
    parts.push_back(absl::StrCat("MFU ", stats::format_share(ledger.mfu), " of ",
                                 si(ledger.peak_flops), "FLOP/s (", ledger.peak_source, ")"));
  }
  std::string line = absl::StrCat("ledger: ", parts.empty() ? "-" : absl::StrJoin(parts, ", "));
  if (!ledger.notes.empty()) absl::StrAppend(&line, "; ", absl::StrJoin(ledger.notes, "; "));
  return line;
}

}  // namespace trainscope::steps
