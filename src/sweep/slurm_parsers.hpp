// What the Slurm sweep reads from Slurm's commands and writes for them
// (internal to sweep): the parsers behind slurm_commands() and the array
// spec and run id of a task. Tested on text Slurm printed and fuzzed
// (tests/fuzz/slurm_fuzz.cpp).
#ifndef TRAINSCOPE_SRC_SWEEP_SLURM_PARSERS_HPP_
#define TRAINSCOPE_SRC_SWEEP_SLURM_PARSERS_HPP_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/sweep/slurm.hpp"

namespace trainscope::sweep::detail {

// squeue's `%F|%K|%T` lines (array job id, index, state): the state of each
// task of `job_id` by index; lines of other jobs and unexpanded index ranges
// ("[5-9%2]") are skipped.
std::map<int, std::string> parse_squeue_tasks(std::string_view text, std::string_view job_id);
// `scontrol show job` text: JobState, ExitCode ("<status>:<signal>", a
// signal N as 128 + N) and Restarts; nullopt without a JobState.
std::optional<SlurmTaskEnd> parse_scontrol_job(std::string_view text);
// "0-3,7,9-10" (sorted, unique indices), "%K" appended when parallel > 0.
std::string slurm_array_spec(std::vector<int> indices, int parallel);
// The run id of an array task (32 hex digits): the same in the task and in
// the process that follows it.
std::string slurm_task_run_id(std::string_view array_job_id, int index, int restarts);

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_SLURM_PARSERS_HPP_
