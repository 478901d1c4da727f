// Asking live ranks to dump (trainscope/launch/dump.hpp).
#include "trainscope/launch/dump.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {

bool catches_signal(pid_t pid, int signal) {
  if (pid <= 0 || signal <= 0 || signal > 64) return false;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const std::uint64_t mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return ((mask >> (signal - 1)) & 1u) != 0;
  }
  return false;
}

absl::StatusOr<DumpRequest> request_dump(const std::string& run_dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status();
  DumpRequest out;
  if (reader->info().status != RunStatus::kRunning) {
    out.run_ended = true;
    return out;
  }
  const std::string host = detail::this_host();
  const int signal = dump_signal();
  for (const RankState& r : reader->ranks()) {
    if (r.status != RunStatus::kRunning || r.crashed) continue;
    if (r.host != host) {
      out.notes.push_back(fmt::format("rank {} runs on {}: ask there (`trainscope dump` on {})",
                                      r.rank.rank, r.host, r.host));
      continue;
    }
    const auto pid = static_cast<pid_t>(r.pid);
    if (!catches_signal(pid, signal)) {
      out.notes.push_back(fmt::format(
          "rank {} (pid {}) has no dump handler (a Python rank gets one from `trainscope run "
          "--auto` or trainscope.start_run(), a C++ rank from a trainscope::Run that handles "
          "signals)",
          r.rank.rank, r.pid));
      continue;
    }
    if (::kill(pid, signal) != 0) {
      out.notes.push_back(fmt::format("rank {} (pid {}): {}", r.rank.rank, r.pid,
                                      std::string(std::strerror(errno))));
      continue;
    }
    out.asked.push_back(r.rank.rank);
  }
  return out;
}

}  // namespace trainscope
