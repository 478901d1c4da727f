// The run directory's files (internal): names, the JSON of run.json, the rank
// files and summaries, shared by the run store's writer (RunStoreExporter),
// Run and RunReader; other rooms use the public run_files.hpp and RunReader.
// Layout and format: docs/run-format.md.
#ifndef TRAINSCOPE_SRC_RUN_RUN_FORMAT_HPP_
#define TRAINSCOPE_SRC_RUN_RUN_FORMAT_HPP_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/stats/summary.hpp"

namespace trainscope::run::detail {

inline constexpr std::string_view kRunFormat = "trainscope.run";
// 2: launchers are not ranks (launcher-<host>-<pid>.json) and hardware
// samples are per host (host-<host>.csv). Readers read 1 and 2.
inline constexpr int kRunFormatVersion = 2;
inline constexpr int kOldestReadableVersion = 1;
inline constexpr std::string_view kRunFileName = "run.json";
inline constexpr std::string_view kArtifactsDirName = "artifacts";
// What `trainscope run` writes beside Run's records (run_files.hpp).
inline constexpr std::string_view kEnvironmentFileName = "environment.json";
inline constexpr std::string_view kStdoutLogName = "stdout.log";
inline constexpr std::string_view kStderrLogName = "stderr.log";
// Artifacts being copied in; readers do not list them.
inline constexpr std::string_view kArtifactTmpPrefix = ".trainscope-tmp-";
inline constexpr std::string_view kRegionsHeader =
    "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch,gpu_start_ns,stream,"
    "cpu_wait_ns\n";
// The headers of runs written before steps carried their run-queue wait, and
// before GPU regions carried their device start: readers take all three, and
// rows of 8, 10 or 11 fields.
inline constexpr std::string_view kRegionsHeaderWithoutWait =
    "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch,gpu_start_ns,stream\n";
inline constexpr std::string_view kRegionsHeaderWithoutGpu =
    "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n";
inline constexpr std::string_view kMetricsHeader = "key,value,step,timestamp_ms,rank\n";

std::string rank_file_name(std::uint32_t rank);     // "rank-3.json"
std::string regions_file_name(std::uint32_t rank);  // "regions-3.csv"
std::string metrics_file_name(std::uint32_t rank);  // "metrics-3.csv"
std::string summary_file_name(std::uint32_t rank);  // "summary-3.json"
// A host name as it appears in file names: [A-Za-z0-9._-], anything else '_'.
std::string host_file_part(std::string_view host);
std::string host_metrics_file_name(std::string_view host);  // "host-node7.csv"
std::string launcher_file_name(std::string_view host,
                               std::int64_t pid);  // "launcher-node7-42.json"
// "<dir>/<name>".
std::string join_path(const std::string& dir, std::string_view name);

// Rank and launcher files: their states without `crashed`, which readers
// derive. The fields of the process (host, pid, status, times, flush
// interval) are written and read by one function each for both kinds.
std::string format_rank_file(const RankState& state);
absl::StatusOr<RankState> parse_rank_file(std::string_view text, const std::string& path);
std::string format_launcher_file(const LauncherState& state);
absl::StatusOr<LauncherState> parse_launcher_file(std::string_view text, const std::string& path);

std::string format_run_file(const RunInfo& info);
// Errors name `path`; *version: the file's format version (1 or 2).
absl::StatusOr<RunInfo> parse_run_file(std::string_view text, const std::string& path,
                                       int* version = nullptr);
// OK when `text` is a JSON object; else an error naming `path`.
absl::Status check_json_object(std::string_view text, const std::string& path);

// The stats JSON of format_summary(summary, StatsFormat::kJson); null is NaN.
absl::StatusOr<Summary> parse_summary_file(std::string_view text, const std::string& path);

// Adds info's params and tags to <dir>/run.json under an exclusive lock of
// <dir>/.lock, so ranks updating concurrently lose nothing. A param already
// stored with another value is an error naming the key and both values.
absl::Status merge_into_run_file(const std::string& dir, const RunInfo& info);

// Writes <run_dir>/artifacts/<name> through a temporary name that readers
// skip (kArtifactTmpPrefix), then renames it into place.
absl::Status write_artifact(const std::string& run_dir, std::string_view name,
                            std::string_view contents);

}  // namespace trainscope::run::detail

#endif  // TRAINSCOPE_SRC_RUN_RUN_FORMAT_HPP_
