// The efficiency ledger of a run (docs/ledger.md): from its steps (periods,
// read_steps) and the work of each step (trainscope/run/step_work.hpp: samples
// and tokens per step as metrics, the FLOPs of one step, the device and the
// data type as params) the rates every view shows: samples/s, tokens/s,
// achieved FLOP/s and MFU against the device's peak (a GPU's from the table
// of trainscope/hardware/gpu/peak_flops.hpp, the CPU's measured GEMM peak, or
// LedgerOptions::peak_flops). Derived here once; a figure that cannot be
// derived is NaN and `notes` says why.
#ifndef TRAINSCOPE_STEPS_LEDGER_HPP_
#define TRAINSCOPE_STEPS_LEDGER_HPP_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {

// A figure of the ledger that cannot be derived.
inline constexpr double kNoRate = std::numeric_limits<double>::quiet_NaN();

struct LedgerOptions {
  // The peak FLOP/s of one device (`--peak-flops`): wins over the table and the probe.
  std::optional<double> peak_flops;
  // Derived figures from the energy, never defaults: cost (per kWh of the
  // measured energy, per hour of the steps' time) and CO2 (grams per kWh).
  std::optional<double> price_per_kwh;
  std::optional<double> price_per_hour;
  std::optional<double> grams_co2_per_kwh;
};

// A meter's cumulative energy readings: (Unix ms, joules).
using EnergySeries = std::vector<std::pair<std::int64_t, double>>;
// The meters: a host's CPU packages and DRAM (RAPL, kRaplEnergyMetric), or one
// GPU (NVML's total energy counter, kGpuEnergyQuantity).
enum class EnergySource : std::uint8_t { kCpuRapl, kGpuNvml };
struct EnergyReadings {
  EnergySource source = EnergySource::kCpuRapl;
  EnergySeries points;
};

// One rank over its steps with work (a metric of kStepSamplesMetric or
// kStepTokensMetric at the step's index), less the step whose FLOPs were counted.
struct RankLedger {
  std::uint32_t rank = 0;
  std::uint64_t steps = 0;
  double seconds = 0;  // their summed periods
  double samples = 0;
  double tokens = kNoRate;  // NaN: no step gave tokens
  double samples_per_s = kNoRate;
  double tokens_per_s = kNoRate;
  double achieved_flops = kNoRate;  // FLOP/s: FLOPs per step x steps / seconds
  double mfu = kNoRate;             // achieved over the peak, 0..1 (more: a wrong peak)
};

struct Ledger {
  std::vector<RankLedger> ranks;  // ranks with work, in rank order
  // The job: rates summed over ranks (each rank its own batches); MFU the
  // ranks' mean.
  std::uint64_t steps = 0;
  double samples_per_s = kNoRate;
  double tokens_per_s = kNoRate;
  double flops_per_step = kNoRate;  // per rank
  std::string flops_source;         // "FlopCounterMode", "user"
  double achieved_flops = kNoRate;  // FLOP/s, all ranks
  double peak_flops = kNoRate;      // one device's
  std::string peak_source;          // "--peak-flops", the table's row, the probe
  std::string device;               // kStepDeviceParam
  std::string dtype;                // kStepDtypeParam
  double mfu = kNoRate;
  // Energy over the steps' time (from the first step with work to the end of
  // the last, all ranks): the CPU's (RAPL) of every host that recorded it and
  // NVML's of every GPU the job used (a device a rank's process tree held
  // memory on; every sampled GPU of a host where none was seen).
  double seconds = kNoRate;                 // that time
  double energy_j = kNoRate;                // the CPU's and the GPUs' together
  double cpu_energy_j = kNoRate;            // RAPL, every host that recorded it
  double gpu_energy_j = kNoRate;            // NVML, every GPU the job used
  std::uint32_t gpus = 0;                   // GPUs whose energy is in gpu_energy_j
  double energy_per_step_j = kNoRate;       // over the most steps a rank took
  double energy_per_1k_tokens_j = kNoRate;  // over every rank's tokens
  double cost = kNoRate;                    // price_per_kwh x kWh + price_per_hour x hours
  double co2_g = kNoRate;
  // Why a figure is missing ("no work recorded: ...", "FLOPs not counted: ...").
  std::vector<std::string> notes;
};

// The work of one step index (its kStepSamplesMetric and kStepTokensMetric
// rows, summed when logged twice), and of each index of one rank.
struct WorkFigures {
  double samples = 0;
  double tokens = 0;
  bool has_tokens = false;
};
using WorkByStep = std::map<std::int64_t, WorkFigures>;
WorkByStep work_by_step(const std::vector<MetricPoint>& metrics);

// The pure step: the ledger of `ranks` (their steps: history, merged or not)
// given each rank's work (by rank), the run's params and tags (info) and each
// host's energy readings. Every reader of the ledger ends here (read_ledger,
// the live diagnosis::Follower).
Ledger conclude_ledger(const RunInfo& info, const std::vector<const RankSteps*>& ranks,
                       const std::map<std::uint32_t, WorkByStep>& work,
                       const LedgerOptions& options = {},
                       const std::vector<EnergyReadings>& energy = {});
// The same on hand-made steps and each rank's work metrics (any metrics:
// those of the work's names are used), by the position of steps.ranks.
Ledger conclude_ledger(const RunSteps& steps, const std::vector<std::vector<MetricPoint>>& metrics,
                       const LedgerOptions& options = {},
                       const std::vector<EnergyReadings>& energy = {});

// Each host's energy readings: its RAPL series (HostLoad::rapl_energy_j) and
// one per GPU of the job (HostLoad::gpu_energy_j of the devices in job_gpus,
// or all of them when job_gpus is empty).
std::vector<EnergyReadings> energy_series(const std::vector<HostLoad>& hosts);

// Reads the work of a run's ranks (their metric rows of the work's names)
// from where it stopped: read_ledger reads once, a live reader (the
// diagnosis's Follower: `trainscope top`, the Prometheus endpoint) at every
// poll what the ranks appended. Another run at the path is read from its start.
class WorkReader {
 public:
  // Reads what each rank's metrics file gained since the last poll (a cut
  // last line is left for the next); an error names the file.
  absl::Status poll(const RunReader& reader);
  // Forgets what was read (the steps' reader read the run again from its start).
  void restart();
  // Keeps memory flat while a live run goes on: the work of a merged step of
  // a rank's history summed at its first index, the work of steps that were
  // not read (a sampled read skipped them) dropped. The ledger of `ranks` is
  // the same before and after.
  void compact(const std::vector<const RankSteps*>& ranks);
  const std::map<std::uint32_t, WorkByStep>& work() const noexcept { return work_; }

 private:
  std::string run_id_;
  std::int64_t start_time_ms_ = 0;
  std::map<std::uint32_t, std::uint64_t> offsets_;
  std::map<std::uint32_t, WorkByStep> work_;
};

// Reads the run (read_steps, each rank's work) and concludes its ledger.
absl::StatusOr<Ledger> read_ledger(const RunReader& reader, const LedgerOptions& options = {});

// The ledger's figures as the run filter's columns (RunFilterRowOptions::
// ledger_columns, trainscope/run/run_filter.hpp): ledger.tokens_per_s,
// ledger.samples_per_s and ledger.mfu of read_ledger, each where it is a number.
absl::Status add_ledger_columns(const RunReader& run, std::map<std::string, std::string>* row);

// What one step's MFU needs of a run (compare's per-step `mfu` row, the same
// meaning as the ledger's): the FLOPs of one step, the peak of one device
// (LedgerOptions::peak_flops, the GPU table, the measured CPU peak) and the
// step whose FLOPs were counted (slowed by the counting: left out).
struct MfuBasis {
  double flops_per_step = kNoRate;
  double peak_flops = kNoRate;
  std::optional<std::int64_t> counted_step;
  // FLOPs per step x steps / period / peak; NaN for the counted step, a step
  // without a period, or a run without FLOPs or peak.
  double step_mfu(const Step& step) const;
};
MfuBasis mfu_basis(const RunInfo& info, const LedgerOptions& options = {});

// The ledger as run metrics (`trainscope run` logs them into the run while it
// goes and once at its end, so MLflow and W&B show them live: docs/ledger.md),
// named here once.
// Their common prefix: trainscope's readers skip them (the report charts the
// ledger it derives, not the launcher's copy for the exporters).
inline constexpr std::string_view kLedgerMetricPrefix = "ledger/";
inline constexpr std::string_view kLedgerTokensPerSMetric = "ledger/tokens_per_s";
inline constexpr std::string_view kLedgerSamplesPerSMetric = "ledger/samples_per_s";
inline constexpr std::string_view kLedgerFlopsPerSMetric = "ledger/flops_per_s";
inline constexpr std::string_view kLedgerMfuMetric = "ledger/mfu";
inline constexpr std::string_view kLedgerEnergyPer1kTokensMetric = "ledger/energy_j_per_1k_tokens";
inline constexpr std::string_view kLedgerEnergyPerStepMetric = "ledger/energy_j_per_step";
// The job's figures of `ledger` under those names, those that are numbers, in
// that order (achieved FLOP/s: all ranks; MFU: 0..1).
std::vector<std::pair<std::string_view, double>> ledger_metrics(const Ledger& ledger);

// One line: "ledger: 12,345 tokens/s, 256 samples/s, 1.2 TFLOP/s achieved, MFU 41.3% of
// 2.9 TFLOP/s (cpu GEMM probe)"; with what is missing and why (`notes`:
// false for a live view's line, `trainscope top`).
std::string format_ledger_line(const Ledger& ledger, bool notes = true);

}  // namespace trainscope::steps

#endif  // TRAINSCOPE_STEPS_LEDGER_HPP_
