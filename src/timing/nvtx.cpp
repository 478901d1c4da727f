#include "trainscope/timing/detail/nvtx.hpp"

#if defined(TRAINSCOPE_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <string>

#include <mutex>
#include "absl/container/flat_hash_map.h"
#endif

namespace trainscope::timing::detail {

#if defined(TRAINSCOPE_HAVE_NVTX)
namespace {

constexpr KeyId kCachedKeys = 4096;

struct NvtxState {
  // Null when no NVTX tool (Nsight Systems, ...) is injected: the first NVTX
  // call decides that for the life of the process, so ranges become no-ops.
  nvtxDomainHandle_t domain = nvtxDomainCreateA("trainscope");
  // Lock-free for the first kCachedKeys ids: the hot path must not lock.
  std::atomic<nvtxStringHandle_t> cached[kCachedKeys] = {};
  std::mutex mu;  // guards names (std::mutex: visible to TSan, see time_type.cpp)
  absl::flat_hash_map<KeyId, nvtxStringHandle_t> names;
};

NvtxState& state() {
  static NvtxState* const s = new NvtxState();
  return *s;
}

// Registered strings make each range call a pointer pass instead of a string copy.
nvtxStringHandle_t registered_name(NvtxState& s, KeyId key) {
  if (key < kCachedKeys) {
    nvtxStringHandle_t handle = s.cached[key].load(std::memory_order_acquire);
    if (handle != nullptr) return handle;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.names.find(key);
  if (it == s.names.end()) {
    const std::string name(Key::FromId(key).name());
    it = s.names.emplace(key, nvtxDomainRegisterStringA(s.domain, name.c_str())).first;
    if (key < kCachedKeys) s.cached[key].store(it->second, std::memory_order_release);
  }
  return it->second;
}

}  // namespace

bool nvtx_compiled_in() noexcept { return true; }

std::uint64_t nvtx_range_start(KeyId key) noexcept {
  NvtxState& s = state();
  if (s.domain == nullptr) return 0;
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = registered_name(s, key);
  return nvtxDomainRangeStartEx(s.domain, &attributes);
}

void nvtx_range_end(std::uint64_t range) noexcept {
  NvtxState& s = state();
  if (s.domain != nullptr) nvtxDomainRangeEnd(s.domain, range);
}

#else

bool nvtx_compiled_in() noexcept { return false; }
std::uint64_t nvtx_range_start(KeyId) noexcept { return 0; }
void nvtx_range_end(std::uint64_t) noexcept {}

#endif

}  // namespace trainscope::timing::detail
