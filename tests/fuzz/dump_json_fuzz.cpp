// A rank's dump (dump-<rank>.json, and a C++ rank's dump-<rank>.txt appended to
// by a signal handler) is written by a process that may be killed while
// writing, and copied around with its run: any bytes. Its readers
// (diagnosis::parse_dump, diagnosis::parse_region_dump) must not crash, hang or
// trip a sanitizer, and must return either a dump or an error naming the file
// (parse_region_dump: or NotFound, no region dump in it); what they accept is
// summarised (dump_text, add_dump_evidence) without a fault.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/hang.hpp"

namespace {

using trainscope::diagnosis::RankDump;

void check(const absl::StatusOr<RankDump>& read, const char* source, bool may_be_absent) {
  if (!read.ok()) {
    if (!absl::IsInvalidArgument(read.status()) &&
        !(may_be_absent && absl::IsNotFound(read.status()))) {
      std::abort();
    }
    if (read.status().message().rfind(source, 0) != 0) std::abort();
    return;
  }
  (void)trainscope::diagnosis::dump_text(*read);
  std::vector<trainscope::diagnosis::Label> hangs(1);
  hangs[0].name = trainscope::diagnosis::LabelName::kHang;
  hangs[0].rank = read->rank;
  trainscope::diagnosis::add_dump_evidence(&hangs, {*read});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(trainscope::diagnosis::parse_dump(text, "fuzz.json"), "fuzz.json: ", false);
  check(trainscope::diagnosis::parse_region_dump(text, "fuzz.txt"), "fuzz.txt", true);
  return 0;
}
