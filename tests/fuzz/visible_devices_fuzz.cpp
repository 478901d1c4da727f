// CUDA_VISIBLE_DEVICES comes from the user's environment: any bytes. Parsing
// must not crash, hang or trip a sanitizer, and what it returns must be
// well-formed (UUID entries keep their prefix, at most one entry per comma).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hardware/gpu/visible_devices.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainscope::nvml::VisibleDevice;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto devices = trainscope::nvml::parse_visible_devices(text);
  std::size_t commas = 0;
  for (char c : text) commas += c == ',';
  if (devices.size() > commas + 1) std::abort();
  for (const VisibleDevice& d : devices) {
    const bool uuid = d.kind != VisibleDevice::Kind::kIndex;
    if (uuid && d.uuid.size() <= 4) std::abort();
    if (d.kind == VisibleDevice::Kind::kMigLegacy && d.uuid.rfind("GPU-", 0) != 0) std::abort();
  }
  return 0;
}
