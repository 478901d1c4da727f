#include <atomic>

#include "trainscope/common/clock.hpp"

namespace trainscope::detail {

std::uint32_t thread_index() noexcept {
  static std::atomic<std::uint32_t> next{0};
  thread_local const std::uint32_t index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace trainscope::detail
