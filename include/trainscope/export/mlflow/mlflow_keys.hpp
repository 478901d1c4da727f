// MLflow's rules for keys and values (mlflow/utils/validation.py), in one
// place: Run refuses what MLflow would refuse when the user logs it, and the
// syncer skips what an older run directory holds that MLflow would refuse.
// Public (Abseil only) so that Run, in the run room, applies them too.
#ifndef TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_KEYS_HPP_
#define TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_KEYS_HPP_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace trainscope::mlflow {

inline constexpr std::size_t kMaxKeyLength = 250;
inline constexpr std::size_t kMaxParamValueLength = 6000;
inline constexpr std::size_t kMaxTagValueLength = 8000;

// At most 250 characters of [/\w.\- :] (non-ASCII bytes pass: Python's \w
// matches letters of any script, and the server has the last word), a
// normalized relative path (no "..", ".", empty or leading parts). Errors
// start with "<kind> key" ("param key", "metric key", "MLflow key").
absl::Status validate_key(std::string_view key, std::string_view kind = "MLflow");
// A value of at most `max_length` characters.
absl::Status validate_value(std::string_view kind, std::string_view key, std::string_view value,
                            std::size_t max_length);

}  // namespace trainscope::mlflow

#endif  // TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_KEYS_HPP_
