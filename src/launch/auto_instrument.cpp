// `trainscope run --auto`: its mode, whether a command is Python, and the
// bootstrap written for the command's Python processes.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "launch/auto_bootstrap.hpp"
#include "trainscope/launch/launch.hpp"

namespace trainscope {
namespace {

// "python", "python3", "python3.11", "pypy3" (the file name only).
bool python_name(std::string name) {
  const std::size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  for (const char* prefix : {"python", "pypy"}) {
    const std::string p(prefix);
    if (name.rfind(p, 0) != 0) continue;
    const std::string rest = name.substr(p.size());
    if (std::all_of(rest.begin(), rest.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; }))
      return true;
  }
  return false;
}

// argv[0] as exec would find it: a path as is, else the first match on PATH.
std::string resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':')) {
    const std::string candidate =
        fmt::format("{}/{}", dir.empty() ? "." : std::string(dir), program);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> parse_auto_mode(const std::string& value) {
  if (value.empty() || value == "on") return std::string("on");
  if (value == "layers" || value == "memory") return value;  // memory: CUDA allocation history
  if (value.rfind("layers=", 0) == 0) {
    const std::string depth = value.substr(7);
    int n = 0;
    const auto [end, error] = std::from_chars(depth.data(), depth.data() + depth.size(), n);
    if (!depth.empty() && error == std::errc() && end == depth.data() + depth.size() && n >= 1) {
      return value;
    }
  }
  return absl::InvalidArgumentError(fmt::format(
      "--auto takes nothing, layers, layers=N (N >= 1: the module depth) or memory, got '{}'",
      value));
}

namespace {

// A python as exec would find it, or the name itself when PATH has none (the
// command then fails to start, but it names Python all the same).
std::string found_or_named(const std::string& program) {
  std::string path = resolve(program);
  return path.empty() ? program : path;
}

}  // namespace

std::string python_interpreter(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  if (python_name(command[0])) return found_or_named(command[0]);
  const std::string path = resolve(command[0]);
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  std::string first(256, '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<std::size_t>(in.gcount()));
  if (first.rfind("#!", 0) != 0) return "";
  first = first.substr(
      2, first.find('\n') == std::string::npos ? std::string::npos : first.find('\n') - 2);
  // "#!/usr/bin/python3 -u", "#!/usr/bin/env python3": a word of it names python
  // (a path, or a name env finds on PATH).
  for (absl::string_view word : absl::StrSplit(first, ' ', absl::SkipEmpty())) {
    if (python_name(std::string(word))) return found_or_named(std::string(word));
  }
  return "";
}

bool is_python_command(const std::vector<std::string>& command) {
  return !python_interpreter(command).empty();
}

namespace launcher::detail {

absl::StatusOr<std::string> write_auto_bootstrap() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = fmt::format("{}/trainscope-auto-XXXXXX", tmp != nullptr && *tmp ? tmp : "/tmp");
  if (::mkdtemp(dir.data()) == nullptr) {
    return trainscope::detail::file_error(errno, "create the directory", dir);
  }
  for (const auto& [name, text] : {std::pair{"sitecustomize.py", kAutoSitecustomize},
                                   std::pair{"_trainscope_auto_hooks.py", kAutoHooks}}) {
    absl::Status written = trainscope::detail::write_new_file(dir + "/" + name, text);
    if (!written.ok()) return written;
  }
  return dir;
}

}  // namespace launcher::detail
}  // namespace trainscope
