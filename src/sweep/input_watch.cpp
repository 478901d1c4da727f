#include "sweep/input_watch.hpp"

#include <sys/stat.h>

#include <optional>
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

void InputWatch::accept_current() { seen_ns_ = modification_time_ns(path_); }

namespace {

bool is_csv(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
}

// The row of radT's CSV a job came from, with its status and run; none for
// a job not read from one.
std::optional<RadtRowStatus> row_status(const JobRecord& record) {
  absl::StatusOr<int> row = radt_line(record.job);
  if (!row.ok()) return std::nullopt;
  return RadtRowStatus{*row, std::string(job_status_name(record.status)), record.run_id};
}

}  // namespace

absl::Status write_radt_progress(const std::string& path, const std::vector<JobRecord>& jobs) {
  if (!is_csv(path)) return absl::OkStatus();
  std::vector<RadtRowStatus> rows;
  for (const JobRecord& record : jobs) {
    if (record.status == JobStatus::kQueued) continue;
    if (std::optional<RadtRowStatus> row = row_status(record)) rows.push_back(std::move(*row));
  }
  return write_radt_statuses(path, rows);
}

RadtProgress::RadtProgress(std::string path) : path_(std::move(path)), csv_(is_csv(path_)) {}

std::vector<RadtRowStatus> RadtProgress::pending(const std::vector<JobRecord>& jobs) {
  std::vector<RadtRowStatus> rows;
  if (!csv_) return rows;
  for (const JobRecord& record : jobs) {
    if (record.status != JobStatus::kFinished && record.status != JobStatus::kFailed &&
        record.status != JobStatus::kKilled) {
      continue;
    }
    auto [it, added] = given_.try_emplace(record.job.id, record.status, record.run_id);
    if (!added) {
      if (it->second.first == record.status && it->second.second == record.run_id) continue;
      it->second = {record.status, record.run_id};
    }
    if (std::optional<RadtRowStatus> row = row_status(record)) rows.push_back(std::move(*row));
  }
  return rows;
}

}  // namespace trainscope::sweep::detail
