// The statuses of a run's processes as a reader sees them, and the one order
// of severity in which the run's status combines them (RunReader::info(),
// the end-of-run summary, the diagnosis, the report).
#ifndef TRAINSCOPE_RUN_RUN_STATUS_HPP_
#define TRAINSCOPE_RUN_RUN_STATUS_HPP_

#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"

namespace trainscope {

// A rank's or launcher's status as read: the one it recorded, and whether it
// crashed (RUNNING in its file while its process is gone or silent too long).
struct ProcessStatus {
  RunStatus recorded = RunStatus::kRunning;
  bool crashed = false;

  // RUNNING and not crashed: the process goes on.
  bool running() const noexcept { return recorded == RunStatus::kRunning && !crashed; }
  friend bool operator==(ProcessStatus a, ProcessStatus b) {
    return a.recorded == b.recorded && a.crashed == b.crashed;
  }
  friend bool operator!=(ProcessStatus a, ProcessStatus b) { return !(a == b); }
};

// "RUNNING", "FINISHED", "FAILED", "KILLED", and "CRASHED" for a crashed process.
std::string_view process_status_name(ProcessStatus status) noexcept;
// Its inverse ("CRASHED": crashed while RUNNING); InvalidArgument naming the text.
absl::StatusOr<ProcessStatus> parse_process_status(std::string_view name);

// What a process's status makes of the run's: a crash counts as FAILED.
RunStatus run_status_of(ProcessStatus status) noexcept;
// The one order: FAILED (a crash too) above KILLED above RUNNING above
// FINISHED (3, 2, 1, 0). The run's status is the worst of its processes'.
int status_severity(RunStatus status) noexcept;
inline int status_severity(ProcessStatus status) noexcept {
  return status_severity(run_status_of(status));
}
// The worse of the two in that order.
RunStatus worse_status(RunStatus a, RunStatus b) noexcept;

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_STATUS_HPP_
