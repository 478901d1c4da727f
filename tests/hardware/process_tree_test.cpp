// host::ProcessTree, the monitored process and its descendants: found
// through the kernel's children lists or, without them, the parents in every
// stat (on a fake /proc as each kind of kernel shows it), rediscovered at most
// once an interval, its members' stat and io summed; and on the real /proc.
#include "trainscope/hardware/host/process_tree.hpp"

#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace trainscope::host
