// Keys by meaning (phases, the key map) and the named thresholds.
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

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

constexpr std::string_view kPhaseNames[kPhaseCount] = {"data_wait", "h2d",  "forward", "backward",
                                                       "optimizer", "comm", "rest"};

}  // namespace

std::string_view phase_name(Phase phase) noexcept {
  const auto index = static_cast<std::size_t>(phase);
  return index < kPhaseCount ? kPhaseNames[index] : std::string_view("?");
}

absl::StatusOr<Phase> parse_phase(std::string_view name) {
  const std::string name_lower = lower(name);
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    if (name_lower == kPhaseNames[i]) return static_cast<Phase>(i);
  }
  if (name_lower == "io" || name_lower == "input" || name_lower == "data" ||
      name_lower == "data-wait") {
    return Phase::kDataWait;
  }
  if (name_lower == "host_to_device" || name_lower == "host-to-device") return Phase::kHostToDevice;
  if (name_lower == "optim" || name_lower == "opt") return Phase::kOptimizer;
  return absl::InvalidArgumentError(fmt::format(
      "unknown phase '{}' (one of data_wait, h2d, forward, backward, optimizer, comm; or step)",
      name));
}

bool is_compute(Phase phase) noexcept {
  return phase == Phase::kHostToDevice || phase == Phase::kForward || phase == Phase::kBackward ||
         phase == Phase::kOptimizer;
}

KeyMap default_key_map() {
  KeyMap map;
  map.step_keys = {"BATCH", "iteration"};
  auto at = [&map](Phase p) -> std::vector<std::string>& {
    return map.phase_keys[static_cast<std::size_t>(p)];
  };
  at(Phase::kDataWait) = {"IO"};
  at(Phase::kHostToDevice) = {kHostToDeviceKey, "h2d"};  // "h2d": the timed loader's copy_to
  at(Phase::kForward) = {"FORWARD", kLossKey};
  at(Phase::kBackward) = {"BACKWARD"};
  at(Phase::kOptimizer) = {kOptimizerKey};
  at(Phase::kComm) = {"COMM"};
  return map;
}

absl::Status KeyMap::map(std::string_view spec) {
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return absl::InvalidArgumentError(
        fmt::format("phase mapping '{}': expected PHASE=KEY, e.g. optimizer=opt_step", spec));
  }
  const std::string_view name = spec.substr(0, eq);
  const std::string key(spec.substr(eq + 1));
  auto forget = [this, &key]() {
    auto drop = [&key](std::vector<std::string>* keys) {
      keys->erase(std::remove(keys->begin(), keys->end(), key), keys->end());
    };
    for (auto& keys : phase_keys) drop(&keys);
    drop(&step_keys);
  };
  if (lower(name) == "step") {
    forget();
    step_keys.insert(step_keys.begin(), key);
    return absl::OkStatus();
  }
  absl::StatusOr<Phase> phase = parse_phase(name);
  if (!phase.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("phase mapping '{}': {}", spec, std::string(phase.status().message())));
  }
  if (*phase == Phase::kRest) {
    return absl::InvalidArgumentError(fmt::format(
        "phase mapping '{}': rest is what a step holds beyond its phases, not a key", spec));
  }
  forget();
  phase_keys[static_cast<std::size_t>(*phase)].push_back(key);
  return absl::OkStatus();
}

std::optional<Phase> KeyMap::phase_of(std::string_view key) const {
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    for (const std::string& k : phase_keys[i]) {
      if (k == key) return static_cast<Phase>(i);
    }
  }
  return std::nullopt;
}

bool KeyMap::is_step(std::string_view key) const {
  for (const std::string& k : step_keys) {
    if (k == key) return true;
  }
  return false;
}

const std::vector<ThresholdInfo>& threshold_table() {
  static const std::vector<ThresholdInfo> table = {
      {"input_bound_share", &Thresholds::input_bound_share,
       "INPUT-BOUND when the data-wait share of the step is above this (whole 95% interval)"},
      {"compute_bound_share", &Thresholds::compute_bound_share,
       "COMPUTE-BOUND when the compute share (h2d, forward, backward, optimizer; or the untimed "
       "rest) is above this"},
      {"wait_heavy_share", &Thresholds::wait_heavy_share,
       "WAIT-HEAVY when communication plus the unattributed rest is above this"},
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
      {"host_pressure_cpu_util_pct", &Thresholds::host_pressure_cpu_util_pct,
       "HOST-PRESSURE when the host's CPU is busier than this (% of all cores) ..."},
      {"host_pressure_other_cpu_share", &Thresholds::host_pressure_other_cpu_share,
       "... with other processes taking more than this share of all cores"},
      {"host_pressure_swap_growth_mb", &Thresholds::host_pressure_swap_growth_mb,
       "HOST-PRESSURE when swap in use grows by more than this many MB"},
      {"min_steps", &Thresholds::min_steps, "NO-DATA with fewer steps than this per rank"},
      {"warmup_steps", &Thresholds::warmup_steps,
       "steps dropped at the start of a run before any statistic"},
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
