// Pinning a test's thread to one core (the contention tests: a thread beside
// N spinners on its core waits N/(N+1) of the time).
#ifndef TRAINSCOPE_TESTS_SUPPORT_PIN_THREAD_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_PIN_THREAD_HPP_

#include <pthread.h>
#include <sched.h>

namespace trainscope::testing {

// Pins the calling thread to `core`; with `round_robin` also makes it
// SCHED_RR (priority 1), so that the test's threads share the core in turns
// ahead of every other process (the kernel leaves those 5% of each second).
inline bool pin_this_thread(int core, bool round_robin) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) != 0) return false;
  if (!round_robin) return true;
  sched_param param{};
  param.sched_priority = 1;
  return ::pthread_setschedparam(::pthread_self(), SCHED_RR, &param) == 0;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_PIN_THREAD_HPP_
