// Starting processes (internal to launch): the environment copy every spawn
// takes under one lock (Run::Start/end setenv TRAINSCOPE_RUN_DIR), pipes, and
// posix_spawn / fork+exec. launch() starts commands with them, run_tool()
// (trainscope/launch/run_tool.hpp) short-lived helper tools.
#ifndef TRAINSCOPE_SRC_LAUNCH_PROCESS_HPP_
#define TRAINSCOPE_SRC_LAUNCH_PROCESS_HPP_

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::launcher::detail {

// Run::Start/end setenv/unsetenv TRAINSCOPE_RUN_DIR, which races with
// another launch thread copying the environment: both happen under this lock.
std::mutex& environment_mutex();
// This process's environment ("NAME=value" each), copied under environment_mutex().
std::vector<std::string> environment_copy();

struct Pipe {
  int read = -1;
  int write = -1;
};
// Closes *fd when open and sets it to -1.
void close_fd(int* fd);
// A pipe with both ends O_CLOEXEC.
absl::StatusOr<Pipe> make_pipe();

// Starts argv[0] (looked up on PATH) with `env`, its stdout/stderr on the
// given descriptors (O_CLOEXEC ones: dup2 clears the flag on 1 and 2). In
// its own process group when `new_group`, so signals reach its whole tree
// and no other launch's. Returns errno on failure.
int spawn(std::vector<std::string> argv, std::vector<std::string> env, int out_fd, int err_fd,
          bool new_group, pid_t* pid);

// spawn() (in a new process group) for a command that dies with this thread
// (LaunchOptions::die_with_parent): PR_SET_PDEATHSIG set before exec.
int spawn_dying_with_parent(std::vector<std::string> argv, std::vector<std::string> env, int out_fd,
                            int err_fd, pid_t* pid);

// Reaps `pid` into *wait_status once it exited (true), or false when
// `deadline` passed first (it is left running).
bool wait_exited(pid_t pid, int* wait_status, std::chrono::steady_clock::time_point deadline);

}  // namespace trainscope::launcher::detail

#endif  // TRAINSCOPE_SRC_LAUNCH_PROCESS_HPP_
