#ifndef TRAINSCOPE_COMMON_CLOCK_HPP_
#define TRAINSCOPE_COMMON_CLOCK_HPP_

#include <chrono>
#include <cstdint>

namespace trainscope::detail {

// Monotonic nanoseconds (CLOCK_MONOTONIC through the vDSO on Linux).
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Wall-clock nanoseconds since the Unix epoch.
inline std::int64_t unix_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Wall-clock milliseconds since the Unix epoch (MLflow's timestamps).
inline std::int64_t unix_now_ms() noexcept { return unix_now_ns() / 1000000; }

// Small dense index of the calling thread (0 for the first thread that asks).
std::uint32_t thread_index() noexcept;

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_COMMON_CLOCK_HPP_
