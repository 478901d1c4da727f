// Asking a run's live ranks for their evidence (`trainscope dump RUN`, and
// `trainscope run --on-hang dump|kill`): each rank process of this host that
// catches the dump signal gets it, and writes into the run directory its
// threads' stacks (dump-<rank>.txt, Python's faulthandler) and
// dump-<rank>.json (threads with names, open regions, recent collectives:
// bindings/python/trainscope/_hang.py; a C++ rank appends the regions its
// timers have open to dump-<rank>.txt: src/run/dump_handler.hpp). Ranks are only signalled when
// /proc/<pid>/status says they catch it (its default action ends a process).
#ifndef TRAINSCOPE_LAUNCH_DUMP_HPP_
#define TRAINSCOPE_LAUNCH_DUMP_HPP_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/run/dump_signal.hpp"  // dump_signal()

namespace trainscope {

// Whether process `pid` catches `signal` (its SigCgt in /proc/<pid>/status).
bool catches_signal(pid_t pid, int signal);

struct DumpRequest {
  bool run_ended = false;            // the run ended: nobody was asked
  std::vector<std::uint32_t> asked;  // ranks signalled, in rank order
  std::vector<std::string> notes;    // why a running rank was not asked
};
// NotFound / InvalidArgument naming the directory when it is no run.
absl::StatusOr<DumpRequest> request_dump(const std::string& run_dir);

}  // namespace trainscope

#endif  // TRAINSCOPE_LAUNCH_DUMP_HPP_
