// The regions each recording timer has open now, readable from a signal
// handler (the dump of a C++ rank, src/run/dump_handler.cpp): a fixed table of
// stacks of lock-free atomics, never freed, and the key names by id. A timer
// claims a stack when it is attached to a run (RegionCore::attach) and its
// thread pushes and pops it as regions open and close (a few relaxed stores).
// A reader on another thread may see a stack mid-change: it is evidence, not
// accounting.
#ifndef TRAINSCOPE_TIMING_DETAIL_OPEN_REGIONS_HPP_
#define TRAINSCOPE_TIMING_DETAIL_OPEN_REGIONS_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "trainscope/timing/time_type.hpp"

namespace trainscope::timing::detail {

inline constexpr std::uint32_t kOpenStackDepth = 16;  // deeper regions are counted, not named
inline constexpr std::size_t kOpenStacks = 256;       // timers past this are not published

struct OpenStack {
  std::atomic<bool> claimed{false};
  std::atomic<std::uint32_t> depth{0};
  std::atomic<KeyId> keys[kOpenStackDepth] = {};
  std::atomic<std::int64_t> starts_ns[kOpenStackDepth] = {};  // steady clock (detail::now_ns)

  void push(KeyId id, std::int64_t start_ns) noexcept {
    const std::uint32_t d = depth.load(std::memory_order_relaxed);
    if (d < kOpenStackDepth) {
      keys[d].store(id, std::memory_order_relaxed);
      starts_ns[d].store(start_ns, std::memory_order_relaxed);
    }
    depth.store(d + 1, std::memory_order_release);
  }
  // Regions of different keys may end in any order: the key leaves its place.
  void pop(KeyId id) noexcept;
  void clear() noexcept { depth.store(0, std::memory_order_release); }
};

// The table (kOpenStacks entries), for the signal handler.
OpenStack* open_stacks() noexcept;

// A claimed stack, released when destroyed; empty when the table is full.
class OpenStackHandle {
 public:
  OpenStackHandle() = default;
  static OpenStackHandle claim() noexcept;
  OpenStackHandle(OpenStackHandle&& other) noexcept : stack_(other.stack_) {
    other.stack_ = nullptr;
  }
  OpenStackHandle& operator=(OpenStackHandle&& other) noexcept {
    if (this != &other) {
      release();
      stack_ = other.stack_;
      other.stack_ = nullptr;
    }
    return *this;
  }
  ~OpenStackHandle() { release(); }
  OpenStack* get() const noexcept { return stack_; }
  void release() noexcept;

 private:
  OpenStack* stack_ = nullptr;
};

// The name of a key, or nullptr: async-signal-safe (the registry publishes
// each name as it interns it; the first kSignalSafeKeys ids).
inline constexpr KeyId kSignalSafeKeys = 4096;
const char* signal_safe_key_name(KeyId id) noexcept;
void publish_key_name(KeyId id, const char* name) noexcept;

}  // namespace trainscope::timing::detail

#endif  // TRAINSCOPE_TIMING_DETAIL_OPEN_REGIONS_HPP_
