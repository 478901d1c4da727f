// Reads a run directory, also while it is being written: a line cut short by
// a crash is ignored (reported by `truncated`), never an error. Every other
// defect is an error naming the file and line.
#ifndef TRAINSCOPE_RUN_RUN_READER_HPP_
#define TRAINSCOPE_RUN_RUN_READER_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/export/run_source.hpp"

namespace trainscope {

class RunReader final : public RunSource {
 public:
  static absl::StatusOr<RunReader> Open(std::string dir);

  const std::string& dir() const noexcept override { return dir_; }
  // Metadata; status combines the ranks and the launchers: KILLED or FAILED
  // if any is, FAILED if any crashed, RUNNING while any runs (or while none
  // has started), else FINISHED.
  const RunInfo& info() const noexcept override { return info_; }
  // The ranks that recorded anything (rank files), by rank.
  const std::vector<RankState>& ranks() const noexcept override { return ranks_; }
  // The `trainscope run` processes of the job (format 2), by host and pid.
  const std::vector<LauncherState>& launchers() const noexcept { return launchers_; }
  const std::vector<std::string>& hosts() const noexcept override { return hosts_; }
  // The job's world size as its ranks report it (largest WORLD_SIZE seen, at
  // least the number of ranks); 0 before any rank recorded.
  std::uint32_t world_size() const noexcept { return world_size_; }
  bool crashed() const noexcept;

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
  // Paths of the files under artifacts/, relative to it.
  std::vector<std::string> artifacts() const;

 private:
  RunReader() = default;
  std::string dir_;
  RunInfo info_;
  std::vector<RankState> ranks_;
  std::vector<LauncherState> launchers_;
  std::vector<std::string> hosts_;
  std::uint32_t world_size_ = 0;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_RUN_READER_HPP_
