// parse_run_filter on arbitrary bytes (the text of `trainscope compare --a`
// or of search_runs' filter), and every filter it reads evaluated on a fixed
// row of every kind of column and on a row of its own literals.
// Nothing may crash or trip a sanitizer; errors are fine, but they quote the
// filter, and what parses holds together.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "trainscope/run/run_filter.hpp"

namespace {

const std::map<std::string, std::string>& fixed_row() {
  static const std::map<std::string, std::string> row = {
      {"run_id", "0123456789abcdef0123456789abcdef"},
      {"name", "run-a"},
      {"experiment", "Default"},
      {"status", "FINISHED"},
      {"start_time", "1795672800000"},
      {"end_time", "1795672861200"},
      {"duration_s", "61.2"},
      {"world_size", "2"},
      {"dir", "/runs/a"},
      {"params.lr", "0.1"},
      {"params.n", "1_000"},
      {"params.batch size", "32"},
      {"tags.team", "perf"},
      {"regions.BATCH.median", "nan"},
      {"metrics.loss", "nan"},
  };
  return row;
}

bool known_op(const std::string& op) {
  return op == "=" || op == "!=" || op == "<" || op == ">" || op == "<=" || op == ">=";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  absl::StatusOr<trainscope::RunFilter> filter = trainscope::parse_run_filter(text);
  if (!filter.ok()) {
    if (!absl::IsInvalidArgument(filter.status()) ||
        !absl::StartsWith(filter.status().message(), "bad filter ")) {
      std::abort();
    }
    return 0;
  }
  if (filter->text != text) std::abort();
  std::map<std::string, std::string> own;
  for (const trainscope::RunFilterClause& clause : filter->clauses) {
    if (clause.column.empty() || !known_op(clause.op)) std::abort();
    if (clause.numeric && std::isnan(clause.number)) std::abort();
    own[clause.column] = clause.text;
  }
  (void)trainscope::run_filter_matches(*filter, fixed_row());
  (void)trainscope::run_filter_matches(*filter, own);
  // A column none of the rows has never matches.
  if (!filter->clauses.empty() && trainscope::run_filter_matches(*filter, {})) std::abort();
  return 0;
}
