// The RAPL counter parser and the wrap-around arithmetic on arbitrary input: a
// counter file of any text never crashes, and a delta never exceeds the
// counter's range (hardware/host/rapl.hpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "trainscope/hardware/host/rapl.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainscope::host;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<std::uint64_t> value = parse_counter(text);
  if (value && size == 0) __builtin_trap();
  if (size >= 24) {
    std::uint64_t before = 0, after = 0, range = 0;
    std::memcpy(&before, data, 8);
    std::memcpy(&after, data + 8, 8);
    std::memcpy(&range, data + 16, 8);
    const std::uint64_t delta = energy_delta_uj(before, after, range);
    if (after >= before && delta != after - before) __builtin_trap();
    // A wrap within the range: (range - before) + after + 1 <= range (range + 1 would
    // overflow at UINT64_MAX: the smoke run found it).
    if (after < before && range != 0 && before <= range && delta > range) __builtin_trap();
  }
  return 0;
}
