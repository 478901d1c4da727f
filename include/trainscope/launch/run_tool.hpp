// Runs a helper tool (git, pip, nvidia-smi, sbatch, ...) to its end and
// captures what it printed: the one way trainscope runs a short-lived
// command and reads its output (launch records the environment with it; the
// sweep drives Slurm, nvidia-smi and MPS with it). Public on purpose, for
// the rooms above launch.
#ifndef TRAINSCOPE_LAUNCH_RUN_TOOL_HPP_
#define TRAINSCOPE_LAUNCH_RUN_TOOL_HPP_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainscope {

struct ToolOutput {
  int exit_code = 0;  // 128 + N when it died of signal N
  std::string out;
  std::string err;
};

// argv[0] is looked up on PATH, with this process's environment; no stdin.
// With own_group, the tool runs in a process group of its own, so a Ctrl-C
// at the terminal (meant for this process) does not cut it off.
// Errors: NotFound when the tool cannot be started (not installed),
// DeadlineExceeded when it ran past `timeout` (then it is killed). A tool
// that exits non-zero is not an error here: see exit_code.
absl::StatusOr<ToolOutput> run_tool(std::vector<std::string> argv, absl::Duration timeout,
                                    bool own_group = false);

}  // namespace trainscope

#endif  // TRAINSCOPE_LAUNCH_RUN_TOOL_HPP_
