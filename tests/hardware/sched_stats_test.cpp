// The kernel's account of waiting for a CPU: the schedstat and status parsers
// on fixed texts, ThreadSchedReader and the process-tree source on a fake
// /proc (threads that come and go), the CPU source's steal time.
#include "trainscope/hardware/host/sched_stats.hpp"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hardware/host/host_parsers.hpp"
#include "support/fake_proc.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

namespace trainscope::host {
namespace {

std::map<std::string, double> by_name(const std::vector<HardwareReading>& readings) {
  std::map<std::string, double> out;
  for (const HardwareReading& r : readings) out[r.name] = r.value;
  return out;
}

TEST(SchedStatParsers, Schedstat) {
  SchedStat s;
  ASSERT_TRUE(parse_schedstat("123456789 987654 42\n", &s));
  EXPECT_EQ(s.run_ns, 123456789u);
  EXPECT_EQ(s.wait_ns, 987654u);
  EXPECT_EQ(s.timeslices, 42u);
  ASSERT_TRUE(parse_schedstat("5 6", &s));  // no timeslices: still the two times
  EXPECT_EQ(s.wait_ns, 6u);
  EXPECT_EQ(s.timeslices, 0u);
  EXPECT_FALSE(parse_schedstat("5\n", &s));
  EXPECT_FALSE(parse_schedstat("", &s));
  EXPECT_FALSE(parse_schedstat("x 1 2", &s));
}

TEST(SchedStatParsers, InvoluntarySwitches) {
  std::uint64_t n = 0;
  ASSERT_TRUE(parse_involuntary_switches(
      "Name:\tpython\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n", &n));
  EXPECT_EQ(n, 7u);  // not the voluntary line, which ends with the same words
  EXPECT_FALSE(parse_involuntary_switches("voluntary_ctxt_switches:\t150\n", &n));
  EXPECT_FALSE(parse_involuntary_switches("nonvoluntary_ctxt_switches:\tx\n", &n));
}

TEST(SchedStatParsers, WaitShare) {
  EXPECT_DOUBLE_EQ(wait_share({100, 50, 0}, {400, 350, 0}), 0.5);
  EXPECT_TRUE(std::isnan(wait_share({100, 50, 0}, {100, 50, 0})));  // asleep throughout
  EXPECT_DOUBLE_EQ(wait_share({100, 50, 0}, {200, 40, 0}), 0.0);    // no negative wait
}

class ThreadSchedOnFakeProc : public ::testing::Test {
 protected:
  void thread(int pid, int tid, std::uint64_t run, std::uint64_t wait, std::uint64_t switches) {
    dir_.write(fmt_path(pid, tid, "schedstat"),
               std::to_string(run) + " " + std::to_string(wait) + " 3\n");
    dir_.write(fmt_path(pid, tid, "status"),
               "voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t" +
                   std::to_string(switches) + "\n");
  }
  void remove(int pid, int tid) {
    std::filesystem::remove_all(dir_.path() / std::to_string(pid) / "task" / std::to_string(tid));
  }
  static std::string fmt_path(int pid, int tid, const char* file) {
    return std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + file;
  }
  trainscope::testing::TempDir dir_;
};

TEST_F(ThreadSchedOnFakeProc, SumsWhatEachThreadAccruedSinceTheLastRead) {
  thread(100, 100, 1000, 100, 2);
  thread(100, 105, 5000, 500, 10);
  thread(101, 101, 300, 30, 1);
  ThreadSchedReader reader(dir_.str());
  SchedDelta d;
  ASSERT_TRUE(reader.read({100, 101}, &d).ok());
  EXPECT_EQ(d.run_ns, 0u);  // the baseline
  EXPECT_EQ(d.threads, 3u);
  // 100 runs on, 105 exits (its past must not count as negative), 106 starts
  // (all it accrued is new), 101 waits.
  thread(100, 100, 1600, 300, 5);
  remove(100, 105);
  thread(100, 106, 200, 50, 1);
  thread(101, 101, 300, 430, 4);
  ASSERT_TRUE(reader.read({100, 101}, &d).ok());
  EXPECT_EQ(d.threads, 3u);
  EXPECT_EQ(d.run_ns, 600u + 200u + 0u);
  EXPECT_EQ(d.wait_ns, 200u + 50u + 400u);
  EXPECT_EQ(d.involuntary_switches, 3u + 1u + 3u);
}

TEST_F(ThreadSchedOnFakeProc, AProcessGoneIsSkippedAllGoneIsAnError) {
  thread(100, 100, 1000, 100, 2);
  ThreadSchedReader reader(dir_.str());
  SchedDelta d;
  ASSERT_TRUE(reader.read({100, 555}, &d).ok());
  EXPECT_EQ(d.threads, 1u);
  const absl::Status gone = reader.read({555}, &d);
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(gone.message().find("555/task"), std::string::npos) << gone;
}

TEST(ThreadSchedOnRealProc, ReadsThisThread) {
  // The kernel adds a thread's run time at a switch or a tick: a test process younger than
  // one tick read 0 (CI). Run 20 ms, then give the CPU up once.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until) {
  }
  ::sched_yield();
  absl::StatusOr<SchedStat> s = read_thread_schedstat(::getpid(), ::gettid());
  if (!s.ok()) GTEST_SKIP() << "no schedstat here: " << s.status();
  EXPECT_GT(s->run_ns, 0u);
  const absl::StatusOr<SchedStat> missing = read_thread_schedstat(::getpid(), 1 << 30);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("schedstat"), std::string::npos);
}

TEST(HostSourcesOnFakeProcSched, ProcessTreeWritesTheThreadsWaitAndSwitches) {
  trainscope::testing::FakeProc proc;
  proc.add_job();  // 100 the job, 101 its child, 102 a stranger
  const auto schedstat = [&](int pid, std::uint64_t run, std::uint64_t wait) {
    proc.write(std::to_string(pid) + "/task/" + std::to_string(pid) + "/schedstat",
               std::to_string(run) + " " + std::to_string(wait) + " 1\n");
  };
  schedstat(100, 0, 0);
  schedstat(101, 0, 0);
  schedstat(102, 0, 0);
  auto tree = make_process_tree_source(proc.root());
  HardwareContext context;
  context.root_pid = 100;
  ASSERT_TRUE(tree->open(context).ok());
  schedstat(100, 1'000'000'000, 4'000'000'000);  // 4 s waited: far more than the interval
  schedstat(101, 0, 1'000'000'000);
  schedstat(102, 0, 0);
  std::vector<HardwareReading> out;
  ASSERT_TRUE(tree->sample(&out).ok());
  const auto v = by_name(out);
  ASSERT_TRUE(v.count(kProcCpuWaitMetric));
  // 5 s of waiting in an interval of well under 5 s: above 100% of one core.
  EXPECT_GT(v.at(kProcCpuWaitMetric), 100.0);
  EXPECT_TRUE(v.count(kProcInvoluntarySwitchesMetric));
  // Now only the stranger waits: the job waited nothing.
  schedstat(102, 0, 1'900'000'000'000);
  out.clear();
  ASSERT_TRUE(tree->sample(&out).ok());
  EXPECT_EQ(by_name(out).at(kProcCpuWaitMetric), 0.0);
}

TEST(HostSourcesOnFakeProcSched, CpuSourceWritesStealTime) {
  trainscope::testing::FakeProc proc;
  proc.write("stat", "cpu 100 0 0 900 0 0 0 0\n");
  auto cpu = make_cpu_source(proc.root());
  ASSERT_TRUE(cpu->open(HardwareContext{}).ok());
  proc.write("stat", "cpu 150 0 0 925 0 0 0 25\n");  // 25 of 100 ticks stolen
  std::vector<HardwareReading> out;
  ASSERT_TRUE(cpu->sample(&out).ok());
  EXPECT_DOUBLE_EQ(by_name(out).at(kCpuStealMetric), 25.0);
}

}  // namespace
}  // namespace trainscope::host
