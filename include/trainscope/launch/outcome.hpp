// How a launch ended, in words: what `trainscope run` prints last.
#ifndef TRAINSCOPE_LAUNCH_OUTCOME_HPP_
#define TRAINSCOPE_LAUNCH_OUTCOME_HPP_

#include <string>

#include "trainscope/launch/launch.hpp"

namespace trainscope {

// "exit code 0, run DIR FINISHED", or "killed by signal 9 (Killed), run DIR
// KILLED"; preceded by the line of why the command could not be started
// (LaunchResult::spawn_error). Every line is prefixed with `prefix`
// ("trainscope run: ") and ends with a newline.
std::string launch_outcome(const LaunchResult& result, const std::string& prefix);

}  // namespace trainscope

#endif  // TRAINSCOPE_LAUNCH_OUTCOME_HPP_
