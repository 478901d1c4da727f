// The work of a step as the run's metrics and params (trainscope/run/step_work.hpp).
#include "trainscope/run/step_work.hpp"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "trainscope/run/run.hpp"

namespace trainscope {
namespace {

absl::Status check_figure(std::string_view what, double value) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "log_step_work: %s = %g is not a count (a finite number >= 0)", std::string(what), value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status log_step_work(Run& run, const StepWork& work, std::optional<std::int64_t> step) {
  if (!work.samples && !work.tokens) {
    return absl::InvalidArgumentError("log_step_work: neither samples nor tokens given");
  }
  if (work.samples) {
    if (absl::Status status = check_figure("samples", *work.samples); !status.ok()) return status;
  }
  if (work.tokens) {
    if (absl::Status status = check_figure("tokens", *work.tokens); !status.ok()) return status;
  }
  if (work.samples) {
    if (absl::Status status = run.log_metric(kStepSamplesMetric, *work.samples, step);
        !status.ok()) {
      return status;
    }
  }
  if (work.tokens) return run.log_metric(kStepTokensMetric, *work.tokens, step);
  return absl::OkStatus();
}

absl::Status log_step_flops(Run& run, double flops, std::string_view source) {
  if (!std::isfinite(flops) || flops <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("log_step_flops: %g is not a FLOP count (finite, > 0)", flops));
  }
  if (absl::Status status = run.log_param(kStepFlopsParam, absl::StrFormat("%.6g", flops));
      !status.ok()) {
    return status;
  }
  return run.log_param(kStepFlopsSourceParam, source);
}

}  // namespace trainscope
