// A radT or W&B YAML sweep is user-written: any bytes. Reading it (grid or
// random, with a seed) must not crash, hang or trip a sanitizer, and must
// not throw (yaml-cpp's exceptions become errors); a plan it returns has
// jobs with unique, directory-safe ids, a program, and at most kMaxPlanJobs
// of them, and the same text and seed give the same plan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "sweep_plan_check.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace {}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainscope::sweep;
  static const bool quiet = [] {
    trainscope::set_warning_handler([](const std::string&) {});
    return true;
  }();
  (void)quiet;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::uint64_t seed = size;
  const absl::StatusOr<Plan> plan = parse_sweep_yaml(text, "fuzz.yaml", {"python", "t.py"}, seed);
  if (!plan.ok()) return 0;
  if (plan->jobs.size() > kMaxPlanJobs) std::abort();
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) {
    if (!trainscope::fuzz::safe_job_id(job.id) || !ids.insert(job.id).second) std::abort();
    if (job.command.empty() || job.command[0].empty()) std::abort();
  }
  const absl::StatusOr<Plan> again = parse_sweep_yaml(text, "fuzz.yaml", {"python", "t.py"}, seed);
  if (!again.ok() || again->jobs.size() != plan->jobs.size()) std::abort();
  for (std::size_t i = 0; i < plan->jobs.size(); ++i) {
    if (again->jobs[i].id != plan->jobs[i].id || again->jobs[i].params != plan->jobs[i].params)
      std::abort();
  }
  return 0;
}
