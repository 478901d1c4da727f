// A run's durable record as exporters that replay it read it: metadata,
// ranks, and each rank's rows from a byte offset on. The MLflow syncer reads
// a RunSource, so the export layer does not depend on the run store that
// implements it (RunReader, trainscope/run/run_reader.hpp).
#ifndef TRAINSCOPE_EXPORT_RUN_SOURCE_HPP_
#define TRAINSCOPE_EXPORT_RUN_SOURCE_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/export/run_record.hpp"
#include "trainscope/stats/summary.hpp"

namespace trainscope {

class RunSource {
 public:
  virtual ~RunSource() = default;
  // The run's directory (syncers keep their cursor files there).
  virtual const std::string& dir() const noexcept = 0;
  virtual const RunInfo& info() const noexcept = 0;
  virtual const std::vector<RankState>& ranks() const noexcept = 0;
  virtual absl::StatusOr<Chunk<RegionRow>> read_regions(std::uint32_t rank,
                                                        std::uint64_t offset = 0) const = 0;
  virtual absl::StatusOr<Chunk<MetricPoint>> read_metrics(std::uint32_t rank,
                                                          std::uint64_t offset = 0) const = 0;
  virtual absl::StatusOr<Summary> read_summary(std::uint32_t rank) const = 0;
  // The hosts of the run (launchers' and ranks'), sorted.
  virtual const std::vector<std::string>& hosts() const noexcept = 0;
  // A host's hardware readings (rank kNoRank: host-wide) from a byte offset
  // on; an empty chunk for a host without samples.
  virtual absl::StatusOr<Chunk<MetricPoint>> read_host_metrics(const std::string& host,
                                                               std::uint64_t offset = 0) const = 0;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_RUN_SOURCE_HPP_
