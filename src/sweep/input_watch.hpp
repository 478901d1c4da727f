// The sweep's input file while the sweep runs (internal): re-read when it
// changes (the local scheduler's live update), and radT's CSV given back
// the Status and Run of its rows when the sweep ends (both schedulers).
// SweepOptions::input names the file.
#ifndef TRAINSCOPE_SRC_SWEEP_INPUT_WATCH_HPP_
#define TRAINSCOPE_SRC_SWEEP_INPUT_WATCH_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/sweep/inputs.hpp"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::sweep::detail {

// The input's modification time (ns since the epoch); -1 when it cannot be stat()ed.
std::int64_t modification_time_ns(const std::string& path);

class InputWatch {
 public:
  // Remembers the input's modification time now; `program` is what
  // read_plan() gets (the command after `--`).
  InputWatch(std::string path, std::vector<std::string> program);

  // nullopt while the modification time is the one seen last (at
  // construction or the previous poll()); else the input read again
  // (read_plan), or why it no longer reads, naming the file: the caller
  // keeps its plan. A file that is gone and comes back is read again.
  std::optional<absl::StatusOr<Plan>> poll();
  // The input as it is now is the one seen: the scheduler's own write-back
  // (RadtProgress) is not an edit to read again.
  void accept_current();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> program_;
  std::int64_t seen_ns_;
};

// radT's CSV shows the sweep's progress itself, as radT does: the Status
// (FINISHED, FAILED, RUNNING, KILLED) and Run (run id) of the row of every
// job that started, written into `path` in one atomic rewrite
// (write_radt_statuses). Nothing for a `path` that is not a .csv, or for jobs
// not read from it (no radT row). Every row is tried; the error is the first
// row that could not be written.
absl::Status write_radt_progress(const std::string& path, const std::vector<JobRecord>& jobs);

// The same as the jobs end (radT's users watch the file; a sweep that fails
// later keeps the rows of the jobs that ended): pending() gives the rows of
// the jobs that ended (FINISHED, FAILED, KILLED) with a status or run not
// given before, and remembers them; the caller writes them
// (write_radt_statuses), outside its lock. Nothing for a `path` that is not a .csv.
class RadtProgress {
 public:
  explicit RadtProgress(std::string path);
  std::vector<RadtRowStatus> pending(const std::vector<JobRecord>& jobs);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool csv_ = false;
  std::map<std::string, std::pair<JobStatus, std::string>> given_;  // job id -> status, run
};

// How often the local scheduler looks at the input's modification time.
inline constexpr int kInputCheckMs = 200;

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_INPUT_WATCH_HPP_
