// Host hardware sources: /proc and /sys read directly, where radT spawns top,
// iostat and free every second and parses their text. Fixed files stay open
// and are re-read from offset 0, and every buffer and name is kept between
// ticks, so a tick costs a few read() calls and no parsing allocations.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "hardware/host/host_parsers.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/hardware/host/host_sources.hpp"
#include "trainscope/hardware/host/process_tree.hpp"
#include "trainscope/hardware/host/sched_stats.hpp"

namespace trainscope::host {
namespace {

constexpr double kMB = 1e6;  // MB, not MiB: as iostat -m, MLflow and W&B
constexpr double kSectorBytes = 512.0;

// ---- Text helpers ----------------------------------------------------------

// Splits off the next line (without '\n'); false at the end.
bool next_line(std::string_view* text, std::string_view* line) {
  if (text->empty()) return false;
  const std::size_t end = text->find('\n');
  *line = text->substr(0, end);
  text->remove_prefix(end == std::string_view::npos ? text->size() : end + 1);
  return true;
}

// Splits off the next whitespace-separated field; false when none is left.
bool next_field(std::string_view* text, std::string_view* field) {
  const std::size_t begin = text->find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    *text = {};
    return false;
  }
  text->remove_prefix(begin);
  const std::size_t end = std::min(text->find_first_of(" \t"), text->size());
  *field = text->substr(0, end);
  text->remove_prefix(end);
  return true;
}

template <typename T>
bool parse_number(std::string_view field, T* value) {
  const char* end = field.data() + field.size();
  const auto result = std::from_chars(field.data(), end, *value);
  return result.ec == std::errc() && result.ptr == end;
}

// Reads the next `n` fields as numbers; false if any is missing or not one.
template <typename T>
bool next_numbers(std::string_view* text, T* values, std::size_t n) {
  std::string_view field;
  for (std::size_t i = 0; i < n; ++i) {
    if (!next_field(text, &field) || !parse_number(field, &values[i])) return false;
  }
  return true;
}

std::uint64_t counter_delta(std::uint64_t now, std::uint64_t before) {
  // A counter that went backwards (device re-added, process gone) counts as 0.
  return now >= before ? now - before : 0;
}

// ---- File reading ----------------------------------------------------------

// A /proc file read once per tick: opened once, re-read from offset 0.
class ProcFile {
 public:
  ProcFile() = default;
  ~ProcFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  absl::Status open(std::string path) {
    path_ = std::move(path);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return detail::file_error(errno, "open", path_);
    return read();
  }
  absl::Status read() { return detail::read_whole_fd(fd_, path_, &buffer_); }
  std::string_view text() const { return buffer_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
};

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Names like kCpuMetricPrefix "3" kCpuCoreUtilSuffix, built once per instance and kept.
struct InstanceNames {
  std::string instance;
  std::vector<std::string> names;
};
InstanceNames make_names(std::string_view family, std::string_view instance,
                         absl::Span<const std::string_view> quantities) {
  InstanceNames result{std::string(instance), {}};
  for (std::string_view quantity : quantities) {
    result.names.push_back(
        instance.empty()
            ? fmt::format("{}{}.{}", kSystemMetricPrefix, family, quantity)
            : fmt::format("{}{}.{}.{}", kSystemMetricPrefix, family, instance, quantity));
  }
  return result;
}

}  // namespace

// ---- Parsers ---------------------------------------------------------------

void parse_proc_stat(std::string_view text, std::vector<CpuTimes>* out) {
  out->clear();
  std::string_view line;
  while (next_line(&text, &line)) {
    std::string_view label;
    if (!next_field(&line, &label) || label.substr(0, 3) != "cpu") continue;
    CpuTimes times;
    if (label.size() > 3 && !parse_number(label.substr(3), &times.core)) continue;
    // user nice system idle iowait irq softirq steal; guest time is already in user.
    std::uint64_t v[8] = {};
    std::size_t n = 0;
    std::string_view field;
    while (n < 8 && next_field(&line, &field) && parse_number(field, &v[n])) ++n;
    if (n < 4) continue;  // Linux 2.4 had four columns; fewer is not a cpu line
    for (std::size_t i = 0; i < n; ++i) times.total += v[i];
    times.busy = times.total - v[3] - v[4];
    times.steal = v[7];
    out->push_back(times);
  }
}

// Calls f(key, value) for every "key: number ..." line (/proc/meminfo, /proc/<pid>/io).
template <typename F>
void for_each_key_number(std::string_view text, F&& f) {
  std::string_view line;
  while (next_line(&text, &line)) {
    std::string_view key;
    std::uint64_t value = 0;
    if (next_field(&line, &key) && next_numbers(&line, &value, 1)) f(key, value);
  }
}

bool parse_meminfo(std::string_view text, MemInfo* out) {
  *out = MemInfo{};
  bool has_total = false;
  for_each_key_number(text, [&](std::string_view key, std::uint64_t value) {
    if (key == "MemTotal:") {
      out->total_kb = value;
      has_total = true;
    } else if (key == "MemFree:") {
      out->free_kb = value;
    } else if (key == "MemAvailable:") {
      out->available_kb = value;
      out->has_available = true;
    } else if (key == "Buffers:") {
      out->buffers_kb = value;
    } else if (key == "Cached:") {
      out->cached_kb = value;
    } else if (key == "SwapTotal:") {
      out->swap_total_kb = value;
    } else if (key == "SwapFree:") {
      out->swap_free_kb = value;
    }
  });
  return has_total;
}

void parse_diskstats(std::string_view text, std::vector<DiskCounters>* out) {
  std::size_t count = 0;
  std::string_view line;
  while (next_line(&text, &line)) {
    unsigned dev[2] = {};
    std::string_view name;
    // reads, reads merged, sectors read, ms reading, writes, writes merged, sectors written
    std::uint64_t v[7] = {};
    if (!next_numbers(&line, dev, 2) || !next_field(&line, &name) || !next_numbers(&line, v, 7)) {
      continue;
    }
    if (count == out->size()) out->emplace_back();
    DiskCounters& disk = (*out)[count++];
    disk.name.assign(name);
    disk.major = dev[0];
    disk.minor = dev[1];
    disk.reads = v[0];
    disk.read_sectors = v[2];
    disk.writes = v[4];
    disk.write_sectors = v[6];
    // ms writing, I/Os in progress, ms doing I/Os (kernels since 2.6 have them).
    std::uint64_t more[3] = {};
    disk.io_ms = next_numbers(&line, more, 3) ? more[2] : 0;
  }
  out->resize(count);
}

void parse_net_dev(std::string_view text, std::vector<NetCounters>* out) {
  std::size_t count = 0;
  std::string_view line;
  while (next_line(&text, &line)) {
    // "  eth0: rx_bytes rx_packets errs drop fifo frame compressed multicast tx_bytes ..."
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the two header lines
    std::string_view padded = line.substr(0, colon);
    std::string_view name;
    if (!next_field(&padded, &name)) continue;
    std::string_view rest = line.substr(colon + 1);
    std::uint64_t v[9] = {};
    if (!next_numbers(&rest, v, 9)) continue;
    if (count == out->size()) out->emplace_back();
    NetCounters& net = (*out)[count++];
    net.name.assign(name);
    net.rx_bytes = v[0];
    net.tx_bytes = v[8];
  }
  out->resize(count);
}

bool parse_pid_stat(std::string_view text, ProcStat* out) {
  const std::size_t paren = text.rfind(')');
  if (paren == std::string_view::npos) return false;
  std::string_view rest = text.substr(paren + 1);
  // Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime stime cutime cstime priority nice num_threads
  // itrealvalue starttime vsize rss
  std::string_view state;
  if (!next_field(&rest, &state)) return false;
  long long v[21] = {};  // cutime/cstime are signed in the kernel's format
  if (!next_numbers(&rest, v, 21)) return false;
  // v[i] is field i + 4: ppid v[0], pgrp v[1], utime..cstime v[10..13], rss v[20].
  if (v[0] < 0 || v[10] < 0 || v[11] < 0 || v[12] < 0 || v[13] < 0) return false;
  out->ppid = static_cast<pid_t>(v[0]);
  out->pgrp = static_cast<pid_t>(v[1]);
  out->exited = state == "Z" || state == "X";
  out->cpu_ticks = static_cast<std::uint64_t>(v[10]) + static_cast<std::uint64_t>(v[11]) +
                   static_cast<std::uint64_t>(v[12]) + static_cast<std::uint64_t>(v[13]);
  out->rss_pages = v[20] > 0 ? static_cast<std::uint64_t>(v[20]) : 0;
  return true;
}

bool parse_pid_io(std::string_view text, ProcIo* out) {
  *out = ProcIo{};
  bool found = false;
  for_each_key_number(text, [&](std::string_view key, std::uint64_t value) {
    if (key == "read_bytes:") {
      out->read_bytes = value;
      found = true;
    } else if (key == "write_bytes:") {
      out->write_bytes = value;
      found = true;
    }
  });
  return found;
}

void parse_pid_list(std::string_view text, std::vector<pid_t>* out) {
  std::string_view field;
  for (;;) {
    const std::size_t begin = text.find_first_not_of(" \t\n");
    if (begin == std::string_view::npos) return;
    text.remove_prefix(begin);
    const std::size_t end = std::min(text.find_first_of(" \t\n"), text.size());
    field = text.substr(0, end);
    text.remove_prefix(end);
    pid_t pid = 0;
    if (parse_number(field, &pid) && pid > 0) out->push_back(pid);
  }
}

// ---- Sources ---------------------------------------------------------------

namespace {

// System and per-core CPU utilisation from /proc/stat.
class CpuSource : public HardwareSource {
 public:
  explicit CpuSource(std::string proc_root) : proc_root_(std::move(proc_root)) {}
  std::string name() const override { return kHostCpuSource; }

  absl::Status open(const HardwareContext&) override {
    if (absl::Status s = file_.open(proc_root_ + "/stat"); !s.ok()) return s;
    parse_proc_stat(file_.text(), &previous_);
    if (previous_.empty()) return absl::DataLossError(file_.path() + ": no cpu lines");
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    if (absl::Status s = file_.read(); !s.ok()) return s;
    parse_proc_stat(file_.text(), &current_);
    for (const CpuTimes& now : current_) {
      const CpuTimes* before = find(now.core);
      if (before == nullptr) continue;  // a core that came online: a rate next tick
      const std::uint64_t total = counter_delta(now.total, before->total);
      if (total == 0) continue;
      const double pct = 100.0 * static_cast<double>(counter_delta(now.busy, before->busy)) /
                         static_cast<double>(total);
      out->push_back({name_for(now.core), pct});
      if (now.core < 0) {
        const double steal = static_cast<double>(counter_delta(now.steal, before->steal));
        out->push_back({host::kCpuStealMetric, 100.0 * steal / static_cast<double>(total)});
      }
    }
    std::swap(previous_, current_);
    return absl::OkStatus();
  }

 private:
  const CpuTimes* find(int core) const {
    for (const CpuTimes& t : previous_) {
      if (t.core == core) return &t;
    }
    return nullptr;
  }
  const std::string& name_for(int core) {
    const std::size_t slot = static_cast<std::size_t>(core + 1);
    if (slot >= names_.size()) names_.resize(slot + 1);
    if (names_[slot].empty()) {
      names_[slot] =
          core < 0 ? std::string(host::kCpuUtilMetric)
                   : fmt::format("{}{}{}", host::kCpuMetricPrefix, core, host::kCpuCoreUtilSuffix);
    }
    return names_[slot];
  }

  std::string proc_root_;
  ProcFile file_;
  std::vector<CpuTimes> previous_, current_;
  std::vector<std::string> names_;  // [core + 1]
};

// Memory, page cache and swap from /proc/meminfo, in MB.
class MemorySource : public HardwareSource {
 public:
  explicit MemorySource(std::string proc_root) : proc_root_(std::move(proc_root)) {}
  std::string name() const override { return kHostMemorySource; }

  absl::Status open(const HardwareContext&) override {
    if (absl::Status s = file_.open(proc_root_ + "/meminfo"); !s.ok()) return s;
    MemInfo info;
    if (!parse_meminfo(file_.text(), &info)) return no_total();
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    if (absl::Status s = file_.read(); !s.ok()) return s;
    MemInfo m;
    if (!parse_meminfo(file_.text(), &m)) return no_total();
    // Before MemAvailable, free(1) estimated it as free + buffers + cache.
    const std::uint64_t available =
        m.has_available ? m.available_kb : m.free_kb + m.buffers_kb + m.cached_kb;
    const std::uint64_t used = counter_delta(m.total_kb, available);
    const auto mb = [](std::uint64_t kb) { return static_cast<double>(kb) * 1024.0 / kMB; };
    out->push_back({kMemTotalMbMetric, mb(m.total_kb)});
    out->push_back({kMemUsedMbMetric, mb(used)});
    out->push_back({host::kMemUsedPctMetric,
                    m.total_kb == 0
                        ? 0.0
                        : 100.0 * static_cast<double>(used) / static_cast<double>(m.total_kb)});
    out->push_back({kMemAvailableMbMetric, mb(available)});
    out->push_back({kMemFreeMbMetric, mb(m.free_kb)});
    out->push_back({kMemBuffersMbMetric, mb(m.buffers_kb)});
    out->push_back({kMemCachedMbMetric, mb(m.cached_kb)});
    out->push_back({kSwapTotalMbMetric, mb(m.swap_total_kb)});
    out->push_back({host::kSwapUsedMbMetric, mb(counter_delta(m.swap_total_kb, m.swap_free_kb))});
    return absl::OkStatus();
  }

 private:
  absl::Status no_total() const { return absl::DataLossError(file_.path() + ": no MemTotal"); }

  std::string proc_root_;
  ProcFile file_;
};

// Per whole block device and in total from /proc/diskstats: MB/s and IOPS,
// and MB read/written since the sampler started (iostat's MB_read/MB_wrtn).
class DiskSource : public HardwareSource {
 public:
  DiskSource(std::string proc_root, std::string sys_root)
      : proc_root_(std::move(proc_root)), sys_root_(std::move(sys_root)) {}
  std::string name() const override { return kHostDiskSource; }

  absl::Status open(const HardwareContext&) override {
    if (absl::Status s = file_.open(proc_root_ + "/diskstats"); !s.ok()) return s;
    parse_diskstats(file_.text(), &counters_);
    for (const DiskCounters& c : counters_) device_for(c);
    last_ = std::chrono::steady_clock::now();
    total_ = Device{};
    total_.names = make_names(kDiskFamily, "", kQuantities);
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    if (absl::Status s = file_.read(); !s.ok()) return s;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = seconds_between(last_, now);
    last_ = now;
    parse_diskstats(file_.text(), &counters_);
    Delta sum;
    for (const DiskCounters& c : counters_) {
      Device* device = device_for(c);
      if (device == nullptr) continue;
      const Delta d = device->advance(c);
      if (device->physical) sum += d;
      device->emit(d, seconds, out);
    }
    total_.read_mb += sum.read_mb;
    total_.write_mb += sum.write_mb;
    total_.emit(sum, seconds, out);
    return absl::OkStatus();
  }

 private:
  static constexpr std::string_view kQuantities[] = {kReadMbPerSecQuantity,
                                                     kWriteMbPerSecQuantity,
                                                     "read_iops",
                                                     "write_iops",
                                                     "read_mb",
                                                     "write_mb"};

  struct Delta {
    double read_mb = 0, write_mb = 0, reads = 0, writes = 0;
    Delta& operator+=(const Delta& d) {
      read_mb += d.read_mb;
      write_mb += d.write_mb;
      reads += d.reads;
      writes += d.writes;
      return *this;
    }
  };
  struct Device {
    InstanceNames names;
    bool included = false;  // a whole device, not a partition, loop or RAM disk
    bool physical = false;  // not stacked on others (dm, md): counted in the totals
    DiskCounters last;
    double read_mb = 0, write_mb = 0;  // since open

    Delta advance(const DiskCounters& c) {
      Delta d;
      d.read_mb = static_cast<double>(counter_delta(c.read_sectors, last.read_sectors)) *
                  kSectorBytes / kMB;
      d.write_mb = static_cast<double>(counter_delta(c.write_sectors, last.write_sectors)) *
                   kSectorBytes / kMB;
      d.reads = static_cast<double>(counter_delta(c.reads, last.reads));
      d.writes = static_cast<double>(counter_delta(c.writes, last.writes));
      last = c;
      read_mb += d.read_mb;
      write_mb += d.write_mb;
      return d;
    }
    void emit(const Delta& d, double seconds, std::vector<HardwareReading>* out) const {
      if (seconds > 0) {
        out->push_back({names.names[0], d.read_mb / seconds});
        out->push_back({names.names[1], d.write_mb / seconds});
        out->push_back({names.names[2], d.reads / seconds});
        out->push_back({names.names[3], d.writes / seconds});
      }
      out->push_back({names.names[4], read_mb});
      out->push_back({names.names[5], write_mb});
    }
  };

  // The state of `c`'s device, classified the first time it is seen; null for
  // a device that is not reported.
  Device* device_for(const DiskCounters& c) {
    for (Device& d : devices_) {
      if (d.names.instance == c.name) return d.included ? &d : nullptr;
    }
    Device d;
    d.names = make_names(kDiskFamily, c.name, kQuantities);
    d.last = c;
    const bool virtual_ram =
        c.name.rfind("loop", 0) == 0 || c.name.rfind("ram", 0) == 0 || c.name.rfind("zram", 0) == 0;
    struct stat st;
    // Whole devices have /sys/block/<name>; partitions do not.
    d.included = !virtual_ram && ::stat((sys_root_ + "/block/" + c.name).c_str(), &st) == 0;
    d.physical = d.included && !has_entries(sys_root_ + "/block/" + c.name + "/slaves");
    devices_.push_back(std::move(d));
    return devices_.back().included ? &devices_.back() : nullptr;
  }
  static bool has_entries(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return false;
    bool found = false;
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') found = true;
    }
    ::closedir(d);
    return found;
  }

  std::string proc_root_, sys_root_;
  ProcFile file_;
  std::vector<DiskCounters> counters_;
  std::vector<Device> devices_;
  Device total_;
  std::chrono::steady_clock::time_point last_;
};

// Per interface (loopback excluded) and in total from /proc/net/dev: MB/s,
// and MB since the sampler started (MLflow's and W&B's are cumulative).
class NetworkSource : public HardwareSource {
 public:
  explicit NetworkSource(std::string proc_root) : proc_root_(std::move(proc_root)) {}
  std::string name() const override { return kHostNetworkSource; }

  absl::Status open(const HardwareContext&) override {
    if (absl::Status s = file_.open(proc_root_ + "/net/dev"); !s.ok()) return s;
    parse_net_dev(file_.text(), &counters_);
    for (const NetCounters& c : counters_) interface_for(c);
    total_.names = make_names(kNetFamily, "", kQuantities);
    last_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    if (absl::Status s = file_.read(); !s.ok()) return s;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = seconds_between(last_, now);
    last_ = now;
    parse_net_dev(file_.text(), &counters_);
    double rx = 0, tx = 0;
    for (const NetCounters& c : counters_) {
      Interface* itf = interface_for(c);
      if (itf == nullptr) continue;
      const double drx = static_cast<double>(counter_delta(c.rx_bytes, itf->last.rx_bytes)) / kMB;
      const double dtx = static_cast<double>(counter_delta(c.tx_bytes, itf->last.tx_bytes)) / kMB;
      itf->last = c;
      itf->emit(drx, dtx, seconds, out);
      rx += drx;
      tx += dtx;
    }
    total_.emit(rx, tx, seconds, out);
    return absl::OkStatus();
  }

 private:
  static constexpr std::string_view kQuantities[] = {kRxMbPerSecQuantity, kTxMbPerSecQuantity,
                                                     "rx_mb", "tx_mb"};
  struct Interface {
    InstanceNames names;
    NetCounters last;
    double rx_mb = 0, tx_mb = 0;  // since open

    void emit(double drx, double dtx, double seconds, std::vector<HardwareReading>* out) {
      rx_mb += drx;
      tx_mb += dtx;
      if (seconds > 0) {
        out->push_back({names.names[0], drx / seconds});
        out->push_back({names.names[1], dtx / seconds});
      }
      out->push_back({names.names[2], rx_mb});
      out->push_back({names.names[3], tx_mb});
    }
  };

  Interface* interface_for(const NetCounters& c) {
    if (c.name == "lo") return nullptr;
    for (Interface& i : interfaces_) {
      if (i.names.instance == c.name) return &i;
    }
    interfaces_.push_back(Interface{make_names(kNetFamily, c.name, kQuantities), c, 0, 0});
    return &interfaces_.back();
  }

  std::string proc_root_;
  ProcFile file_;
  std::vector<NetCounters> counters_;
  std::vector<Interface> interfaces_;
  Interface total_;
  std::chrono::steady_clock::time_point last_;
};

// The monitored process and all its descendants (data-loader workers, ranks
// started by a launcher): CPU % (100 = one core), RSS, process count, and
// block I/O. Membership is re-discovered at most once a second (ProcessTree);
// the members' stat and io files stay open between discoveries and are
// re-read every tick.
class ProcessTreeSource : public HardwareSource {
 public:
  explicit ProcessTreeSource(std::string proc_root)
      : tree_(proc_root, ProcessTree::Files::kStatAndIo), sched_(std::move(proc_root)) {}
  std::string name() const override { return kHostProcSource; }

  absl::Status open(const HardwareContext& context) override {
    ticks_per_s_ = static_cast<double>(::sysconf(_SC_CLK_TCK));
    page_mb_ = static_cast<double>(::sysconf(_SC_PAGESIZE)) / kMB;
    const pid_t root = context.root_pid > 0 ? context.root_pid : ::getpid();
    if (absl::Status s = tree_.discover(root); !s.ok()) return s;
    ProcessTotals first;
    if (absl::Status s = tree_.read(&first); !s.ok()) return s;
    last_totals_ = first;
    SchedDelta baseline;
    sched_ok_ = sched_.read(tree_.pids(), &baseline).ok();
    last_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    const auto now = std::chrono::steady_clock::now();
    if (absl::Status s = tree_.refresh(now); !s.ok()) return s;
    ProcessTotals t;
    if (absl::Status s = tree_.read(&t); !s.ok()) return s;
    const double seconds = seconds_between(last_, now);
    last_ = now;
    // Sums over live members: a new member adds its past, a member reaped
    // outside the tree takes its own away; clamp so neither shows as negative.
    const auto mb = [](std::uint64_t now_bytes, std::uint64_t before) {
      return static_cast<double>(counter_delta(now_bytes, before)) / kMB;
    };
    const double cpu_s =
        static_cast<double>(counter_delta(t.cpu_ticks, last_totals_.cpu_ticks)) / ticks_per_s_;
    const double read_mb = mb(t.read_bytes, last_totals_.read_bytes);
    const double write_mb = mb(t.write_bytes, last_totals_.write_bytes);
    last_totals_ = t;
    read_mb_ += read_mb;
    write_mb_ += write_mb;
    if (seconds > 0) {
      out->push_back({host::kProcCpuMetric, 100.0 * cpu_s / seconds});
      out->push_back({kProcReadMbPerSecMetric, read_mb / seconds});
      out->push_back({kProcWriteMbPerSecMetric, write_mb / seconds});
    }
    // The threads' run-queue wait: a tree whose tasks cannot be read (another
    // user's, a kernel without schedstat) only lacks these readings.
    SchedDelta sched;
    const bool sched_ok = sched_.read(tree_.pids(), &sched).ok();
    if (sched_ok && sched_ok_ && seconds > 0) {
      out->push_back(
          {kProcCpuWaitMetric, 100.0 * static_cast<double>(sched.wait_ns) / 1e9 / seconds});
      out->push_back({kProcInvoluntarySwitchesMetric,
                      static_cast<double>(sched.involuntary_switches) / seconds});
    }
    sched_ok_ = sched_ok;
    out->push_back({host::kProcRssMbMetric, static_cast<double>(t.rss_pages) * page_mb_});
    out->push_back({kProcCountMetric, static_cast<double>(t.count)});
    out->push_back({kProcReadMbMetric, read_mb_});
    out->push_back({kProcWriteMbMetric, write_mb_});
    return absl::OkStatus();
  }

 private:
  ProcessTree tree_;
  double ticks_per_s_ = 100;
  double page_mb_ = 0;
  ProcessTotals last_totals_;
  ThreadSchedReader sched_;
  bool sched_ok_ = false;  // the last read of sched_ succeeded (a baseline for the next)
  double read_mb_ = 0, write_mb_ = 0;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

std::unique_ptr<HardwareSource> make_cpu_source(std::string proc_root) {
  return std::make_unique<CpuSource>(std::move(proc_root));
}
std::unique_ptr<HardwareSource> make_memory_source(std::string proc_root) {
  return std::make_unique<MemorySource>(std::move(proc_root));
}
std::unique_ptr<HardwareSource> make_disk_source(std::string proc_root, std::string sys_root) {
  return std::make_unique<DiskSource>(std::move(proc_root), std::move(sys_root));
}
std::unique_ptr<HardwareSource> make_network_source(std::string proc_root) {
  return std::make_unique<NetworkSource>(std::move(proc_root));
}
std::unique_ptr<HardwareSource> make_process_tree_source(std::string proc_root) {
  return std::make_unique<ProcessTreeSource>(std::move(proc_root));
}

}  // namespace trainscope::host

namespace trainscope {

std::vector<std::unique_ptr<HardwareSource>> host_sources() {
  std::vector<std::unique_ptr<HardwareSource>> sources;
  sources.push_back(host::make_cpu_source("/proc"));
  sources.push_back(host::make_memory_source("/proc"));
  sources.push_back(host::make_disk_source("/proc", "/sys"));
  sources.push_back(host::make_network_source("/proc"));
  sources.push_back(host::make_process_tree_source("/proc"));
  return sources;
}

}  // namespace trainscope
