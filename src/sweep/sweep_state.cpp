#include "trainscope/sweep/sweep_state.hpp"

#include <filesystem>
#include <system_error>

#include "common/files.hpp"
#include "fmt/format.h"
#include "sweep/state_file.hpp"

namespace trainscope::sweep {
namespace {

namespace fs = std::filesystem;

bool holds_run(const fs::path& dir) {
  std::error_code error;
  return !dir.empty() && fs::is_regular_file(dir / "run.json", error);
}

}  // namespace

bool is_sweep_dir(const std::string& dir) {
  std::error_code error;
  return fs::is_regular_file(fs::path(dir) / detail::kStateFileName, error);
}

absl::StatusOr<StoredSweep> read_sweep_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / detail::kStateFileName).string();
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(
          fmt::format("{}: no such file (\"{}\" holds no sweep)", path, dir));
    }
    return text.status();
  }
  absl::StatusOr<detail::SweepState> state = detail::state_from_json(*text, path);
  if (!state.ok()) return state.status();
  StoredSweep out;
  out.name = state->name;
  for (const JobRecord& record : state->jobs) {
    StoredJob job;
    job.id = record.job.id;
    job.status = record.status;
    job.params = record.job.params;
    job.attempts = record.attempts;
    job.exit_code = record.exit_code;
    job.run_id = record.run_id;
    if (!record.run_id.empty()) {
      for (const fs::path& candidate :
           {fs::path(record.run_dir), fs::path(dir) / detail::kRunsDirName / record.run_id}) {
        if (holds_run(candidate)) {
          job.run_dir = candidate.string();
          break;
        }
      }
    }
    out.jobs.push_back(std::move(job));
  }
  return out;
}

}  // namespace trainscope::sweep
