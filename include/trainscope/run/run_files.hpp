// The files of a run directory by what they hold, named once (in the run
// room) for their writers and RunReader: the data files a reader lists, and
// what `trainscope run` (launch) adds beside Run's records: the command's
// logs, environment.json and artifacts. Layout: docs/run-format.md.
#ifndef TRAINSCOPE_RUN_RUN_FILES_HPP_
#define TRAINSCOPE_RUN_RUN_FILES_HPP_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "trainscope/export/run_record.hpp"

namespace trainscope {

// A data file of a run directory, as RunReader::files() lists it.
enum class RunFileKind {
  kRegions,      // regions-<rank>.csv
  kMetrics,      // metrics-<rank>.csv (format 1: with the hardware readings)
  kSummary,      // summary-<rank>.json
  kHostMetrics,  // host-<host>.csv (format 2: hardware readings per host)
};
struct RunFile {
  RunFileKind kind = RunFileKind::kRegions;
  std::uint32_t rank = kNoRank;  // whose file (regions, metrics, summary)
  // A host file's host: as a rank or launcher of the run names it, else as
  // the file name spells it (host names are sanitized there).
  std::string host;
  std::string path;              // "<run dir>/regions-0.csv"
  std::uint64_t size_bytes = 0;  // when listed
  // The first line of a CSV file, without its newline ("" for a summary).
  std::string_view csv_header;
};

// Whether `dir` holds a run (its run.json), without reading it.
bool is_run_directory(const std::string& dir);

// A data file's name: "regions-3.csv", "metrics-3.csv", "summary-3.json"
// (of `rank`), "host-node7.csv" (of `host`, sanitized as the writer does).
std::string run_data_file_name(RunFileKind kind, std::uint32_t rank, std::string_view host = {});

// The command's output as `trainscope run` records it.
enum class RunLog { kStdout, kStderr };
// "<run_dir>/stdout.log" or "<run_dir>/stderr.log".
std::string run_log_path(const std::string& run_dir, RunLog log);
// "<run_dir>/environment.json": the host, command line, git commit and tools
// of a `trainscope run` (a JSON object).
std::string run_environment_path(const std::string& run_dir);

// One record per launcher: each `trainscope run` of a run writes its own logs,
// environment and environment artifacts, named by its host and pid:
// "stdout.log" -> "stdout-node17-4200.log", "environment.json" ->
// "environment-node17-4200.json", "pip-freeze.txt" ->
// "pip-freeze-node17-4200.txt" (the host as in launcher file names). The
// first launcher also links its files to the plain names, which runs written
// before launchers had their own records hold alone.
std::string launcher_variant_name(std::string_view name, std::string_view host, std::int64_t pid);
// "<run_dir>/stdout-<host>-<pid>.log", "<run_dir>/stderr-<host>-<pid>.log".
std::string run_log_path(const std::string& run_dir, RunLog log, std::string_view host,
                         std::int64_t pid);
// "<run_dir>/environment-<host>-<pid>.json".
std::string run_environment_path(const std::string& run_dir, std::string_view host,
                                 std::int64_t pid);
// Writes <run_dir>/artifacts/<name> through a temporary name that readers
// skip, then renames it into place (fsynced): readers never see part of it.
absl::Status write_run_artifact(const std::string& run_dir, std::string_view name,
                                std::string_view contents);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_FILES_HPP_
