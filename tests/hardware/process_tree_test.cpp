// host::ProcessTree, the monitored process and its descendants: found
// through the kernel's children lists or, without them, the parents in every
// stat (on a fake /proc as each kind of kernel shows it), rediscovered at most
// once an interval, its members' stat and io summed; and on the real /proc.
#include "trainscope/hardware/host/process_tree.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/fake_proc.hpp"

namespace trainscope::host {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;
using trainscope::testing::FakeProc;
using trainscope::testing::FakeProcess;

constexpr FakeProc::Kind kKinds[] = {FakeProc::kComplete, FakeProc::kChildrenLists,
                                     FakeProc::kParentsOnly};

std::vector<pid_t> tree_of(pid_t root, const std::string& proc_root) {
  ProcessTree tree(proc_root, ProcessTree::Files::kNone);
  if (!tree.discover(root).ok()) return {};
  return tree.pids();
}

TEST(ProcessTree, FollowsTheChildrenListsOfEveryThread) {
  FakeProc proc(FakeProc::kChildrenLists);
  proc.add_job();
  EXPECT_THAT(tree_of(100, proc.root()), ElementsAre(100, 101));
  EXPECT_THAT(tree_of(102, proc.root()), ElementsAre(102));
}

TEST(ProcessTree, FollowsParentsWithoutChildrenLists) {
  FakeProc proc(FakeProc::kParentsOnly);
  proc.add_job();
  EXPECT_THAT(tree_of(100, proc.root()), ElementsAre(100, 101));
  EXPECT_THAT(tree_of(102, proc.root()), ElementsAre(102));
}

TEST(ProcessTree, FollowsAKernelThatShowsBoth) {
  FakeProc proc(FakeProc::kComplete);
  proc.add_job();
  EXPECT_THAT(tree_of(100, proc.root()), ElementsAre(100, 101));
  EXPECT_THAT(tree_of(102, proc.root()), ElementsAre(102));
}

TEST(ProcessTree, AMissingRootFailsDiscovery) {
  for (FakeProc::Kind kind : kKinds) {
    FakeProc proc(kind);
    proc.add_job();
    ProcessTree tree(proc.root(), ProcessTree::Files::kNone);
    EXPECT_FALSE(tree.discover(103).ok()) << kind;
  }
  ProcessTree tree("/nonexistent", ProcessTree::Files::kNone);
  EXPECT_FALSE(tree.discover(100).ok());
}

TEST(ProcessTree, RediscoversAtMostOnceAnInterval) {
  for (FakeProc::Kind kind : kKinds) {
    FakeProc proc(kind);
    proc.add_job();
    ProcessTree tree(proc.root(), ProcessTree::Files::kNone);
    ASSERT_TRUE(tree.discover(100).ok()) << kind;
    proc.add({103, "worker", 101});
    const auto now = std::chrono::steady_clock::now();
    ASSERT_TRUE(tree.refresh(now).ok()) << kind;
    EXPECT_THAT(tree.pids(), ElementsAre(100, 101)) << kind;
    ASSERT_TRUE(tree.refresh(now + ProcessTree::kRediscoveryInterval).ok()) << kind;
    EXPECT_THAT(tree.pids(), ElementsAre(100, 101, 103)) << kind;
  }
}

TEST(ProcessTree, ReadSumsTheMembersStatAndIoThroughTheirOpenFiles) {
  for (FakeProc::Kind kind : {FakeProc::kComplete, FakeProc::kParentsOnly}) {
    FakeProc proc(kind);
    proc.add_job();
    FakeProcess child = proc.process(101);
    child.read_bytes = 4096;
    child.write_bytes = 8192;
    proc.update(child);
    ProcessTree tree(proc.root(), ProcessTree::Files::kStatAndIo);
    ASSERT_TRUE(tree.discover(100).ok()) << kind;
    ProcessTotals totals;
    ASSERT_TRUE(tree.read(&totals).ok()) << kind;
    EXPECT_EQ(totals.count, 2u) << kind;          // not the stranger 102
    EXPECT_EQ(totals.cpu_ticks, 2u * 8) << kind;  // utime 5 + stime 3 each
    EXPECT_EQ(totals.rss_pages, 2u * 250) << kind;
    EXPECT_EQ(totals.read_bytes, 4096u) << kind;
    EXPECT_EQ(totals.write_bytes, 8192u) << kind;
    // The files stay open: a read sees what the kernel (the fake) shows now.
    child.utime += 100;
    proc.update(child);
    totals = ProcessTotals{};
    ASSERT_TRUE(tree.read(&totals).ok()) << kind;
    EXPECT_EQ(totals.cpu_ticks, 2u * 8 + 100) << kind;
  }
}

TEST(ProcessTree, FindsAChildOfThisProcess) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::vector<pid_t> tree = tree_of(::getpid(), "/proc");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_THAT(tree, Not(IsEmpty()));
  EXPECT_EQ(tree.front(), ::getpid());
  EXPECT_THAT(tree, Contains(child));
}

// A launcher ending its job: the processes that carry its marker (a rank
// torchrun started in a session of its own, reparented to init), those in
// the command's process group, and their descendants; no stranger, no
// zombie, never the caller.
TEST(FindJobProcesses, TheMarkedTheGroupAndTheirDescendants) {
  FakeProc proc(FakeProc::kParentsOnly);
  const std::string marked = std::string("PATH=/bin\0TRAINSCOPE_LAUNCHER=vm:7\0", 35);
  proc.add({200, "bash", 1, 0, 5, 3, 250, 0, 0, 200});                   // the command: its group
  proc.add({201, "torchrun", 1, 0, 5, 3, 250, 0, 0, 200});               // orphaned, same group
  proc.add({202, "rank (0)", 1, 0, 5, 3, 250, 0, 0, 202, 'S', marked});  // own session, reparented
  proc.add({203, "worker", 202, 0, 5, 3, 250, 0, 0, 202});               // the rank's child
  proc.add({204, "scrubbed", 201});                                      // no marker: a descendant
  proc.add({205, "gone", 1, 0, 5, 3, 250, 0, 0, 200, 'Z'});              // a zombie of the group
  proc.add({206, "stranger", 1, 0, 5, 3, 250, 0, 0, 0, 'S',
            std::string("TRAINSCOPE_LAUNCHER=vm:77\0X=TRAINSCOPE_LAUNCHER=vm:7\0", 52)});
  std::vector<pid_t> found = find_job_processes(proc.root(), "TRAINSCOPE_LAUNCHER=vm:7", 200);
  std::sort(found.begin(), found.end());
  EXPECT_THAT(found, ElementsAre(200, 201, 202, 203, 204));
  found = find_job_processes(proc.root(), "TRAINSCOPE_LAUNCHER=vm:7", 0);
  std::sort(found.begin(), found.end());
  EXPECT_THAT(found, ElementsAre(202, 203));
  EXPECT_THAT(find_job_processes("/nonexistent", "TRAINSCOPE_LAUNCHER=vm:7", 200), IsEmpty());
}

TEST(FindJobProcesses, FindsAMarkedProcessInASessionOfItsOwn) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setsid();
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("1000"), nullptr};
    char* const envp[] = {const_cast<char*>("TRAINSCOPE_TEST_JOB_MARK=find-job-processes"),
                          nullptr};
    ::execve("/bin/sleep", argv, envp);
    ::_exit(127);
  }
  // Until the child has exec'd, its environment is this process's.
  std::vector<pid_t> found;
  for (int i = 0; i < 500 && found.empty(); ++i) {
    found = find_job_processes("/proc", "TRAINSCOPE_TEST_JOB_MARK=find-job-processes", 0);
    if (found.empty()) ::usleep(10000);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_THAT(found, ElementsAre(child));
}

}  // namespace
}  // namespace trainscope::host
