// The regions open now, for a signal handler (trainscope/timing/detail/open_regions.hpp).
#include "trainscope/timing/detail/open_regions.hpp"

namespace trainscope::timing::detail {
namespace {

OpenStack g_stacks[kOpenStacks];
std::atomic<const char*> g_names[kSignalSafeKeys] = {};

}  // namespace

void OpenStack::pop(KeyId id) noexcept {
  const std::uint32_t d = depth.load(std::memory_order_relaxed);
  if (d == 0) return;
  const std::uint32_t named = d < kOpenStackDepth ? d : kOpenStackDepth;
  for (std::uint32_t i = named; i-- > 0;) {
    if (keys[i].load(std::memory_order_relaxed) != id) continue;
    for (std::uint32_t j = i; j + 1 < named; ++j) {
      keys[j].store(keys[j + 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
      starts_ns[j].store(starts_ns[j + 1].load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
    }
    break;
  }
  depth.store(d - 1, std::memory_order_release);
}

OpenStack* open_stacks() noexcept { return g_stacks; }

OpenStackHandle OpenStackHandle::claim() noexcept {
  OpenStackHandle handle;
  for (OpenStack& s : g_stacks) {
    bool expected = false;
    if (s.claimed.load(std::memory_order_relaxed)) continue;
    if (s.claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      s.clear();
      handle.stack_ = &s;
      break;
    }
  }
  return handle;
}

void OpenStackHandle::release() noexcept {
  if (stack_ == nullptr) return;
  stack_->clear();
  stack_->claimed.store(false, std::memory_order_release);
  stack_ = nullptr;
}

const char* signal_safe_key_name(KeyId id) noexcept {
  return id < kSignalSafeKeys ? g_names[id].load(std::memory_order_acquire) : nullptr;
}

void publish_key_name(KeyId id, const char* name) noexcept {
  if (id < kSignalSafeKeys) g_names[id].store(name, std::memory_order_release);
}

}  // namespace trainscope::timing::detail
