// A radT experiment CSV is user-written: any bytes. Reading must not crash,
// hang or trip a sanitizer; a plan it returns is well-formed (ids unique and
// directory-safe, each job's source a line of the file), and a status written
// back keeps the file readable with the same jobs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "support/temp_dir.hpp"
#include "sweep_plan_check.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace {}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainscope::sweep;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RadtReadOptions all;
  all.include_done = true;
  const absl::StatusOr<Plan> plan = parse_radt_csv(text, "fuzz.csv", all);
  if (!plan.ok()) return 0;
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) {
    if (!trainscope::fuzz::safe_job_id(job.id) || !ids.insert(job.id).second) std::abort();
    if (job.command.size() < 2 || job.group < 0) std::abort();
    if (!radt_line(job).ok()) std::abort();
  }
  if (plan->jobs.empty()) return 0;
  // Write a status back into a copy, then read it again.
  trainscope::testing::TempDir tmp;
  const std::string path = tmp.file("fuzz.csv");
  trainscope::testing::write_file(path, text);
  const int line = *radt_line(plan->jobs.front());
  if (!write_radt_status(path, line, "FINISHED a,\"b\" (0)", "run-1").ok()) std::abort();
  const absl::StatusOr<Plan> again = read_radt_csv(path, all);
  if (!again.ok() || again->jobs.size() != plan->jobs.size()) std::abort();
  return 0;
}
