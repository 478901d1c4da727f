// The public /proc parsers (trainscope/hardware/host/proc_files.hpp) on fixed
// texts: /proc/meminfo and /proc/diskstats, as the host sources and the
// stalls room read them.
#include "trainscope/hardware/host/proc_files.hpp"

#include <vector>

#include "gtest/gtest.h"

namespace trainscope::host {
namespace {

TEST(ProcFiles, Meminfo) {
  MemInfo m;
  ASSERT_TRUE(parse_meminfo(
      "MemTotal:       16000000 kB\nMemFree:         2000000 kB\n"
      "MemAvailable:    9000000 kB\nBuffers:          500000 kB\n"
      "Cached:          6000000 kB\nSwapCached:            0 kB\n"
      "SwapTotal:       4000000 kB\nSwapFree:        3000000 kB\nHugePages_Total: 0\n",
      &m));
  EXPECT_EQ(m.total_kb, 16000000u);
  EXPECT_EQ(m.free_kb, 2000000u);
  EXPECT_TRUE(m.has_available);
  EXPECT_EQ(m.available_kb, 9000000u);
  EXPECT_EQ(m.buffers_kb, 500000u);
  EXPECT_EQ(m.cached_kb, 6000000u);  // not SwapCached
  EXPECT_EQ(m.swap_total_kb, 4000000u);
  EXPECT_EQ(m.swap_free_kb, 3000000u);
  EXPECT_FALSE(parse_meminfo("MemFree: 1 kB\n", &m));
}

TEST(ProcFiles, Diskstats) {
  std::vector<DiskCounters> disks;
  parse_diskstats(
      " 259       0 nvme0n1 1000 10 80000 500 2000 20 160000 900 0 1000 1400 0 0 0 0\n"
      " 259       1 nvme0n1p1 900 10 70000 400 1900 20 150000 800 0 900 1200\n"
      "   8       0 sda 1 2 3\n",
      &disks);
  ASSERT_EQ(disks.size(), 2u);  // sda's line is cut short
  EXPECT_EQ(disks[0].name, "nvme0n1");
  EXPECT_EQ(disks[0].major, 259u);
  EXPECT_EQ(disks[0].reads, 1000u);
  EXPECT_EQ(disks[0].read_sectors, 80000u);
  EXPECT_EQ(disks[0].writes, 2000u);
  EXPECT_EQ(disks[0].write_sectors, 160000u);
  EXPECT_EQ(disks[0].io_ms, 1000u);  // the busy time (io_ticks)
  EXPECT_EQ(disks[1].name, "nvme0n1p1");
  EXPECT_EQ(disks[1].io_ms, 900u);
  parse_diskstats(" 8 0 sdb 1 2 3 4 5 6 7\n", &disks);  // an old kernel's 7 counters
  ASSERT_EQ(disks.size(), 1u);
  EXPECT_EQ(disks[0].write_sectors, 7u);
  EXPECT_EQ(disks[0].io_ms, 0u);
}

}  // namespace
}  // namespace trainscope::host
