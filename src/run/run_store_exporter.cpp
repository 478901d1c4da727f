#include "run/run_store_exporter.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/csv.hpp"
#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope::run::detail {
namespace {

// The byte just after the last newline in the file's first `size` bytes, or
// -1 if there is none.
off_t end_of_last_line(int fd, off_t size) {
  char block[4096];
  for (off_t end = size; end > 0;) {
    const off_t begin = std::max<off_t>(0, end - static_cast<off_t>(sizeof(block)));
    const ssize_t n = ::pread(fd, block, static_cast<std::size_t>(end - begin), begin);
    if (n != end - begin) return -1;
    for (ssize_t i = n; i > 0; --i) {
      if (block[i - 1] == '\n') return begin + i;
    }
    end = begin;
  }
  return -1;
}

// Checks the header of an append-only CSV file and, for the rank's owner,
// drops an incomplete last line left by a crash, so appended lines start on a
// line of their own.
absl::Status check_and_repair(int fd, const std::string& path, std::string_view header,
                              bool repair) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return trainscope::detail::file_error(errno, "inspect", path);
  std::string start(header.size(), '\0');
  const ssize_t n = ::pread(fd, start.data(), start.size(), 0);
  if (n != static_cast<ssize_t>(header.size()) || start != header) {
    return absl::DataLossError(fmt::format(
        "{} does not start with the header \"{}\"; it is not a trainscope record file or is "
        "damaged: move it away to record into this run directory",
        absl::Utf8SafeCHexEscape(path), absl::CHexEscape(std::string(header))));
  }
  if (!repair) return absl::OkStatus();
  const off_t keep = end_of_last_line(fd, st.st_size);
  if (keep < 0) return trainscope::detail::file_error(errno == 0 ? EIO : errno, "read", path);
  if (keep == st.st_size) return absl::OkStatus();
  if (::ftruncate(fd, keep) != 0)
    return trainscope::detail::file_error(errno, "repair (truncate)", path);
  warn(
      fmt::format("{}: dropped an incomplete last line of {} bytes (a record cut short by a "
                  "crash) before appending",
                  path, st.st_size - keep));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<RunStoreExporter>> RunStoreExporter::Create(Options options) {
  std::shared_ptr<RunStoreExporter> exporter(new RunStoreExporter(std::move(options)));
  absl::Status status = exporter->open_files();
  if (status.ok() && exporter->owns_rank()) status = exporter->write_rank_file();
  if (!status.ok()) return status;
  return exporter;
}

namespace {

// The stream's statistics keep exact samples up to this many per key, then a
// sketch: a day of every batch timed would otherwise double the timers' memory.
TimerOptions stream_table_options() {
  TimerOptions options;
  options.exact_sample_cap = std::size_t{1} << 16;
  return options;
}

}  // namespace

RunStoreExporter::RunStoreExporter(Options options)
    : options_(std::move(options)), cpu_(stream_table_options()), gpu_(stream_table_options()) {
  host_ = trainscope::detail::this_host();
  const std::int64_t flush_ms = absl::ToInt64Milliseconds(options_.flush_interval);
  if (options_.launcher) {
    metrics_.path = join_path(options_.dir, host_metrics_file_name(host_));
    LauncherState& s = launcher_state_;
    s.host = host_;
    s.pid = ::getpid();
    s.command = options_.command;
    s.start_time_ms = options_.start_time_ms;
    s.flush_interval_ms = flush_ms;
    return;
  }
  regions_.path = join_path(options_.dir, regions_file_name(options_.rank.rank));
  metrics_.path = join_path(options_.dir, metrics_file_name(options_.rank.rank));
  RankState& s = rank_state_;
  s.rank = options_.rank;
  s.host = host_;
  s.pid = ::getpid();
  s.start_time_ms = options_.start_time_ms;
  s.launcher = options_.launched_by;
  s.flush_interval_ms = flush_ms;
}

RunStoreExporter::~RunStoreExporter() {
  for (int fd : {regions_.fd, metrics_.fd, lock_fd_, host_lock_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

// A rank's first process holds rank-<r>.lock; a host's first launcher holds
// host-<host>.lock. The kernel drops a lock when its process dies, however.
absl::Status RunStoreExporter::lock_rank_or_host() {
  if (!options_.launcher && options_.claim != RankClaimKind::kUnclaimed) {
    lock_fd_ = options_.claimed_lock_fd;
    owner_ = options_.claim == RankClaimKind::kOwner;
    return absl::OkStatus();
  }
  const std::string lock_path =
      options_.launcher
          ? join_path(options_.dir, fmt::format("host-{}.lock", host_file_part(host_)))
          : join_path(options_.dir, fmt::format("rank-{}.lock", options_.rank.rank));
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return trainscope::detail::file_error(errno, "open", lock_path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
  } else if (options_.launcher) {
    host_lock_fd_ = fd;
  } else {
    lock_fd_ = fd;
  }
  owner_ = options_.launcher || lock_fd_ >= 0;
  return absl::OkStatus();
}

void RunStoreExporter::set_exit(int exit_code, int term_signal) {
  std::lock_guard<std::mutex> lock(mu_);
  launcher_state_.exit_code = exit_code;
  launcher_state_.term_signal = term_signal;
}

absl::Status RunStoreExporter::open_files() {
  if (absl::Status status = lock_rank_or_host(); !status.ok()) return status;
  // A second claimant of a live rank opens nothing: its records go nowhere.
  if (options_.claim == RankClaimKind::kRefused) return absl::OkStatus();
  // A launcher's host file is repaired by the host's first launcher only.
  const bool repair = options_.launcher ? owns_host() : owns_rank();
  for (auto [file, header] :
       {std::make_pair(&regions_, kRegionsHeader), std::make_pair(&metrics_, kMetricsHeader)}) {
    if (file->path.empty()) continue;  // a launcher has no regions
    bool created;
    absl::Status status = trainscope::detail::create_file_exclusively(file->path, header, &created);
    if (!status.ok()) return status;
    file->fd = ::open(file->path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    if (file->fd < 0) return trainscope::detail::file_error(errno, "open", file->path);
    status = check_and_repair(file->fd, file->path, header, repair);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_rank_file() {
  if (options_.launcher) {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mu_);
      launcher_state_.heartbeat_ms = trainscope::detail::unix_now_ms();
      text = format_launcher_file(launcher_state_);
    }
    return trainscope::detail::write_file_atomically(
        join_path(options_.dir, launcher_file_name(host_, launcher_state_.pid)), text);
  }
  rank_state_.heartbeat_ms = trainscope::detail::unix_now_ms();
  return trainscope::detail::write_file_atomically(
      join_path(options_.dir, rank_file_name(options_.rank.rank)), format_rank_file(rank_state_));
}

const std::string& RunStoreExporter::key_field(KeyId id) {
  if (id >= key_fields_.size()) key_fields_.resize(id + 1);
  std::string& field = key_fields_[id];
  // The trailing comma makes a cached field never empty, even for key "".
  if (field.empty()) {
    trainscope::detail::append_csv_field(Key::FromId(id).name(), &field);
    field.push_back(',');
  }
  return field;
}

bool RunStoreExporter::make_room(std::size_t records) {
  if (regions_.pending.size() + metrics_.pending.size() < options_.max_buffered_bytes) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped_ += records;
  }
  if (!drop_warned_) {
    drop_warned_ = true;
    warn(
        fmt::format("run store {}: {} MiB of records are waiting for the disk; dropping new "
                    "records until it takes them (see dropped_records())",
                    options_.dir, options_.max_buffered_bytes >> 20));
  }
  return false;
}

absl::Status RunStoreExporter::write_samples(absl::Span<const RegionSample> samples) {
  constexpr KeyId kBatch = static_cast<KeyId>(TimeType::BATCH);
  constexpr KeyId kEpoch = static_cast<KeyId>(TimeType::EPOCH);
  // The pipeline drains as fast as regions arrive (up to millions a second),
  // so lines go to the file a MiB at a time rather than waiting a whole flush
  // interval in memory, where a burst would reach max_buffered_bytes. A write
  // that fails leaves its lines pending: flush() retries and reports it.
  constexpr std::size_t kWriteBytes = std::size_t{1} << 20;
  // A line without its key: device, 5 integers of at most 20 characters, commas, newline.
  constexpr std::size_t kMaxLineTail = 3 + 6 + 5 * 20 + 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RegionSample& s : samples) {
      (s.device == Device::kCPU ? cpu_ : gpu_).add(s.key, s.duration_ns);
      saw_gpu_ |= s.device == Device::kGPU;
    }
  }
  std::string& pending = regions_.pending;
  std::size_t write_at = pending.size() < kWriteBytes ? kWriteBytes : pending.size() + kWriteBytes;
  const fmt::format_int rank(options_.rank.rank);
  char line[kMaxLineTail];
  for (const RegionSample& s : samples) {
    if (!make_room(1)) continue;
    if (s.thread >= progress_.size()) progress_.resize(s.thread + 1);
    ThreadProgress& progress = progress_[s.thread];
    // key,device,rank,thread,start_unix_ns,duration_ns,step,epoch
    char* p = line;
    const auto put = [&p](std::string_view text) {
      std::memcpy(p, text.data(), text.size());
      p += text.size();
    };
    const auto put_int = [&put](auto value) {
      const fmt::format_int digits(value);
      put(std::string_view(digits.data(), digits.size()));
    };
    put(device_name(s.device));
    *p++ = ',';
    put(std::string_view(rank.data(), rank.size()));
    *p++ = ',';
    put_int(s.thread);
    *p++ = ',';
    put_int(s.start_unix_ns);
    *p++ = ',';
    put_int(s.duration_ns);
    *p++ = ',';
    put_int(progress.batches);
    *p++ = ',';
    put_int(progress.epochs);
    *p++ = '\n';
    pending += key_field(s.key);
    pending.append(line, static_cast<std::size_t>(p - line));
    if (s.device == Device::kCPU) {
      progress.batches += s.key == kBatch;
      progress.epochs += s.key == kEpoch;
    }
    if (pending.size() >= write_at) {
      (void)append_pending(&regions_);
      write_at = pending.size() + kWriteBytes;
    }
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_metrics(absl::Span<const MetricPoint> metrics) {
  auto out = std::back_inserter(metrics_.pending);
  for (const MetricPoint& m : metrics) {
    if (!make_room(1)) continue;
    trainscope::detail::append_csv_field(m.key, &metrics_.pending);
    if (m.rank == kNoRank) {
      fmt::format_to(out, ",{},{},{},\n", m.value, m.step, m.timestamp_ms);
    } else {
      fmt::format_to(out, ",{},{},{},{}\n", m.value, m.step, m.timestamp_ms, m.rank);
    }
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_summary(const Summary& summary) {
  // A second process of the rank would replace the owner's file.
  if (!owns_rank() || options_.launcher) return absl::OkStatus();
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    summary_.has_gpu_section |= summary.has_gpu_section;
    for (const SummaryEntry& entry : summary.entries) {
      auto same = [&entry](const SummaryEntry& e) {
        return e.key == entry.key && e.device == entry.device;
      };
      auto it = std::find_if(summary_.entries.begin(), summary_.entries.end(), same);
      if (it != summary_.entries.end()) {
        *it = entry;
      } else {
        summary_.entries.push_back(entry);
      }
    }
    text = format_summary(summary_, StatsFormat::kJson);
  }
  return trainscope::detail::write_file_atomically(
      join_path(options_.dir, summary_file_name(options_.rank.rank)), text);
}

absl::Status RunStoreExporter::write_run_info(const RunInfo& info) {
  absl::Status status = merge_into_run_file(options_.dir, info);
  if (info.status == RunStatus::kRunning || !owns_rank()) return status;
  // The end: the records first, so a reader that sees the final status also
  // sees everything recorded before it.
  if (options_.launcher) {
    std::lock_guard<std::mutex> lock(mu_);
    launcher_state_.status = info.status;
    launcher_state_.end_time_ms = info.end_time_ms;
  } else {
    rank_state_.status = info.status;
    rank_state_.end_time_ms = info.end_time_ms;
  }
  absl::Status flushed = flush();
  return status.ok() ? flushed : status;
}

absl::Status RunStoreExporter::append_pending(CsvFile* file) {
  if (file->fd < 0) file->pending.clear();  // a launcher has no regions file
  if (file->pending.empty()) return absl::OkStatus();
  const std::size_t written = trainscope::detail::write_all(file->fd, file->pending);
  const int error = errno;
  // What did not make it stays for the next flush (a full disk may clear).
  file->pending.erase(0, written);
  if (!file->pending.empty()) return trainscope::detail::file_error(error, "append to", file->path);
  return absl::OkStatus();
}

absl::Status RunStoreExporter::flush() {
  absl::Status status = append_pending(&regions_);
  status.Update(append_pending(&metrics_));
  if (owns_rank()) status.Update(write_rank_file());
  std::lock_guard<std::mutex> lock(mu_);
  last_flush_ = status;
  return status;
}

Summary RunStoreExporter::stream_summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  Summary summary;
  summary.has_gpu_section = saw_gpu_ || summary_.has_gpu_section;
  for (Device device : {Device::kCPU, Device::kGPU}) {
    const timing::detail::SeriesTable& table = device == Device::kCPU ? cpu_ : gpu_;
    for (KeyId id : table.order()) {
      const std::string name(Key::FromId(id).name());
      const bool covered =
          std::any_of(summary_.entries.begin(), summary_.entries.end(),
                      [&](const SummaryEntry& e) { return e.key == name && e.device == device; });
      if (!covered) summary.entries.push_back({name, device, table.find(id)->stats()});
    }
  }
  return summary;
}

std::uint64_t RunStoreExporter::dropped_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

absl::Status RunStoreExporter::last_flush_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_flush_;
}

}  // namespace trainscope::run::detail
