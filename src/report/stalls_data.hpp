// The data stalls of a report page (internal): a run's live breakdown, from
// trainscope::stalls::analyze_run (the figures `trainscope stalls RUN --json`
// prints), and a differential analysis's DIR/stalls.json (what
// `trainscope stalls --dataset D -- cmd` stored beside its runs).
#ifndef TRAINSCOPE_SRC_REPORT_STALLS_DATA_HPP_
#define TRAINSCOPE_SRC_REPORT_STALLS_DATA_HPP_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "report/run_data.hpp"
#include "trainscope/stalls/differential.hpp"

namespace trainscope::report::detail {

// The stalls room's document and the tags it gives each run of an analysis.
inline constexpr const char* kStallsFileName = stalls::kAnalysisFileName;
inline constexpr const char* kStallsAnalysisTag = stalls::kAnalysisTag;
inline constexpr const char* kStallsLegTag = stalls::kLegTag;

// The run page's live data stalls: null when the run has no IO rows (no
// section); {"error": ...} when analyze_run fails otherwise; else the run's
// and each pass's figures (the fields and values of `trainscope stalls RUN
// --json`), the rank they are of, each pass's start and every wait over the
// run as an envelope of at most `max_points` buckets.
nlohmann::json run_stalls_json(const RunData& run, std::size_t max_points);

// Whether `dir` holds a stalls.json.
bool has_stalls_analysis(const std::string& dir);

// A differential analysis for the page: {"dir", "file", "analysis": the
// stalls.json that stalls::read_differential read, as its writer writes it},
// or {"dir", "file", "error"} naming the file and what is wrong with it
// (missing, not JSON, a field missing or of the wrong type).
nlohmann::json stalls_analysis_json(const std::string& dir);
// The same from the file's text: {"analysis": ...} or {"error": ...} naming `file`.
nlohmann::json parse_stalls_analysis(std::string_view text, const std::string& file);

// The analysis directory a run belongs to: its kStallsAnalysisTag when that
// directory holds stalls.json, else <run>/../.. when the run lies in its
// runs/ (an analysis copied elsewhere), else the tag as recorded. Empty for a
// run without the tag.
std::string stalls_analysis_dir_of(const std::string& run_dir,
                                   const std::map<std::string, std::string>& tags);

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_STALLS_DATA_HPP_
