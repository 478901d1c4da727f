// How a launch ended, in words (trainscope/launch/outcome.hpp).
#include "trainscope/launch/outcome.hpp"

#include <string.h>  // strsignal (POSIX)

#include "fmt/format.h"
#include "trainscope/run/run_status.hpp"

namespace trainscope {

std::string launch_outcome(const LaunchResult& result, const std::string& prefix) {
  std::string out;
  if (!result.spawn_error.ok()) {
    out += fmt::format("{}{}\n", prefix, std::string(result.spawn_error.message()));
  }
  const std::string how = result.term_signal != 0
                              ? fmt::format("killed by signal {} ({})", result.term_signal,
                                            ::strsignal(result.term_signal))
                              : fmt::format("exit code {}", result.exit_code);
  out +=
      fmt::format("{}{}, run {} {}\n", prefix, how, result.run_dir, run_status_name(result.status));
  return out;
}

}  // namespace trainscope
