// The efficiency ledger (trainscope/steps/ledger.hpp, docs/ledger.md).
#include "trainscope/steps/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainscope/hardware/gpu/peak_flops.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/hardware/host/rapl.hpp"
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

// The cumulative reading at `ms`, linear between readings; nullopt outside them.
std::optional<double> energy_at(const EnergySeries& series, double ms) {
  if (series.empty() || ms < static_cast<double>(series.front().first) ||
      ms > static_cast<double>(series.back().first)) {
    return std::nullopt;
  }
  for (std::size_t i = 1; i < series.size(); ++i) {
    const double t0 = static_cast<double>(series[i - 1].first);
    const double t1 = static_cast<double>(series[i].first);
    if (ms > t1) continue;
    if (t1 <= t0) return series[i].second;
    return series[i - 1].second + (series[i].second - series[i - 1].second) * (ms - t0) / (t1 - t0);
  }
  return series.back().second;
}

void conclude_energy(Ledger& out, const std::vector<EnergyReadings>& energy, std::int64_t start_ns,
                     std::int64_t end_ns, std::uint64_t most_steps, double tokens,
                     const RunInfo& info, const LedgerOptions& options) {
  double joules = 0, cpu = 0, gpu = 0;
  bool any = false, any_cpu = false, covered = true;
  std::uint32_t gpus = 0;
  for (const EnergyReadings& meter : energy) {
    const EnergySeries& series = meter.points;
    if (series.empty()) continue;
    std::optional<double> first = energy_at(series, static_cast<double>(start_ns) * 1e-6);
    std::optional<double> last = energy_at(series, static_cast<double>(end_ns) * 1e-6);
    if (!first || !last) {
      covered = false;
      continue;
    }
    joules += *last - *first;
    any = true;
    if (meter.source == EnergySource::kGpuNvml) {
      gpu += *last - *first;
      ++gpus;
    } else {
      cpu += *last - *first;
      any_cpu = true;
    }
  }
  if (any_cpu) out.cpu_energy_j = cpu;
  if (gpus > 0) out.gpu_energy_j = gpu;
  out.gpus = gpus;
  const double hours = out.seconds / 3600;
  if (options.price_per_hour) out.cost = *options.price_per_hour * hours;
  if (!any) {
    auto tag = info.tags.find(std::string(host::kEnergyNoteTag));
    out.notes.push_back(tag != info.tags.end()
                            ? absl::StrCat("energy: ", tag->second)
                            : std::string(covered ? "energy: not recorded (no RAPL or GPU energy "
                                                    "readings in the run)"
                                                  : "energy: the readings do not cover the steps"));
    return;
  }
  out.energy_j = joules;
  if (most_steps > 0) out.energy_per_step_j = joules / static_cast<double>(most_steps);
  if (std::isfinite(tokens) && tokens > 0) out.energy_per_1k_tokens_j = joules / (tokens / 1000);
  const double kwh = joules / 3.6e6;
  if (options.price_per_kwh) {
    out.cost = (std::isfinite(out.cost) ? out.cost : 0) + *options.price_per_kwh * kwh;
  }
  if (options.grams_co2_per_kwh) out.co2_g = *options.grams_co2_per_kwh * kwh;
}

// MFU above 1 is impossible: the achieved FLOP/s cannot pass the peak. When it does, the
// peak is what is wrong (a CPU probe taken while the machine was busy, a table row of another
// model or type): no MFU is shown, and the note says why and what to do.
void refuse_impossible_mfu(Ledger& out) {
  bool above = std::isfinite(out.mfu) && out.mfu > 1.0;
  for (const RankLedger& row : out.ranks)
    above = above || (std::isfinite(row.mfu) && row.mfu > 1.0);
  if (!above) return;
  double most = out.ranks.empty() ? out.achieved_flops : 0.0;  // a rank's: MFU is per device
  for (RankLedger& row : out.ranks) {
    if (std::isfinite(row.achieved_flops)) most = std::max(most, row.achieved_flops);
    row.mfu = kNoRate;
  }
  out.mfu = kNoRate;
  out.notes.push_back(absl::StrCat(
      "MFU not shown: the achieved ", si(most), "FLOP/s is above the peak of ", si(out.peak_flops),
      "FLOP/s (", out.peak_source,
      "), so the peak is too low (a CPU probe taken while the machine was busy, or a peak of "
      "another device or type): give the device's peak with --peak-flops"));
}

}  // namespace

namespace {

// A metric row of the work's names into `work`; other rows nothing.
void add_ledger_work(const MetricPoint& point, WorkByStep* work) {
  if (point.key == kStepSamplesMetric) {
    (*work)[point.step].samples += point.value;
  } else if (point.key == kStepTokensMetric) {
    WorkFigures& figures = (*work)[point.step];
    figures.tokens += point.value;
    figures.has_tokens = true;
  }
}

}  // namespace

WorkByStep work_by_step(const std::vector<MetricPoint>& metrics) {
  WorkByStep out;
  for (const MetricPoint& point : metrics) add_ledger_work(point, &out);
  return out;
}

std::vector<EnergyReadings> energy_series(const std::vector<HostLoad>& hosts) {
  std::vector<EnergyReadings> out;
  for (const HostLoad& host : hosts) {
    if (!host.rapl_energy_j.empty()) out.push_back({EnergySource::kCpuRapl, host.rapl_energy_j});
    for (const auto& [device, series] : host.gpu_energy_j) {
      if (series.empty()) continue;
      if (!host.job_gpus.empty() && host.job_gpus.count(device) == 0) continue;
      out.push_back({EnergySource::kGpuNvml, series});
    }
  }
  return out;
}

Ledger conclude_ledger(const RunSteps& steps, const std::vector<std::vector<MetricPoint>>& metrics,
                       const LedgerOptions& options, const std::vector<EnergyReadings>& energy) {
  std::vector<const RankSteps*> ranks;
  std::map<std::uint32_t, WorkByStep> work;
  for (std::size_t i = 0; i < steps.ranks.size() && i < metrics.size(); ++i) {
    ranks.push_back(&steps.ranks[i]);
    work[steps.ranks[i].rank] = work_by_step(metrics[i]);
  }
  return conclude_ledger(steps.info, ranks, work, options, energy);
}

Ledger conclude_ledger(const RunInfo& info, const std::vector<const RankSteps*>& ranks,
                       const std::map<std::uint32_t, WorkByStep>& work_of,
                       const LedgerOptions& options, const std::vector<EnergyReadings>& energy) {
  Ledger out;
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

  double samples_per_s = 0, tokens_per_s = 0, achieved = 0, mfu_sum = 0, all_tokens = 0;
  std::size_t with_tokens = 0, with_mfu = 0;
  std::uint64_t most_steps = 0;
  std::int64_t window_start_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t window_end_ns = std::numeric_limits<std::int64_t>::min();
  for (const RankSteps* rank_steps : ranks) {
    const RankSteps& rank = *rank_steps;
    const auto rank_work = work_of.find(rank.rank);
    if (rank_work == work_of.end() || rank_work->second.empty()) continue;
    const WorkByStep& work = rank_work->second;
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
      if (!found) continue;
      window_start_ns = std::min(window_start_ns, step.start_ns);
      window_end_ns =
          std::max(window_end_ns,
                   step.start_ns + static_cast<std::int64_t>(std::llround(step.period_s * 1e9)));
      if (counted) continue;
      row.steps += step.steps;
      row.seconds += step.period_s;
      row.samples += step_samples;
      tokens += step_tokens;
    }
    if (row.steps == 0 || row.seconds <= 0) continue;
    row.samples_per_s = row.samples / row.seconds;
    most_steps = std::max(most_steps, row.steps);
    if (has_tokens) {
      all_tokens += tokens;
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
  refuse_impossible_mfu(out);
  if (window_end_ns > window_start_ns) {
    out.seconds = static_cast<double>(window_end_ns - window_start_ns) * 1e-9;
    conclude_energy(out, energy, window_start_ns, window_end_ns, most_steps,
                    with_tokens > 0 ? all_tokens : kNoRate, info, options);
  }
  return out;
}

MfuBasis mfu_basis(const RunInfo& info, const LedgerOptions& options) {
  MfuBasis out;
  if (std::optional<double> flops = number_param(info.params, kStepFlopsParam); flops && *flops > 0)
    out.flops_per_step = *flops;
  if (std::optional<double> step = number_param(info.params, kStepFlopsStepParam))
    out.counted_step = static_cast<std::int64_t>(std::llround(*step));
  std::vector<std::string> notes;
  out.peak_flops = peak_of(info, options, notes).first;
  return out;
}

double MfuBasis::step_mfu(const Step& step) const {
  if (!(step.period_s > 0) || !std::isfinite(flops_per_step) || !(peak_flops > 0)) return kNoRate;
  if (counted_step && *counted_step >= step.step && *counted_step < step.step + step.steps)
    return kNoRate;
  const double mfu = flops_per_step * static_cast<double>(step.steps) / step.period_s / peak_flops;
  return mfu > 1.0 ? kNoRate : mfu;  // impossible: the peak is too low (refuse_impossible_mfu)
}

absl::Status WorkReader::poll(const RunReader& reader) {
  if (reader.info().id != run_id_ || reader.info().start_time_ms != start_time_ms_) {
    restart();
    run_id_ = reader.info().id;
    start_time_ms_ = reader.info().start_time_ms;
  }
  for (const RunFile& file : reader.files()) {
    if (file.kind != RunFileKind::kMetrics) continue;
    std::uint64_t& offset = offsets_[file.rank];
    if (file.size_bytes <= offset) continue;
    absl::StatusOr<Chunk<MetricPoint>> chunk = reader.read_metrics(file.rank, offset);
    if (absl::IsNotFound(chunk.status())) continue;
    if (!chunk.ok()) return chunk.status();
    WorkByStep& work = work_[file.rank];
    for (const MetricPoint& point : chunk->rows) add_ledger_work(point, &work);
    offset = std::max(offset, chunk->next_offset);
  }
  return absl::OkStatus();
}

void WorkReader::restart() {
  offsets_.clear();
  work_.clear();
}

void WorkReader::compact(const std::vector<const RankSteps*>& ranks) {
  for (const RankSteps* t : ranks) {
    auto found = work_.find(t->rank);
    if (found == work_.end() || t->history.empty()) continue;
    WorkByStep& work = found->second;
    // Most polls: nothing to do (the history's steps are few, and so is the work).
    if (work.size() <= 2 * t->history.size() + 64) continue;
    WorkByStep kept;
    for (const Step& step : t->history) {
      auto it = work.lower_bound(step.step);
      if (it == work.end() || it->first >= step.step + step.steps) continue;
      WorkFigures& sum = kept[step.step];
      for (; it != work.end() && it->first < step.step + step.steps; ++it) {
        sum.samples += it->second.samples;
        sum.tokens += it->second.tokens;
        sum.has_tokens = sum.has_tokens || it->second.has_tokens;
      }
    }
    // Past the last step read: the open step's, and those not read yet.
    const Step& last = t->history.back();
    for (auto it = work.lower_bound(last.step + last.steps); it != work.end(); ++it) {
      kept.insert(*it);
    }
    work = std::move(kept);
  }
}

absl::StatusOr<Ledger> read_ledger(const RunReader& reader, const LedgerOptions& options) {
  absl::StatusOr<RunSteps> steps = read_steps(reader);
  if (!steps.ok()) return steps.status();
  WorkReader work;
  if (absl::Status polled = work.poll(reader); !polled.ok()) return polled;
  std::vector<const RankSteps*> ranks;
  for (const RankSteps& rank : steps->ranks) ranks.push_back(&rank);
  return conclude_ledger(steps->info, ranks, work.work(), options, energy_series(steps->hosts));
}

absl::Status add_ledger_columns(const RunReader& run, std::map<std::string, std::string>* row) {
  absl::StatusOr<Ledger> ledger = read_ledger(run);
  if (!ledger.ok()) return ledger.status();
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"ledger.tokens_per_s", ledger->tokens_per_s},
        {"ledger.samples_per_s", ledger->samples_per_s},
        {"ledger.mfu", ledger->mfu}}) {
    if (std::isfinite(value)) (*row)[name] = absl::StrFormat("%.17g", value);
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string_view, double>> ledger_metrics(const Ledger& ledger) {
  std::vector<std::pair<std::string_view, double>> out;
  for (const auto& [name, value] :
       {std::pair{kLedgerTokensPerSMetric, ledger.tokens_per_s},
        std::pair{kLedgerSamplesPerSMetric, ledger.samples_per_s},
        std::pair{kLedgerFlopsPerSMetric, ledger.achieved_flops},
        std::pair{kLedgerMfuMetric, ledger.mfu},
        std::pair{kLedgerEnergyPer1kTokensMetric, ledger.energy_per_1k_tokens_j},
        std::pair{kLedgerEnergyPerStepMetric, ledger.energy_per_step_j}}) {
    if (std::isfinite(value)) out.emplace_back(name, value);
  }
  return out;
}

std::string format_ledger_line(const Ledger& ledger, bool notes) {
  std::vector<std::string> parts;
  if (std::isfinite(ledger.tokens_per_s)) parts.push_back(si(ledger.tokens_per_s) + "tokens/s");
  if (std::isfinite(ledger.samples_per_s)) {
    parts.push_back(si(ledger.samples_per_s) + "samples/s");
  }
  if (std::isfinite(ledger.achieved_flops)) {
    parts.push_back(si(ledger.achieved_flops) + "FLOP/s achieved");
  }
  if (std::isfinite(ledger.mfu)) {
    parts.push_back(absl::StrCat(
        "MFU ", stats::format_share(ledger.mfu), " of ", si(ledger.peak_flops), "FLOP/s",
        ledger.peak_source.empty() ? "" : absl::StrCat(" (", ledger.peak_source, ")")));
  }
  if (std::isfinite(ledger.energy_j)) {
    const std::string gpus = absl::StrCat(ledger.gpus, ledger.gpus == 1 ? " GPU " : " GPUs ");
    std::string energy;
    if (std::isfinite(ledger.gpu_energy_j) && std::isfinite(ledger.cpu_energy_j)) {
      energy = absl::StrCat(si(ledger.energy_j), "J energy (CPU ", si(ledger.cpu_energy_j), "J, ",
                            gpus, si(ledger.gpu_energy_j), "J)");
    } else if (std::isfinite(ledger.gpu_energy_j)) {
      energy = absl::StrCat(si(ledger.energy_j), "J GPU energy (", ledger.gpus,
                            ledger.gpus == 1 ? " GPU)" : " GPUs)");
    } else {
      energy = absl::StrCat(si(ledger.energy_j), "J CPU energy");
    }
    if (std::isfinite(ledger.energy_per_step_j)) {
      absl::StrAppend(&energy, ", ", si(ledger.energy_per_step_j), "J/step");
    }
    if (std::isfinite(ledger.energy_per_1k_tokens_j)) {
      absl::StrAppend(&energy, ", ", si(ledger.energy_per_1k_tokens_j), "J/1k tokens");
    }
    parts.push_back(std::move(energy));
  }
  if (std::isfinite(ledger.cost)) parts.push_back(absl::StrFormat("cost %.4g", ledger.cost));
  if (std::isfinite(ledger.co2_g)) parts.push_back(absl::StrFormat("%.3g g CO2", ledger.co2_g));
  std::string line = absl::StrCat("ledger: ", parts.empty() ? "-" : absl::StrJoin(parts, ", "));
  if (notes && !ledger.notes.empty()) {
    absl::StrAppend(&line, "; ", absl::StrJoin(ledger.notes, "; "));
  }
  return line;
}

}  // namespace trainscope::steps
