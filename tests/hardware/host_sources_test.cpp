// The host sources: parsers on fixed texts, sources on a fake /proc, a
// missing file, and the real /proc against known load in forked children
// (one busy core, 200 MB written and fsynced, 1 GiB touched). Tolerances are
// stated next to each assertion.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/host/host_parsers.hpp"
#include "support/fake_proc.hpp"
#include "support/temp_dir.hpp"
#include "support/warnings.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/hardware/host/host_sources.hpp"
#include "trainscope/hardware/sampler.hpp"

namespace trainscope::host {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr double kMB = 1e6;

std::map<std::string, double> by_name(const std::vector<HardwareReading>& readings) {
  std::map<std::string, double> out;
  for (const HardwareReading& r : readings) out[r.name] = r.value;
  return out;
}

// ---- Parsers on fixed texts -------------------------------------------------

TEST(HostParsers, ProcStat) {
  std::vector<CpuTimes> cpus;
  parse_proc_stat(
      "cpu  100 5 50 800 20 3 2 0 7 0\n"
      "cpu0 60 5 30 400 10 3 2 0 0 0\n"
      "cpu1 40 0 20 400 10 0 0 0\n"
      "intr 12345 0 0\n"
      "cpuX 1 2 3 4\n"
      "ctxt 99\n",
      &cpus);
  ASSERT_EQ(cpus.size(), 3u);
  EXPECT_EQ(cpus[0].core, -1);
  EXPECT_EQ(cpus[0].total, 980u);  // guest (7) is already in user: not added
  EXPECT_EQ(cpus[0].busy, 160u);   // minus idle 800 and iowait 20
  EXPECT_EQ(cpus[1].core, 0);
  EXPECT_EQ(cpus[2].core, 1);
  EXPECT_EQ(cpus[2].busy, 60u);
  parse_proc_stat("garbage\ncpu 1 2\n", &cpus);
  EXPECT_TRUE(cpus.empty());
}

TEST(HostParsers, NetDev) {
  std::vector<NetCounters> nets;
  parse_net_dev(
      "Inter-|   Receive                            |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes ...\n"
      "    lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n"
      "  eth0:123456 100 0 0 0 0 0 0 654321 200 0 0 0 0 0 0\n",
      &nets);
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[1].name, "eth0");
  EXPECT_EQ(nets[1].rx_bytes, 123456u);
  EXPECT_EQ(nets[1].tx_bytes, 654321u);
}

TEST(HostParsers, PidStatWithAnAwkwardCommandName) {
  ProcStat s;
  ASSERT_TRUE(
      parse_pid_stat("4242 (py (worker) 1) S 4000 4242 4000 0 -1 4194560 500 0 0 0 "
                     "150 50 7 3 20 0 4 0 12345 1000000 2560 18446744073709551615 1 1 0 0 0\n",
                     &s));
  EXPECT_EQ(s.ppid, 4000);
  EXPECT_EQ(s.pgrp, 4242);
  EXPECT_FALSE(s.exited);
  EXPECT_EQ(s.cpu_ticks, 210u);  // utime + stime + cutime + cstime
  EXPECT_EQ(s.rss_pages, 2560u);
  ASSERT_TRUE(
      parse_pid_stat("4243 (zombie) Z 1 4000 4000 0 -1 4194560 0 0 0 0 "
                     "0 0 0 0 20 0 1 0 12345 0 0 18446744073709551615 0 0 0 0 0\n",
                     &s));
  EXPECT_TRUE(s.exited);
  EXPECT_EQ(s.pgrp, 4000);
  EXPECT_FALSE(parse_pid_stat("4242 (cut short) S 1 2 3", &s));
  EXPECT_FALSE(parse_pid_stat("no parenthesis", &s));
}

TEST(HostParsers, PidIoAndChildren) {
  ProcIo io;
  ASSERT_TRUE(parse_pid_io("rchar: 10\nwchar: 20\nread_bytes: 4096\nwrite_bytes: 8192\n", &io));
  EXPECT_EQ(io.read_bytes, 4096u);
  EXPECT_EQ(io.write_bytes, 8192u);
  EXPECT_FALSE(parse_pid_io("rchar: 10\n", &io));
  std::vector<pid_t> pids = {1};
  parse_pid_list("12 345 x 0 67\n", &pids);
  EXPECT_EQ(pids, (std::vector<pid_t>{1, 12, 345, 67}));
}

// ---- Sources on a fake /proc ------------------------------------------------

// proc_.write() rewrites a file in place (same inode): the sources keep their
// files open.
class HostSourcesOnFakeProc : public ::testing::Test {
 protected:
  trainscope::testing::FakeProc proc_;
  const std::string root_ = proc_.root();
};

TEST_F(HostSourcesOnFakeProc, CpuUtilisationIsBusyOverTotal) {
  proc_.write("stat", "cpu 100 0 0 900 0 0 0 0\ncpu0 100 0 0 900 0 0 0 0\n");
  auto cpu = make_cpu_source(root_);
  ASSERT_TRUE(cpu->open(HardwareContext{}).ok());
  proc_.write("stat", "cpu 175 0 0 925 0 0 0 0\ncpu0 175 0 0 925 0 0 0 0\n");
  std::vector<HardwareReading> out;
  ASSERT_TRUE(cpu->sample(&out).ok());
  const auto values = by_name(out);
  EXPECT_DOUBLE_EQ(values.at("system/cpu.util_pct"), 75.0);
  EXPECT_DOUBLE_EQ(values.at("system/cpu.0.util_pct"), 75.0);
}

TEST_F(HostSourcesOnFakeProc, MemoryInMegabytes) {
  proc_.write("meminfo",
              "MemTotal: 1000000 kB\nMemFree: 100000 kB\nMemAvailable: 400000 kB\n"
              "Buffers: 50000 kB\nCached: 250000 kB\nSwapTotal: 200000 kB\nSwapFree: 150000 kB\n");
  auto mem = make_memory_source(root_);
  ASSERT_TRUE(mem->open(HardwareContext{}).ok());
  std::vector<HardwareReading> out;
  ASSERT_TRUE(mem->sample(&out).ok());
  const auto v = by_name(out);
  EXPECT_DOUBLE_EQ(v.at("system/mem.total_mb"), 1024.0);  // kB are KiB; MB are 10^6 bytes
  EXPECT_DOUBLE_EQ(v.at("system/mem.used_mb"), 600000 * 1024.0 / kMB);
  EXPECT_DOUBLE_EQ(v.at("system/mem.used_pct"), 60.0);
  EXPECT_DOUBLE_EQ(v.at("system/mem.cached_mb"), 250000 * 1024.0 / kMB);
  EXPECT_DOUBLE_EQ(v.at("system/swap.used_mb"), 50000 * 1024.0 / kMB);
}

TEST_F(HostSourcesOnFakeProc, NetworkSkipsLoopbackAndAccumulates) {
  const std::string header = "Inter-|\n face |\n";
  proc_.write("net/dev", header +
                             "lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                             "eth0: 1000000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
  auto net = make_network_source(root_);
  ASSERT_TRUE(net->open(HardwareContext{}).ok());
  proc_.write("net/dev", header +
                             "lo: 9000000 0 0 0 0 0 0 0 9000000 0 0 0 0 0 0 0\n"
                             "eth0: 4000000 0 0 0 0 0 0 0 2000000 0 0 0 0 0 0 0\n");
  std::vector<HardwareReading> out;
  ASSERT_TRUE(net->sample(&out).ok());
  const auto v = by_name(out);
  EXPECT_DOUBLE_EQ(v.at("system/net.eth0.rx_mb"), 3.0);
  EXPECT_DOUBLE_EQ(v.at("system/net.eth0.tx_mb"), 2.0);
  EXPECT_DOUBLE_EQ(v.at("system/net.rx_mb"), 3.0);
  EXPECT_EQ(v.count("system/net.lo.rx_mb"), 0u);
  EXPECT_GT(v.at("system/net.rx_mb_s"), 0.0);
}

TEST_F(HostSourcesOnFakeProc, MissingFileDisablesTheSourceWithOneWarning) {
  // root_ has no meminfo.
  const trainscope::testing::CapturedWarnings warnings;
  {
    ExportPipeline pipeline;
    std::vector<std::unique_ptr<HardwareSource>> sources;
    sources.push_back(make_memory_source(root_));
    SamplerOptions options;
    options.interval = absl::Milliseconds(1);
    Sampler sampler(options, std::move(sources), &pipeline);
    sampler.start();
    while (sampler.ticks() < 5) std::this_thread::yield();
    sampler.stop();
  }
  ASSERT_EQ(warnings.count(), 1u) << warnings.joined();
  EXPECT_THAT(warnings.messages()[0], HasSubstr("host.memory"));
  EXPECT_THAT(warnings.messages()[0], HasSubstr("meminfo"));
}

TEST_F(HostSourcesOnFakeProc, ProcessTreeSumsTheJobOnly) {
  proc_.add_job();  // 100 the job, 101 its child, 102 a stranger
  auto tree = make_process_tree_source(root_);
  HardwareContext context;
  context.root_pid = 100;
  ASSERT_TRUE(tree->open(context).ok());
  // Between open and the sample: the job and its child work; so does the
  // stranger, which must not count.
  trainscope::testing::FakeProcess job = proc_.process(100);
  job.utime += 50;
  job.rss_pages = 1000;
  job.read_bytes = 3'000'000;
  job.write_bytes = 1'000'000;
  proc_.update(job);
  trainscope::testing::FakeProcess child = proc_.process(101);
  child.write_bytes = 2'000'000;
  proc_.update(child);
  trainscope::testing::FakeProcess stranger = proc_.process(102);
  stranger.utime += 10000;
  stranger.rss_pages = 100000;
  stranger.write_bytes = 50'000'000;
  proc_.update(stranger);
  std::vector<HardwareReading> out;
  ASSERT_TRUE(tree->sample(&out).ok());
  const auto v = by_name(out);
  const double page_mb = static_cast<double>(::sysconf(_SC_PAGESIZE)) / kMB;
  EXPECT_EQ(v.at("system/proc.count"), 2.0);
  EXPECT_DOUBLE_EQ(v.at("system/proc.rss_mb"), (1000 + 250) * page_mb);
  EXPECT_DOUBLE_EQ(v.at("system/proc.read_mb"), 3.0);
  EXPECT_DOUBLE_EQ(v.at("system/proc.write_mb"), 3.0);
  EXPECT_GT(v.at("system/proc.cpu_pct"), 0.0);  // the job's 50 ticks since open
}

// ---- Real /proc against known load -----------------------------------------

// A forked child that waits for "go", runs `work`, reports a double (its own
// measurement) and waits for "exit", so the parent samples it while alive.
class Child {
 public:
  explicit Child(const std::function<double()>& work) {
    if (::pipe(go_) != 0 || ::pipe(done_) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      char c;
      if (::read(go_[0], &c, 1) != 1) ::_exit(1);
      const double result = work();
      if (::write(done_[1], &result, sizeof result) != sizeof result) ::_exit(1);
      if (::read(go_[0], &c, 1) != 1) ::_exit(1);
      ::_exit(0);
    }
  }
  ~Child() {
    release();
    int status = 0;
    ::waitpid(pid_, &status, 0);
    for (int fd : {go_[0], go_[1], done_[0], done_[1]}) ::close(fd);
  }
  pid_t pid() const { return pid_; }
  void go() { ASSERT_EQ(::write(go_[1], "g", 1), 1); }
  double wait_done() {
    double result = 0;
    EXPECT_EQ(::read(done_[0], &result, sizeof result), static_cast<ssize_t>(sizeof result));
    return result;
  }
  void release() {
    if (!released_) released_ = ::write(go_[1], "x", 1) == 1;
  }

 private:
  pid_t pid_ = -1;
  int go_[2] = {-1, -1};
  int done_[2] = {-1, -1};
  bool released_ = false;
};

std::unique_ptr<HardwareSource> open_tree(pid_t pid) {
  auto tree = make_process_tree_source("/proc");
  HardwareContext context;
  context.root_pid = pid;
  EXPECT_TRUE(tree->open(context).ok());
  return tree;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(HostLoad, BusyCoreReadsAsOneCore) {
  Child child([] {
    // Spin for 3 s of wall time; report the CPU time actually obtained.
    const auto start = std::chrono::steady_clock::now();
    volatile unsigned sink = 0;
    while (seconds_since(start) < 3.0) sink = sink + 1;
    timespec cpu{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    return static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
  });
  auto tree = open_tree(child.pid());
  const auto window_start = std::chrono::steady_clock::now();
  child.go();
  const double child_cpu_s = child.wait_done();
  std::vector<HardwareReading> out;
  ASSERT_TRUE(tree->sample(&out).ok());
  const double window_s = seconds_since(window_start);
  const double pct = by_name(out).at("system/proc.cpu_pct");
  // What the child really got: 100 on an idle machine, less when other jobs
  // share the cores. Tolerance: 80% to 110% of it (i.e. 80..110 when idle),
  // which covers the 10 ms clock-tick granularity over 3 s and the sampling
  // window being a few ms longer than the spin.
  const double expected = 100.0 * child_cpu_s / window_s;
  RecordProperty("cpu_pct", std::to_string(pct));
  // Below 30% the 10 ms tick granularity dominates the comparison: a precondition
  // of this test (the CPU it needs), not a defect of the source.
  if (expected <= 30.0) {
    GTEST_SKIP() << "the child got " << expected << "% of a core (machine overloaded); need > 30%";
  }
  EXPECT_GE(pct, 0.8 * expected) << "child CPU " << child_cpu_s << " s over " << window_s << " s";
  EXPECT_LE(pct, 1.1 * expected) << "child CPU " << child_cpu_s << " s over " << window_s << " s";
  EXPECT_EQ(by_name(out).at("system/proc.count"), 1.0);
}

std::size_t open_fd_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

pid_t spawn_sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Members keep their files open between discoveries (once a second): the tree
// follows processes that come and go, and closes what it no longer needs.
TEST(HostLoad, TreeFollowsMembersThatComeAndGo) {
  const std::size_t fds_before = open_fd_count();
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) children.push_back(spawn_sleeper());
  {
    auto tree = open_tree(::getpid());
    std::vector<HardwareReading> out;
    ASSERT_TRUE(tree->sample(&out).ok());
    EXPECT_EQ(by_name(out).at("system/proc.count"), 4.0);

    reap(children[0]);
    reap(children[1]);
    out.clear();
    ASSERT_TRUE(tree->sample(&out).ok());  // before the next discovery: the dead are skipped
    EXPECT_EQ(by_name(out).at("system/proc.count"), 2.0);

    children.push_back(spawn_sleeper());
    children.push_back(spawn_sleeper());
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    out.clear();
    ASSERT_TRUE(tree->sample(&out).ok());  // rediscovered
    EXPECT_EQ(by_name(out).at("system/proc.count"), 4.0);
    for (std::size_t i = 2; i < children.size(); ++i) reap(children[i]);
  }
  EXPECT_EQ(open_fd_count(), fds_before) << "the tree source leaked file descriptors";
}

TEST(HostLoad, TouchedGigabyteShowsInRss) {
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  Child child([] {
    // volatile: the compiler may not elide the allocation or the stores.
    volatile char* p = static_cast<char*>(std::malloc(kBytes));
    if (p == nullptr) return 0.0;
    for (std::size_t i = 0; i < kBytes; i += 4096) p[i] = 1;  // every page resident
    return static_cast<double>(p[kBytes - 4096]);
  });
  auto tree = open_tree(child.pid());
  child.go();
  ASSERT_EQ(child.wait_done(), 1.0) << "the child could not allocate 1 GiB";
  std::vector<HardwareReading> out;
  ASSERT_TRUE(tree->sample(&out).ok());
  const double rss_mb = by_name(out).at("system/proc.rss_mb");
  // 1 GiB = 1073.7 MB. Tolerance: at least 1000 MB (the brief's bound), at
  // most 1300 MB (the child's own code and libraries are a few MB), except
  // under a sanitizer, whose shadow memory of the touched pages is resident too.
  EXPECT_GE(rss_mb, 1000.0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_LE(rss_mb, 1300.0);
#endif
}

// The whole disk (e.g. "nvme0n1" for a partition nvme0n1p2) holding `dir`, or
// "" when it is on no block device (overlay, tmpfs).
std::string whole_disk_of(const fs::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return "";
  const fs::path dev = fs::path("/sys/dev/block") /
                       (std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)));
  std::error_code ec;
  fs::path real = fs::canonical(dev, ec);
  if (ec) return "";
  if (fs::exists(real / "partition")) real = real.parent_path();
  return fs::exists(fs::path("/sys/block") / real.filename()) ? real.filename().string() : "";
}

TEST(HostLoad, FsyncedWritesShowOnTheDevice) {
  constexpr int kMegabytes = 200;
  const trainscope::testing::TempDir tmp;
  const fs::path file = tmp.path() / "fsync";
  const std::string disk = whole_disk_of(tmp.path());

  std::vector<HardwareReading> out;
  Child child([&file] {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 0.0;
    std::vector<char> block(1'000'000, 'x');
    for (int i = 0; i < kMegabytes; ++i) {
      if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) return 0.0;
    }
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    return synced ? 1.0 : 0.0;
  });
  auto tree = open_tree(child.pid());
  auto disks = make_disk_source("/proc", "/sys");
  ASSERT_TRUE(disks->open(HardwareContext{}).ok());  // counts from here
  child.go();
  ASSERT_EQ(child.wait_done(), 1.0) << "the child could not write and fsync " << file;
  out.clear();
  ASSERT_TRUE(tree->sample(&out).ok());
  ASSERT_TRUE(disks->sample(&out).ok());
  child.release();
  fs::remove(file);
  const auto v = by_name(out);

  // The tree's block-layer writes are the child's own: 200 MB +-10%.
  EXPECT_GE(v.at("system/proc.write_mb"), 0.9 * kMegabytes);
  EXPECT_LE(v.at("system/proc.write_mb"), 1.1 * kMegabytes);
  // The summed read rate under the name stalls reads (one definition, host_metrics.hpp).
  EXPECT_EQ(v.count(trainscope::host::kDiskReadMbPerSecMetric), 1u);
  if (disk.empty()) {
    GTEST_SKIP() << tmp.str() << " is on no block device (overlay/tmpfs): checked the process "
                 << "tree's /proc/<pid>/io write_bytes above, not the device's counters";
  }
  // The device: all 200 MB (-10%) must appear. No upper bound: a device
  // counter includes every writer on the machine (ctest runs tests in
  // parallel), so only the tree's own counter above is attributable.
  const double device_mb = v.at("system/disk." + disk + ".write_mb");
  EXPECT_GE(device_mb, 0.9 * kMegabytes) << disk;
  EXPECT_GE(v.at("system/disk.write_mb"), device_mb);  // totals include it
}

}  // namespace
}  // namespace trainscope::host
