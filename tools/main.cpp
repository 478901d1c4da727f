// `trainscope <command> [args]`: one binary, one function per subcommand
// (commands.hpp); new commands are one more row in kCommands.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "trainscope/version.hpp"

namespace {

using trainscope::cli::kExitOk;
using trainscope::cli::kExitUsage;

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"sync", "upload a run directory to an MLflow tracking server (resumable)",
     trainscope::cli::sync_command},
    {"run", "run a command as a trainscope run (samples, output, exit status)",
     trainscope::cli::run_command},
    {"model", "fit a scaling model (Extra-P's PMNF) to runs or Extra-P files; predict, plot",
     trainscope::cli::model_command},
    {"sweep", "run many configurations (radT CSV/YAML, Furcate JSON, --grid) as runs on all slots",
     trainscope::cli::sweep_command},
    {"stalls", "how long training waits for data: a run, or DS-Analyzer's differential analysis",
     trainscope::cli::stalls_command},
    {"diagnose", "what a run's steps are made of and what holds it back (labels with evidence)",
     trainscope::cli::diagnose_command},
    {"top", "a live terminal view of a run (or a sweep): its diagnosis, phases, keys, hardware",
     trainscope::cli::top_command},
    {"compare",
     "is B faster than A: per key ratio, interval, verdict; a CI gate (--fail-if-slower)",
     trainscope::cli::compare_command},
    {"report", "write one self-contained HTML page for a run, a sweep or a scaling study",
     trainscope::cli::report_command},
    {"dump", "ask a running run's ranks for their stacks (where a hung rank waits)",
     trainscope::cli::dump_command},
    {"serve", "serve live runs' metrics for Prometheus (every run under a root)",
     trainscope::cli::serve_command},
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: trainscope <command> [args]\n"
               "       trainscope --help | --version\n\ncommands:\n");
  for (const Command& command : kCommands) {
    std::fprintf(out, "  %-8.*s %.*s\n", static_cast<int>(command.name.size()), command.name.data(),
                 static_cast<int>(command.summary.size()), command.summary.data());
  }
  std::fprintf(out, "\n`trainscope <command> --help` describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (first == "--version") {
    std::printf("trainscope %s\n", TRAINSCOPE_VERSION_STRING);
    return kExitOk;
  }
  for (const Command& command : kCommands) {
    if (command.name == first) return command.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::vector<std::string> names;
  for (const Command& command : kCommands) names.emplace_back(command.name);
  std::fprintf(stderr, "trainscope: unknown command '%s'%s\n(see `trainscope --help`)\n", argv[1],
               trainscope::cli::did_you_mean(argv[1], names).c_str());
  return kExitUsage;
}
