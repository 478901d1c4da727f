#include "trainscope/run/run_status.hpp"

#include <string_view>

#include "fmt/format.h"

namespace trainscope {

std::string_view process_status_name(ProcessStatus status) noexcept {
  return status.crashed ? "CRASHED" : run_status_name(status.recorded);
}

absl::StatusOr<ProcessStatus> parse_process_status(std::string_view name) {
  if (name == "CRASHED") return ProcessStatus{RunStatus::kRunning, true};
  absl::StatusOr<RunStatus> recorded = parse_run_status(name);
  if (!recorded.ok()) {
    return absl::InvalidArgumentError(fmt::format(
        "unknown status \"{}\" (expected RUNNING, FINISHED, FAILED, KILLED or CRASHED)", name));
  }
  return ProcessStatus{*recorded, false};
}

RunStatus run_status_of(ProcessStatus status) noexcept {
  return status.crashed ? RunStatus::kFailed : status.recorded;
}

int status_severity(RunStatus status) noexcept {
  switch (status) {
    case RunStatus::kFinished:
      return 0;
    case RunStatus::kRunning:
      return 1;
    case RunStatus::kKilled:
      return 2;
    case RunStatus::kFailed:
      return 3;
  }
  return 3;
}

RunStatus worse_status(RunStatus a, RunStatus b) noexcept {
  return status_severity(b) > status_severity(a) ? b : a;
}

}  // namespace trainscope
