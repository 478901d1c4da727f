// A saved comparison comes from disk (a baseline in a CI cache) or another
// tool: any bytes. The one reader (compare::parse_comparison, which
// `trainscope compare FILE.json ...` and Python use) must not crash, hang or
// trip a sanitizer, must return a comparison or an error naming the source,
// and what it accepts must come back the same through the one writer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/compare/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainscope::compare::Comparison;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<Comparison> read = trainscope::compare::parse_comparison(text, "fuzz.json");
  if (!read.ok()) {
    if (!absl::IsInvalidArgument(read.status())) std::abort();
    if (read.status().message().rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  // The text table of whatever was accepted is drawable.
  (void)trainscope::compare::format_comparison(*read);
  const std::string written = trainscope::compare::compare_json(*read);
  const absl::StatusOr<Comparison> again =
      trainscope::compare::parse_comparison(written, "fuzz.json");
  if (!again.ok() || trainscope::compare::compare_json(*again) != written) std::abort();
  return 0;
}
