// The Slurm sweep's parsers (src/sweep/slurm_parsers.hpp) on arbitrary text:
// squeue's and scontrol's output from another Slurm version, or cut off, must
// never crash, hang or trip a sanitizer. The first byte picks the parser and
// its job id; what they return must hold what they promise.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sweep/slurm_parsers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace trainscope::sweep;
  switch (data[0] % 3) {
    case 0: {
      const std::string job_id = std::to_string(data[0] / 3);
      const std::map<int, std::string> tasks = detail::parse_squeue_tasks(text, job_id);
      for (const auto& [index, state] : tasks) {
        if (index < 0) __builtin_trap();  // indices are never negative
      }
      break;
    }
    case 1: {
      const std::optional<SlurmTaskEnd> end = detail::parse_scontrol_job(text);
      if (end && end->state.empty()) __builtin_trap();  // a task end has a state
      break;
    }
    case 2: {
      // The spec of the indices the bytes name: sorted, unique ranges.
      std::vector<int> indices;
      for (std::size_t i = 0; i < text.size() && i < 64; ++i) {
        indices.push_back(static_cast<unsigned char>(text[i]));
      }
      const std::string spec = detail::slurm_array_spec(indices, data[0] % 5);
      if (!indices.empty() && spec.empty()) __builtin_trap();
      if (spec.find_first_not_of("0123456789,-%") != std::string::npos) __builtin_trap();
      break;
    }
  }
  return 0;
}
