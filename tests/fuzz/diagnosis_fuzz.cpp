// A diagnosis document comes from disk or another tool: any bytes. The one
// reader (diagnosis::parse_diagnosis, which the CLI, the report and Python
// use) must not crash, hang or trip a sanitizer, must return a diagnosis or an
// error naming the source, and a diagnosis it accepts must come back the same
// through the one writer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/diagnosis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainscope::diagnosis::Diagnosis;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<Diagnosis> read = trainscope::diagnosis::parse_diagnosis(text, "fuzz.json");
  if (!read.ok()) {
    if (!absl::IsInvalidArgument(read.status())) std::abort();
    if (read.status().message().rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  const std::string written = trainscope::diagnosis::diagnosis_json(*read);
  const absl::StatusOr<Diagnosis> again =
      trainscope::diagnosis::parse_diagnosis(written, "fuzz.json");
  if (!again.ok() || trainscope::diagnosis::diagnosis_json(*again) != written) std::abort();
  return 0;
}
