// Subcommands of the `trainscope` tool: each takes the arguments after its
// name and returns the process exit code (0 done, 1 failed, 2 bad usage).
#ifndef TRAINSCOPE_TOOLS_COMMANDS_HPP_
#define TRAINSCOPE_TOOLS_COMMANDS_HPP_

#include <string>
#include <vector>

namespace trainscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

int sync_command(const std::vector<std::string>& args);
int run_command(const std::vector<std::string>& args);
int model_command(const std::vector<std::string>& args);
int sweep_command(const std::vector<std::string>& args);
int report_command(const std::vector<std::string>& args);
int stalls_command(const std::vector<std::string>& args);
int diagnose_command(const std::vector<std::string>& args);
int top_command(const std::vector<std::string>& args);
int compare_command(const std::vector<std::string>& args);
int dump_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);

}  // namespace trainscope::cli

#endif  // TRAINSCOPE_TOOLS_COMMANDS_HPP_
