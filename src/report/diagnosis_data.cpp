#include "report/diagnosis_data.hpp"

#include <exception>
#include <utility>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::report::detail {

using nlohmann::json;

json run_diagnosis_json(const std::string& run_dir) {
  absl::StatusOr<diagnosis::Diagnosis> d = diagnosis::diagnose_run(run_dir);
  if (!d.ok()) {
    return json{{"error", fmt::format("the diagnosis of this run failed: {}",
                                      std::string(d.status().message()))}};
  }
  // The fields of `trainscope diagnose RUN --json`, from the same writer.
  json out = json::parse(diagnosis::diagnosis_json(*d), nullptr, /*allow_exceptions=*/false);
  if (!out.is_object()) {
    return json{{"error", fmt::format("the diagnosis of {} wrote no JSON object", run_dir)}};
  }
  return out;
}

}  // namespace trainscope::report::detail
