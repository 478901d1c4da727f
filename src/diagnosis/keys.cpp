// The named thresholds (the keys by meaning are the steps room's: src/steps/keys.cpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::vector<ThresholdInfo>& threshold_table() {
  static const std::vector<ThresholdInfo> table = {
      {"input_bound_share", &Thresholds::input_bound_share,
       "INPUT-BOUND when the data-wait share of the step is above this (whole 95% interval)"},
      {"compute_bound_share", &Thresholds::compute_bound_share,
       "COMPUTE-BOUND when the compute share (h2d, forward, backward, optimizer; or the untimed "
       "rest) is above this"},
      {"wait_heavy_share", &Thresholds::wait_heavy_share,
       "WAIT-HEAVY when the communication waited for, host syncs and the unattributed rest are "
       "above this"},
      {"comm_bound_share", &Thresholds::comm_bound_share,
       "COMM-BOUND when the communication the step waits for (comm_exposed) is above this"},
      {"mfu_low", &Thresholds::mfu_low,
       "COMPUTE-BOUND notes a low MFU when the ledger's is below this share of the peak"},
      {"straggler_lag_share", &Thresholds::straggler_lag_share,
       "STRAGGLER when a rank lags the others by more than this share of the step"},
      {"straggler_min_lag_s", &Thresholds::straggler_min_lag_s,
       "... and by more than this many seconds per step"},
      {"memory_creep_mb_per_1k_steps", &Thresholds::memory_creep_mb_per_1k_steps,
       "MEMORY-CREEP when memory grows faster than this (MB per 1,000 steps)"},
      {"memory_creep_min_share_per_1k_steps", &Thresholds::memory_creep_min_share_per_1k_steps,
       "... and faster than this share of its level per 1,000 steps"},
      {"memory_creep_min_growth_mb", &Thresholds::memory_creep_min_growth_mb,
       "... and grown by at least this many MB over the readings (low slope x their span)"},
      {"throughput_drift_share", &Thresholds::throughput_drift_share,
       "THROUGHPUT-DRIFT when the step time grows by at least this share over the scope"},
      {"drift_p_value", &Thresholds::drift_p_value,
       "... and the Mann-Kendall trend test's one-sided p-value is below this"},
      {"gpu_idle_busy_share", &Thresholds::gpu_idle_busy_share,
       "GPU-IDLE when GPU-timed work covers less than this share of the step"},
      {"launch_bound_cpu_gpu_ratio", &Thresholds::launch_bound_cpu_gpu_ratio,
       "LAUNCH-BOUND when the GPU-timed phases' CPU time is at least this share of their GPU time"},
      {"launch_bound_busy_share", &Thresholds::launch_bound_busy_share,
       "... and the GPU busy share (NVML) is below this"},
      {"host_pressure_cpu_util_pct", &Thresholds::host_pressure_cpu_util_pct,
       "HOST-PRESSURE when the host's CPU is busier than this (% of all cores) ..."},
      {"host_pressure_other_cpu_share", &Thresholds::host_pressure_other_cpu_share,
       "... with other processes taking more than this share of all cores"},
      {"host_pressure_swap_growth_mb", &Thresholds::host_pressure_swap_growth_mb,
       "HOST-PRESSURE when swap in use grows by more than this many MB"},
      {"host_pressure_contention_share", &Thresholds::host_pressure_contention_share,
       "HOST-PRESSURE when the job's threads waited for a CPU more than this share of the time"},
      {"min_steps", &Thresholds::min_steps, "NO-DATA with fewer steps than this per rank"},
      {"warmup_steps", &Thresholds::warmup_steps,
       "steps dropped at the start of a run before any statistic"},
      {"hang_factor", &Thresholds::hang_factor,
       "HANG when a running rank's step has not ended for this many times its p99 step ..."},
      {"hang_min_s", &Thresholds::hang_min_s, "... and for at least this many seconds"},
  };
  return table;
}

absl::Status Thresholds::set(std::string_view name, double value) {
  for (const ThresholdInfo& info : threshold_table()) {
    if (info.name != name) continue;
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(
          fmt::format("threshold {}={}: must be a finite number >= 0", name, value));
    }
    this->*(info.field) = value;
    return absl::OkStatus();
  }
  std::string names;
  for (const ThresholdInfo& info : threshold_table()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", info.name);
  }
  return absl::InvalidArgumentError(fmt::format("unknown threshold '{}' (known: {})", name, names));
}

absl::Status Thresholds::set(std::string_view spec) {
  const std::size_t eq = spec.find('=');
  double value = 0;
  bool parsed = false;
  if (eq != std::string_view::npos) {
    const std::string number(strip(spec.substr(eq + 1)));
    char* end = nullptr;
    value = number.empty() ? 0 : std::strtod(number.c_str(), &end);
    parsed = !number.empty() && end == number.c_str() + number.size();
  }
  if (!parsed) {
    return absl::InvalidArgumentError(
        fmt::format("threshold '{}': expected NAME=NUMBER, e.g. input_bound_share=0.3", spec));
  }
  return set(strip(spec.substr(0, eq)), value);
}

}  // namespace trainscope::diagnosis
