// A C++ rank's answer to the dump signal (trainscope/run/dump_signal.hpp):
// with only async-signal-safe calls (clock_gettime, write), the handler
// appends to dump-<rank>.txt, opened beforehand, one block:
//   trainscope.regions-dump 1
//   rank 1 pid 4242 time_ms 1700000000000
//   timer 0: BATCH 12034 ms; LOAD 12030 ms
//   end
// (each timer attached to a run with regions open: its regions outermost
// first, each with how long it has been open). A handler the program had is
// kept and called first; an ignored signal stays ignored.
#ifndef TRAINSCOPE_SRC_RUN_DUMP_HANDLER_HPP_
#define TRAINSCOPE_SRC_RUN_DUMP_HANDLER_HPP_

#include <cstdint>
#include <string>

namespace trainscope::run::detail {

// False (nothing installed) when another Run of the process has it, the
// signal is ignored or the file cannot be opened.
bool install_dump_handler(const std::string& run_dir, std::uint32_t rank);
// Puts back what was there (the Run that installed it, when it ends).
void remove_dump_handler();

}  // namespace trainscope::run::detail

#endif  // TRAINSCOPE_SRC_RUN_DUMP_HANDLER_HPP_
