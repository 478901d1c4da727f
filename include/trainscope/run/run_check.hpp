// The checks every reader of a run makes on what it reads, in one place: a
// rank that ended with regions in its summary but none on disk (an error: the
// run's timings are gone), a regions file holding fewer rows of a key than the
// rank's summary counts (a warning: the file was cut short, every statistic
// of the rows is of part of the run), and a summary that cannot be read (a
// warning: the run stays readable without it). The report, stalls, model,
// diagnose, compare and Python's read_run and search_runs all call check_run
// and say what it finds, naming the file (docs/run-format.md, "Damage").
//
//   absl::StatusOr<std::vector<RunProblem>> problems = check_run(reader);
//   if (absl::Status damaged = run_problems_error(*problems); !damaged.ok()) ...
#ifndef TRAINSCOPE_RUN_RUN_CHECK_HPP_
#define TRAINSCOPE_RUN_RUN_CHECK_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/summary.hpp"

namespace trainscope {

enum class RunProblemKind {
  // Error: a rank that ended (FINISHED, KILLED or FAILED) and whose summary
  // counts regions has no regions file, or one without a row.
  kRegionsMissing,
  kRegionsEmpty,
  // Warning: the regions file holds fewer rows of a key on a device than the
  // rank's summary counts (count + warmup_excluded: warm-up regions are rows
  // too), in a rank that ended.
  kRegionsShort,
  // Warning: summary-<r>.json is damaged; readers go on without it.
  kSummaryUnreadable,
  // Warning: the regions file holds rows of more than one process at once
  // (two series of BATCH steps of one thread advancing together: processes
  // started with the same RANK before ranks were claimed, or a child process
  // that timed BATCH); the message names the first such line. Found where
  // check_run reads a rank's rows itself (not in `counted`).
  kRegionsMixed,
};

struct RunProblem {
  RunProblemKind kind = RunProblemKind::kRegionsShort;
  // An error: the run's region data is not there, so no reader uses the run
  // (a study skips it, naming it); else a warning each reader prints.
  bool error = false;
  std::uint32_t rank = 0;
  std::string path;  // the file: "<dir>/regions-0.csv", "<dir>/summary-0.json"
  // kRegionsShort (and kRegionsEmpty: the first key the summary counts).
  std::string key;
  Device device = Device::kCPU;
  std::uint64_t summary_rows = 0;  // rows the summary counts
  std::uint64_t file_rows = 0;     // rows the file holds
  // The whole sentence, naming the file (and key and both counts):
  // "<dir>/regions-0.csv holds 453 rows of BATCH on CPU, but summary-0.json
  // counts 900 (the file was cut short or lost rows): statistics of its rows
  // cover part of the run".
  std::string message;
};

// Rows of one key on one device in a rank's regions file.
struct RegionCount {
  std::string key;
  Device device = Device::kCPU;
  std::uint64_t rows = 0;
};

// What a reader saw of one rank's files: the input of the pure check.
struct RankRecords {
  RankState state;
  std::string regions_path;
  // Whether the regions file exists; its rows by key and device (only looked
  // at when it does).
  bool regions_found = false;
  // False when the file could not be read (an I/O error, a bad line): its
  // rows are not held to the summary; the readers of the rows say why.
  bool regions_read = true;
  std::vector<RegionCount> rows;
  // What the rows show of more than one writing process (RankWriterCheck's
  // finding, naming the file and line), empty when nothing.
  std::string mixed_rows;
  std::string summary_path;
  // The summary read (an empty one when the rank stored none), or why it
  // could not be read.
  absl::StatusOr<Summary> summary = Summary{};
};

// The pure check over what was read: the problems, by rank, errors first
// within a rank. Only ranks that ended (FINISHED, KILLED, FAILED; not RUNNING
// nor crashed: their summaries are not final) are held to their summary.
std::vector<RunProblem> check_rank_records(const std::vector<RankRecords>& ranks);

// Rows a reader already counted while reading regions, by rank; check_run
// counts the ranks it needs and does not find here by reading their files.
using RegionCounts = std::map<std::uint32_t, std::vector<RegionCount>>;

// Reads what check_rank_records needs of `reader`'s run (every summary; the
// rows of each ended rank whose summary counts regions, unless in `counted`)
// and checks it. A regions file that cannot be read (an I/O error, a bad
// line) is not checked: reading its rows fails, naming it, and that is the
// error its readers report (read_run raises it when its regions are read).
absl::StatusOr<std::vector<RunProblem>> check_run(const RunReader& reader,
                                                  const RegionCounts* counted = nullptr);

// The first error among `problems` as a DataLoss status (its message), else OK.
absl::Status run_problems_error(const std::vector<RunProblem>& problems);
// The messages of the warnings among `problems`.
std::vector<std::string> run_problem_warnings(const std::vector<RunProblem>& problems);
// The ranks whose summary is unreadable (kSummaryUnreadable), for readers that
// go on without those summaries.
std::vector<std::uint32_t> unreadable_summaries(const std::vector<RunProblem>& problems);

// Whether `dir` holds a run or what is left of one: run.json, or a rank,
// launcher, regions or summary file (a run whose run.json is lost). Readers
// that gather runs from a folder take these too, so a damaged run is named
// when it is skipped rather than silently missing.
bool holds_run_files(const std::string& dir);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_CHECK_HPP_
