#include "run_store_exporter.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "csv.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "stats_fields.hpp"
#include "trainscope/errors.hpp"
#include "trainscope/stats_format.hpp"
#include "trainscope/time_type.hpp"

namespace trainscope::detail {
namespace {

using Json = nlohmann::ordered_json;

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string join_path(const std::string& dir, std::string_view name) {
  return fmt::format("{}/{}", dir, name);
}

// Writes all of `data` unless an error stops it; returns the bytes written
// and leaves errno set when fewer than data.size().
std::size_t write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// A temporary name next to `path` that no other writer uses at the same time.
std::string temporary_path(const std::string& path) {
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter.fetch_add(1));
}

absl::Status write_new(const std::string& path, std::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return file_error(errno, "create", path);
  const bool complete = write_all(fd, contents) == contents.size();
  const int error = errno;
  if (::close(fd) != 0 && complete) return file_error(errno, "write", path);
  if (!complete) {
    ::unlink(path.c_str());
    return file_error(error, "write", path);
  }
  return absl::OkStatus();
}

// Reads typed fields of a JSON object; the first problem becomes status(),
// naming the file and the field, and later reads return defaults.
class FieldReader {
 public:
  FieldReader(const Json& object, const std::string& path) : object_(object), path_(path) {}

  std::string text(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return {};
    if (!value->is_string()) return fail(name, "is not a string"), std::string();
    return value->get<std::string>();
  }
  std::int64_t integer(const char* name, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    const Json* value = find(name);
    if (value == nullptr) return 0;
    if (!value->is_number_integer()) return fail(name, "is not an integer"), 0;
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      return fail(name, "is out of range"), 0;
    }
    const std::int64_t v = value->get<std::int64_t>();
    if (v < min || v > max) return fail(name, "is out of range"), 0;
    return v;
  }
  std::uint64_t unsigned_integer(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return 0;
    if (!value->is_number_unsigned()) return fail(name, "is not a non-negative integer"), 0;
    return value->get<std::uint64_t>();
  }
  // A number, or null for NaN (JSON has no NaN).
  double number(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return 0.0;
    if (value->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!value->is_number()) return fail(name, "is not a number or null"), 0.0;
    return value->get<double>();
  }
  bool boolean(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return false;
    if (!value->is_boolean()) return fail(name, "is not true or false"), false;
    return value->get<bool>();
  }
  std::map<std::string, std::string> string_map(const char* name) {
    std::map<std::string, std::string> out;
    const Json* value = find(name);
    if (value == nullptr) return out;
    if (!value->is_object()) return fail(name, "is not an object"), out;
    for (const auto& [key, item] : value->items()) {
      if (!item.is_string()) return fail(name, "has a value that is not a string"), out;
      out.emplace(key, item.get<std::string>());
    }
    return out;
  }
  const Json* array(const char* name) {
    const Json* value = find(name);
    if (value != nullptr && !value->is_array()) return fail(name, "is not an array"), nullptr;
    return value;
  }
  const absl::Status& status() const { return status_; }

 private:
  const Json* find(const char* name) {
    const auto it = object_.find(name);
    if (it == object_.end()) return fail(name, "is missing"), nullptr;
    return &*it;
  }
  void fail(const char* name, const char* what) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(
        fmt::format("{}: field \"{}\" {}", absl::Utf8SafeCHexEscape(path_), name, what));
  }

  const Json& object_;
  const std::string& path_;
  absl::Status status_;
};

absl::StatusOr<Json> parse_object(std::string_view text, const std::string& path) {
  Json doc = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: not a JSON object (corrupt or cut short; {} bytes)", absl::Utf8SafeCHexEscape(path),
        text.size()));
  }
  return doc;
}

// Checks "format" and "version" so that a newer writer's file is refused
// instead of misread.
absl::Status check_format(FieldReader& fields, std::string_view format, const std::string& path) {
  const std::string found = fields.text("format");
  const std::int64_t version = fields.integer("version");
  if (!fields.status().ok()) return fields.status();
  if (found != format || version != kRunFormatVersion) {
    return absl::InvalidArgumentError(
        fmt::format("{}: format \"{}\" version {} (this reader understands \"{}\" version {})",
                    absl::Utf8SafeCHexEscape(path), absl::Utf8SafeCHexEscape(found), version,
                    format, kRunFormatVersion));
  }
  return absl::OkStatus();
}

Json string_map_json(const std::map<std::string, std::string>& map) {
  Json out = Json::object();
  for (const auto& [key, value] : map) out[key] = value;
  return out;
}

std::string dump(const Json& doc) {
  // Invalid UTF-8 becomes U+FFFD instead of throwing.
  return doc.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

constexpr std::string_view kRankFormat = "trainscope.rank";


absl::StatusOr<SummaryEntry> parse_summary_entry(const Json& item, const std::string& path) {
  if (!item.is_object()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: an entry is not an object", absl::Utf8SafeCHexEscape(path)));
  }
  FieldReader fields(item, path);
  SummaryEntry entry;
  entry.key = fields.text("key");
  const std::string device = fields.text("device");
  entry.stats.count = fields.unsigned_integer("count");
  for (const auto& [name, member] : kStatsDoubleFields) entry.stats.*member = fields.number(name);
  entry.stats.warmup_excluded = fields.unsigned_integer("warmup_excluded");
  entry.stats.approximate = fields.boolean("approximate");
  if (!fields.status().ok()) return fields.status();
  if (device != "CPU" && device != "GPU") {
    return absl::InvalidArgumentError(fmt::format("{}: entry \"{}\" has device \"{}\" (CPU or GPU)",
                                                  absl::Utf8SafeCHexEscape(path),
                                                  absl::Utf8SafeCHexEscape(entry.key),
                                                  absl::Utf8SafeCHexEscape(device)));
  }
  entry.device = device == "GPU" ? Device::kGPU : Device::kCPU;
  return entry;
}

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
  if (::fstat(fd, &st) != 0) return file_error(errno, "inspect", path);
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
  if (keep < 0) return file_error(errno == 0 ? EIO : errno, "read", path);
  if (keep == st.st_size) return absl::OkStatus();
  if (::ftruncate(fd, keep) != 0) return file_error(errno, "repair (truncate)", path);
  warn(fmt::format("{}: dropped an incomplete last line of {} bytes (a record cut short by a "
                   "crash) before appending",
                   path, st.st_size - keep));
  return absl::OkStatus();
}

}  // namespace

std::string rank_file_name(std::uint32_t rank) { return fmt::format("rank-{}.json", rank); }
std::string regions_file_name(std::uint32_t rank) { return fmt::format("regions-{}.csv", rank); }
std::string metrics_file_name(std::uint32_t rank) { return fmt::format("metrics-{}.csv", rank); }
std::string summary_file_name(std::uint32_t rank) { return fmt::format("summary-{}.json", rank); }

absl::Status file_error(int error, std::string_view action, const std::string& path) {
  return absl::ErrnoToStatus(
      error, fmt::format("cannot {} \"{}\"", action, absl::Utf8SafeCHexEscape(path)));
}

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_error(errno, "open", path);
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return file_error(error, "read", path);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status write_file_atomically(const std::string& path, std::string_view contents) {
  const std::string tmp = temporary_path(path);
  absl::Status status = write_new(tmp, contents);
  if (!status.ok()) return status;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return file_error(error, "replace", path);
  }
  return absl::OkStatus();
}

absl::Status create_file_exclusively(const std::string& path, std::string_view contents,
                                     bool* created) {
  const std::string tmp = temporary_path(path);
  absl::Status status = write_new(tmp, contents);
  if (!status.ok()) return status;
  const int result = ::link(tmp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(tmp.c_str());
  *created = result == 0;
  if (result == 0 || error == EEXIST) return absl::OkStatus();
  return file_error(error, "create", path);
}

std::string format_run_file(const RunInfo& info) {
  Json doc;
  doc["format"] = kRunFormat;
  doc["version"] = kRunFormatVersion;
  doc["id"] = info.id;
  doc["name"] = info.name;
  doc["experiment"] = info.experiment;
  doc["start_time_ms"] = info.start_time_ms;
  doc["params"] = string_map_json(info.params);
  doc["tags"] = string_map_json(info.tags);
  return dump(doc);
}

absl::StatusOr<RunInfo> parse_run_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  FieldReader fields(*doc, path);
  absl::Status status = check_format(fields, kRunFormat, path);
  if (!status.ok()) return status;
  RunInfo info;
  info.id = fields.text("id");
  info.name = fields.text("name");
  info.experiment = fields.text("experiment");
  info.start_time_ms = fields.integer("start_time_ms");
  info.params = fields.string_map("params");
  info.tags = fields.string_map("tags");
  if (!fields.status().ok()) return fields.status();
  return info;
}

std::string format_rank_file(const RankRecord& record) {
  const RankState& s = record.state;
  Json doc;
  doc["format"] = kRankFormat;
  doc["version"] = kRunFormatVersion;
  doc["rank"] = s.rank.rank;
  doc["local_rank"] = s.rank.local_rank;
  doc["world_size"] = s.rank.world_size;
  doc["host"] = s.host;
  doc["pid"] = s.pid;
  doc["status"] = std::string(run_status_name(s.status));
  doc["start_time_ms"] = s.start_time_ms;
  doc["end_time_ms"] = s.end_time_ms;
  doc["heartbeat_ms"] = s.heartbeat_ms;
  doc["flush_interval_ms"] = record.flush_interval_ms;
  return dump(doc);
}

absl::StatusOr<RankRecord> parse_rank_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  FieldReader fields(*doc, path);
  absl::Status status = check_format(fields, kRankFormat, path);
  if (!status.ok()) return status;
  constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
  RankRecord record;
  RankState& s = record.state;
  s.rank.rank = static_cast<std::uint32_t>(fields.integer("rank", 0, kU32Max));
  s.rank.local_rank = static_cast<std::uint32_t>(fields.integer("local_rank", 0, kU32Max));
  s.rank.world_size = static_cast<std::uint32_t>(fields.integer("world_size", 1, kU32Max));
  s.host = fields.text("host");
  s.pid = fields.integer("pid", 0);
  const std::string status_name = fields.text("status");
  s.start_time_ms = fields.integer("start_time_ms");
  s.end_time_ms = fields.integer("end_time_ms");
  s.heartbeat_ms = fields.integer("heartbeat_ms");
  record.flush_interval_ms = fields.integer("flush_interval_ms", 0);
  if (!fields.status().ok()) return fields.status();
  absl::StatusOr<RunStatus> run_status = parse_run_status(status_name);
  if (!run_status.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", absl::Utf8SafeCHexEscape(path),
                                                  std::string(run_status.status().message())));
  }
  s.status = *run_status;
  return record;
}

absl::StatusOr<Summary> parse_summary_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  FieldReader fields(*doc, path);
  absl::Status status = check_format(fields, "trainscope.stats", path);
  if (!status.ok()) return status;
  Summary summary;
  summary.has_gpu_section = fields.boolean("has_gpu_section");
  const Json* entries = fields.array("entries");
  if (!fields.status().ok()) return fields.status();
  for (const Json& item : *entries) {
    absl::StatusOr<SummaryEntry> entry = parse_summary_entry(item, path);
    if (!entry.ok()) return entry.status();
    summary.entries.push_back(*std::move(entry));
  }
  return summary;
}

absl::Status merge_into_run_file(const std::string& dir, const RunInfo& info) {
  const std::string lock_path = join_path(dir, ".lock");
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return file_error(errno, "open", lock_path);
  // Closing the descriptor releases the lock on every path out.
  const auto unlock = [lock_fd](absl::Status status) {
    ::close(lock_fd);
    return status;
  };
  if (::flock(lock_fd, LOCK_EX) != 0) return unlock(file_error(errno, "lock", lock_path));
  const std::string path = join_path(dir, kRunFileName);
  absl::StatusOr<std::string> text = read_whole_file(path);
  if (!text.ok()) return unlock(text.status());
  absl::StatusOr<RunInfo> stored = parse_run_file(*text, path);
  if (!stored.ok()) return unlock(stored.status());
  bool changed = false;
  for (const auto& [key, value] : info.params) {
    const auto [it, inserted] = stored->params.emplace(key, value);
    changed |= inserted;
    if (!inserted && it->second != value) {
      return unlock(absl::InvalidArgumentError(
          fmt::format("param \"{}\" is already \"{}\" in {}; params are write-once (cannot set "
                      "\"{}\")",
                      key, absl::Utf8SafeCHexEscape(it->second), path,
                      absl::Utf8SafeCHexEscape(value))));
    }
  }
  for (const auto& [key, value] : info.tags) {
    std::string& slot = stored->tags[key];
    changed |= slot != value;
    slot = value;
  }
  if (!changed) return unlock(absl::OkStatus());
  return unlock(write_file_atomically(path, format_run_file(*stored)));
}

// ---------------------------------------------------------------------------

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
  regions_.path = join_path(options_.dir, regions_file_name(options_.rank.rank));
  metrics_.path = join_path(options_.dir, metrics_file_name(options_.rank.rank));
  RankState& s = rank_record_.state;
  s.rank = options_.rank;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) s.host = host;
  s.pid = ::getpid();
  s.start_time_ms = options_.start_time_ms;
  rank_record_.flush_interval_ms = absl::ToInt64Milliseconds(options_.flush_interval);
}

RunStoreExporter::~RunStoreExporter() {
  for (int fd : {regions_.fd, metrics_.fd, lock_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

absl::Status RunStoreExporter::open_files() {
  const std::string lock_path =
      join_path(options_.dir, fmt::format("rank-{}.lock", options_.rank.rank));
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return file_error(errno, "open", lock_path);
  // The kernel drops the lock when the process dies, however it dies.
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    lock_fd_ = fd;
  } else {
    ::close(fd);
  }
  for (auto [file, header] : {std::make_pair(&regions_, kRegionsHeader),
                              std::make_pair(&metrics_, kMetricsHeader)}) {
    bool created;
    absl::Status status = create_file_exclusively(file->path, header, &created);
    if (!status.ok()) return status;
    file->fd = ::open(file->path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    if (file->fd < 0) return file_error(errno, "open", file->path);
    status = check_and_repair(file->fd, file->path, header, owns_rank());
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_rank_file() {
  rank_record_.state.heartbeat_ms = unix_now_ms();
  return write_file_atomically(join_path(options_.dir, rank_file_name(options_.rank.rank)),
                               format_rank_file(rank_record_));
}

const std::string& RunStoreExporter::key_field(KeyId id) {
  if (id >= key_fields_.size()) key_fields_.resize(id + 1);
  std::string& field = key_fields_[id];
  // The trailing comma makes a cached field never empty, even for key "".
  if (field.empty()) {
    append_csv_field(Key::FromId(id).name(), &field);
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
    warn(fmt::format("run store {}: {} MiB of records are waiting for the disk; dropping new "
                     "records until it takes them (see dropped_records())",
                     options_.dir, options_.max_buffered_bytes >> 20));
  }
  return false;
}

absl::Status RunStoreExporter::write_samples(absl::Span<const RegionSample> samples) {
  constexpr KeyId kBatch = static_cast<KeyId>(TimeType::BATCH);
  constexpr KeyId kEpoch = static_cast<KeyId>(TimeType::EPOCH);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RegionSample& s : samples) {
      (s.device == Device::kCPU ? cpu_ : gpu_).add(s.key, s.duration_ns);
      saw_gpu_ |= s.device == Device::kGPU;
    }
  }
  auto out = std::back_inserter(regions_.pending);
  for (const RegionSample& s : samples) {
    if (!make_room(1)) continue;
    if (s.thread >= progress_.size()) progress_.resize(s.thread + 1);
    ThreadProgress& progress = progress_[s.thread];
    regions_.pending += key_field(s.key);
    fmt::format_to(out, "{},{},{},{},{},{},{}\n", device_name(s.device), options_.rank.rank,
                   s.thread, s.start_unix_ns, s.duration_ns, progress.batches, progress.epochs);
    if (s.device == Device::kCPU) {
      progress.batches += s.key == kBatch;
      progress.epochs += s.key == kEpoch;
    }
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_metrics(absl::Span<const MetricPoint> metrics) {
  auto out = std::back_inserter(metrics_.pending);
  for (const MetricPoint& m : metrics) {
    if (!make_room(1)) continue;
    append_csv_field(m.key, &metrics_.pending);
    fmt::format_to(out, ",{},{},{},{}\n", m.value, m.step, m.timestamp_ms, m.rank);
  }
  return absl::OkStatus();
}

absl::Status RunStoreExporter::write_summary(const Summary& summary) {
  // A second process of the rank would replace the owner's file.
  if (!owns_rank()) return absl::OkStatus();
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
  return write_file_atomically(join_path(options_.dir, summary_file_name(options_.rank.rank)),
                               text);
}

absl::Status RunStoreExporter::write_run_info(const RunInfo& info) {
  absl::Status status = merge_into_run_file(options_.dir, info);
  if (info.status == RunStatus::kRunning || !owns_rank()) return status;
  // The end: the records first, so a reader that sees the final status also
  // sees everything recorded before it.
  rank_record_.state.status = info.status;
  rank_record_.state.end_time_ms = info.end_time_ms;
  absl::Status flushed = flush();
  return status.ok() ? flushed : status;
}

absl::Status RunStoreExporter::append_pending(CsvFile* file) {
  if (file->pending.empty()) return absl::OkStatus();
  const std::size_t written = write_all(file->fd, file->pending);
  const int error = errno;
  // What did not make it stays for the next flush (a full disk may clear).
  file->pending.erase(0, written);
  if (!file->pending.empty()) return file_error(error, "append to", file->path);
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
    const SeriesTable& table = device == Device::kCPU ? cpu_ : gpu_;
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

}  // namespace trainscope::detail
