#include "trainscope/run/run_reader.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "run/run_format.hpp"
#include "trainscope/common/clock.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

// A RUNNING rank is presumed dead once its heartbeat is this much older than
// its flush interval allows.
constexpr std::int64_t kHeartbeatIntervals = 3;
constexpr std::int64_t kMinHeartbeatSilenceMs = 10'000;

bool process_gone(std::int64_t pid) {
  return pid > 0 && pid <= INT_MAX && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// A RUNNING process (rank or launcher) that is gone or has been silent too long.
template <typename State>
bool looks_crashed(const State& s, const std::string& host, std::int64_t now_ms) {
  const std::int64_t flush_interval_ms = s.flush_interval_ms;
  if (s.status != RunStatus::kRunning) return false;
  if (s.host == host && process_gone(s.pid)) return true;
  // An infinite flush interval never renews the heartbeat.
  if (flush_interval_ms > std::numeric_limits<std::int64_t>::max() / kHeartbeatIntervals) {
    return false;
  }
  const std::int64_t allowed =
      std::max(kHeartbeatIntervals * flush_interval_ms, kMinHeartbeatSilenceMs);
  return s.heartbeat_ms < now_ms - allowed;
}

// The run's status from a process's: the one order of run_status.hpp.
template <typename State>
RunStatus status_of(const State& s) {
  return run_status_of(ProcessStatus{s.status, s.crashed});
}

// "rank-12.json" -> 12 (prefix "rank-", suffix ".json"); false for any
// other name (also "rank-012.json").
bool parse_numbered_name(const std::string& name, std::string_view prefix, std::string_view suffix,
                         std::uint32_t* rank) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size() - suffix.size();
  const auto [stop, error] = std::from_chars(begin, end, *rank);
  return error == std::errc() && stop == end && (*begin != '0' || end - begin == 1);
}

bool is_launcher_file_name(const std::string& name) {
  return name.size() > 14 && name.compare(0, 9, "launcher-") == 0 &&
         name.compare(name.size() - 5, 5, ".json") == 0;
}

// Whether a process's own status counts in the run's: a lost launcher's does
// not while ranks it started tell how its command goes (they outlive it).
bool counts(const RankState&) { return true; }
bool counts(const LauncherState& s) { return !s.lost || s.crashed; }

// A launcher that vanished while RUNNING is lost; with no rank naming it, it
// is crashed too (nothing else tells how its command went).
void judge_launcher(LauncherState* s, const std::vector<RankState>& ranks, const std::string& host,
                    std::int64_t now_ms) {
  s->lost = looks_crashed(*s, host, now_ms);
  const std::string id = s->id();
  s->crashed = s->lost && std::none_of(ranks.begin(), ranks.end(),
                                       [&](const RankState& rank) { return rank.launcher == id; });
}

// Worst status of ranks and launchers (see RunReader::info()) and the end time.
template <typename State>
void combine(const std::vector<State>& states, RunStatus* worst, bool* running,
             std::int64_t* end_ms) {
  for (const State& s : states) {
    // A lost launcher ended at its last sign of life; its ranks say the rest.
    if (!counts(s)) {
      *end_ms = std::max(*end_ms, s.heartbeat_ms);
      continue;
    }
    *worst = worse_status(*worst, status_of(s));
    *running |= s.status == RunStatus::kRunning && !s.crashed;
    // A crashed process ended at its last sign of life.
    *end_ms = std::max(*end_ms, s.crashed ? s.heartbeat_ms : s.end_time_ms);
  }
}

// --- CSV -------------------------------------------------------------------

// One pass over the line that starts at data[from]: where it ends (its
// newline, or npos when the data ends first), whether it holds a quote (then
// the pass stops there), and its commas' positions relative to `from`, up to
// commas->size() (that many: there may be more). Eight bytes at a time on
// little-endian machines: a byte of the word XOR ",,,,,,,," is zero exactly
// where a comma is (likewise for the quote and the newline), found by the
// exact zero-byte test (no false positive after a borrow).
struct LineScan {
  std::size_t newline = std::string_view::npos;
  bool quote = false;
  std::size_t commas = 0;
};
LineScan scan_line(std::string_view data, std::size_t from, std::array<std::uint32_t, 32>* commas) {
  LineScan out;
  const char* const bytes = data.data() + from;
  const std::size_t size = data.size() - from;
  std::size_t i = 0;
  const auto add_comma = [&](std::size_t at) {
    if (out.commas < commas->size()) (*commas)[out.commas++] = static_cast<std::uint32_t>(at);
  };
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL;
  const auto zero_bytes = [](std::uint64_t x) {  // 0x80 in each zero byte of x
    return ~(((x & kLow7) + kLow7) | x | kLow7);
  };
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    std::uint64_t comma = zero_bytes(word ^ (kOnes * ','));
    const std::uint64_t newline = zero_bytes(word ^ (kOnes * '\n'));
    const std::uint64_t quote = zero_bytes(word ^ (kOnes * '"'));
    if ((newline | quote) != 0) {
      const int end = __builtin_ctzll(newline | quote);      // the first of them
      if (end < 63) comma &= (std::uint64_t{1} << end) - 1;  // commas before it
      for (; comma != 0; comma &= comma - 1) add_comma(i + (__builtin_ctzll(comma) >> 3));
      if ((quote >> end) & 1) {
        out.quote = true;
      } else {
        out.newline = from + i + (end >> 3);
      }
      return out;
    }
    for (; comma != 0; comma &= comma - 1) add_comma(i + (__builtin_ctzll(comma) >> 3));
  }
#endif
  for (; i < size; ++i) {
    if (bytes[i] == ',') add_comma(i);
    if (bytes[i] == '"') {
      out.quote = true;
      return out;
    }
    if (bytes[i] == '\n') {
      out.newline = from + i;
      return out;
    }
  }
  return out;
}

// Splits RFC 4180 records out of a buffer that may end mid-record.
class CsvScanner {
 public:
  enum class Result { kRecord, kIncomplete, kError };

  explicit CsvScanner(std::string_view data) : data_(data) {}

  // The next record's fields; kIncomplete when the data ends before its
  // newline (a record still being written, or cut by a crash).
  Result next(std::vector<std::string>* fields) {
    fields->clear();
    std::size_t i = pos_;
    std::int64_t lines = 0;
    for (;;) {
      std::string& field = fields->emplace_back();
      if (i < data_.size() && data_[i] == '"') {
        for (++i;; ++i) {
          if (i >= data_.size()) return Result::kIncomplete;
          if (data_[i] != '"') {
            lines += data_[i] == '\n';
            field.push_back(data_[i]);
          } else if (i + 1 < data_.size() && data_[i + 1] == '"') {
            field.push_back('"');
            ++i;
          } else {
            ++i;
            break;
          }
        }
      } else {
        const std::size_t stop = data_.find_first_of(",\n\"", i);
        if (stop == std::string_view::npos) return Result::kIncomplete;
        field.assign(data_.substr(i, stop - i));
        i = stop;
      }
      if (i >= data_.size()) return Result::kIncomplete;
      if (data_[i] == ',') {
        ++i;
        continue;
      }
      if (data_[i] != '\n') {
        error_ = data_[i] == '"' ? "a quote inside an unquoted field"
                                 : "a character after a closing quote";
        return Result::kError;
      }
      pos_ = i + 1;
      line_ += lines + 1;
      return Result::kRecord;
    }
  }

  // As next(), without copying a record that has no quoted field: its fields
  // are views into the buffer. A record with a quoted field is unquoted into
  // *scratch, and the views point there (valid until the next call).
  Result next_views(std::vector<std::string_view>* views, std::vector<std::string>* scratch) {
    // The commas' positions into a local array: stores into the vector as
    // they are found would reload its end after every byte read (char
    // aliases anything).
    std::array<std::uint32_t, 32> commas;
    const LineScan scan = scan_line(data_, pos_, &commas);
    if (scan.quote || scan.newline == std::string_view::npos) {
      const Result result = next(scratch);
      views->clear();
      if (result == Result::kRecord) views->assign(scratch->begin(), scratch->end());
      return result;
    }
    const std::size_t newline = scan.newline;
    const std::string_view line = data_.substr(pos_, newline - pos_);
    const std::size_t n = scan.commas;
    if (n == commas.size()) {  // many fields: one search each
      views->clear();
      std::size_t start = 0;
      for (std::size_t comma; (comma = line.find(',', start)) != std::string_view::npos;
           start = comma + 1) {
        views->push_back(line.substr(start, comma - start));
      }
      views->push_back(line.substr(start));
    } else {
      views->resize(n + 1);  // the same size as the last row's: no work
      std::string_view* out = views->data();
      std::size_t start = 0;
      for (std::size_t c = 0; c < n; ++c) {
        out[c] = std::string_view(line.data() + start, commas[c] - start);
        start = commas[c] + 1;
      }
      out[n] = std::string_view(line.data() + start, line.size() - start);
    }
    pos_ = newline + 1;
    ++line_;
    return Result::kRecord;
  }

  std::size_t consumed() const { return pos_; }
  // Lines before the record being parsed, relative to the buffer's start.
  std::int64_t lines_before() const { return line_; }
  const char* error() const { return error_; }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
  std::int64_t line_ = 0;
  const char* error_ = "";
};

// What a non-regular file in a run file's place is, for messages.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// Opens a run file to read it, refusing anything but a regular file: a FIFO
// in its place would block the reader (it is opened non-blocking, so even the
// open returns), a directory would read as empty. *st: the file's stat.
absl::StatusOr<int> open_run_file(const std::string& path, struct stat* st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return detail::file_error(errno, "open", path);
  if (::fstat(fd, st) != 0) {
    const int error = errno;
    ::close(fd);
    return detail::file_error(error, "inspect", path);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        fmt::format("cannot read \"{}\": it is {}, not a regular file",
                    absl::Utf8SafeCHexEscape(path), file_type_name(st->st_mode)));
  }
  return fd;
}

// A whole run file (JSON, logs), as detail::read_whole_file but never
// blocking on, or reading as empty, something that is not a regular file.
absl::StatusOr<std::string> read_run_file(const std::string& path) {
  struct stat st;
  absl::StatusOr<int> fd = open_run_file(path, &st);
  if (!fd.ok()) return fd.status();
  std::string out;
  absl::Status status = detail::read_whole_fd(*fd, path, &out);
  ::close(*fd);
  if (!status.ok()) return status;
  return out;
}

// Where a row came from, for messages: "dir/regions-0.csv:12".
struct RowSource {
  const std::string& path;
  std::uint64_t offset;
  std::int64_t line_in_chunk;  // 0-based
};

// Counts lines before `offset` only when an error needs the line number, so
// incremental reads do not rescan the file.
std::int64_t line_number(const RowSource& source) {
  std::int64_t line = source.line_in_chunk + 1;
  if (source.offset == 0) return line;
  const int fd = ::open(source.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return line;
  char block[65536];
  for (std::uint64_t done = 0; done < source.offset;) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(sizeof(block), source.offset - done));
    const ssize_t n = ::pread(fd, block, want, static_cast<off_t>(done));
    if (n <= 0) break;
    line += std::count(block, block + n, '\n');
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  return line;
}

absl::Status row_error(const RowSource& source, std::string_view what) {
  return absl::DataLossError(
      fmt::format("{}:{}: {}", absl::Utf8SafeCHexEscape(source.path), line_number(source), what));
}

// Converts fields to typed values; the first bad one becomes an error naming
// the file, line and column.
template <typename Text>
class FieldParser {
 public:
  FieldParser(const std::vector<Text>& fields, const RowSource& source)
      : fields_(fields), source_(source) {}

  // A count or a duration: negative is as wrong as a non-number.
  template <typename Int>
  Int non_negative(std::size_t column, const char* name) {
    const Int value = integer<Int>(column, name);
    if (value < 0) fail(name, fields_[column], "a non-negative integer");
    return value;
  }
  template <typename Int>
  Int integer(std::size_t column, const char* name) {
    Int value = 0;
    const std::string_view text = fields_[column];
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      fail(name, text, "an integer in range");
    }
    return value;
  }
  double finite(std::size_t column, const char* name) {
    double value = 0.0;
    const std::string_view text = fields_[column];
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
        !std::isfinite(value)) {
      fail(name, text, "a finite number");
    }
    return value;
  }
  Device device(std::size_t column) {
    const std::string_view text = fields_[column];
    if (text != "CPU" && text != "GPU") fail("device", text, "CPU or GPU");
    return text == "GPU" ? Device::kGPU : Device::kCPU;
  }
  const absl::Status& status() const { return status_; }

 private:
  void fail(const char* name, std::string_view text, const char* expected) {
    if (!status_.ok()) return;
    const std::string_view shown = text.substr(0, 64);
    status_ = row_error(
        source_,
        fmt::format("{} is \"{}\", not {}", name,
                    absl::CHexEscape(absl::string_view(shown.data(), shown.size())), expected));
  }

  const std::vector<Text>& fields_;
  const RowSource& source_;
  absl::Status status_;
};

absl::StatusOr<RegionView> parse_region(const std::vector<std::string_view>& fields,
                                        const RowSource& source) {
  FieldParser<std::string_view> p(fields, source);
  RegionView row;
  row.key = fields[0];
  row.device = p.device(1);
  row.rank = p.integer<std::uint32_t>(2, "rank");
  row.thread = p.integer<std::uint32_t>(3, "thread");
  row.start_unix_ns = p.integer<std::int64_t>(4, "start_unix_ns");
  row.duration_ns = p.non_negative<std::int64_t>(5, "duration_ns");
  row.step = p.integer<std::int64_t>(6, "step");
  row.epoch = p.integer<std::int64_t>(7, "epoch");
  if (fields.size() > 8) {  // rows of runs written before these columns have 8 fields
    if (!fields[8].empty()) row.gpu_start_ns = p.integer<std::int64_t>(8, "gpu_start_ns");
    if (!fields[9].empty()) row.stream = p.integer<std::uint32_t>(9, "stream");
  }
  if (fields.size() > 10 && !fields[10].empty())  // a step's run-queue wait (11 fields)
    row.cpu_wait_ns = p.non_negative<std::int64_t>(10, "cpu_wait_ns");
  if (!p.status().ok()) return p.status();
  return row;
}

absl::StatusOr<MetricPoint> parse_metric(const std::vector<std::string>& fields,
                                         const RowSource& source) {
  FieldParser<std::string> p(fields, source);
  MetricPoint point;
  point.key = fields[0];
  point.value = p.finite(1, "value");
  point.step = p.integer<std::int64_t>(2, "step");
  point.timestamp_ms = p.integer<std::int64_t>(3, "timestamp_ms");
  // An empty rank: a host-wide hardware reading (format 2).
  point.rank = fields[4].empty() ? kNoRank : p.integer<std::uint32_t>(4, "rank");
  if (!p.status().ok()) return p.status();
  return point;
}

std::size_t field_count(std::string_view header) {
  return static_cast<std::size_t>(std::count(header.begin(), header.end(), ',')) + 1;
}

inline constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};

// Everything from `offset` to the end of the file, or at most `max_bytes` of
// it (*at_end: the data reaches the end of the file), into *data (its
// capacity is reused: a follower's buffer is allocated once).
absl::Status read_into(const std::string& path, std::uint64_t offset, std::uint64_t max_bytes,
                       bool* at_end, std::string* data) {
  struct stat st;
  absl::StatusOr<int> opened = open_run_file(path, &st);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (offset > size) {
    ::close(fd);
    return absl::OutOfRangeError(fmt::format("{}: offset {} is past the end ({} bytes)",
                                             absl::Utf8SafeCHexEscape(path), offset, size));
  }
  const std::uint64_t wanted = std::min(size - offset, max_bytes);
  if (at_end != nullptr) *at_end = wanted == size - offset;
  data->resize(static_cast<std::size_t>(wanted));
  std::size_t done = 0;
  while (done < data->size()) {
    const ssize_t n =
        ::pread(fd, data->data() + done, data->size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      // An I/O error is not the end of the file: never a silently short read.
      const int error = errno;
      ::close(fd);
      return detail::file_error(error, "read", path);
    }
    if (n == 0) break;  // the file shrank since fstat: read what is there
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  data->resize(done);
  return absl::OkStatus();
}

absl::StatusOr<std::string> read_from(const std::string& path, std::uint64_t offset,
                                      std::uint64_t max_bytes = kNoLimit, bool* at_end = nullptr) {
  std::string data;
  if (absl::Status read = read_into(path, offset, max_bytes, at_end, &data); !read.ok()) {
    return read;
  }
  return data;
}

// Reads complete records of a CSV file from `offset`; at offset 0 the first
// record must be `header`.
template <typename Row, typename ParseRow>
absl::StatusOr<Chunk<Row>> read_csv(const std::string& path, std::string_view header,
                                    std::uint64_t offset, ParseRow parse_row,
                                    std::uint64_t max_bytes = kNoLimit) {
  const std::size_t columns = field_count(header);
  for (;;) {
    bool at_end = true;
    absl::StatusOr<std::string> data = read_from(path, offset, max_bytes, &at_end);
    if (!data.ok()) return data.status();
    Chunk<Row> chunk;
    CsvScanner scanner(*data);
    std::vector<std::string> fields;
    for (bool first = offset == 0;; first = false) {
      const RowSource source{path, offset, scanner.lines_before()};
      const CsvScanner::Result result = scanner.next(&fields);
      if (result == CsvScanner::Result::kIncomplete) break;
      if (result == CsvScanner::Result::kError) return row_error(source, scanner.error());
      if (fields.size() != columns) {
        return row_error(source, fmt::format("{} fields, expected {}", fields.size(), columns));
      }
      if (first) {
        std::string expected(header.substr(0, header.size() - 1));
        std::string found = fields[0];
        for (std::size_t i = 1; i < fields.size(); ++i) found += "," + fields[i];
        if (found != expected) {
          return row_error(source, fmt::format("header \"{}\", expected \"{}\"",
                                               absl::CHexEscape(found), expected));
        }
        continue;
      }
      absl::StatusOr<Row> row = parse_row(fields, source);
      if (!row.ok()) return row.status();
      chunk.rows.push_back(*std::move(row));
    }
    if (scanner.consumed() == 0 && !at_end) {
      // A window that holds no whole record: widen it until one fits.
      max_bytes =
          max_bytes > kNoLimit / 2 ? kNoLimit : std::max<std::uint64_t>(max_bytes * 2, 4096);
      continue;
    }
    chunk.next_offset = offset + scanner.consumed();
    // Only a cut at the end of the file is an incomplete record; the end of a
    // smaller window is just where the next read starts.
    chunk.truncated = at_end && scanner.consumed() < data->size();
    return chunk;
  }
}

// Scans complete region records from `offset` without copying them: each
// is handed to `visit` as views into the read buffer. At offset 0 the first
// record must be the header.
absl::StatusOr<RunReader::Scan> scan_regions_file(
    const std::string& path, std::uint64_t offset, std::uint64_t max_bytes,
    absl::FunctionRef<void(const RegionView&)> visit) {
  const std::string_view header = run::detail::kRegionsHeader;
  const std::string_view old_header = run::detail::kRegionsHeaderWithoutGpu;
  const std::string_view no_wait_header = run::detail::kRegionsHeaderWithoutWait;
  const std::size_t columns = field_count(header);
  const std::size_t old_columns = field_count(old_header);
  const std::size_t no_wait_columns = field_count(no_wait_header);
  std::vector<std::string_view> fields;
  std::vector<std::string> scratch;
  thread_local std::string buffer;  // kept between calls: no allocation per poll
  struct Trim {                     // ... unless a whole large file was read into it
    ~Trim() {
      if (buffer.capacity() > (std::size_t{64} << 20)) std::string().swap(buffer);
    }
  } trim;
  for (;;) {
    bool at_end = true;
    if (absl::Status read = read_into(path, offset, max_bytes, &at_end, &buffer); !read.ok()) {
      return read;
    }
    const std::string* data = &buffer;
    RunReader::Scan scan;
    CsvScanner scanner(*data);
    for (bool first = offset == 0;; first = false) {
      const RowSource source{path, offset, scanner.lines_before()};
      const CsvScanner::Result result = scanner.next_views(&fields, &scratch);
      if (result == CsvScanner::Result::kIncomplete) break;
      if (result == CsvScanner::Result::kError) return row_error(source, scanner.error());
      if (fields.size() != columns && fields.size() != old_columns &&
          fields.size() != no_wait_columns) {
        return row_error(source,
                         fmt::format("{} fields, expected {} (or {} or {}, written before steps' "
                                     "waits and before device starts)",
                                     fields.size(), columns, no_wait_columns, old_columns));
      }
      if (first) {
        std::string found(fields[0]);
        for (std::size_t i = 1; i < fields.size(); ++i) {
          found += ',';
          found += fields[i];
        }
        const std::string expected(header.substr(0, header.size() - 1));
        if (found != expected && found != old_header.substr(0, old_header.size() - 1) &&
            found != no_wait_header.substr(0, no_wait_header.size() - 1)) {
          return row_error(source, fmt::format("header \"{}\", expected \"{}\"",
                                               absl::CHexEscape(found), expected));
        }
        continue;
      }
      absl::StatusOr<RegionView> row = parse_region(fields, source);
      if (!row.ok()) return row.status();
      visit(*row);
      ++scan.rows;
    }
    if (scanner.consumed() == 0 && !at_end) {
      max_bytes =
          max_bytes > kNoLimit / 2 ? kNoLimit : std::max<std::uint64_t>(max_bytes * 2, 4096);
      continue;
    }
    scan.next_offset = offset + scanner.consumed();
    scan.truncated = at_end && scanner.consumed() < data->size();
    return scan;
  }
}

absl::StatusOr<Chunk<RegionRow>> collect_regions(const std::string& path, std::uint64_t offset,
                                                 std::uint64_t max_bytes) {
  Chunk<RegionRow> chunk;
  absl::StatusOr<RunReader::Scan> scan =
      scan_regions_file(path, offset, max_bytes, [&chunk](const RegionView& v) {
        chunk.rows.push_back(RegionRow{std::string(v.key), v.device, v.rank, v.thread,
                                       v.start_unix_ns, v.duration_ns, v.step, v.epoch,
                                       v.gpu_start_ns, v.stream, v.cpu_wait_ns});
      });
  if (!scan.ok()) return scan.status();
  chunk.next_offset = scan->next_offset;
  chunk.truncated = scan->truncated;
  return chunk;
}

}  // namespace

absl::StatusOr<RunReader::Scan> RunReader::scan_regions(
    std::uint32_t rank, std::uint64_t offset, std::uint64_t max_bytes,
    absl::FunctionRef<void(const RegionView&)> visit) const {
  return scan_regions_file(fmt::format("{}/{}", dir_, run::detail::regions_file_name(rank)), offset,
                           max_bytes, visit);
}

absl::StatusOr<std::uint64_t> RunReader::regions_tail_offset(std::uint32_t rank, std::uint64_t from,
                                                             std::uint64_t keep_bytes) const {
  const std::string path = fmt::format("{}/{}", dir_, run::detail::regions_file_name(rank));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return detail::file_error(errno, "inspect", path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size <= from || size - from <= keep_bytes) return from;
  // The byte before the cut: a newline there makes the cut a line's start.
  std::uint64_t at = size - keep_bytes - 1;
  std::string chunk;
  constexpr std::uint64_t kChunk = std::uint64_t{64} << 10;
  while (at < size) {
    bool at_end = false;
    if (absl::Status read = read_into(path, at, kChunk, &at_end, &chunk); !read.ok()) return read;
    if (chunk.empty()) break;
    const std::size_t newline = chunk.find('\n');
    if (newline != std::string::npos) return at + newline + 1;
    at += chunk.size();
  }
  return from;
}

absl::StatusOr<RunReader> RunReader::Open(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  RunReader reader;
  reader.dir_ = std::move(dir);
  const std::string shown_dir = absl::Utf8SafeCHexEscape(reader.dir_);
  const std::string run_path = run::detail::join_path(reader.dir_, run::detail::kRunFileName);
  absl::StatusOr<std::string> text = read_run_file(run_path);
  if (absl::IsNotFound(text.status())) {
    std::error_code error;
    if (!fs::exists(reader.dir_, error)) {
      return absl::NotFoundError(fmt::format("{}: no such run directory", shown_dir));
    }
    return absl::NotFoundError(fmt::format("{} is not a trainscope run: it has no {}", shown_dir,
                                           run::detail::kRunFileName));
  }
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        fmt::format("{} is not a readable trainscope run: {}", shown_dir,
                                    std::string(text.status().message())));
  }
  absl::StatusOr<RunInfo> info = run::detail::parse_run_file(*text, run_path, &reader.version_);
  if (!info.ok()) return info.status();
  reader.info_ = *std::move(info);

  std::error_code error;
  std::vector<std::pair<std::uint32_t, std::string>> rank_files;
  std::vector<std::string> launcher_files;
  for (fs::directory_iterator it(reader.dir_, error), end; !error && it != end;
       it.increment(error)) {
    std::uint32_t rank;
    const std::string name = it->path().filename().string();
    if (parse_numbered_name(name, "rank-", ".json", &rank))
      rank_files.emplace_back(rank, it->path().string());
    if (is_launcher_file_name(name)) launcher_files.push_back(it->path().string());
  }
  if (error) {
    return absl::ErrnoToStatus(error.value(), fmt::format("cannot list run directory \"{}\"",
                                                          absl::Utf8SafeCHexEscape(reader.dir_)));
  }
  std::sort(rank_files.begin(), rank_files.end());

  std::sort(launcher_files.begin(), launcher_files.end());
  const std::string host = detail::this_host();
  const std::int64_t now_ms = detail::unix_now_ms();
  for (const auto& [rank, path] : rank_files) {
    absl::StatusOr<std::string> rank_text = read_run_file(path);
    if (!rank_text.ok()) return rank_text.status();
    absl::StatusOr<RankState> state = run::detail::parse_rank_file(*rank_text, path);
    if (!state.ok()) return state.status();
    if (state->rank.rank != rank) {
      return absl::DataLossError(
          fmt::format("{}: records rank {}", absl::Utf8SafeCHexEscape(path), state->rank.rank));
    }
    state->crashed = looks_crashed(*state, host, now_ms);
    reader.world_size_ = std::max({reader.world_size_, state->rank.world_size,
                                   static_cast<std::uint32_t>(reader.ranks_.size() + 1)});
    reader.ranks_.push_back(*std::move(state));
  }
  for (const std::string& path : launcher_files) {
    absl::StatusOr<std::string> launcher_text = read_run_file(path);
    if (!launcher_text.ok()) return launcher_text.status();
    absl::StatusOr<LauncherState> state = run::detail::parse_launcher_file(*launcher_text, path);
    if (!state.ok()) return state.status();
    judge_launcher(&*state, reader.ranks_, host, now_ms);
    reader.launchers_.push_back(*std::move(state));
  }
  for (const RankState& s : reader.ranks_) reader.hosts_.push_back(s.host);
  for (const LauncherState& s : reader.launchers_) reader.hosts_.push_back(s.host);
  std::sort(reader.hosts_.begin(), reader.hosts_.end());
  reader.hosts_.erase(std::unique(reader.hosts_.begin(), reader.hosts_.end()), reader.hosts_.end());

  // A run with no rank or launcher file yet has not started a process: RUNNING.
  RunStatus worst = RunStatus::kRunning;
  reader.info_.end_time_ms = 0;
  if (!reader.ranks_.empty() || !reader.launchers_.empty()) {
    worst = RunStatus::kFinished;
    bool running = false;
    combine(reader.ranks_, &worst, &running, &reader.info_.end_time_ms);
    combine(reader.launchers_, &worst, &running, &reader.info_.end_time_ms);
    if (running) reader.info_.end_time_ms = 0;
    if (running) worst = worse_status(worst, RunStatus::kRunning);
    reader.in_progress_ = running;
  }
  reader.info_.status = worst;
  return reader;
}

bool RunReader::crashed() const noexcept {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const RankState& s) { return s.crashed; }) ||
         std::any_of(launchers_.begin(), launchers_.end(),
                     [](const LauncherState& s) { return s.crashed; });
}

absl::StatusOr<Chunk<MetricPoint>> RunReader::read_host_metrics(const std::string& host,
                                                                std::uint64_t offset) const {
  const std::string path = fmt::format("{}/{}", dir_, run::detail::host_metrics_file_name(host));
  absl::StatusOr<Chunk<MetricPoint>> chunk =
      read_csv<MetricPoint>(path, run::detail::kMetricsHeader, offset, parse_metric);
  if (absl::IsNotFound(chunk.status())) return Chunk<MetricPoint>{{}, offset, false};
  return chunk;
}

absl::StatusOr<Chunk<RegionRow>> RunReader::read_regions(std::uint32_t rank, std::uint64_t offset,
                                                         std::uint64_t max_bytes) const {
  return collect_regions(fmt::format("{}/{}", dir_, run::detail::regions_file_name(rank)), offset,
                         max_bytes);
}

absl::StatusOr<Chunk<MetricPoint>> RunReader::read_host_metrics(const std::string& host,
                                                                std::uint64_t offset,
                                                                std::uint64_t max_bytes) const {
  const std::string path = fmt::format("{}/{}", dir_, run::detail::host_metrics_file_name(host));
  absl::StatusOr<Chunk<MetricPoint>> chunk =
      read_csv<MetricPoint>(path, run::detail::kMetricsHeader, offset, parse_metric, max_bytes);
  if (absl::IsNotFound(chunk.status())) return Chunk<MetricPoint>{{}, offset, false};
  return chunk;
}

absl::StatusOr<Chunk<RegionRow>> RunReader::read_regions(std::uint32_t rank,
                                                         std::uint64_t offset) const {
  return collect_regions(fmt::format("{}/{}", dir_, run::detail::regions_file_name(rank)), offset,
                         kNoLimit);
}

absl::StatusOr<Chunk<MetricPoint>> RunReader::read_metrics(std::uint32_t rank,
                                                           std::uint64_t offset) const {
  return read_csv<MetricPoint>(fmt::format("{}/{}", dir_, run::detail::metrics_file_name(rank)),
                               run::detail::kMetricsHeader, offset, parse_metric);
}

absl::StatusOr<Summary> RunReader::read_summary(std::uint32_t rank) const {
  const std::string path = fmt::format("{}/{}", dir_, run::detail::summary_file_name(rank));
  absl::StatusOr<std::string> text = read_run_file(path);
  if (absl::IsNotFound(text.status())) return Summary{};
  if (!text.ok()) return text.status();
  return run::detail::parse_summary_file(*text, path);
}

std::vector<std::string> RunReader::artifacts() const {
  std::vector<std::string> out;
  const fs::path root = fs::path(dir_) / run::detail::kArtifactsDirName;
  std::error_code error;
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(run::detail::kArtifactTmpPrefix, 0) == 0) continue;
    std::error_code type_error;
    if (it->is_regular_file(type_error))
      out.push_back(it->path().lexically_relative(root).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RunFile> RunReader::files() const {
  std::vector<RunFile> out;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    RunFile file;
    std::uint32_t rank = 0;
    if (parse_numbered_name(name, "regions-", ".csv", &rank)) {
      file.kind = RunFileKind::kRegions;
      file.csv_header =
          run::detail::kRegionsHeader.substr(0, run::detail::kRegionsHeader.size() - 1);
    } else if (parse_numbered_name(name, "metrics-", ".csv", &rank)) {
      file.kind = RunFileKind::kMetrics;
      file.csv_header =
          run::detail::kMetricsHeader.substr(0, run::detail::kMetricsHeader.size() - 1);
    } else if (parse_numbered_name(name, "summary-", ".json", &rank)) {
      file.kind = RunFileKind::kSummary;
    } else if (name.size() > 9 && name.compare(0, 5, "host-") == 0 &&
               name.compare(name.size() - 4, 4, ".csv") == 0) {
      file.kind = RunFileKind::kHostMetrics;
      file.csv_header =
          run::detail::kMetricsHeader.substr(0, run::detail::kMetricsHeader.size() - 1);
      file.host = name.substr(5, name.size() - 9);
      // The host as the run's processes name it, where one does.
      for (const std::string& host : hosts_) {
        if (run::detail::host_metrics_file_name(host) == name) file.host = host;
      }
    } else {
      continue;
    }
    // Something else by such a name (a directory, a FIFO) is listed too:
    // reading it is then an error naming it, never an empty file.
    if (file.kind != RunFileKind::kHostMetrics) file.rank = rank;
    file.path = it->path().string();
    std::error_code size_error;
    const std::uintmax_t size = it->file_size(size_error);
    file.size_bytes = size_error ? 0 : static_cast<std::uint64_t>(size);
    out.push_back(std::move(file));
  }
  std::sort(out.begin(), out.end(), [](const RunFile& a, const RunFile& b) {
    return std::tie(a.kind, a.rank, a.path) < std::tie(b.kind, b.rank, b.path);
  });
  return out;
}

namespace {

absl::StatusOr<std::string> read_environment(const std::string& path) {
  absl::StatusOr<std::string> text = read_run_file(path);
  if (!text.ok()) return text.status();
  absl::Status valid = run::detail::check_json_object(*text, path);
  if (!valid.ok()) return valid;
  return text;
}

absl::StatusOr<std::string> read_log_tail(const std::string& path, std::size_t max_bytes) {
  absl::StatusOr<std::string> text = read_run_file(path);
  if (!text.ok()) return text.status();
  if (text->size() <= max_bytes) return text;
  std::string tail = text->substr(text->size() - max_bytes);
  const std::size_t newline = tail.find('\n');
  if (newline != std::string::npos) tail.erase(0, newline + 1);
  return tail;
}

}  // namespace

absl::StatusOr<std::string> RunReader::environment() const {
  return read_environment(run_environment_path(dir_));
}

absl::StatusOr<std::string> RunReader::environment(const LauncherState& launcher) const {
  return read_environment(run_environment_path(dir_, launcher.host, launcher.pid));
}

absl::StatusOr<EnvironmentRecord> RunReader::environment_record() const {
  const std::string path = run_environment_path(dir_);
  absl::StatusOr<std::string> text = read_run_file(path);
  if (!text.ok()) return text.status();
  return parse_environment_record(*text, path);
}

absl::StatusOr<EnvironmentRecord> RunReader::environment_record(
    const LauncherState& launcher) const {
  const std::string path = run_environment_path(dir_, launcher.host, launcher.pid);
  absl::StatusOr<std::string> text = read_run_file(path);
  if (!text.ok()) return text.status();
  return parse_environment_record(*text, path);
}

absl::StatusOr<std::string> RunReader::read_run_relative_file(std::string_view path) const {
  const fs::path relative = fs::path(std::string(path)).lexically_normal();
  if (path.empty() || relative.is_absolute() || relative.empty() || *relative.begin() == "..") {
    return absl::InvalidArgumentError(
        fmt::format("{}: \"{}\" is not a path inside the run directory", dir_,
                    absl::CHexEscape(absl::string_view(path.data(), path.size()))));
  }
  return read_run_file((fs::path(dir_) / relative).string());
}

absl::StatusOr<std::string> RunReader::log_tail(RunLog log, std::size_t max_bytes) const {
  return read_log_tail(run_log_path(dir_, log), max_bytes);
}

absl::StatusOr<std::string> RunReader::log_tail(RunLog log, std::size_t max_bytes,
                                                const LauncherState& launcher) const {
  return read_log_tail(run_log_path(dir_, log, launcher.host, launcher.pid), max_bytes);
}

}  // namespace trainscope
