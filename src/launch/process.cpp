#include "launch/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "fmt/format.h"

extern char** environ;

namespace trainscope::launcher::detail {
namespace {

constexpr auto kWaitPoll = std::chrono::milliseconds(20);
constexpr int kExitNotExecutable = 126;

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::mutex& environment_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string> environment_copy() {
  std::lock_guard<std::mutex> lock(environment_mutex());
  std::vector<std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) out.emplace_back(*entry);
  return out;
}

void close_fd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

absl::StatusOr<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(fmt::format("pipe: {}", std::strerror(errno)));
  return Pipe{fds[0], fds[1]};
}

// Starts argv[0] (looked up on PATH) with `env`, its stdout/stderr on the
// given descriptors (O_CLOEXEC ones: dup2 clears the flag on 1 and 2). In
// its own process group when `new_group`, so signals reach its whole tree
// and no other launch's. Returns errno on failure.
int spawn(std::vector<std::string> argv, std::vector<std::string> env, int out_fd, int err_fd,
          bool new_group, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Threads of this process may block signals; the command starts with none blocked.
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  short flags = POSIX_SPAWN_SETSIGMASK;
  if (new_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  posix_spawnattr_setflags(&attributes, flags);
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  const int error =
      ::posix_spawnp(pid, c_argv[0], &actions, &attributes, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return error;
}

// spawn() for a command that dies with this thread (LaunchOptions::die_with_parent):
// posix_spawn cannot set PR_SET_PDEATHSIG, so fork, then only async-signal-safe
// calls up to exec; a failed exec reports its errno through a close-on-exec pipe.
int spawn_dying_with_parent(std::vector<std::string> argv, std::vector<std::string> env, int out_fd,
                            int err_fd, pid_t* pid) {
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errno;
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitNotExecutable);  // the parent died already
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::execvpe(c_argv[0], c_argv.data(), c_env.data());
    const int error = errno;
    (void)!::write(report[1], &error, sizeof error);
    ::_exit(kExitNotExecutable);
  }
  const int fork_error = child < 0 ? errno : 0;
  ::close(report[1]);
  int error = 0;
  ssize_t n = 0;
  if (child > 0) {
    while ((n = ::read(report[0], &error, sizeof error)) < 0 && errno == EINTR) {
    }
  }
  ::close(report[0]);
  if (child < 0) return fork_error;
  if (n == static_cast<ssize_t>(sizeof error)) {
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return error;
  }
  *pid = child;
  return 0;
}

bool wait_exited(pid_t pid, int* wait_status, std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t done = ::waitpid(pid, wait_status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return true;
    std::this_thread::sleep_for(kWaitPoll);
  }
  return false;
}

}  // namespace trainscope::launcher::detail
