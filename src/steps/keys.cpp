// Keys by meaning: the phases of a step and the key map.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "trainscope/steps/steps.hpp"

namespace trainscope::steps {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr std::string_view kPhaseNames[kPhaseCount] = {
    "data_wait", "h2d", "forward", "backward", "optimizer", "comm", "comm_exposed", "sync", "rest"};

}  // namespace

std::uint32_t sampled_every(std::string_view key, std::string_view tag_value) noexcept {
  constexpr std::string_view kPrefix = "layer/", kSuffix = "/backward";
  if (tag_value.empty() || key.size() <= kPrefix.size() + kSuffix.size() ||
      key.substr(0, kPrefix.size()) != kPrefix ||
      key.substr(key.size() - kSuffix.size()) != kSuffix) {
    return 1;
  }
  std::uint32_t every = 0;
  for (char c : tag_value) {
    if (c < '0' || c > '9' || every > 100000000) return 1;  // not a count: as every step
    every = every * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return every > 0 ? every : 1;
}

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
  return absl::InvalidArgumentError(
      fmt::format("unknown phase '{}' (one of data_wait, h2d, forward, backward, optimizer, comm, "
                  "comm_exposed, sync; or step)",
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
  at(Phase::kComm) = {kCommKey};
  at(Phase::kCommExposed) = {kCommExposedKey};
  at(Phase::kSync) = {kSyncKey};
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
  if (is_collective_key(key)) return Phase::kComm;
  return std::nullopt;
}

bool is_collective_key(std::string_view key) noexcept {
  constexpr std::string_view prefix(kCollectivePrefix);
  return key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix;
}

bool KeyMap::is_step(std::string_view key) const {
  for (const std::string& k : step_keys) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace trainscope::steps
