// A fake /proc in a TempDir, for code that reads a proc root other than
// "/proc" (the host sources, host::ProcessTree, NvmlSource): system-wide
// files written whole, and processes with the files of /proc/<pid>.
//
//   FakeProc proc;                              // <TempDir>/self, nothing else
//   proc.write("meminfo", "MemTotal: 1 kB\n");  // <root>/meminfo
//   proc.add_job();                             // processes 100, 101 and 102
//   proc.add({103, "worker", 101});             // pid, comm, ppid (, parent_tid)
//   FakeProcess job = proc.process(100);
//   job.write_bytes += 1000000;
//   proc.update(job);                           // its stat, status and io again
//   make_process_tree_source(proc.root());
//
// What the fake kernel shows of a process (Kind):
//   kComplete       stat, status, io and task/<tid>/children (a kernel with
//                   CONFIG_PROC_CHILDREN)
//   kChildrenLists  task/<tid>/children only: no stat, so only the lists can
//                   tell the tree
//   kParentsOnly    stat, status, io and task/<tid>/, no children files (a
//                   kernel without CONFIG_PROC_CHILDREN): the tree is known from
//                   the parents in stat
// Every file is rewritten in place (same inode), as the kernel's change: the
// sources keep their files open and re-read them.
#ifndef TRAINSCOPE_TESTS_SUPPORT_FAKE_PROC_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_FAKE_PROC_HPP_

#include <unistd.h>  // sysconf

#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "support/temp_dir.hpp"

namespace trainscope::testing {

// One process of a FakeProc.
struct FakeProcess {
  int pid = 0;
  std::string comm = "proc";  // may hold blanks and ')', as a real one
  int ppid = 1;               // 1: init, which is not in the fake
  int parent_tid = 0;         // the thread of ppid that started it; 0: ppid's main thread
  std::uint64_t utime = 5;    // clock ticks
  std::uint64_t stime = 3;
  std::uint64_t rss_pages = 250;
  std::uint64_t read_bytes = 0;  // io: bytes that reached the block layer
  std::uint64_t write_bytes = 0;
  int pgrp = 0;              // its process group; 0: its own (pgrp = pid)
  char state = 'S';          // 'Z': a zombie
  std::string environ_text;  // <pid>/environ ("NAME=value" entries, each NUL-ended); none if empty
};

class FakeProc {
 public:
  enum Kind { kComplete, kChildrenLists, kParentsOnly };

  // `label`: the TempDir's (empty: the running test's name).
  explicit FakeProc(Kind kind = kComplete, std::string_view label = {}) : kind_(kind), dir_(label) {
    dir_.subdir("self");  // not a pid: a scan of the root must skip it
  }

  Kind kind() const { return kind_; }
  // The proc root, for the code under test.
  std::string root() const { return dir_.str(); }
  const std::filesystem::path& path() const { return dir_.path(); }

  // <root>/<name> (e.g. "stat", "meminfo", "net/dev") written whole with
  // `text`, in place.
  void write(std::string_view name, std::string_view text) const { dir_.write(name, text); }

  // Adds `p`: <root>/<pid>/ with task/<pid>/ and, as kind() shows them, its
  // stat, status and io, its own children list, and its pid in the children
  // list of the thread of its parent that started it.
  void add(const FakeProcess& p) {
    processes_[p.pid] = p;
    dir_.subdir(std::to_string(p.pid) + "/task/" + std::to_string(p.pid));
    write_pid_files(p);
    if (kind_ == kParentsOnly) return;
    write_children(p.pid, p.pid);
    if (p.ppid == 1) return;  // init is not in the fake
    const int tid = p.parent_tid != 0 ? p.parent_tid : p.ppid;
    children_[tid] += std::to_string(p.pid) + " ";
    write_children(p.ppid, tid);
  }

  // The job the tests monitor: 100 is the job ("python"), 101 its child
  // (started by the job's second thread 1001; comm with blanks and ')'), 102
  // a stranger whose use must not count.
  void add_job() {
    add({100, "python", 1});
    add({101, "data loader) x", 100, 1001});
    add({102, "other", 1});
  }

  // Process `pid` as last written (it must have been added).
  FakeProcess process(int pid) const { return processes_.at(pid); }

  // Rewrites the stat, status and io of `p` (added before, same parent) with
  // its new counters.
  void update(const FakeProcess& p) {
    processes_[p.pid] = p;
    write_pid_files(p);
  }

 private:
  void write_pid_files(const FakeProcess& p) const {
    if (kind_ == kChildrenLists) return;
    const std::string dir = std::to_string(p.pid) + "/";
    // proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads itrealvalue starttime vsize rss rsslim startcode endcode
    std::ostringstream stat;
    stat << p.pid << " (" << p.comm << ") " << p.state << " " << p.ppid << " "
         << (p.pgrp != 0 ? p.pgrp : p.pid) << " " << p.pid << " 0 -1 4194304 100 0 0 0 " << p.utime
         << " " << p.stime << " 0 0 20 0 1 0 1000 "
         << "1000000 " << p.rss_pages << " 0 0 0\n";
    dir_.write(dir + "stat", stat.str());
    const auto page_kb = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    std::ostringstream status;
    status << "Name:\t" << p.comm << "\nState:\tS (sleeping)\nTgid:\t" << p.pid << "\nPid:\t"
           << p.pid << "\nPPid:\t" << p.ppid << "\nVmRSS:\t" << p.rss_pages * page_kb
           << " kB\nThreads:\t1\n";
    dir_.write(dir + "status", status.str());
    std::ostringstream io;
    io << "rchar: " << p.read_bytes << "\nwchar: " << p.write_bytes
       << "\nsyscr: 0\nsyscw: 0\nread_bytes: " << p.read_bytes << "\nwrite_bytes: " << p.write_bytes
       << "\ncancelled_write_bytes: 0\n";
    dir_.write(dir + "io", io.str());
    if (!p.environ_text.empty()) dir_.write(dir + "environ", p.environ_text);
  }

  // <root>/<pid>/task/<tid>/children: what thread `tid` started.
  void write_children(int pid, int tid) {
    dir_.write(std::to_string(pid) + "/task/" + std::to_string(tid) + "/children", children_[tid]);
  }

  Kind kind_;
  TempDir dir_;
  std::map<int, FakeProcess> processes_;
  std::map<int, std::string> children_;  // tid → its children list
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_FAKE_PROC_HPP_
