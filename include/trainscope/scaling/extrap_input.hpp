// Extra-P's input formats, so existing measurement sets work: the text format
// (PARAMETER / POINTS / REGION / METRIC / DATA lines), JSON (the current
// "parameters"+"measurements" layout and the legacy id-based layout) and JSON
// Lines ({"params":{"p":4},"value":1.2,"callpath":"epoch","metric":"time"}).
// Every error names the file and the line (1-based) and what is wrong; JSON
// content errors name the JSON path instead of a line. A point that appears
// twice for the same region and metric is one point: its values are merged as
// repetitions.
#ifndef TRAINSCOPE_SCALING_EXTRAP_INPUT_HPP_
#define TRAINSCOPE_SCALING_EXTRAP_INPUT_HPP_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/scaling/measurement_set.hpp"

namespace trainscope::scaling {

// Parse from memory; `name` is used in error messages ("file.txt:12: ...").
absl::StatusOr<MeasurementSet> parse_extrap_text(std::string_view text, std::string_view name);
absl::StatusOr<MeasurementSet> parse_extrap_json(std::string_view text, std::string_view name);
absl::StatusOr<MeasurementSet> parse_extrap_jsonl(std::string_view text, std::string_view name);

// Read a file; the format from the extension (.txt text, .json JSON, .jsonl
// JSON Lines), else from the content (a '{' first: JSON, or JSON Lines if it
// is not one document; otherwise text).
absl::StatusOr<MeasurementSet> read_extrap_file(const std::string& path);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_EXTRAP_INPUT_HPP_
