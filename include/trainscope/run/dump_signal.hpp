// The signal that asks a rank for its evidence (`trainscope dump`,
// trainscope/launch/dump.hpp). A C++ rank whose Run handles signals
// (RunOptions::handle_signals) catches it and appends the regions its timers
// have open to dump-<rank>.txt (docs/diagnosis.md, "Hangs and dumps").
#ifndef TRAINSCOPE_RUN_DUMP_SIGNAL_HPP_
#define TRAINSCOPE_RUN_DUMP_SIGNAL_HPP_

namespace trainscope {

// SIGRTMIN + 7: a real-time signal, so no common handler (SIGUSR1: Slurm's
// and elastic agents' warnings, SIGUSR2, SIGPROF: profilers) collides with it.
int dump_signal() noexcept;

// The first line of each block a C++ rank appends to dump-<rank>.txt.
inline constexpr char kRegionDumpHeader[] = "trainscope.regions-dump 1";

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_DUMP_SIGNAL_HPP_
