// The work of a step (docs/ledger.md): samples and tokens per step, recorded as
// the run's metrics (so MLflow and W&B get them live), and the FLOPs of one step,
// recorded once as the run's params. `trainscope run --auto` records them from
// the batches that enter the model (trainscope._work), the Hugging Face and
// Lightning callbacks from their Trainer; a user with log_step_work (Python:
// trainscope.log_step_work). The names are the writer's constants: every reader
// (the ledger) uses these.
#ifndef TRAINSCOPE_RUN_STEP_WORK_HPP_
#define TRAINSCOPE_RUN_STEP_WORK_HPP_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace trainscope {

class Run;

// Samples (the leading dimension of the model's first tensor input) per step.
inline constexpr std::string_view kStepSamplesMetric = "work/samples";
// Tokens per step: batch x sequence of integer-token inputs, padding excluded
// when an attention mask is given.
inline constexpr std::string_view kStepTokensMetric = "work/tokens";
// Floating-point operations of one training step (forward and backward), as a
// number ("1.25e+12"), and where the count comes from (kFlopsFrom*).
inline constexpr std::string_view kStepFlopsParam = "work/flops_per_step";
inline constexpr std::string_view kStepFlopsSourceParam = "work/flops_source";
inline constexpr std::string_view kFlopsFromCounter = "FlopCounterMode";
inline constexpr std::string_view kFlopsFromUser = "user";
// The step (index) whose FLOPs were counted: slowed by the counting, the
// ledger leaves it out of the rates.
inline constexpr std::string_view kStepFlopsStepParam = "work/flops_step";
// The device the steps ran on ("NVIDIA H100 80GB HBM3", "cpu") and the data
// type of their matrix products ("fp32", "tf32", "bf16", "fp16", "fp8"): the
// ledger's peak for a GPU (trainscope/hardware/gpu/peak_flops.hpp).
inline constexpr std::string_view kStepDeviceParam = "work/device";
inline constexpr std::string_view kStepDtypeParam = "work/dtype";
// A measured peak FLOP/s of the device (the CPU's GEMM probe) and what it is.
inline constexpr std::string_view kPeakFlopsParam = "work/peak_flops";
inline constexpr std::string_view kPeakSourceParam = "work/peak_source";
// Why the FLOPs were not counted (a tag).
inline constexpr std::string_view kFlopsNoteTag = "trainscope.work.flops";
// Where the samples and tokens per step come from (a tag: "samples: the Lightning
// batch; tokens: Trainer.num_input_tokens_seen (all)", docs/ledger.md).
inline constexpr std::string_view kWorkSourceTag = "trainscope.work.source";

struct StepWork {
  std::optional<double> samples;
  std::optional<double> tokens;
};

// Logs the step's samples and tokens (those given) as the metrics above at
// `step` (none: the metric's previous step + 1). Nothing given, a negative or
// non-finite figure: InvalidArgument naming it, nothing recorded.
absl::Status log_step_work(Run& run, const StepWork& work, std::optional<std::int64_t> step = {});

// Records the FLOPs of one training step (params: written once; a second,
// different count is the params' error). `source` is kFlopsFromCounter or
// kFlopsFromUser. Not positive or not finite: InvalidArgument.
absl::Status log_step_flops(Run& run, double flops, std::string_view source = kFlopsFromUser);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_STEP_WORK_HPP_
