// A real full disk for tests: run_on_small_tmpfs() forks a child, gives it a
// mount namespace of its own (as root; otherwise a user namespace where it is
// root, as `unshare --user --map-root-user --mount`), mounts a tmpfs of the
// given size there and calls body(mount point). The mount goes away with the
// child. The body reports failures as lines (its return value); the parent
// gets them, or the reason the tmpfs could not be mounted (then the test
// skips).
#ifndef TRAINSCOPE_TESTS_SUPPORT_SMALL_TMPFS_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_SMALL_TMPFS_HPP_

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>

namespace trainscope::testing {

struct TmpfsOutcome {
  bool mounted = false;
  std::string skip_reason;  // why not, when !mounted
  std::string failures;     // what body() returned (empty: it passed)
};

namespace small_tmpfs_detail {

inline bool write_text(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// In the child: a private mount namespace with a tmpfs at `point`; "" or why not.
inline std::string mount_tmpfs(const std::string& point, std::size_t bytes) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + strerror(errno);
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return std::string("not root, and unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: ") +
             strerror(errno);
    }
    write_text("/proc/self/setgroups", "deny");
    if (!write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
      return std::string("cannot map root in a user namespace: ") + strerror(errno);
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("cannot make the mounts private: ") + strerror(errno);
  }
  const std::string size = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", point.c_str(), "tmpfs", 0, size.c_str()) != 0) {
    return "mount -t tmpfs -o " + size + " " + point + ": " + strerror(errno);
  }
  return "";
}

inline std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace small_tmpfs_detail

// `point` must be an existing, empty directory.
inline TmpfsOutcome run_on_small_tmpfs(const std::string& point, std::size_t bytes,
                                       const std::function<std::string(const std::string&)>& body) {
  TmpfsOutcome outcome;
  int fds[2];
  if (::pipe(fds) != 0) {
    outcome.skip_reason = std::string("pipe: ") + strerror(errno);
    return outcome;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    outcome.skip_reason = std::string("fork: ") + strerror(errno);
    return outcome;
  }
  if (pid == 0) {
    ::close(fds[0]);
    const std::string why = small_tmpfs_detail::mount_tmpfs(point, bytes);
    const std::string report = why.empty() ? "M" + body(point) : "S" + why;
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  const std::string report = small_tmpfs_detail::read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (report.empty()) {
    outcome.mounted = true;
    outcome.failures = "the child died without a report (status " + std::to_string(status) + ")";
  } else if (report[0] == 'S') {
    outcome.skip_reason = report.substr(1);
  } else {
    outcome.mounted = true;
    outcome.failures = report.substr(1);
  }
  return outcome;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_SMALL_TMPFS_HPP_
