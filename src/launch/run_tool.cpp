#include "trainscope/launch/run_tool.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "fmt/format.h"
#include "launch/process.hpp"

namespace trainscope {
namespace {
// The launch room's process helpers (src/launch/process.hpp).
using launcher::detail::close_fd;
using launcher::detail::environment_copy;
using launcher::detail::make_pipe;
using launcher::detail::Pipe;
using launcher::detail::spawn;
using launcher::detail::wait_exited;
}  // namespace

absl::StatusOr<ToolOutput> run_tool(std::vector<std::string> argv, absl::Duration timeout,
                                    bool own_group) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("no tool to run");
  const std::string name = argv[0];
  absl::StatusOr<Pipe> out = make_pipe();
  if (!out.ok()) return out.status();
  absl::StatusOr<Pipe> err = make_pipe();
  if (!err.ok()) {
    close_fd(&out->read);
    close_fd(&out->write);
    return err.status();
  }
  pid_t pid = 0;
  const int error =
      spawn(std::move(argv), environment_copy(), out->write, err->write, own_group, &pid);
  close_fd(&out->write);
  close_fd(&err->write);
  if (error != 0) {
    close_fd(&out->read);
    close_fd(&err->read);
    return absl::NotFoundError(fmt::format("cannot run {}: {}", name, std::strerror(error)));
  }
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  ToolOutput result;
  char buffer[65536];
  bool late = false;
  while (out->read >= 0 || err->read >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      late = true;
      break;
    }
    pollfd fds[2] = {{out->read, POLLIN, 0}, {err->read, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close_fd(i == 0 ? &out->read : &err->read);
        continue;
      }
      (i == 0 ? result.out : result.err).append(buffer, static_cast<std::size_t>(n));
    }
  }
  close_fd(&out->read);
  close_fd(&err->read);
  int wait_status = 0;
  if (late || !wait_exited(pid, &wait_status, deadline)) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    return absl::DeadlineExceededError(
        fmt::format("{} did not end within {}", name, absl::FormatDuration(timeout)));
  }
  result.exit_code = WIFEXITED(wait_status)     ? WEXITSTATUS(wait_status)
                     : WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status)
                                                : 1;
  return result;
}

}  // namespace trainscope
