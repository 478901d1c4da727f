#include "trainscope/stalls/page_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "common/files.hpp"
#include "trainscope/hardware/host/proc_files.hpp"

namespace trainscope::stalls {
namespace {

namespace fs = std::filesystem;

std::uint64_t page_size() {
  static const std::uint64_t size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Resident bytes of one open file of `size` bytes; false if it cannot be mapped.
bool resident_bytes(int fd, std::uint64_t size, std::uint64_t* out) {
  *out = 0;
  if (size == 0) return true;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return false;
  const std::uint64_t pages = (size + page_size() - 1) / page_size();
  std::vector<unsigned char> vec(pages);
  const bool ok = ::mincore(map, size, vec.data()) == 0;
  ::munmap(map, size);
  if (!ok) return false;
  for (std::uint64_t i = 0; i < pages; ++i) {
    if (vec[i] & 1) *out += std::min(page_size(), size - i * page_size());
  }
  return true;
}

enum class Action { kMeasure, kEvict, kWarm };

Residency visit(const std::vector<std::string>& files, Action action, std::uint64_t max_bytes) {
  Residency r;
  std::uint64_t read_total = 0;
  std::vector<char> buffer(action == Action::kWarm ? (1u << 20) : 0);
  for (const std::string& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      if (fd >= 0) ::close(fd);
      r.unreadable.push_back(path);
      continue;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (action == Action::kEvict) {
      // Dirty pages cannot be dropped: write them back first.
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    } else if (action == Action::kWarm && (max_bytes == 0 || read_total < max_bytes)) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n > 0) read_total += static_cast<std::uint64_t>(n);
        if (n == 0 || (n < 0 && errno != EINTR)) break;
        if (max_bytes != 0 && read_total >= max_bytes) break;
      }
    }
    std::uint64_t resident = 0;
    if (!resident_bytes(fd, size, &resident)) r.unreadable.push_back(path);
    ::close(fd);
    ++r.files;
    r.bytes += size;
    r.resident_bytes += resident;
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> dataset_files(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || !fs::exists(status)) {
    return absl::InvalidArgumentError("--dataset " + path + ": no such file or directory");
  }
  std::vector<std::string> files;
  std::uint64_t bytes = 0;
  const auto add = [&](const fs::path& p) {
    std::error_code size_error;
    const std::uintmax_t size = fs::file_size(p, size_error);
    if (size_error) return;
    files.push_back(p.string());
    bytes += size;
  };
  if (fs::is_regular_file(fs::status(path, error))) {
    add(path);
  } else if (fs::is_directory(status)) {
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, error);
    if (error) {
      return absl::InvalidArgumentError("--dataset " + path + ": " + error.message());
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (error) break;
      if (it->is_regular_file(error) && !it->is_symlink(error)) add(it->path());
    }
  }
  if (files.empty() || bytes == 0) {
    return absl::InvalidArgumentError(
        "--dataset " + path + (files.empty() ? ": holds no file" : ": every file is empty"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

Residency residency(const std::vector<std::string>& files) {
  return visit(files, Action::kMeasure, 0);
}

Residency evict(const std::vector<std::string>& files) { return visit(files, Action::kEvict, 0); }

Residency warm(const std::vector<std::string>& files, std::uint64_t max_bytes) {
  return visit(files, Action::kWarm, max_bytes);
}

std::uint64_t available_memory_bytes() {
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file("/proc/meminfo");
  if (!text.ok()) return 0;
  host::MemInfo info;
  if (!host::parse_meminfo(*text, &info)) return 0;
  const std::uint64_t kb =
      info.has_available ? info.available_kb : info.free_kb + info.buffers_kb + info.cached_kb;
  return kb * 1024;
}

double memory_bandwidth_mb_s() {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<char> from(kBytes, 1);
  std::vector<char> to(kBytes, 0);
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), kBytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * kBytes / s / 1e6);
    from[i] = to[kBytes - 1 - i];  // keep the copies observable
  }
  return best;
}

std::vector<DiskReadCounter::Counters> DiskReadCounter::now() {
  std::vector<Counters> out;
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file("/proc/diskstats");
  if (!text.ok()) return out;
  std::vector<host::DiskCounters> disks;
  host::parse_diskstats(*text, &disks);
  for (const host::DiskCounters& d : disks) out.push_back({d.name, d.read_sectors, d.io_ms});
  return out;
}

DiskReadCounter::DiskReadCounter() : start_(now()) {}

DiskReads DiskReadCounter::read_since() const {
  DiskReads best;
  for (const Counters& end : now()) {
    for (const Counters& begin : start_) {
      if (begin.name != end.name || end.read_sectors < begin.read_sectors) continue;
      const std::uint64_t bytes = (end.read_sectors - begin.read_sectors) * 512;
      if (bytes > best.bytes) {
        best.device = end.name;
        best.bytes = bytes;
        best.busy_ms = end.io_ms >= begin.io_ms ? end.io_ms - begin.io_ms : 0;
      }
    }
  }
  return best;
}

}  // namespace trainscope::stalls
