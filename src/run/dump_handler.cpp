// A C++ rank's answer to the dump signal (dump_handler.hpp).
#include "run/dump_handler.hpp"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "fmt/format.h"
#include "trainscope/run/dump_signal.hpp"
#include "trainscope/timing/detail/open_regions.hpp"

namespace trainscope {

int dump_signal() noexcept { return SIGRTMIN + 7; }

namespace run::detail {
namespace {

std::atomic<bool> g_claimed{false};
std::atomic<int> g_fd{-1};
std::atomic<pid_t> g_pid{0};  // a forked child does not write its parent's dump
std::atomic<std::uint32_t> g_rank{0};
struct sigaction g_previous;

// A bounded line built without allocation.
struct Line {
  char text[512];
  std::size_t size = 0;
  void add(const char* s) noexcept {
    while (*s != '\0' && size < sizeof(text)) text[size++] = *s++;
  }
  void add(std::int64_t v) noexcept {
    char digits[24];
    std::size_t n = 0;
    const bool negative = v < 0;
    std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) add("-");
    while (n > 0 && size < sizeof(text)) text[size++] = digits[--n];
  }
  void flush(int fd) noexcept {
    if (size < sizeof(text)) {
      text[size++] = '\n';
    } else {
      text[sizeof(text) - 1] = '\n';
    }
    const char* p = text;
    std::size_t left = size;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    size = 0;
  }
};

std::int64_t clock_ns(clockid_t clock) noexcept {
  timespec t = {};
  ::clock_gettime(clock, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

void write_dump(int fd) noexcept {
  // detail::now_ns is std::chrono::steady_clock: CLOCK_MONOTONIC on Linux.
  const std::int64_t now = clock_ns(CLOCK_MONOTONIC);
  Line line;
  line.add(kRegionDumpHeader);
  line.flush(fd);
  line.add("rank ");
  line.add(static_cast<std::int64_t>(g_rank.load()));
  line.add(" pid ");
  line.add(static_cast<std::int64_t>(::getpid()));
  line.add(" time_ms ");
  line.add(clock_ns(CLOCK_REALTIME) / 1'000'000);
  line.flush(fd);
  timing::detail::OpenStack* stacks = timing::detail::open_stacks();
  for (std::size_t i = 0; i < timing::detail::kOpenStacks; ++i) {
    timing::detail::OpenStack& s = stacks[i];
    if (!s.claimed.load(std::memory_order_acquire)) continue;
    const std::uint32_t depth = s.depth.load(std::memory_order_acquire);
    if (depth == 0) continue;
    line.add("timer ");
    line.add(static_cast<std::int64_t>(i));
    line.add(":");
    const std::uint32_t named =
        depth < timing::detail::kOpenStackDepth ? depth : timing::detail::kOpenStackDepth;
    for (std::uint32_t k = 0; k < named; ++k) {
      const char* name =
          timing::detail::signal_safe_key_name(s.keys[k].load(std::memory_order_relaxed));
      line.add(k == 0 ? " " : "; ");
      line.add(name != nullptr ? name : "?");
      line.add(" ");
      line.add((now - s.starts_ns[k].load(std::memory_order_relaxed)) / 1'000'000);
      line.add(" ms");
    }
    if (depth > named) {
      line.add("; ");
      line.add(static_cast<std::int64_t>(depth - named));
      line.add(" more");
    }
    line.flush(fd);
  }
  line.add("end");
  line.flush(fd);
}

extern "C" void on_dump_signal(int signal_number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // The program's handler first (it was there before the run).
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(signal_number, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal_number);
  }
  const int fd = g_fd.load();
  if (fd >= 0 && ::getpid() == g_pid.load()) write_dump(fd);
  errno = saved_errno;
}

}  // namespace

bool install_dump_handler(const std::string& run_dir, std::uint32_t rank) {
  if (g_claimed.exchange(true)) return false;
  const int signal_number = dump_signal();
  struct sigaction previous = {};
  ::sigaction(signal_number, nullptr, &previous);
  const bool ignored = !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN;
  const std::string path = fmt::format("{}/dump-{}.txt", run_dir, rank);
  const int fd =
      ignored ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    g_claimed.store(false);
    return false;
  }
  g_previous = previous;
  g_rank.store(rank);
  g_pid.store(::getpid());
  g_fd.store(fd);
  struct sigaction action = {};
  action.sa_sigaction = on_dump_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  ::sigaction(signal_number, &action, nullptr);
  return true;
}

void remove_dump_handler() {
  if (!g_claimed.load()) return;
  ::sigaction(dump_signal(), &g_previous, nullptr);
  const int fd = g_fd.exchange(-1);
  if (fd >= 0) ::close(fd);
  g_claimed.store(false);
}

}  // namespace run::detail
}  // namespace trainscope
