// Reads a run directory, also while it is being written: a line cut short by
// a crash is ignored (reported by `truncated`), never an error. Every other
// defect is an error naming the file and line; so is a read that fails (an
// I/O error is never taken for the end of the file) and anything but a regular
// file (a directory, a FIFO: never waited on) in a run file's place. The one
// reader of the format: the report, the CLI and Python's trainscope.read_run
// all read through it.
#ifndef TRAINSCOPE_RUN_RUN_READER_HPP_
#define TRAINSCOPE_RUN_RUN_READER_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/export/run_source.hpp"
#include "trainscope/run/environment_record.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_status.hpp"

namespace trainscope {

class RunReader final : public RunSource {
 public:
  // NotFound for a missing directory or run.json ("<dir>: no such run
  // directory", "<dir> is not a trainscope run: it has no run.json");
  // InvalidArgument or DataLoss naming the file for a damaged run.json, rank
  // or launcher file, or one of a newer format version.
  static absl::StatusOr<RunReader> Open(std::string dir);

  const std::string& dir() const noexcept override { return dir_; }
  // run.json's format version (1 or 2; docs/run-format.md).
  int version() const noexcept { return version_; }
  // Metadata; status combines the ranks and the launchers: KILLED or FAILED
  // if any is, FAILED if any crashed, RUNNING while any runs (or while none
  // has started), else FINISHED. A lost launcher (gone while RUNNING: its
  // command outlives it) does not count while ranks it started tell how its
  // command goes; with none, it is crashed.
  const RunInfo& info() const noexcept override { return info_; }
  // The ranks that recorded anything (rank files), by rank.
  const std::vector<RankState>& ranks() const noexcept override { return ranks_; }
  // The `trainscope run` processes of the job (format 2), by host and pid.
  const std::vector<LauncherState>& launchers() const noexcept { return launchers_; }
  const std::vector<std::string>& hosts() const noexcept override { return hosts_; }
  // The job's world size as its ranks report it (largest WORLD_SIZE seen, at
  // least the number of ranks); 0 before any rank recorded.
  std::uint32_t world_size() const noexcept { return world_size_; }
  // Whether a rank or launcher crashed (lost launchers whose ranks go on, or
  // ended, are not: see LauncherState::lost).
  bool crashed() const noexcept;
  // Whether the run goes on: a rank or launcher is RUNNING and not crashed,
  // or none has started yet (info().end_time_ms is 0 then).
  bool in_progress() const noexcept { return in_progress_; }

  absl::StatusOr<Chunk<RegionRow>> read_regions(std::uint32_t rank,
                                                std::uint64_t offset = 0) const override;
  absl::StatusOr<Chunk<MetricPoint>> read_metrics(std::uint32_t rank,
                                                  std::uint64_t offset = 0) const override;
  // The last summary the rank stored (empty Summary if none).
  absl::StatusOr<Summary> read_summary(std::uint32_t rank) const override;
  absl::StatusOr<Chunk<MetricPoint>> read_host_metrics(const std::string& host,
                                                       std::uint64_t offset = 0) const override;
  // As above, but reading at most about `max_bytes` from `offset` (whole
  // lines; one line at least, however long), for readers of large runs that
  // show progress or keep memory flat: the rest is read by calling again
  // from next_offset, until it reaches the file's size.
  absl::StatusOr<Chunk<RegionRow>> read_regions(std::uint32_t rank, std::uint64_t offset,
                                                std::uint64_t max_bytes) const;
  absl::StatusOr<Chunk<MetricPoint>> read_host_metrics(const std::string& host,
                                                       std::uint64_t offset,
                                                       std::uint64_t max_bytes) const;
  // Region rows from `offset`, about `max_bytes` at most (as read_regions),
  // handed to `visit` one by one without copying: the views are valid only
  // during the call. For followers of live runs that keep little of each row
  // (trainscope top, the diagnosis); read_regions is built on it.
  struct Scan {
    std::uint64_t next_offset = 0;
    bool truncated = false;  // an incomplete last line was left for later
    std::uint64_t rows = 0;
  };
  absl::StatusOr<Scan> scan_regions(std::uint32_t rank, std::uint64_t offset,
                                    std::uint64_t max_bytes,
                                    absl::FunctionRef<void(const RegionView&)> visit) const;
  // Where a follower at `from` in rank's region file resumes when it reads at
  // most about the last `keep_bytes` of it: `from` itself when the file grew
  // by no more than that since, else the first line that starts at or after
  // size - keep_bytes (the rows before it are skipped; `from` when no line
  // starts there yet). NotFound when the rank has no region file.
  absl::StatusOr<std::uint64_t> regions_tail_offset(std::uint32_t rank, std::uint64_t from,
                                                    std::uint64_t keep_bytes) const;
  // Paths of the files under artifacts/, relative to it.
  std::vector<std::string> artifacts() const;

  // The data files in the directory now (also of ranks without a rank file,
  // and hosts of no rank or launcher), with their sizes: by kind, then rank
  // or file name. Anything by such a name is listed, also what is not a
  // regular file (size 0), which reading then refuses by name.
  std::vector<RunFile> files() const;
  // environment.json's text (a JSON object): NotFound when the run has none
  // (not launched by `trainscope run`, or not yet written), InvalidArgument
  // naming the file when it is not a JSON object.
  absl::StatusOr<std::string> environment() const;
  // The last `max_bytes` of the command's log, from its first whole line
  // (all of it when shorter); NotFound when there is none.
  absl::StatusOr<std::string> log_tail(RunLog log, std::size_t max_bytes) const;
  // The plain names above are the first launcher's records (and, in runs
  // written before each launcher had its own, the only ones, shared by all).
  // A launcher's own (environment-<host>-<pid>.json, stdout-<host>-<pid>.log,
  // run_files.hpp), as above: NotFound when it wrote none.
  absl::StatusOr<std::string> environment(const LauncherState& launcher) const;
  // environment.json, typed (environment_record.hpp): NotFound as environment(),
  // InvalidArgument naming the file and the field when it is not such a document.
  absl::StatusOr<EnvironmentRecord> environment_record() const;
  absl::StatusOr<EnvironmentRecord> environment_record(const LauncherState& launcher) const;
  // A file the run keeps, by its path relative to the run directory as the
  // run's documents name it ("artifacts/pip-freeze-h-1.txt"): InvalidArgument
  // for a path that leaves the run directory (absolute, or through ".."),
  // NotFound when there is no such file.
  absl::StatusOr<std::string> read_run_relative_file(std::string_view path) const;
  absl::StatusOr<std::string> log_tail(RunLog log, std::size_t max_bytes,
                                       const LauncherState& launcher) const;

 private:
  RunReader() = default;
  std::string dir_;
  RunInfo info_;
  std::vector<RankState> ranks_;
  std::vector<LauncherState> launchers_;
  std::vector<std::string> hosts_;
  std::uint32_t world_size_ = 0;
  int version_ = 0;
  bool in_progress_ = true;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_READER_HPP_
