// Extra-P JSON Lines input from arbitrary bytes: nothing may crash, hang or
// trip a sanitizer; an error is InvalidArgument naming the input and line, a
// result is well-formed. An odd first byte puts a valid first line in front.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "measurement_set_check.hpp"
#include "trainscope/scaling/extrap_input.hpp"

namespace {

constexpr std::string_view kSeed =
    "{\"params\": {\"p\": 4, \"q\": 64}, \"value\": [1, 2], "
    "\"callpath\": \"c\", \"metric\": \"m\"}\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text = (data[0] & 1) != 0 ? std::string(kSeed) : std::string();
  text.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainscope_fuzz::check(trainscope::scaling::parse_extrap_jsonl(text, "in"),
                         static_cast<std::size_t>(-1));
  return 0;
}
