// What a forked child does with an object whose threads stayed in its parent
// (internal). fork() copies one thread, the caller: the export pipeline's,
// the run's heartbeat, the sampler's and the launcher's follower threads do
// not exist in the child, and the locks they held and the condition variables
// they waited on stay as the fork found them, forever. Joining such a thread,
// waiting for it (a flush), taking its lock or destroying its condition
// variable (glibc's pthread_cond_destroy waits for the waiters it counts)
// hangs the child, and with it the parent that waits for the child.
//
// So each such object remembers the process that made it (ForkOwner) and,
// in any other process, does none of that: its calls return at once, and its
// destructor abandons its state (the memory stays; nothing of the parent's is
// touched: no file written, no lock taken). A child that records starts runs
// of its own.
#ifndef TRAINSCOPE_SRC_COMMON_FORK_OWNER_HPP_
#define TRAINSCOPE_SRC_COMMON_FORK_OWNER_HPP_

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <thread>

namespace trainscope::detail {

class ForkOwner {
 public:
  // User-provided, so a `const ForkOwner` member default-initializes (clang
  // requires it of a const member in an implicitly constructed class).
  ForkOwner() noexcept : pid_(::getpid()) {}

  // True in a process forked from the one that made this (a system call:
  // for calls that wait or lock, never for a timer's start/end).
  bool forked() const noexcept { return ::getpid() != pid_; }
  pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_;
};

// In a forked child: lets go of an object without running its destructor
// (its threads, locks and files are the parent's).
template <typename T>
void abandon(std::unique_ptr<T>& owned) noexcept {
  (void)owned.release();
}

// In a forked child: lets go of a thread object that names a parent's thread
// (joining it waits forever; destroying it while joinable terminates).
inline void abandon(std::thread& thread) noexcept {
  if (thread.joinable()) (void)new std::thread(std::move(thread));
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_FORK_OWNER_HPP_
