// Reads a run directory, also while it is being written: a line cut short by
// a crash is ignored (reported by `truncated`), never an error. Every other
// defect is an error naming the file and line.
#ifndef TRAINSCOPE_RUN_READER_HPP_
#define TRAINSCOPE_RUN_READER_HPP_

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
  // Metadata; status combines the ranks: KILLED or FAILED if any rank is,
  // FAILED if any crashed, RUNNING while any runs, else FINISHED.
  const RunInfo& info() const noexcept override { return info_; }
  const std::vector<RankState>& ranks() const noexcept override { return ranks_; }
  bool crashed() const noexcept;

  absl::StatusOr<Chunk<RegionRow>> read_regions(std::uint32_t rank,
                                                std::uint64_t offset = 0) const override;
  absl::StatusOr<Chunk<MetricPoint>> read_metrics(std::uint32_t rank,
                                                  std::uint64_t offset = 0) const override;
  // The last summary the rank stored (empty Summary if none).
  absl::StatusOr<Summary> read_summary(std::uint32_t rank) const override;
  // Paths of the files under artifacts/, relative to it.
  std::vector<std::string> artifacts() const;

 private:
  RunReader() = default;
  std::string dir_;
  RunInfo info_;
  std::vector<RankState> ranks_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_READER_HPP_
