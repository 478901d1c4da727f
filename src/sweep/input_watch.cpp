#include "sweep/input_watch.hpp"

#include <sys/stat.h>

#include <utility>

#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep::detail {

std::int64_t modification_time_ns(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

InputWatch::InputWatch(std::string path, std::vector<std::string> program)
    : path_(std::move(path)), program_(std::move(program)), seen_ns_(modification_time_ns(path_)) {}

std::optional<absl::StatusOr<Plan>> InputWatch::poll() {
  const std::int64_t now_ns = modification_time_ns(path_);
  if (now_ns == seen_ns_) return std::nullopt;
  seen_ns_ = now_ns;
  return read_plan(path_, program_);
}

absl::Status write_radt_progress(const std::string& path, const std::vector<JobRecord>& jobs) {
  if (path.size() < 4 || path.compare(path.size() - 4, 4, ".csv") != 0) return absl::OkStatus();
  absl::Status first;
  for (const JobRecord& record : jobs) {
    if (record.status == JobStatus::kQueued) continue;
    absl::StatusOr<int> row = radt_line(record.job);
    if (!row.ok()) continue;
    absl::Status written =
        write_radt_status(path, *row, job_status_name(record.status), record.run_id);
    if (!written.ok() && first.ok()) first = written;
  }
  return first;
}

}  // namespace trainscope::sweep::detail
