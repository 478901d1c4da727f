// Reads a run directory, also while it is being written: a line cut short by
// a crash is ignored (reported by `truncated`), never an error. Every other
// defect is an error naming the file and line.
#ifndef TRAINSCOPE_RUN_READER_HPP_
#define TRAINSCOPE_RUN_READER_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/exporter.hpp"
#include "trainscope/run_record.hpp"

namespace trainscope {

// One region sample as stored (docs/run-format.md).
struct RegionRow {
  std::string key;
  Device device = Device::kCPU;
  std::uint32_t rank = 0;
  std::uint32_t thread = 0;
  std::int64_t start_unix_ns = 0;
  std::int64_t duration_ns = 0;
  std::int64_t step = 0;   // CPU BATCH regions this thread completed before this one ended
  std::int64_t epoch = 0;  // likewise for EPOCH
};

// One rank's process, as its rank file records it.
struct RankState {
  RankInfo rank;
  RunStatus status = RunStatus::kRunning;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t start_time_ms = 0;
  std::int64_t end_time_ms = 0;
  std::int64_t heartbeat_ms = 0;  // last flush
  bool crashed = false;           // RUNNING, but its process is gone or silent
};

// Rows read from a byte offset on, and where the next read starts.
template <typename Row>
struct Chunk {
  std::vector<Row> rows;
  std::uint64_t next_offset = 0;
  bool truncated = false;  // an incomplete last line was left for later
};

class RunReader {
 public:
  static absl::StatusOr<RunReader> Open(std::string dir);

  const std::string& dir() const noexcept { return dir_; }
  // Metadata; status combines the ranks: KILLED or FAILED if any rank is,
  // FAILED if any crashed, RUNNING while any runs, else FINISHED.
  const RunInfo& info() const noexcept { return info_; }
  const std::vector<RankState>& ranks() const noexcept { return ranks_; }
  bool crashed() const noexcept;

  absl::StatusOr<Chunk<RegionRow>> read_regions(std::uint32_t rank, std::uint64_t offset = 0) const;
  absl::StatusOr<Chunk<MetricPoint>> read_metrics(std::uint32_t rank, std::uint64_t offset = 0) const;
  // The last summary the rank stored (empty Summary if none).
  absl::StatusOr<Summary> read_summary(std::uint32_t rank) const;
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
