#include "trainscope/run/run_dirs.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "trainscope/run/run_check.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

// The runs one level down in `dir`, sorted by name; none when `dir` is not a
// directory.
absl::StatusOr<std::vector<std::string>> runs_in(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return found;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code type_error;
    if (it->is_directory(type_error) && holds_run_files(it->path().string())) {
      found.push_back(it->path().string());
    }
  }
  if (error) {
    return absl::ErrnoToStatus(error.value(),
                               fmt::format("{}: cannot list the directory", dir.string()));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::string default_runs_root() {
  const char* value = std::getenv(kRunsRootEnv.data());
  return value != nullptr && *value != '\0' ? std::string(value) : std::string(kDefaultRunsRoot);
}

absl::StatusOr<std::vector<std::string>> find_run_dirs(const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no run directories given");
  std::vector<std::string> runs;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (status.type() == fs::file_type::not_found) {
      return absl::NotFoundError(fmt::format("{}: no such run directory", path));
    }
    if (error) return absl::ErrnoToStatus(error.value(), fmt::format("{}: cannot access", path));
    if (!fs::is_directory(status)) {
      return absl::InvalidArgumentError(fmt::format("{}: not a directory", path));
    }
    if (holds_run_files(path)) {
      runs.push_back(path);
      continue;
    }
    absl::StatusOr<std::vector<std::string>> found = runs_in(path);
    if (found.ok() && found->empty()) found = runs_in(fs::path(path) / "runs");
    if (!found.ok()) return found.status();
    if (found->empty()) {
      const std::string base =
          path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
      return absl::NotFoundError(
          fmt::format("{}: not a run (no run.json), and neither {} nor {}/runs has a run directory",
                      path, base, base));
    }
    runs.insert(runs.end(), found->begin(), found->end());
  }
  return runs;
}

}  // namespace trainscope
