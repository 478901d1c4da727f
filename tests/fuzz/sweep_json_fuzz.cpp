// A Furcate JSON config is user-written: any bytes. Expanding it must not
// crash, hang or trip a sanitizer; a plan it returns has unique,
// directory-safe ids and a JSON config per job.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/sweep/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainscope::sweep;
  static const bool quiet = [] {
    trainscope::set_warning_handler([](const std::string&) {});  // exclude warnings
    return true;
  }();
  (void)quiet;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<Plan> plan = parse_furcate_json(text, "fuzz.json", {"python", "t.py"});
  if (!plan.ok()) return 0;
  if (plan->jobs.empty()) std::abort();
  std::set<std::string> ids;
  for (const Job& job : plan->jobs) {
    if (job.id.empty() || job.id.size() > 120 || !ids.insert(job.id).second) std::abort();
    if (job.id.find('/') != std::string::npos) std::abort();
    if (!nlohmann::json::accept(job.config_json)) std::abort();
  }
  return 0;
}
