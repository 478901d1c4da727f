// The stalls room's JSON (internal): the live analysis as a JSON object (the
// fields of run_stalls_json) and back; documents are read with the strict
// Field reader of src/common/json_field.hpp.
#ifndef TRAINSCOPE_SRC_STALLS_STALLS_JSON_HPP_
#define TRAINSCOPE_SRC_STALLS_STALLS_JSON_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/json_field.hpp"
#include "nlohmann/json.hpp"
#include "trainscope/stalls/analysis.hpp"

namespace trainscope::stalls::detail {

using ::trainscope::detail::DocumentError;
using ::trainscope::detail::Field;
using ::trainscope::detail::type_name;

// The live analysis as JSON (run_stalls_json's object) and back, without its
// series (iteration_s, wait_s and their starts stay empty).
nlohmann::json run_stalls_to_json(const RunStalls& run);
RunStalls run_stalls_from_json(const Field& field);

}  // namespace trainscope::stalls::detail

#endif  // TRAINSCOPE_SRC_STALLS_STALLS_JSON_HPP_
