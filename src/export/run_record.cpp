#include "trainscope/export/run_record.hpp"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>

#include "fmt/format.h"

namespace trainscope {
namespace {

constexpr std::string_view kStatusNames[] = {"RUNNING", "FINISHED", "FAILED", "KILLED"};

// The variables one launcher sets, in RankInfo's field order.
struct LauncherVariables {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};
constexpr LauncherVariables kLaunchers[] = {
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},                                            // torchrun
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},                               // Slurm
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},  // Open MPI
};

// Unset is not an error (the caller picks a default); anything but plain
// decimal digits that fit is one, naming the variable.
absl::Status read_uint32(const char* variable, std::uint32_t* out, bool* present) {
  const char* text = std::getenv(variable);
  *present = text != nullptr;
  if (text == nullptr) return absl::OkStatus();
  const std::string_view value(text);
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), *out);
  if (value.empty() || value[0] == '-' || error != std::errc() ||
      end != value.data() + value.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "environment variable {}=\"{}\" is not a non-negative 32-bit integer", variable, value));
  }
  return absl::OkStatus();
}

absl::StatusOr<RankInfo> read_launcher(const LauncherVariables& vars) {
  RankInfo info;
  bool has_local = false;
  bool has_size = false;
  bool has_rank = false;
  for (auto [variable, field, present] :
       {std::make_tuple(vars.rank, &info.rank, &has_rank),
        std::make_tuple(vars.local_rank, &info.local_rank, &has_local),
        std::make_tuple(vars.world_size, &info.world_size, &has_size)}) {
    absl::Status status = read_uint32(variable, field, present);
    if (!status.ok()) return status;
  }
  // A launcher that sets only the rank still implies at least rank + 1 processes.
  if (!has_size) info.world_size = info.rank + 1;
  if (info.rank >= info.world_size) {
    return absl::InvalidArgumentError(fmt::format("environment variable {}={} is not below {}={}",
                                                  vars.rank, info.rank, vars.world_size,
                                                  info.world_size));
  }
  return info;
}

}  // namespace

std::string_view run_status_name(RunStatus status) noexcept {
  return kStatusNames[static_cast<int>(status)];
}

absl::StatusOr<RunStatus> parse_run_status(std::string_view name) {
  for (int i = 0; i < 4; ++i) {
    if (kStatusNames[i] == name) return static_cast<RunStatus>(i);
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown run status \"{}\" (expected RUNNING, FINISHED, FAILED or KILLED)", name));
}

absl::StatusOr<RankInfo> rank_from_environment() {
  for (const LauncherVariables& vars : kLaunchers) {
    if (std::getenv(vars.rank) != nullptr) return read_launcher(vars);
  }
  return RankInfo{};
}

}  // namespace trainscope
