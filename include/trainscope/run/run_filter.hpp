// The run filter of Python's search_runs and `trainscope compare --a/--b`:
// MLflow-like comparisons joined by `and`, parsed once, here, for both
//
//   params.lr = '0.1' and status = 'FINISHED' and regions.BATCH.median < 0.5
//   metrics.loss < 0.2 and tags.team = 'vision'
//   attributes.id != "0123..." AND params.`batch size` >= 32
//
// and evaluated on a run's columns (docs/run-format.md, search_runs): the row
// (run_filter_row) and its evaluation (run_filter_matches) are this file's, for
// both; Python binds them (trainscope._core._RunFilter, _RunReader.filter_row).
//
// Grammar (Python's regular expressions, as search_runs had them): tokens,
// each after optional white space, are tried in this order
//   name    (?:[A-Za-z_]\w*\.)*(?:`[^`]+`|[A-Za-z_][\w.:/-]*)
//   op      <= >= != = < >
//   string  '[^']*' or "[^"]*" (no escapes)
//   number  [-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?
// and a filter is `name op (string|number)` joined by the name `and` (any
// case). A column loses its backticks and an `attributes.` prefix (`id` is
// run_id) and must be one of kRunFilterAttributes or params.<k>, tags.<k>,
// regions.<KEY>.<stat> (a region's statistic), metrics.<k> (a logged metric),
// ledger.<figure> (RunFilterRowOptions::ledger_columns). Text is UTF-8, read
// as Python reads a str: \s is Python's white space (also U+001C-U+001F, U+0085, U+00A0,
// U+2000-U+200A, U+3000, ...), \w a letter, digit or `_` and \d a decimal digit of any script, by
// Python 3.11's Unicode 14 tables (code points unassigned there may differ); a byte that is not
// UTF-8 is one character that is none of these, shown as \udcXX (as Python's surrogateescape
// decodes it).
#ifndef TRAINSCOPE_RUN_RUN_FILTER_HPP_
#define TRAINSCOPE_RUN_RUN_FILTER_HPP_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {

// The columns of a run besides params.<k>, tags.<k>, regions.<KEY>.<stat> and metrics.<k>,
// in search_runs' order (Python's _ATTRIBUTES).
inline constexpr std::string_view kRunFilterAttributes[] = {
    "run_id",   "name",       "experiment", "status", "start_time",
    "end_time", "duration_s", "world_size", "dir"};

struct RunFilterClause {
  // Normalized: "status", "run_id" (attributes.id), "params.lr", "tags.x",
  // "regions.BATCH.median", "metrics.loss".
  std::string column;
  std::string op;        // "=", "!=", "<", ">", "<=", ">="
  bool numeric = false;  // a number literal (compares numerically) vs a quoted string
  std::string text;      // the string without its quotes; a number as written
  double number = 0.0;   // the number literal (as Python's float(): 1e999 is inf)
};

struct RunFilter {
  std::vector<RunFilterClause> clauses;  // empty: keeps every run
  std::string text;                      // as given
};

// Empty or white space only: no clauses. Otherwise InvalidArgument with
// Python's messages, quoting the filter as Python's repr() does:
//   bad filter 'x ~ 1': cannot read '~ 1' (expected: column op value [and ...],
//       op one of = != < > <= >=)
//   bad filter 'x =': expected `column op value` at 'x =' (op one of = != < > <= >=;
//       quote strings: params.lr = '0.1')
//   bad filter 'x = 1': unknown column 'x' (one of run_id, ..., params.<k>, tags.<k>,
//       regions.<KEY>.<stat>, metrics.<k>)
//   bad filter "a = 'b' or c = 1": expected `and` at 'or' (only `and` joins comparisons)
//   bad filter 'a = 1 and': nothing after the last `and`
absl::StatusOr<RunFilter> parse_run_filter(std::string_view text);

// What run_filter_row reads beyond the run's metadata.
struct RunFilterRowOptions {
  // regions.<KEY>.<stat>: every key its summaries hold on this device, every
  // numeric statistic (kTimeStatsFields but `approximate`).
  Device device = Device::kCPU;
  bool regions = true;  // read the summaries for regions.*
  bool metrics = true;  // read the metrics files for metrics.*
  // ledger.<figure> (tokens_per_s, samples_per_s, mfu: the efficiency ledger's,
  // docs/ledger.md) of a run whose metrics hold work (metrics.work/samples or
  // metrics.work/tokens: read with `metrics`): derived by a room above this one
  // (steps::add_ledger_columns), set by the callers that show or filter them
  // (search_runs, `trainscope compare`); none when unset.
  std::function<absl::Status(const RunReader& run, std::map<std::string, std::string>* row)>
      ledger_columns;
};
// What a filter needs (its regions.* and metrics.* columns), for callers that
// read the row only to filter.
RunFilterRowOptions row_options_for(const RunFilter& filter, Device device = Device::kCPU);

// One run's columns, the one row search_runs and `trainscope compare --a/--b`
// filter (and search_runs shows): run_id, name, experiment, status,
// start_time and end_time (Unix ms as decimal text; no end_time while the run
// goes on), duration_s (seconds as Python prints the float: "361.2"; none
// while no rank or launcher recorded), world_size, dir, params.<k>, tags.<k>,
// regions.<KEY>.<stat> (the summaries' statistic of KEY on the device, in
// seconds for durations, the mean over the ranks that have it; "nan" when
// none has a value; a summary that cannot be read is left out, as check_run
// warns) and metrics.<k> (each metric's last value, per rank in file order,
// the mean over ranks; format-1 runs' system/
// readings are hardware, not metrics). Numbers as Python's repr() of the
// float. An error names the metrics file that cannot be read.
absl::StatusOr<std::map<std::string, std::string>> run_filter_row(
    const RunReader& run, const RunFilterRowOptions& options = {});

// Whether `row` satisfies every clause (Python's _compare): a column the row
// lacks never matches; a number literal compares with the value read as
// Python's float() reads it (unreadable or NaN: no match); a string literal
// compares as a string (byte order: Unicode's code point order), except
//  - on start_time/end_time, where it is an ISO 8601 date or time, UTC unless
//    it has an offset: '2026', '2026-11-26', '2026-11-26T06:00:00.5Z',
//    '2026-11-26 07:00+01:00' (pandas.Timestamp reads more, like '2026/11/26'
//    or 'now': no match here; '', 'NaT' and 'nan' are its NaT, which only !=
//    matches), and
//  - on duration_s and metrics.*, where a NaN value never matches.
bool run_filter_matches(const RunFilter& filter, const std::map<std::string, std::string>& row);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_FILTER_HPP_
