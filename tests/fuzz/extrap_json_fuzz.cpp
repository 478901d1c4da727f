// Extra-P JSON input (current and legacy layouts, and the JSON Lines fallback)
// from arbitrary bytes: nothing may crash, hang or trip a sanitizer; an error
// is InvalidArgument naming the input, a result is well-formed. An odd first
// byte puts the start of a valid document in front.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "measurement_set_check.hpp"
#include "trainscope/scaling/extrap_input.hpp"

namespace {

constexpr std::string_view kSeed =
    "{\"parameters\": [\"p\"], \"measurements\": {\"c\": {\"m\": [{\"point\": [4], \"values\": [1";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text = (data[0] & 1) != 0 ? std::string(kSeed) : std::string();
  text.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainscope_fuzz::check(trainscope::scaling::parse_extrap_json(text, "in"),
                         static_cast<std::size_t>(-1));
  return 0;
}
