#include "common/no_gpu.hpp"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "trainscope/common/errors.hpp"

namespace trainscope::detail {
namespace {

std::atomic<bool> noted{false};

}  // namespace

bool no_gpu_noted() {
  if (noted.load(std::memory_order_relaxed)) return true;
  const char* value = std::getenv(kNoGpuNotedVariable);
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

void note_no_gpu(const std::string& what_is_off) {
  if (no_gpu_noted() || noted.exchange(true)) return;
  warn(std::string(kNoGpuFound) + ": " + what_is_off);
}

void mark_no_gpu_noted() { noted.store(true); }

}  // namespace trainscope::detail
