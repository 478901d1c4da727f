// Extra-P text input (PARAMETER / POINTS / REGION / METRIC / DATA lines) from
// arbitrary bytes: nothing may crash, hang or trip a sanitizer; an error is
// InvalidArgument naming the input and line, a result is well-formed (every
// point has one finite value per parameter and at least one finite value).
// An odd first byte puts a valid header in front, so the fuzzer reaches the
// DATA lines sooner.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "measurement_set_check.hpp"
#include "trainscope/scaling/extrap_input.hpp"

namespace {

constexpr std::string_view kSeed =
    "PARAMETER p q\nPOINTS ( 4 64 ) ( 8 64 )\nREGION r\nMETRIC m\nDATA 1 2\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text = (data[0] & 1) != 0 ? std::string(kSeed) : std::string();
  text.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainscope_fuzz::check(trainscope::scaling::parse_extrap_text(text, "in"), 4);
  return 0;
}
