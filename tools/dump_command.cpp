// `trainscope dump RUN`: asks every live rank of the run on this host for its
// stacks (trainscope/launch/dump.hpp).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/launch/dump.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace dump_cmd {

constexpr char kDumpDescription[] =
    "Asks every running rank of the run on this host to write its stacks into the run\n"
    "directory: dump-<rank>.txt (every thread's Python stack, faulthandler) and\n"
    "dump-<rank>.json (threads by name, the open regions, the recent collectives); a C++\n"
    "rank appends the regions its timers have open to dump-<rank>.txt.\n"
    "`trainscope diagnose RUN` then names where a hung rank waits.\n";

constexpr char kDumpFooter[] =
    "The ranks get the signal SIGRTMIN+7, and only those that catch it: a Python rank\n"
    "under `trainscope run --auto` or trainscope.start_run(), a C++ rank whose\n"
    "trainscope::Run handles signals (the default). Ranks on other hosts:\n"
    "run it there. A finished run is said so.\n"
    "Exit status: 0 asked (or nothing to ask), 1 no run, 2 bad usage.\n";

}  // namespace dump_cmd

int dump_command(const std::vector<std::string>& args) {
  using namespace dump_cmd;  // NOLINT(build/namespaces): this file's own names
  CommandLine line({"dump", "trainscope dump RUN", kDumpDescription, kDumpFooter});
  std::vector<std::string> run_dirs;
  line.add_positionals("RUN", &run_dirs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(args)) return *done;
  if (run_dirs.size() != 1) {
    return line.usage_error(run_dirs.empty() ? std::string("missing RUN")
                                             : fmt::format("one run at a time (got {} and {})",
                                                           run_dirs[0], run_dirs[1]));
  }
  absl::StatusOr<DumpRequest> asked = request_dump(run_dirs[0]);
  if (!asked.ok()) {
    std::fprintf(stderr, "trainscope dump: %s\n", std::string(asked.status().message()).c_str());
    return kExitFailed;
  }
  if (asked->run_ended) {
    std::printf("%s", fmt::format("the run {} has ended: no rank to ask (its dumps, if any, stay "
                                  "in it)\n",
                                  run_dirs[0])
                          .c_str());
    return kExitOk;
  }
  for (const std::string& note : asked->notes) std::printf("%s\n", note.c_str());
  if (asked->asked.empty()) {
    std::printf("no rank of %s was asked\n", run_dirs[0].c_str());
  } else {
    std::printf("%s", fmt::format("asked rank{} {} for their stacks: {}/dump-<rank>.txt, .json\n",
                                  asked->asked.size() == 1 ? "" : "s",
                                  fmt::join(asked->asked, ", "), run_dirs[0])
                          .c_str());
  }
  return kExitOk;
}

}  // namespace trainscope::cli
