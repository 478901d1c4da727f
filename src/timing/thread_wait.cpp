// The calling thread's run-queue wait (trainscope/timing/thread_wait.hpp).
#include "trainscope/timing/thread_wait.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <system_error>

namespace trainscope::timing {
namespace {

// The next number after spaces and tabs; false when none starts there.
bool next_number(std::string_view* text, std::uint64_t* value) noexcept {
  const std::size_t begin = text->find_first_not_of(" \t");
  if (begin == std::string_view::npos) return false;
  text->remove_prefix(begin);
  const char* end = text->data() + text->size();
  const auto result = std::from_chars(text->data(), end, *value);
  if (result.ec != std::errc()) return false;
  text->remove_prefix(static_cast<std::size_t>(result.ptr - text->data()));
  return true;
}

// Bumped in a forked child: a descriptor opened before the fork names the
// parent's thread.
std::atomic<std::uint32_t> fork_generation{0};

void after_fork_in_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

struct ThreadFile {
  int fd = -1;
  bool failed = false;  // opening failed once: not tried again on this thread
  std::uint32_t generation = 0;
  ~ThreadFile() {
    if (fd >= 0) ::close(fd);
  }
  void open() noexcept {
    static const bool registered = [] {
      return ::pthread_atfork(nullptr, nullptr, &after_fork_in_child) == 0;
    }();
    (void)registered;
    fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    failed = fd < 0;
  }
};

}  // namespace

bool parse_schedstat(std::string_view text, SchedStat* out) noexcept {
  SchedStat s;
  if (!next_number(&text, &s.run_ns) || !next_number(&text, &s.wait_ns)) return false;
  if (!next_number(&text, &s.timeslices)) s.timeslices = 0;
  *out = s;
  return true;
}

std::int64_t thread_wait_ns() noexcept {
  thread_local ThreadFile file;
  const std::uint32_t generation = fork_generation.load(std::memory_order_relaxed);
  if (file.generation != generation) {
    if (file.fd >= 0) ::close(file.fd);
    file.fd = -1;
    file.failed = false;
    file.generation = generation;
  }
  if (file.fd < 0) {
    if (file.failed) return -1;
    file.open();
    if (file.fd < 0) return -1;
  }
  char buffer[96];
  const ssize_t n = ::pread(file.fd, buffer, sizeof(buffer), 0);
  SchedStat s;
  if (n <= 0 || !parse_schedstat(std::string_view(buffer, static_cast<std::size_t>(n)), &s) ||
      s.wait_ns > static_cast<std::uint64_t>(INT64_MAX))
    return -1;
  return static_cast<std::int64_t>(s.wait_ns);
}

}  // namespace trainscope::timing
