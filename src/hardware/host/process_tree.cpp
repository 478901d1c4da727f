#include "trainscope/hardware/host/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <string_view>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "hardware/host/host_parsers.hpp"

namespace trainscope::host {
namespace {

// The whole file at `path` into `buffer`, which keeps its capacity.
absl::Status read_path(const std::string& path, std::string* buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return detail::file_error(errno, "open", path);
  absl::Status status = detail::read_whole_fd(fd, path, buffer);
  ::close(fd);
  return status;
}

// A /proc entry that names a process: digits only.
bool parse_pid(std::string_view name, pid_t* pid) {
  const char* end = name.data() + name.size();
  const auto result = std::from_chars(name.data(), end, *pid);
  return result.ec == std::errc() && result.ptr == end && *pid > 0;
}

// Whether the NUL-separated environment `environ` holds the entry `marker`.
bool has_entry(std::string_view environ, std::string_view marker) {
  while (!environ.empty()) {
    const std::size_t end = std::min(environ.find('\0'), environ.size());
    if (environ.substr(0, end) == marker) return true;
    environ.remove_prefix(std::min(end + 1, environ.size()));
  }
  return false;
}

absl::Status gone(pid_t pid) {
  return absl::UnavailableError(fmt::format("process {} is gone", pid));
}

}  // namespace

ProcessTree::ProcessTree(std::string proc_root, Files files)
    : proc_root_(std::move(proc_root)), files_(files) {}

ProcessTree::~ProcessTree() {
  for (Member& m : members_) close_member(m);
}

absl::Status ProcessTree::discover(pid_t root) {
  root_ = root;
  last_discovery_ = std::chrono::steady_clock::now();
  discovered_ = false;
  if (absl::Status s = find_members(); !s.ok()) return s;
  if (absl::Status s = update_members(); !s.ok()) return s;
  discovered_ = true;
  return absl::OkStatus();
}

absl::Status ProcessTree::refresh(std::chrono::steady_clock::time_point now) {
  if (discovered_ && now - last_discovery_ < kRediscoveryInterval) return absl::OkStatus();
  return discover(root_);
}

// found_ = the root and its descendants, breadth-first.
absl::Status ProcessTree::find_members() {
  found_.assign(1, root_);
  if (children_lists_) {
    absl::Status status = walk_children_lists();
    if (!absl::IsUnimplemented(status)) return status;
    children_lists_ = false;  // the root's threads have none: the kernel lacks them
    found_.assign(1, root_);
  }
  return scan_parents();
}

// Breadth-first over every thread's children list; Unimplemented when none
// of the root's threads has one.
absl::Status ProcessTree::walk_children_lists() {
  std::vector<pid_t> listed;
  for (std::size_t i = 0; i < found_.size(); ++i) {
    const std::string task_dir = fmt::format("{}/{}/task", proc_root_, found_[i]);
    DIR* dir = ::opendir(task_dir.c_str());
    if (dir == nullptr) {
      if (i == 0) return detail::file_error(errno, "read", task_dir);
      continue;  // a member that exited meanwhile
    }
    bool threads = false;
    bool lists = false;
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      threads = true;
      path_.assign(task_dir).append("/").append(e->d_name).append("/children");
      absl::Status status = read_path(path_, &buffer_);
      if (absl::IsNotFound(status)) continue;  // no such file, or the thread exited
      lists = true;
      listed.clear();
      if (status.ok()) parse_pid_list(buffer_, &listed);
      for (pid_t pid : listed) append_new(pid);
    }
    ::closedir(dir);
    if (i == 0 && threads && !lists) {
      return absl::UnimplementedError("no /proc/<pid>/task/<tid>/children");
    }
  }
  return absl::OkStatus();
}

// Every process's parent from its stat file, then breadth-first from the
// root (what the kernel's children lists save).
absl::Status ProcessTree::scan_parents() {
  DIR* dir = ::opendir(proc_root_.c_str());
  if (dir == nullptr) return detail::file_error(errno, "read", proc_root_);
  parents_.clear();
  bool root_seen = false;
  while (const dirent* e = ::readdir(dir)) {
    pid_t pid = 0;
    if (!parse_pid(e->d_name, &pid)) continue;
    set_path(pid, "stat");
    ProcStat stat;
    if (!read_path(path_, &buffer_).ok() || !parse_pid_stat(buffer_, &stat)) {
      continue;  // exited meanwhile
    }
    parents_.emplace_back(stat.ppid, pid);
    root_seen = root_seen || pid == root_;
  }
  ::closedir(dir);
  if (!root_seen) return gone(root_);
  std::sort(parents_.begin(), parents_.end());
  for (std::size_t i = 0; i < found_.size(); ++i) {
    const std::pair<pid_t, pid_t> first_child(found_[i], 0);
    auto it = std::lower_bound(parents_.begin(), parents_.end(), first_child);
    for (; it != parents_.end() && it->first == found_[i]; ++it) append_new(it->second);
  }
  return absl::OkStatus();
}

// Appends `pid` to found_ unless it is there already: lists read at
// different times could otherwise make a cycle of a reused pid.
void ProcessTree::append_new(pid_t pid) {
  if (std::find(found_.begin(), found_.end(), pid) == found_.end()) found_.push_back(pid);
}

// members_ = found_: members still in the tree keep their open files, new
// ones open theirs.
absl::Status ProcessTree::update_members() {
  absl::flat_hash_map<pid_t, Member> previous;
  for (Member& m : members_) previous[m.pid] = m;
  members_.clear();
  pids_.clear();
  for (pid_t pid : found_) {
    Member m{pid, -1, -1};
    if (auto it = previous.find(pid); it != previous.end()) {
      m = it->second;
      previous.erase(it);
    }
    if (files_ == Files::kStatAndIo && m.stat_fd < 0) {
      set_path(pid, "stat");
      m.stat_fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (m.stat_fd < 0) continue;  // exited meanwhile (the root is reported below)
      set_path(pid, "io");
      if (m.io_fd < 0) m.io_fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    }
    members_.push_back(m);
    pids_.push_back(pid);
  }
  for (auto& [pid, m] : previous) close_member(m);
  if (members_.empty() || members_.front().pid != root_) return gone(root_);
  return absl::OkStatus();
}

// path_ = <proc_root>/<pid>/<file>, in path_'s existing capacity.
void ProcessTree::set_path(pid_t pid, const char* file) {
  path_.clear();
  fmt::format_to(std::back_inserter(path_), "{}/{}/{}", proc_root_, pid, file);
}

void ProcessTree::close_member(Member& m) {
  if (m.stat_fd >= 0) ::close(m.stat_fd);
  if (m.io_fd >= 0) ::close(m.io_fd);
  m.stat_fd = m.io_fd = -1;
}

absl::Status ProcessTree::read(ProcessTotals* totals) {
  for (std::size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    ProcStat stat;
    if (m.stat_fd < 0 || !detail::read_small_fd(m.stat_fd, "stat", &buffer_).ok() ||
        !parse_pid_stat(buffer_, &stat)) {
      if (i == 0) return gone(m.pid);
      close_member(m);  // gone; a reused pid is opened afresh if it joins the tree
      continue;
    }
    totals->cpu_ticks += stat.cpu_ticks;
    totals->rss_pages += stat.rss_pages;
    ++totals->count;
    ProcIo io;
    if (m.io_fd >= 0 && detail::read_small_fd(m.io_fd, "io", &buffer_).ok() &&
        parse_pid_io(buffer_, &io)) {
      totals->read_bytes += io.read_bytes;
      totals->write_bytes += io.write_bytes;
    }
  }
  return absl::OkStatus();
}

std::vector<pid_t> find_job_processes(const std::string& proc_root, std::string_view marker,
                                      pid_t pgid) {
  DIR* dir = ::opendir(proc_root.c_str());
  if (dir == nullptr) return {};
  const pid_t self = ::getpid();
  std::vector<std::pair<pid_t, pid_t>> parents;  // (ppid, pid) of every live process
  std::vector<pid_t> found;
  std::string path, buffer;
  while (const dirent* e = ::readdir(dir)) {
    pid_t pid = 0;
    if (!parse_pid(e->d_name, &pid) || pid == self) continue;
    ProcStat stat;
    path = fmt::format("{}/{}/stat", proc_root, pid);
    if (!read_path(path, &buffer).ok() || !parse_pid_stat(buffer, &stat) || stat.exited) {
      continue;  // exited meanwhile, or a zombie
    }
    parents.emplace_back(stat.ppid, pid);
    if (pgid > 0 && stat.pgrp == pgid) {
      found.push_back(pid);
      continue;
    }
    path = fmt::format("{}/{}/environ", proc_root, pid);
    if (!marker.empty() && read_path(path, &buffer).ok() && has_entry(buffer, marker)) {
      found.push_back(pid);
    }
  }
  ::closedir(dir);
  std::sort(parents.begin(), parents.end());
  for (std::size_t i = 0; i < found.size(); ++i) {
    auto it = std::lower_bound(parents.begin(), parents.end(), std::make_pair(found[i], 0));
    for (; it != parents.end() && it->first == found[i]; ++it) {
      if (std::find(found.begin(), found.end(), it->second) == found.end()) {
        found.push_back(it->second);
      }
    }
  }
  return found;
}

}  // namespace trainscope::host
