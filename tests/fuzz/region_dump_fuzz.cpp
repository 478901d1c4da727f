// A C++ rank's dump-<rank>.txt is appended to by a signal handler of a process
// that may be killed while writing, and shares its name with Python's stacks:
// any bytes. Its one reader (diagnosis::parse_region_dump) must not crash, hang
// or trip a sanitizer, and must return a dump, NotFound (no region dump) or an
// error naming the file; what it accepts is summarised (dump_text) without a fault.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/hang.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using trainscope::diagnosis::RankDump;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<RankDump> read = trainscope::diagnosis::parse_region_dump(text, "fuzz.txt");
  if (!read.ok()) {
    if (!absl::IsInvalidArgument(read.status()) && !absl::IsNotFound(read.status())) std::abort();
    if (read.status().message().rfind("fuzz.txt", 0) != 0) std::abort();
    return 0;
  }
  (void)trainscope::diagnosis::dump_text(*read);
  std::vector<trainscope::diagnosis::Label> hangs(1);
  hangs[0].name = trainscope::diagnosis::LabelName::kHang;
  hangs[0].rank = read->rank;
  trainscope::diagnosis::add_dump_evidence(&hangs, {*read});
  return 0;
}
