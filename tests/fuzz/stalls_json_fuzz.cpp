// A stalls.json comes from disk, copied around with its runs: any bytes. The
// stalls room's one reader (stalls::parse_differential, which the report page
// uses) must not crash, hang or trip a sanitizer, must return either an
// analysis or an error naming the file, and an analysis it accepts must come
// back the same through its one writer (so the page's script meets exactly
// the fields the writer writes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/stalls/differential.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainscope::stalls::DifferentialAnalysis;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<DifferentialAnalysis> read =
      trainscope::stalls::parse_differential(text, "fuzz.json");
  if (!read.ok()) {
    if (!absl::IsInvalidArgument(read.status())) std::abort();
    if (read.status().message().rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  const std::string written = trainscope::stalls::differential_json(*read);
  const absl::StatusOr<DifferentialAnalysis> again =
      trainscope::stalls::parse_differential(written, "fuzz.json");
  if (!again.ok() || trainscope::stalls::differential_json(*again) != written) std::abort();
  return 0;
}
