// The kernel's account of waiting for a CPU: schedstat and involuntary
// context switches, per thread (trainscope/hardware/host/sched_stats.hpp).
#include "trainscope/hardware/host/sched_stats.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <system_error>

#include "absl/strings/numbers.h"
#include "common/files.hpp"
#include "fmt/format.h"

namespace trainscope::host {
namespace {

// The whole file at `path` into `buffer` (capacity kept); false when it cannot be read.
bool read_small_path(const std::string& path, std::string* buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const absl::Status status = detail::read_small_fd(fd, path, buffer);
  ::close(fd);
  return status.ok();
}

bool parse_tid(const char* name, pid_t* tid) {
  const std::string_view text(name);
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, *tid);
  return result.ec == std::errc() && result.ptr == end && *tid > 0;
}

}  // namespace

bool parse_involuntary_switches(std::string_view text, std::uint64_t* out) {
  static constexpr std::string_view kKey = "nonvoluntary_ctxt_switches:";
  std::size_t at = 0;
  while ((at = text.find(kKey, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      std::string_view rest = text.substr(at + kKey.size());
      const std::string_view line = rest.substr(0, rest.find('\n'));
      return absl::SimpleAtoi(absl::string_view(line.data(), line.size()), out);  // spaces: fine
    }
    at += kKey.size();
  }
  return false;
}

absl::StatusOr<SchedStat> read_thread_schedstat(pid_t pid, pid_t tid,
                                                const std::string& proc_root) {
  const std::string path = fmt::format("{}/{}/task/{}/schedstat", proc_root, pid, tid);
  absl::StatusOr<std::string> text = detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  SchedStat s;
  if (!parse_schedstat(*text, &s)) {
    return absl::DataLossError(path + ": not \"run_ns wait_ns timeslices\"");
  }
  return s;
}

double wait_share(const SchedStat& before, const SchedStat& after) {
  const double run =
      after.run_ns >= before.run_ns ? static_cast<double>(after.run_ns - before.run_ns) : 0.0;
  const double wait =
      after.wait_ns >= before.wait_ns ? static_cast<double>(after.wait_ns - before.wait_ns) : 0.0;
  if (run + wait <= 0) return std::numeric_limits<double>::quiet_NaN();
  return wait / (run + wait);
}

ThreadSchedReader::ThreadSchedReader(std::string proc_root) : proc_root_(std::move(proc_root)) {}

absl::Status ThreadSchedReader::read(const std::vector<pid_t>& pids, SchedDelta* delta) {
  *delta = {};
  current_.clear();
  std::size_t processes_read = 0;
  for (pid_t pid : pids) {
    path_ = fmt::format("{}/{}/task", proc_root_, pid);
    DIR* dir = ::opendir(path_.c_str());
    if (dir == nullptr) continue;  // gone since the tree was discovered
    ++processes_read;
    while (const dirent* entry = ::readdir(dir)) {
      Thread t;
      if (!parse_tid(entry->d_name, &t.tid)) continue;
      path_ = fmt::format("{}/{}/task/{}/schedstat", proc_root_, pid, t.tid);
      SchedStat s;
      if (!read_small_path(path_, &buffer_) || !parse_schedstat(buffer_, &s)) continue;  // exited
      t.run_ns = s.run_ns;
      t.wait_ns = s.wait_ns;
      path_.resize(path_.size() - std::string_view("schedstat").size());
      path_ += "status";
      if (read_small_path(path_, &buffer_)) parse_involuntary_switches(buffer_, &t.switches);
      current_.push_back(t);
    }
    ::closedir(dir);
  }
  if (processes_read == 0 && !pids.empty()) {
    return absl::UnavailableError(
        fmt::format("{}/{}/task: cannot be read (the process is gone)", proc_root_, pids[0]));
  }
  std::sort(current_.begin(), current_.end(),
            [](const Thread& a, const Thread& b) { return a.tid < b.tid; });
  delta->threads = current_.size();
  if (!first_) {
    const auto grown = [](std::uint64_t now, std::uint64_t before) {
      return now >= before ? now - before : 0;
    };
    auto before = previous_.begin();
    for (const Thread& t : current_) {
      while (before != previous_.end() && before->tid < t.tid) ++before;
      const bool known = before != previous_.end() && before->tid == t.tid;
      delta->run_ns += known ? grown(t.run_ns, before->run_ns) : t.run_ns;
      delta->wait_ns += known ? grown(t.wait_ns, before->wait_ns) : t.wait_ns;
      delta->involuntary_switches += known ? grown(t.switches, before->switches) : t.switches;
    }
  }
  first_ = false;
  std::swap(previous_, current_);
  return absl::OkStatus();
}

}  // namespace trainscope::host
