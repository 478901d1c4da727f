// Shared by the sweep input fuzz targets: what every job id of a plan must be.
#ifndef TRAINSCOPE_TESTS_FUZZ_SWEEP_PLAN_CHECK_HPP_
#define TRAINSCOPE_TESTS_FUZZ_SWEEP_PLAN_CHECK_HPP_

#include <string>

namespace trainscope::fuzz {

// Non-empty, at most 120 bytes, and safe as a directory name.
inline bool safe_job_id(const std::string& id) {
  if (id.empty() || id.size() > 120) return false;
  for (char c : id) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '=' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace trainscope::fuzz

#endif  // TRAINSCOPE_TESTS_FUZZ_SWEEP_PLAN_CHECK_HPP_
