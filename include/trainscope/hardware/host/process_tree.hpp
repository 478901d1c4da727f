// The monitored process and all its descendants (data-loader workers, ranks
// started by a launcher), as the host source (CPU, RSS, I/O of the tree) and
// the NVML source (the tree's GPU memory and utilisation) both need it.
#ifndef TRAINSCOPE_HARDWARE_HOST_PROCESS_TREE_HPP_
#define TRAINSCOPE_HARDWARE_HOST_PROCESS_TREE_HPP_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace trainscope::host {

// What the members' /proc/<pid>/stat and io say, summed over live members.
struct ProcessTotals {
  std::uint64_t cpu_ticks = 0;  // utime+stime+cutime+cstime
  std::uint64_t rss_pages = 0;
  std::uint64_t read_bytes = 0;  // that reached the block layer
  std::uint64_t write_bytes = 0;
  std::size_t count = 0;  // live members
};

// Members are found breadth-first from the root through the kernel's
// children lists (<proc_root>/<pid>/task/<tid>/children), which costs a read
// per thread of the tree; on a kernel without them (CONFIG_PROC_CHILDREN
// unset) through the parent pid in every <proc_root>/<pid>/stat. With
// Files::kStatAndIo each member's stat and io files are opened when it joins
// and stay open between discoveries, to be re-read every tick (an open
// /proc/<pid> file keeps naming that process, even if its pid is reused).
class ProcessTree {
 public:
  enum class Files { kNone, kStatAndIo };
  // How long the members found stay current for refresh().
  static constexpr std::chrono::seconds kRediscoveryInterval{1};

  ProcessTree(std::string proc_root, Files files);
  ~ProcessTree();
  ProcessTree(const ProcessTree&) = delete;
  ProcessTree& operator=(const ProcessTree&) = delete;

  // Finds `root`'s tree; members still in it keep their open files. Fails
  // when the root is gone (Unavailable, or the error of reading its task
  // directory) or <proc_root> cannot be read.
  absl::Status discover(pid_t root);
  // After discover(): discovers again with the same root, unless the last
  // discovery succeeded less than kRediscoveryInterval before `now`.
  absl::Status refresh(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // The members the last discovery found, the root first when it succeeded.
  const std::vector<pid_t>& pids() const { return pids_; }

  // Re-reads every member's stat and io (Files::kStatAndIo). A member whose
  // stat can no longer be read is closed and left out; Unavailable when that
  // is the root.
  absl::Status read(ProcessTotals* totals);

 private:
  struct Member {
    pid_t pid = 0;
    int stat_fd = -1;  // -1: not open (gone, or to be reopened at the next discovery)
    int io_fd = -1;    // -1 also when /proc/<pid>/io is not readable (ptrace rights)
  };

  absl::Status find_members();
  absl::Status walk_children_lists();
  absl::Status scan_parents();
  void append_new(pid_t pid);
  absl::Status update_members();
  void set_path(pid_t pid, const char* file);
  static void close_member(Member& m);

  std::string proc_root_;
  Files files_;
  pid_t root_ = 0;
  bool discovered_ = false;     // the last discovery succeeded
  bool children_lists_ = true;  // false once the kernel showed it has none
  std::chrono::steady_clock::time_point last_discovery_;
  std::vector<pid_t> found_;                      // discovery's breadth-first queue
  std::vector<std::pair<pid_t, pid_t>> parents_;  // (ppid, pid) of every process
  std::vector<Member> members_;
  std::vector<pid_t> pids_;  // members_' pids
  std::string path_, buffer_;
};

// The processes of a job on this host, as a launcher that ends the job needs
// them: those whose environment holds the entry `marker` ("NAME=value": what
// the job started, in any session or process group, also once reparented),
// those in process group `pgid` (0: none), and the descendants of both. Never
// the calling process, and no zombie (it has exited: only its parent's reaping
// is left). An environment this process may not read (another user's) is no
// match. Empty when <proc_root> cannot be read.
std::vector<pid_t> find_job_processes(const std::string& proc_root, std::string_view marker,
                                      pid_t pgid);

}  // namespace trainscope::host

#endif  // TRAINSCOPE_HARDWARE_HOST_PROCESS_TREE_HPP_
