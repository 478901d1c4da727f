#include "run/run_format.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::run::detail {
namespace {

using Json = nlohmann::ordered_json;

// A value as a message shows it: JSON (escaped, valid UTF-8), cut to 80 characters.
std::string shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// Reads typed fields of a JSON object; the first problem becomes status(),
// naming the file, the field and the value found ("field \"id\" is 7, not a
// string"), and later reads return defaults. The optional_ reads give their
// default for a field that older or hand-written files leave out.
class FieldReader {
 public:
  FieldReader(const Json& object, const std::string& path) : object_(object), path_(path) {}

  bool has(const char* name) const { return object_.find(name) != object_.end(); }

  std::string text(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return {};
    if (!value->is_string()) return fail(name, *value, "a string"), std::string();
    return value->get<std::string>();
  }
  std::string optional_text(const char* name, std::string fallback = {}) {
    return has(name) ? text(name) : fallback;
  }
  std::int64_t integer(const char* name,
                       std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    const Json* value = find(name);
    if (value == nullptr) return 0;
    if (!value->is_number_integer()) return fail(name, *value, "an integer"), 0;
    const bool too_big = value->is_number_unsigned() &&
                         value->get<std::uint64_t>() > static_cast<std::uint64_t>(max);
    const std::int64_t v = too_big ? 0 : value->get<std::int64_t>();
    if (too_big || v < min || v > max) {
      return fail(name, *value, fmt::format("an integer from {} to {}", min, max)), 0;
    }
    return v;
  }
  std::int64_t optional_integer(const char* name, std::int64_t fallback,
                                std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    return has(name) ? integer(name, min, max) : fallback;
  }
  std::uint64_t unsigned_integer(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return 0;
    if (!value->is_number_unsigned()) return fail(name, *value, "a non-negative integer"), 0;
    return value->get<std::uint64_t>();
  }
  // A number, or null for NaN (JSON has no NaN).
  double number(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return 0.0;
    if (value->is_null()) return stats::kNaN;
    if (!value->is_number()) return fail(name, *value, "a number or null"), 0.0;
    return value->get<double>();
  }
  bool boolean(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return false;
    if (!value->is_boolean()) return fail(name, *value, "true or false"), false;
    return value->get<bool>();
  }
  // An object of strings; an absent one is empty.
  std::map<std::string, std::string> optional_string_map(const char* name) {
    std::map<std::string, std::string> out;
    if (!has(name)) return out;
    const Json& value = *find(name);
    if (!value.is_object()) return fail(name, value, "an object of strings"), out;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) return fail(name, value, "an object of strings"), out;
      out.emplace(key, item.get<std::string>());
    }
    return out;
  }
  // An array of strings; an absent one is empty.
  std::vector<std::string> optional_string_list(const char* name) {
    std::vector<std::string> out;
    if (!has(name)) return out;
    const Json& value = *find(name);
    if (!value.is_array()) return fail(name, value, "an array of strings"), out;
    for (const Json& item : value) {
      if (!item.is_string()) return fail(name, value, "an array of strings"), out;
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  const Json* array(const char* name) {
    const Json* value = find(name);
    if (value != nullptr && !value->is_array()) return fail(name, *value, "an array"), nullptr;
    return value;
  }
  // A field that read but holds a value out of its set: "is \"DONE\", not one of ...".
  void reject(const char* name, std::string_view expected) {
    if (const Json* value = find(name); value != nullptr) fail(name, *value, expected);
  }
  const absl::Status& status() const { return status_; }

 private:
  const Json* find(const char* name) {
    const auto it = object_.find(name);
    if (it == object_.end()) {
      if (status_.ok()) {
        status_ = absl::InvalidArgumentError(
            fmt::format("{}: field \"{}\" is missing", absl::Utf8SafeCHexEscape(path_), name));
      }
      return nullptr;
    }
    return &*it;
  }
  void fail(const char* name, const Json& value, std::string_view expected) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(fmt::format("{}: field \"{}\" is {}, not {}",
                                                     absl::Utf8SafeCHexEscape(path_), name,
                                                     shown(value), expected));
  }

  const Json& object_;
  const std::string& path_;
  absl::Status status_;
};

absl::StatusOr<Json> parse_object(std::string_view text, const std::string& path) {
  Json doc = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not valid JSON (corrupt or cut short; {} bytes)",
                    absl::Utf8SafeCHexEscape(path), text.size()));
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not a JSON object ({})", absl::Utf8SafeCHexEscape(path), shown(doc)));
  }
  return doc;
}

// Checks "format" and "version" so that a newer writer's file is refused
// instead of misread; *version: the file's.
absl::Status check_format(const Json& doc, std::string_view format, const std::string& path,
                          int* version = nullptr) {
  const auto found = doc.find("format");
  const auto number = doc.find("version");
  const bool ok = found != doc.end() && found->is_string() && found->get<std::string>() == format &&
                  number != doc.end() && number->is_number_integer() &&
                  number->get<std::int64_t>() >= kOldestReadableVersion &&
                  number->get<std::int64_t>() <= kRunFormatVersion;
  if (!ok) {
    return absl::InvalidArgumentError(
        fmt::format("{}: format {} version {} (this reader understands \"{}\" versions {} to {})",
                    absl::Utf8SafeCHexEscape(path), found == doc.end() ? "null" : shown(*found),
                    number == doc.end() ? "null" : shown(*number), format, kOldestReadableVersion,
                    kRunFormatVersion));
  }
  if (version != nullptr) *version = static_cast<int>(number->get<std::int64_t>());
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
constexpr std::string_view kLauncherFormat = "trainscope.launcher";

// --- The process part of rank and launcher files --------------------------
// Both kinds of process file record the same fields of their process (host,
// pid, status, start, end and heartbeat times, flush interval): written and
// read here for both, as RankState and LauncherState name them alike.

template <typename State>
void format_process(const State& s, Json* doc) {
  (*doc)["host"] = s.host;
  (*doc)["pid"] = s.pid;
  (*doc)["status"] = std::string(run_status_name(s.status));
  (*doc)["start_time_ms"] = s.start_time_ms;
  (*doc)["end_time_ms"] = s.end_time_ms;
  (*doc)["heartbeat_ms"] = s.heartbeat_ms;
  (*doc)["flush_interval_ms"] = s.flush_interval_ms;
}

// The process fields into *s; a status that is none of RunStatus's is an
// error naming the field.
template <typename State>
void parse_process(FieldReader& fields, State* s) {
  s->host = fields.text("host");
  s->pid = fields.integer("pid", 0);
  const std::string status_name = fields.text("status");
  s->start_time_ms = fields.integer("start_time_ms");
  s->end_time_ms = fields.integer("end_time_ms");
  s->heartbeat_ms = fields.integer("heartbeat_ms");
  s->flush_interval_ms = fields.integer("flush_interval_ms", 0);
  if (!fields.status().ok()) return;
  absl::StatusOr<RunStatus> status = parse_run_status(status_name);
  if (status.ok()) {
    s->status = *status;
  } else {
    fields.reject("status", "one of RUNNING, FINISHED, FAILED, KILLED");
  }
}

absl::StatusOr<SummaryEntry> parse_summary_entry(const Json& item, const std::string& path) {
  if (!item.is_object()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: an entry is not an object", absl::Utf8SafeCHexEscape(path)));
  }
  FieldReader fields(item, path);
  SummaryEntry entry;
  entry.key = fields.text("key");
  const std::string device = fields.text("device");
  for (const TimeStatsField& f : kTimeStatsFields) {
    switch (f.kind) {
      case TimeStatsFieldKind::kInteger:
        entry.stats.*f.integer = fields.unsigned_integer(f.name);
        break;
      case TimeStatsFieldKind::kDouble:
        entry.stats.*f.number = fields.number(f.name);
        break;
      case TimeStatsFieldKind::kBoolean:
        entry.stats.*f.boolean = fields.boolean(f.name);
        break;
    }
  }
  if (!fields.status().ok()) return fields.status();
  if (device != "CPU" && device != "GPU") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: entry \"{}\" has device \"{}\" (CPU or GPU)", absl::Utf8SafeCHexEscape(path),
        absl::Utf8SafeCHexEscape(entry.key), absl::Utf8SafeCHexEscape(device)));
  }
  entry.device = device == "GPU" ? Device::kGPU : Device::kCPU;
  // Durations, their statistics and cv are never below 0: such a summary is
  // damaged (its readers warn and go on without it), named by its field.
  for (const TimeStatsField& f : kTimeStatsFields) {
    if (f.kind == TimeStatsFieldKind::kDouble && entry.stats.*f.number < 0) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: entry \"{}\" on {}: {} is {}, below 0 (no duration or statistic of one is)",
          absl::Utf8SafeCHexEscape(path), absl::Utf8SafeCHexEscape(entry.key), device, f.name,
          entry.stats.*f.number));
    }
  }
  return entry;
}

}  // namespace

std::string rank_file_name(std::uint32_t rank) { return fmt::format("rank-{}.json", rank); }
std::string regions_file_name(std::uint32_t rank) { return fmt::format("regions-{}.csv", rank); }
std::string metrics_file_name(std::uint32_t rank) { return fmt::format("metrics-{}.csv", rank); }
std::string summary_file_name(std::uint32_t rank) { return fmt::format("summary-{}.json", rank); }

std::string join_path(const std::string& dir, std::string_view name) {
  return fmt::format("{}/{}", dir, name);
}

std::string host_file_part(std::string_view host) {
  std::string out(host.empty() ? std::string_view("unknown-host") : host);
  for (char& c : out) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

std::string host_metrics_file_name(std::string_view host) {
  return fmt::format("host-{}.csv", host_file_part(host));
}

std::string launcher_file_name(std::string_view host, std::int64_t pid) {
  return fmt::format("launcher-{}-{}.json", host_file_part(host), pid);
}

absl::Status check_json_object(std::string_view text, const std::string& path) {
  return parse_object(text, path).status();
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

absl::StatusOr<RunInfo> parse_run_file(std::string_view text, const std::string& path,
                                       int* version) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  absl::Status status = check_format(*doc, kRunFormat, path, version);
  if (!status.ok()) return status;
  FieldReader fields(*doc, path);
  RunInfo info;
  info.id = fields.text("id");
  info.name = fields.optional_text("name");
  info.experiment = fields.optional_text("experiment");
  info.start_time_ms = fields.integer("start_time_ms");
  info.params = fields.optional_string_map("params");
  info.tags = fields.optional_string_map("tags");
  if (!fields.status().ok()) return fields.status();
  return info;
}

std::string format_rank_file(const RankState& s) {
  Json doc;
  doc["format"] = kRankFormat;
  doc["version"] = kRunFormatVersion;
  doc["rank"] = s.rank.rank;
  doc["local_rank"] = s.rank.local_rank;
  doc["world_size"] = s.rank.world_size;
  format_process(s, &doc);
  if (!s.launcher.empty()) doc["launcher"] = s.launcher;
  // Only when records were not written (a full disk): absent means none.
  if (s.dropped_region_rows != 0) doc["dropped_region_rows"] = s.dropped_region_rows;
  if (s.dropped_metrics != 0) doc["dropped_metrics"] = s.dropped_metrics;
  return dump(doc);
}

absl::StatusOr<RankState> parse_rank_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  absl::Status status = check_format(*doc, kRankFormat, path);
  if (!status.ok()) return status;
  FieldReader fields(*doc, path);
  constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
  RankState s;
  s.rank.rank = static_cast<std::uint32_t>(fields.integer("rank", 0, kU32Max));
  s.rank.local_rank =
      static_cast<std::uint32_t>(fields.optional_integer("local_rank", 0, 0, kU32Max));
  s.rank.world_size =
      static_cast<std::uint32_t>(fields.optional_integer("world_size", 1, 1, kU32Max));
  parse_process(fields, &s);
  s.launcher = fields.optional_text("launcher");  // format 2
  constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
  s.dropped_region_rows =
      static_cast<std::uint64_t>(fields.optional_integer("dropped_region_rows", 0, 0, kI64Max));
  s.dropped_metrics =
      static_cast<std::uint64_t>(fields.optional_integer("dropped_metrics", 0, 0, kI64Max));
  if (!fields.status().ok()) return fields.status();
  return s;
}

std::string format_launcher_file(const LauncherState& s) {
  Json doc;
  doc["format"] = kLauncherFormat;
  doc["version"] = kRunFormatVersion;
  format_process(s, &doc);
  doc["command"] = s.command;
  doc["exit_code"] = s.exit_code;
  doc["term_signal"] = s.term_signal;
  return dump(doc);
}

absl::StatusOr<LauncherState> parse_launcher_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  absl::Status status = check_format(*doc, kLauncherFormat, path);
  if (!status.ok()) return status;
  FieldReader fields(*doc, path);
  LauncherState s;
  parse_process(fields, &s);
  s.command = fields.optional_string_list("command");
  s.exit_code = static_cast<int>(fields.optional_integer("exit_code", -1, -1, 255 + 128));
  s.term_signal = static_cast<int>(fields.optional_integer("term_signal", 0, 0, 128));
  if (!fields.status().ok()) return fields.status();
  return s;
}

absl::StatusOr<Summary> parse_summary_file(std::string_view text, const std::string& path) {
  absl::StatusOr<Json> doc = parse_object(text, path);
  if (!doc.ok()) return doc.status();
  absl::Status status = check_format(*doc, "trainscope.stats", path);
  if (!status.ok()) return status;
  FieldReader fields(*doc, path);
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
  if (lock_fd < 0) return trainscope::detail::file_error(errno, "open", lock_path);
  // Closing the descriptor releases the lock on every path out.
  const auto unlock = [lock_fd](absl::Status status) {
    ::close(lock_fd);
    return status;
  };
  if (::flock(lock_fd, LOCK_EX) != 0)
    return unlock(trainscope::detail::file_error(errno, "lock", lock_path));
  const std::string path = join_path(dir, kRunFileName);
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return unlock(text.status());
  absl::StatusOr<RunInfo> stored = parse_run_file(*text, path);
  if (!stored.ok()) return unlock(stored.status());
  bool changed = false;
  for (const auto& [key, value] : info.params) {
    const auto [it, inserted] = stored->params.emplace(key, value);
    changed |= inserted;
    if (!inserted && it->second != value) {
      return unlock(absl::InvalidArgumentError(fmt::format(
          "param \"{}\" is already \"{}\" in {}; params are write-once (cannot set "
          "\"{}\")",
          key, absl::Utf8SafeCHexEscape(it->second), path, absl::Utf8SafeCHexEscape(value))));
    }
  }
  for (const auto& [key, value] : info.tags) {
    std::string& slot = stored->tags[key];
    changed |= slot != value;
    slot = value;
  }
  if (!changed) return unlock(absl::OkStatus());
  return unlock(trainscope::detail::write_file_atomically(path, format_run_file(*stored)));
}

absl::Status write_artifact(const std::string& run_dir, std::string_view name,
                            std::string_view contents) {
  return trainscope::detail::write_file_atomically(
      fmt::format("{}/{}/{}", run_dir, kArtifactsDirName, name), contents, kArtifactTmpPrefix);
}

}  // namespace trainscope::run::detail
