#include "run/run_store_exporter.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

// The disk (or the user's quota) is full: what the reserve and the stopped
// region rows are for. Other errors (EIO, EFBIG) keep records buffered.
bool disk_full(int error) { return error == ENOSPC || error == EDQUOT; }

// The reserve is given back in whole steps of this much.
constexpr std::size_t kReleaseStep = std::size_t{64} << 10;

std::size_t round_up(std::size_t bytes, std::size_t step) {
  return (bytes + step - 1) / step * step;
}

// Allocates `bytes` of `fd` (fallocate, or written zeros where a file system
// has no fallocate), so that they count as used until given back.
bool allocate(int fd, std::size_t bytes) {
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0) return true;
  static const char zeros[4096] = {};
  for (std::size_t at = 0; at < bytes; at += sizeof(zeros)) {
    const std::size_t n = std::min(sizeof(zeros), bytes - at);
    if (::pwrite(fd, zeros, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<RunStoreExporter>> RunStoreExporter::Create(Options options) {
  std::shared_ptr<RunStoreExporter> exporter(new RunStoreExporter(std::move(options)));
  absl::Status status = exporter->open_files();
  if (status.ok() && exporter->owns_rank()) status = exporter->write_rank_file();
  if (!status.ok()) return status;
  // A second claimant of a rank (records nothing) sets nothing aside either.
  if (exporter->options_.claim != RankClaimKind::kRefused) exporter->create_reserve();
  return exporter;
}

// Best effort: a run starts without a reserve (and says so) rather than not at all.
void RunStoreExporter::create_reserve() {
  if (options_.reserve_bytes == 0) return;
  const std::string& record = options_.launcher ? metrics_.path : regions_.path;
  std::lock_guard<std::mutex> lock(reserve_.mu);
  reserve_.path = fmt::format("{}.tmp-reserve-{}", record, ::getpid());
  reserve_.fd = ::open(reserve_.path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (reserve_.fd >= 0 && allocate(reserve_.fd, options_.reserve_bytes)) {
    reserve_.held = options_.reserve_bytes;
    return;
  }
  const int error = errno;
  if (reserve_.fd >= 0) {
    ::close(reserve_.fd);
    reserve_.fd = -1;
    ::unlink(reserve_.path.c_str());
  }
  warn(fmt::format(
      "run store {}: no space set aside for metrics and the summary on a full disk: "
      "{}",
      options_.dir,
      std::string(trainscope::detail::file_error(error, "allocate", reserve_.path).message())));
}

bool RunStoreExporter::release_reserve(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(reserve_.mu);
  if (reserve_.held == 0) return false;
  const std::size_t give = bytes >= reserve_.held
                               ? reserve_.held
                               : std::min(reserve_.held, round_up(bytes, kReleaseStep));
  const std::size_t keep = reserve_.held - give;
  if (keep == 0) {
    ::close(reserve_.fd);
    ::unlink(reserve_.path.c_str());
    reserve_.fd = -1;
  } else if (::ftruncate(reserve_.fd, static_cast<off_t>(keep)) != 0) {
    return false;
  }
  reserve_.held = keep;
  return true;
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
  retire_spares();
  release_reserve(std::numeric_limits<std::size_t>::max());
}

// At the end: the record is written as a plain file again (later flushes
// only renew the heartbeat), and the spares go.
void RunStoreExporter::retire_spares() {
  ended_ = true;
  for (int i = 0; i < 2; ++i) {
    if (record_.fds[i] < 0) continue;
    ::close(record_.fds[i]);
    record_.fds[i] = -1;
    // The name of spare 0 went to the record when it was first used.
    if (i == 1 || record_.live < 0) ::unlink(record_.spares[i].c_str());
  }
  record_.live = -1;
  record_.size = 0;
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
  std::string text;
  if (options_.launcher) {
    std::lock_guard<std::mutex> lock(mu_);
    launcher_state_.heartbeat_ms = trainscope::detail::unix_now_ms();
    text = format_launcher_file(launcher_state_);
  } else {
    rank_state_.heartbeat_ms = trainscope::detail::unix_now_ms();
    {
      std::lock_guard<std::mutex> lock(mu_);
      rank_state_.dropped_region_rows = dropped_regions_;
      rank_state_.dropped_metrics = dropped_ - dropped_regions_;
    }
    text = format_rank_file(rank_state_);
  }
  return write_record(text);
}

// The first write creates the record and its spares; later ones replace it,
// in place once the disk was full (a reader would otherwise take a live,
// healthy process whose heartbeat stopped for a crashed one).
absl::Status RunStoreExporter::write_record(const std::string& text) {
  if (record_.path.empty()) {
    record_.path = options_.launcher
                       ? join_path(options_.dir, launcher_file_name(host_, launcher_state_.pid))
                       : join_path(options_.dir, rank_file_name(options_.rank.rank));
  }
  if (record_.live >= 0) return write_record_in_place(text);
  absl::Status status = trainscope::detail::write_file_atomically(record_.path, text);
  if (status.ok()) {
    if (record_.fds[0] < 0 && !ended_) prepare_spares(text.size());
    return status;
  }
  if (!absl::IsResourceExhausted(status) || record_.fds[0] < 0) return status;
  absl::Status in_place = write_record_in_place(text);
  return in_place.ok() ? in_place : status;
}

// Two files of the record's size with twice its length (at least 4 KiB) of
// written bytes each, so that rewriting them needs no new block.
void RunStoreExporter::prepare_spares(std::size_t record_size) {
  const std::size_t size = round_up(std::max<std::size_t>(2 * record_size + 256, 4096), 4096);
  const std::string padding(size, ' ');
  for (int i = 0; i < 2; ++i) {
    record_.spares[i] = fmt::format("{}.tmp-spare-{}-{}", record_.path, ::getpid(), i);
    record_.fds[i] =
        ::open(record_.spares[i].c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (record_.fds[i] < 0 ||
        trainscope::detail::write_all(record_.fds[i], padding) != padding.size()) {
      for (int j = 0; j <= i; ++j) {
        if (record_.fds[j] >= 0) ::close(record_.fds[j]);
        ::unlink(record_.spares[j].c_str());
        record_.fds[j] = -1;
      }
      return;  // the disk is full already: the record stays a plain file
    }
  }
  record_.size = size;
}

absl::Status RunStoreExporter::write_record_in_place(const std::string& text) {
  if (text.size() + 1 > record_.size) {
    return absl::ResourceExhaustedError(
        fmt::format("cannot replace \"{}\" in place: the record ({} bytes) outgrew its "
                    "preallocated {} bytes",
                    absl::Utf8SafeCHexEscape(record_.path), text.size(), record_.size));
  }
  // The older of the two files takes the new record: the name not shown now.
  const int target = record_.live < 0 ? 0 : 1 - record_.live;
  std::string padded = text;
  padded.resize(record_.size - 1, ' ');
  padded.push_back('\n');
  if (::pwrite(record_.fds[target], padded.data(), padded.size(), 0) !=
      static_cast<ssize_t>(padded.size())) {
    return trainscope::detail::file_error(errno, "write", record_.spares[target]);
  }
  (void)::fdatasync(record_.fds[target]);
  // The first time, spare 0 replaces the record; then spare 1's name swaps
  // with the record's, so that both files stay, each written over in turn.
  const int moved = record_.live < 0 ? ::rename(record_.spares[0].c_str(), record_.path.c_str())
                                     : ::renameat2(AT_FDCWD, record_.spares[1].c_str(), AT_FDCWD,
                                                   record_.path.c_str(), RENAME_EXCHANGE);
  if (moved != 0) return trainscope::detail::file_error(errno, "replace", record_.path);
  record_.live = target;
  return absl::OkStatus();
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

bool RunStoreExporter::make_room(bool region) {
  if (regions_.pending.size() + metrics_.pending.size() < options_.max_buffered_bytes) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++dropped_;
    dropped_regions_ += region;
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

// The disk is full: region rows (the bulk, and summarized anyway) stop, so
// that metrics, the summary and the end record get the space that is left.
void RunStoreExporter::stop_regions(const absl::Status& why) {
  const auto rows = static_cast<std::uint64_t>(
      std::count(regions_.pending.begin(), regions_.pending.end(), '\n'));
  regions_.pending.clear();
  regions_stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped_ += rows;
    dropped_regions_ += rows;
  }
  if (regions_stop_warned_) return;
  regions_stop_warned_ = true;
  warn(fmt::format(
      "{}; region rows are not written while the disk is full (counted as dropped in {}); "
      "metrics, the summary (every region's statistics) and the rank's status get the space "
      "left",
      std::string(why.message()), rank_file_name(options_.rank.rank)));
}

// Region rows start again once the reserve is whole again and as much is free besides.
void RunStoreExporter::maybe_resume_regions() {
  if (!regions_stopped_ || ended_ || !metrics_.pending.empty() || summary_unwritten_) return;
  {
    std::lock_guard<std::mutex> lock(reserve_.mu);
    if (reserve_.held < options_.reserve_bytes) {
      if (reserve_.fd < 0) {
        reserve_.fd = ::open(reserve_.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (reserve_.fd < 0) return;
      }
      if (!allocate(reserve_.fd, options_.reserve_bytes)) {
        // Not yet: back to what it held (a failed allocation may leave some).
        (void)!::ftruncate(reserve_.fd, static_cast<off_t>(reserve_.held));
        if (reserve_.held == 0) {
          ::close(reserve_.fd);
          ::unlink(reserve_.path.c_str());
          reserve_.fd = -1;
        }
        return;
      }
      reserve_.held = options_.reserve_bytes;
    }
  }
  struct statvfs fs {};
  if (::statvfs(options_.dir.c_str(), &fs) != 0 ||
      static_cast<double>(fs.f_bavail) * fs.f_frsize < 2.0 * options_.reserve_bytes) {
    return;
  }
  regions_stopped_ = false;
  if (resume_warned_) return;
  resume_warned_ = true;
  warn(
      fmt::format("{}: the disk has space again; region rows are written again ({} dropped "
                  "while it was full)",
                  regions_.path, dropped_region_rows()));
}

absl::Status RunStoreExporter::write_samples(absl::Span<const RegionSample> samples) {
  constexpr KeyId kBatch = static_cast<KeyId>(TimeType::BATCH);
  constexpr KeyId kEpoch = static_cast<KeyId>(TimeType::EPOCH);
  // The pipeline drains as fast as regions arrive (up to millions a second),
  // so lines go to the file a MiB at a time rather than waiting a whole flush
  // interval in memory, where a burst would reach max_buffered_bytes. A write
  // that fails leaves its lines pending: flush() retries and reports it.
  constexpr std::size_t kWriteBytes = std::size_t{1} << 20;
  // A line without its key: device, 9 commas, 9 integers (two of at most 10 characters, one of
  // 3, six of 20), newline.
  constexpr std::size_t kMaxLineTail = 3 + 9 + 8 * 20 + 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RegionSample& s : samples) {
      (s.device == Device::kCPU ? cpu_ : gpu_).add(s.key, s.duration_ns);
      saw_gpu_ |= s.device == Device::kGPU;
    }
    if (regions_stopped_) {
      dropped_ += samples.size();
      dropped_regions_ += samples.size();
    }
  }
  if (regions_stopped_) {
    // Not written, but counted: rows written after the disk has space again
    // carry the right step and epoch.
    for (const RegionSample& s : samples) {
      if (s.device != Device::kCPU) continue;
      if (s.thread >= progress_.size()) progress_.resize(s.thread + 1);
      progress_[s.thread].batches += s.key == kBatch;
      progress_[s.thread].epochs += s.key == kEpoch;
    }
    return absl::OkStatus();
  }
  std::string& pending = regions_.pending;
  std::size_t write_at = pending.size() < kWriteBytes ? kWriteBytes : pending.size() + kWriteBytes;
  const fmt::format_int rank(options_.rank.rank);
  char line[kMaxLineTail];
  for (const RegionSample& s : samples) {
    if (s.thread >= progress_.size()) progress_.resize(s.thread + 1);
    ThreadProgress& progress = progress_[s.thread];
    const bool write = !regions_stopped_ && make_room(true);
    if (regions_stopped_) {
      std::lock_guard<std::mutex> lock(mu_);
      ++dropped_;
      ++dropped_regions_;
    }
    if (write) {
      // key,device,rank,thread,start_unix_ns,duration_ns,step,epoch,gpu_start_ns,stream,
      // cpu_wait_ns
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
      *p++ = ',';
      if (s.device == Device::kGPU && s.gpu_start_ns != kNoGpuStart) put_int(s.gpu_start_ns);
      *p++ = ',';
      if (s.device == Device::kGPU) put_int(s.stream);
      *p++ = ',';
      if (s.device == Device::kCPU && s.cpu_wait_ns >= 0) put_int(s.cpu_wait_ns);
      *p++ = '\n';
      pending += key_field(s.key);
      pending.append(line, static_cast<std::size_t>(p - line));
    }
    if (s.device == Device::kCPU) {
      progress.batches += s.key == kBatch;
      progress.epochs += s.key == kEpoch;
    }
    if (pending.size() >= write_at) {
      const absl::Status status = append_pending(&regions_);
      if (!status.ok() && disk_full(regions_.error)) stop_regions(status);
      write_at = pending.size() + kWriteBytes;
    }
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_metrics(absl::Span<const MetricPoint> metrics) {
  auto out = std::back_inserter(metrics_.pending);
  for (const MetricPoint& m : metrics) {
    if (!make_room(false)) continue;
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
    summary_text_ = format_summary(summary_, StatsFormat::kJson);
  }
  return write_summary_file();
}

// On a full disk the summary takes from the reserve; what still fails stays
// in memory and is written at a later flush (or printed at the end).
absl::Status RunStoreExporter::write_summary_file() {
  const std::string path = join_path(options_.dir, summary_file_name(options_.rank.rank));
  absl::Status status = trainscope::detail::write_file_atomically(path, summary_text_);
  if (absl::IsResourceExhausted(status)) {
    if (!regions_stopped_) stop_regions(status);
    if (release_reserve(summary_text_.size() + 4096)) {
      status = trainscope::detail::write_file_atomically(path, summary_text_);
    }
  }
  summary_unwritten_ = !status.ok();
  return status;
}

absl::Status RunStoreExporter::write_run_info(const RunInfo& info) {
  absl::Status status = merge_into_run_file(options_.dir, info);
  if (absl::IsResourceExhausted(status) && release_reserve(4096)) {
    status = merge_into_run_file(options_.dir, info);
  }
  if (info.status == RunStatus::kRunning) return status;
  if (owns_rank()) {
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
    status.Update(flush());
    if (summary_unwritten_) {
      // Not lost: the exact statistics of every region, where the user sees them.
      warn(fmt::format("{}: not written ({}); rank {}'s summary follows:\n{}",
                       join_path(options_.dir, summary_file_name(options_.rank.rank)),
                       std::string(last_flush_status().message()), options_.rank.rank,
                       summary_text_));
    }
  }
  end_failure_ = status;
  retire_spares();
  // What is left of the reserve goes to whatever is written after the end
  // (the command's last output, a traceback, the launcher's records).
  release_reserve(std::numeric_limits<std::size_t>::max());
  return status;
}

// Appends what is pending. A write cut short in the middle of a line is
// taken back to the line's start (when nobody appended since), so that the
// file holds whole lines and the cut line stays pending whole.
absl::Status RunStoreExporter::append_pending(CsvFile* file) {
  if (file->fd < 0) file->pending.clear();  // a launcher has no regions file
  if (file->pending.empty()) return absl::OkStatus();
  std::size_t written = trainscope::detail::write_all(file->fd, file->pending);
  const int error = errno;
  if (written < file->pending.size() && written > 0 && file->pending[written - 1] != '\n') {
    const std::size_t line = file->pending.rfind('\n', written - 1);
    const std::size_t keep = line == std::string::npos ? 0 : line + 1;
    const off_t end = ::lseek(file->fd, 0, SEEK_CUR);
    struct stat st;
    if (end >= 0 && ::fstat(file->fd, &st) == 0 && st.st_size == end &&
        ::ftruncate(file->fd, end - static_cast<off_t>(written - keep)) == 0) {
      written = keep;
    }
  }
  // What did not make it stays for the next flush (a full disk may clear).
  file->pending.erase(0, written);
  if (!file->pending.empty()) {
    file->error = error;
    return trainscope::detail::file_error(error, "append to", file->path);
  }
  file->error = 0;
  return absl::OkStatus();
}

absl::Status RunStoreExporter::flush() {
  maybe_resume_regions();
  absl::Status status = append_pending(&regions_);
  if (!status.ok() && disk_full(regions_.error)) {
    stop_regions(status);
    status = absl::OkStatus();  // reported by the warning and the dropped count
  }
  absl::Status metrics = append_pending(&metrics_);
  if (!metrics.ok() && disk_full(metrics_.error)) {
    // Metrics before region rows: those stop, and the reserve gives what is needed.
    if (!regions_stopped_ && !options_.launcher) stop_regions(metrics);
    if (release_reserve(metrics_.pending.size())) metrics = append_pending(&metrics_);
  }
  status.Update(metrics);
  if (summary_unwritten_) status.Update(write_summary_file());
  // After the end the record holds the final status: nothing to renew, but
  // what the end could not write stays the answer (end() reports it).
  if (owns_rank() && !ended_) status.Update(write_rank_file());
  if (ended_) status.Update(end_failure_);
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

std::uint64_t RunStoreExporter::dropped_region_rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_regions_;
}

absl::Status RunStoreExporter::last_flush_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_flush_;
}

}  // namespace trainscope::run::detail
