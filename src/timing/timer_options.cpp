#include "trainscope/timing/timer_options.hpp"

#include "fmt/format.h"
#include "trainscope/stats/detail/quantile_sketch.hpp"

namespace trainscope {

absl::Status validate_options(const TimerOptions& options) {
  if (!stats::detail::QuantileSketch::valid_relative_accuracy(options.sketch_relative_error)) {
    return absl::InvalidArgumentError(fmt::format(
        "TimerOptions.sketch_relative_error = {}: must lie in (0, 1) and be at least about 2e-8 "
        "(the quantile sketch's relative error, e.g. 0.01 for 1%)",
        options.sketch_relative_error));
  }
  return absl::OkStatus();
}

absl::Status validate_options(const CPUGPUTimerOptions& options) {
  // harvest_per_end, stream and require_gpu take any value.
  return validate_options(static_cast<const TimerOptions&>(options));
}

}  // namespace trainscope
