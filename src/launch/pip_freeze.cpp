#include "launch/pip_freeze.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "common/stable_hash.hpp"
#include "fmt/format.h"
#include "trainscope/launch/run_tool.hpp"

namespace trainscope::launcher::detail {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// "<path> <mtime ns>" of a directory, or nothing when it does not exist.
void add_directory_time(const fs::path& dir, std::string* out) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  *out += fmt::format("{} {}.{:09}\n", dir.string(), static_cast<long long>(st.st_mtim.tv_sec),
                      static_cast<long>(st.st_mtim.tv_nsec));
}

// base/lib*/python*/{site,dist}-packages, in name order.
void add_package_directories(const fs::path& base, std::string* out) {
  for (const char* lib : {"lib", "lib64"}) {
    std::error_code error;
    std::vector<fs::path> pythons;
    for (fs::directory_iterator it(base / lib, error), end; !error && it != end;
         it.increment(error)) {
      if (it->path().filename().string().rfind("python", 0) == 0) pythons.push_back(it->path());
    }
    std::sort(pythons.begin(), pythons.end());
    for (const fs::path& python : pythons) {
      add_directory_time(python / "site-packages", out);
      add_directory_time(python / "dist-packages", out);
    }
  }
}

}  // namespace

std::string environment_signature(const std::string& python) {
  std::string out = fmt::format("python {}\n", python);
  std::error_code error;
  const fs::path real = fs::canonical(python, error);
  if (!error) out += fmt::format("real {}\n", real.string());
  out += fmt::format("PYTHONPATH {}\nPYTHONUSERBASE {}\n", env_or_empty("PYTHONPATH"),
                     env_or_empty("PYTHONUSERBASE"));
  // The prefix as the path names it (a venv's bin/python is a link into the
  // system's, but its packages are the venv's).
  const fs::path prefix = fs::path(python).parent_path().parent_path();
  add_directory_time(prefix, &out);  // pyvenv.cfg and friends
  add_package_directories(prefix, &out);
  if (!error) add_package_directories(real.parent_path().parent_path(), &out);
  if (prefix == "/usr" || (!error && real.parent_path().parent_path() == "/usr")) {
    add_package_directories("/usr/local", &out);  // Debian's pip installs there
  }
  const std::string user_base = env_or_empty("PYTHONUSERBASE");
  const std::string home = env_or_empty("HOME");
  if (!user_base.empty()) {
    add_package_directories(user_base, &out);
  } else if (!home.empty()) {
    add_package_directories(fs::path(home) / ".local", &out);
  }
  const std::string python_path = env_or_empty("PYTHONPATH");
  for (std::size_t start = 0; start <= python_path.size();) {
    const std::size_t colon = std::min(python_path.find(':', start), python_path.size());
    if (colon > start) add_directory_time(python_path.substr(start, colon - start), &out);
    start = colon + 1;
  }
  return out;
}

std::string cache_dir() {
  if (std::string dir = env_or_empty("TRAINSCOPE_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/trainscope";
  if (std::string home = env_or_empty("HOME"); !home.empty()) return home + "/.cache/trainscope";
  return "";
}

std::optional<PipFreeze> pip_freeze(const std::string& python, std::chrono::seconds timeout) {
  const std::string signature = environment_signature(python);
  const std::string dir = cache_dir();
  const std::string path = dir.empty() ? ""
                                       : fmt::format("{}/pip-freeze-{:016x}.txt", dir,
                                                     ::trainscope::detail::stable_hash(signature));
  // The file holds the signature, a blank line, then the list: a hash
  // collision or a torn file never passes for another environment's list.
  const std::string head = signature + "\n";
  if (!path.empty()) {
    absl::StatusOr<std::string> text = ::trainscope::detail::read_whole_file(path);
    if (text.ok() && text->compare(0, head.size(), head) == 0) {
      return PipFreeze{text->substr(head.size()), true};
    }
  }
  absl::StatusOr<ToolOutput> done =
      run_tool({python, "-m", "pip", "freeze"}, absl::FromChrono(timeout));
  if (!done.ok() || done->exit_code != 0) return std::nullopt;
  if (!path.empty()) {
    std::error_code error;
    fs::create_directories(dir, error);
    // A cache that cannot be written costs the next run a pip call, nothing else.
    if (!error) (void)::trainscope::detail::write_file_atomically(path, head + done->out);
  }
  return PipFreeze{std::move(done->out), false};
}

}  // namespace trainscope::launcher::detail
