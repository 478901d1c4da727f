// The names of labels and their kinds: what the documents and the text say.
#include <array>
#include <cstddef>
#include <string_view>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis {
namespace {

constexpr std::array<std::string_view, 13> kLabelNames = {
    "BALANCED",     "INPUT-BOUND",      "COMPUTE-BOUND", "WAIT-HEAVY",    "STRAGGLER",
    "MEMORY-CREEP", "THROUGHPUT-DRIFT", "GPU-IDLE",      "HOST-PRESSURE", "HANG",
    "NO-DATA",      "COMM-BOUND",       "LAUNCH-BOUND"};
constexpr std::array<std::string_view, 12> kKindNames = {
    "",     "input", "compute", "host",     "device",    "cpu",
    "swap", "h2d",   "forward", "backward", "optimizer", "rest"};

}  // namespace

std::string_view label_name(LabelName name) noexcept {
  const auto i = static_cast<std::size_t>(name);
  return i < kLabelNames.size() ? kLabelNames[i] : std::string_view("?");
}

absl::StatusOr<LabelName> parse_label_name(std::string_view name) {
  for (std::size_t i = 0; i < kLabelNames.size(); ++i) {
    if (kLabelNames[i] == name) return static_cast<LabelName>(i);
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown label \"{}\" (one of {})", name,
                  fmt::join(kLabelNames.begin(), kLabelNames.end(), ", ")));
}

std::string_view label_kind_name(LabelKind kind) noexcept {
  const auto i = static_cast<std::size_t>(kind);
  return i < kKindNames.size() ? kKindNames[i] : std::string_view("?");
}

absl::StatusOr<LabelKind> parse_label_kind(std::string_view name) {
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<LabelKind>(i);
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown label kind \"{}\" (one of input, compute, host, device, cpu, swap, h2d, forward, "
      "backward, optimizer, rest, or empty)",
      name));
}

LabelKind label_kind_of(Phase phase) noexcept {
  switch (phase) {
    case Phase::kHostToDevice:
      return LabelKind::kHostToDevice;
    case Phase::kForward:
      return LabelKind::kForward;
    case Phase::kBackward:
      return LabelKind::kBackward;
    case Phase::kOptimizer:
      return LabelKind::kOptimizer;
    case Phase::kRest:
      return LabelKind::kRest;
    case Phase::kDataWait:
    case Phase::kComm:
    case Phase::kCommExposed:
    case Phase::kSync:
      break;
  }
  return LabelKind::kNone;
}

}  // namespace trainscope::diagnosis
