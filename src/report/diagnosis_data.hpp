// The diagnosis of a report page (internal): the section at the top of a run
// page, from trainscope::diagnosis::diagnose_run and the room's one JSON
// writer (the document `trainscope diagnose RUN --json` prints).
#ifndef TRAINSCOPE_SRC_REPORT_DIAGNOSIS_DATA_HPP_
#define TRAINSCOPE_SRC_REPORT_DIAGNOSIS_DATA_HPP_

#include <string>

#include "nlohmann/json.hpp"

namespace trainscope::report::detail {

// The run's diagnosis document (diagnosis::diagnosis_json, parsed: the fields
// of `trainscope diagnose RUN --json`), or {"error": ...} naming the run and
// what is wrong: the page then says so instead of failing.
nlohmann::json run_diagnosis_json(const std::string& run_dir);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_DIAGNOSIS_DATA_HPP_
