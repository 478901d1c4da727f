// The page cache of a dataset, without root: which of its bytes are resident
// (mincore), evicting them (posix_fadvise POSIX_FADV_DONTNEED after
// fdatasync, so written-back pages can go) and reading them in. DS-Analyzer
// drops the whole cache as root (echo 3 > /proc/sys/vm/drop_caches);
// `trainscope stalls` evicts only the dataset, as any user who can read it.
#ifndef TRAINSCOPE_STALLS_PAGE_CACHE_HPP_
#define TRAINSCOPE_STALLS_PAGE_CACHE_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::stalls {

struct Residency {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;           // file sizes
  std::uint64_t resident_bytes = 0;  // of them in the page cache (whole pages)
  // Files that could not be opened or mapped (named in the warning of the caller).
  std::vector<std::string> unreadable;
  double share() const { return bytes == 0 ? 0.0 : static_cast<double>(resident_bytes) / bytes; }
};

// Every regular file under `path` (itself when it is a file; directories
// recursively, symbolic links not followed), sorted. InvalidArgument naming
// the path when it does not exist, or holds no file or only empty ones.
absl::StatusOr<std::vector<std::string>> dataset_files(const std::string& path);

// How much of `files` is in the page cache now.
Residency residency(const std::vector<std::string>& files);
// Evicts `files` from the page cache, then measures what is left resident
// (pages another process holds mapped or dirty stay).
Residency evict(const std::vector<std::string>& files);
// Reads `files` through (into the page cache), then measures residency.
// Stops reading once `max_bytes` were read (0: no limit).
Residency warm(const std::vector<std::string>& files, std::uint64_t max_bytes = 0);

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
std::uint64_t available_memory_bytes();

// Memory copy bandwidth in MB/s (bytes read + written over time, best of a
// few 64 MiB copies): the rate of a cached read, for the cache what-if.
double memory_bandwidth_mb_s();

// What the busiest block device read while a counter ran, from /proc/diskstats:
// the bytes and the time the device was busy (its io_ticks), so that mb_s()
// is the device's read rate while it worked, not diluted by idle time.
struct DiskReads {
  std::string device;  // "" when nothing was read (or /proc/diskstats is missing)
  std::uint64_t bytes = 0;
  std::uint64_t busy_ms = 0;
  double mb_s() const { return busy_ms == 0 ? 0.0 : bytes / 1e3 / static_cast<double>(busy_ms); }
};
class DiskReadCounter {
 public:
  DiskReadCounter();  // reads the counters now
  // What was read since construction, on the device that read the most
  // (a partition and its disk count the same reads: either is that device).
  DiskReads read_since() const;

 private:
  struct Counters {
    std::string name;
    std::uint64_t read_sectors = 0;
    std::uint64_t io_ms = 0;
  };
  static std::vector<Counters> now();
  std::vector<Counters> start_;
};

}  // namespace trainscope::stalls

#endif  // TRAINSCOPE_STALLS_PAGE_CACHE_HPP_
