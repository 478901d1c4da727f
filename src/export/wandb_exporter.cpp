#include "trainscope/export/wandb_exporter.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/files.hpp"
#include "export/wandb_format.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/version.hpp"

namespace trainscope {

namespace {

using wandb_detail::ProtoWriter;

// Field numbers of wandb/proto/wandb_internal.proto (wandb 0.31.0, read from
// the installed package's descriptors: Record.DESCRIPTOR.fields_by_name).
namespace field {
constexpr std::uint32_t kRecordNum = 1;
constexpr std::uint32_t kRecordHistory = 2;
constexpr std::uint32_t kRecordSummary = 3;
constexpr std::uint32_t kRecordConfig = 5;
constexpr std::uint32_t kRecordRun = 17;
constexpr std::uint32_t kRecordExit = 18;
constexpr std::uint32_t kRecordHeader = 21;
constexpr std::uint32_t kRecordInfo = 200;       // _RecordInfo
constexpr std::uint32_t kInfoStreamId = 1;       // _RecordInfo.stream_id
constexpr std::uint32_t kHeaderVersionInfo = 1;  // HeaderRecord.version_info
constexpr std::uint32_t kVersionProducer = 1;    // VersionInfo.producer
constexpr std::uint32_t kRunId = 1;              // RunRecord...
constexpr std::uint32_t kRunEntity = 2;
constexpr std::uint32_t kRunProject = 3;
constexpr std::uint32_t kRunConfig = 4;
constexpr std::uint32_t kRunGroup = 6;
constexpr std::uint32_t kRunJobType = 7;
constexpr std::uint32_t kRunDisplayName = 8;
constexpr std::uint32_t kRunHost = 13;
constexpr std::uint32_t kRunStartTime = 17;
constexpr std::uint32_t kTimestampSeconds = 1;  // google.protobuf.Timestamp
constexpr std::uint32_t kTimestampNanos = 2;
// HistoryRecord.item, SummaryRecord.update and ConfigRecord.update are all
// field 1; their items share key = 1 and value_json = 16.
constexpr std::uint32_t kItems = 1;
constexpr std::uint32_t kItemKey = 1;
constexpr std::uint32_t kItemValueJson = 16;
constexpr std::uint32_t kHistoryStep = 2;  // HistoryRecord.step
constexpr std::uint32_t kStepNum = 1;      // HistoryStep.num
constexpr std::uint32_t kExitCode = 1;     // RunExitRecord.exit_code
constexpr std::uint32_t kExitRuntime = 2;  // RunExitRecord.runtime (seconds)
}  // namespace field

std::string json_string(const std::string& value) {
  // Replace invalid UTF-8 rather than fail: a param must not lose the run.
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ProtoWriter item(std::string_view key, std::string_view value_json) {
  ProtoWriter writer;
  writer.string(field::kItemKey, key).string(field::kItemValueJson, value_json);
  return writer;
}

ProtoWriter config_items(const std::map<std::string, std::string>& params) {
  ProtoWriter config;
  for (const auto& [key, value] : params)
    config.message(field::kItems, item(key, json_string(value)));
  return config;
}

std::string random_run_id() {
  std::random_device device;
  const std::uint64_t value = (std::uint64_t{device()} << 32) | device();
  return wandb_detail::derive_run_id(fmt::format("{:016x}", value), 0);
}

std::string default_wandb_dir() {
  const char* dir = std::getenv("WANDB_DIR");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/wandb";
  return "wandb";
}

// wandb names run directories by local start time.
std::string local_timestamp(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%d_%H%M%S", &tm);
  return buffer;
}

std::string summary_key(const std::string& prefix, const Summary& summary,
                        const SummaryEntry& entry) {
  std::string key = prefix.empty() ? "" : prefix + "/";
  if (summary.has_gpu_section) key += fmt::format("{}/", device_name(entry.device));
  return key + entry.key;
}

}  // namespace

absl::StatusOr<std::shared_ptr<WandbExporter>> WandbExporter::Create(WandbOptions options) {
  // wandb rejects ids it cannot put in a URL path.
  if (options.run_id.find_first_of("/\\#?%:") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format("W&B run id \"{}\" contains one of / \\ # ? % :",
                                                  absl::Utf8SafeCHexEscape(options.run_id)));
  }
  if (options.wandb_dir.empty()) options.wandb_dir = default_wandb_dir();
  return std::shared_ptr<WandbExporter>(new WandbExporter(std::move(options)));
}

WandbExporter::WandbExporter(WandbOptions options) : options_(std::move(options)) {}

WandbExporter::~WandbExporter() {
  if (file_ == nullptr) return;
  (void)emit_row();  // nowhere to report a failure from a destructor
  close_file();
}

std::string WandbExporter::name() const {
  return "wandb:" + (path_.empty() ? options_.wandb_dir : path_);
}

absl::Status WandbExporter::open(const RunInfo* info) {
  if (failed_)
    return absl::FailedPreconditionError(fmt::format("{}: an earlier write failed", name()));
  if (ended_) return absl::FailedPreconditionError(fmt::format("{}: the run has ended", name()));
  if (file_ != nullptr) return absl::OkStatus();
  if (!options_.run_id.empty()) {
    run_id_ = options_.run_id;
  } else if (info != nullptr && !info->id.empty()) {
    run_id_ = wandb_detail::derive_run_id(info->id, options_.rank);
  } else {
    run_id_ = random_run_id();
  }
  start_time_ms_ =
      info != nullptr && info->start_time_ms > 0 ? info->start_time_ms : detail::unix_now_ms();
  run_dir_ = fmt::format("{}/offline-run-{}-{}", options_.wandb_dir,
                         local_timestamp(start_time_ms_), run_id_);
  path_ = fmt::format("{}/run-{}.wandb", run_dir_, run_id_);
  std::error_code error;
  std::filesystem::create_directories(run_dir_ + "/files", error);
  if (error) {
    failed_ = true;
    return absl::InternalError(fmt::format("cannot create W&B run directory \"{}\": {}",
                                           absl::Utf8SafeCHexEscape(run_dir_), error.message()));
  }
  // "x": never overwrite another run's log (wandb opens it O_EXCL too).
  file_ = std::fopen(path_.c_str(), "wbxe");
  if (file_ == nullptr) {
    failed_ = true;
    return absl::ErrnoToStatus(
        errno, fmt::format("cannot create W&B run file \"{}\"", absl::Utf8SafeCHexEscape(path_)));
  }
  const std::string header = wandb_detail::file_header();
  block_offset_ = header.size();
  absl::Status status = write_bytes(header);
  if (!status.ok()) return status;

  ProtoWriter version;
  version.string(field::kVersionProducer, "trainscope " TRAINSCOPE_VERSION_STRING);
  ProtoWriter header_record;
  header_record.message(field::kHeaderVersionInfo, version);
  ProtoWriter record;
  record.message(field::kRecordHeader, header_record);
  status = write_record(record.bytes());
  if (!status.ok()) return status;

  // The run record: `wandb sync` takes the run's path and start from it.
  ProtoWriter start;
  start.varint(field::kTimestampSeconds, start_time_ms_ / 1000)
      .varint(field::kTimestampNanos, (start_time_ms_ % 1000) * 1000000);
  ProtoWriter run;
  std::string project = options_.project;
  if (project.empty())
    project = info != nullptr && !info->experiment.empty() ? info->experiment : "trainscope";
  if (info != nullptr) {
    config_ = info->params;
    if (!info->id.empty()) config_["trainscope_run_id"] = info->id;
  }
  run.string(field::kRunId, run_id_)
      .string(field::kRunEntity, options_.entity)
      .string(field::kRunProject, project)
      .message(field::kRunConfig, config_items(config_))
      .string(field::kRunGroup, options_.group)
      .string(field::kRunJobType, options_.job_type)
      .string(field::kRunDisplayName, info != nullptr ? info->name : "")
      .string(field::kRunHost, detail::this_host())
      .message(field::kRunStartTime, start);
  ProtoWriter run_record;
  run_record.message(field::kRecordRun, run);
  return write_record(run_record.bytes());
}

// Adds num and _info (as wandb numbers and tags its records) around the
// record's one body field, frames it and appends it to the file.
absl::Status WandbExporter::write_record(std::string body) {
  if (file_ == nullptr) return absl::FailedPreconditionError(fmt::format("{}: not open", name()));
  ProtoWriter record;
  record.varint(field::kRecordNum, ++record_num_);
  std::string bytes = record.bytes() + body;
  ProtoWriter info_field;
  ProtoWriter stream;
  stream.string(field::kInfoStreamId, run_id_);
  info_field.message(field::kRecordInfo, stream);
  bytes += info_field.bytes();

  std::string framed;
  wandb_detail::append_framed(bytes, &block_offset_, &framed);
  return write_bytes(framed);
}

absl::Status WandbExporter::write_bytes(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size()) return absl::OkStatus();
  const int error = errno;
  // A partial chunk would misalign every later one: stop writing this run.
  failed_ = true;
  close_file();
  return absl::ErrnoToStatus(
      error, fmt::format("cannot write W&B run file \"{}\"", absl::Utf8SafeCHexEscape(path_)));
}

absl::Status WandbExporter::write_config_changes(const RunInfo& info) {
  ProtoWriter config;
  for (const auto& [key, value] : info.params) {
    auto [it, inserted] = config_.emplace(key, value);
    if (!inserted && it->second == value) continue;
    it->second = value;
    config.message(field::kItems, item(key, json_string(value)));
  }
  if (config.bytes().empty()) return absl::OkStatus();
  ProtoWriter record;
  record.message(field::kRecordConfig, config);
  return write_record(record.bytes());
}

// Tags (key/value; W&B's own tags are plain strings) as summary items, JSON
// strings, each written again only when its value changed.
absl::Status WandbExporter::write_tag_changes(const RunInfo& info) {
  ProtoWriter update;
  for (const auto& [key, value] : info.tags) {
    auto [it, inserted] = tags_.emplace(key, value);
    if (!inserted && it->second == value) continue;
    it->second = value;
    update.message(field::kItems, item(key, json_string(value)));
  }
  if (update.bytes().empty()) return absl::OkStatus();
  ProtoWriter record;
  record.message(field::kRecordSummary, update);
  return write_record(record.bytes());
}

// One history row, preceded by the summary update wandb derives from it (a
// metric's summary is its last value).
absl::Status WandbExporter::emit_row() {
  if (!row_pending_) return absl::OkStatus();
  row_pending_ = false;
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(row_.values.size() + 3);
  for (const auto& [key, value] : row_.values)
    items.emplace_back(key, wandb_detail::json_number(value));
  items.emplace_back("_timestamp", wandb_detail::json_number(row_.timestamp_ms / 1000.0));
  items.emplace_back("_runtime",
                     wandb_detail::json_number((row_.timestamp_ms - start_time_ms_) / 1000.0));
  items.emplace_back("_step", fmt::format("{}", row_.step));
  ProtoWriter summary;
  ProtoWriter history;
  for (const auto& [key, value_json] : items) {
    summary.message(field::kItems, item(key, value_json));
    history.message(field::kItems, item(key, value_json));
  }
  ProtoWriter step;
  step.varint(field::kStepNum, row_.step);
  history.message(field::kHistoryStep, step);
  ProtoWriter summary_record;
  summary_record.message(field::kRecordSummary, summary);
  absl::Status status = write_record(summary_record.bytes());
  if (!status.ok()) return status;
  ProtoWriter history_record;
  history_record.message(field::kRecordHistory, history);
  return write_record(history_record.bytes());
}

absl::Status WandbExporter::write_metrics(absl::Span<const MetricPoint> metrics) {
  if (metrics.empty()) return absl::OkStatus();
  absl::Status status = open(nullptr);
  if (!status.ok()) return status;
  for (const MetricPoint& point : metrics) {
    // Points of one step that arrive together form one row, as one
    // wandb.log() call does; a new step closes the row.
    if (row_pending_ && point.step != row_.step) {
      status = emit_row();
      if (!status.ok()) return status;
    }
    if (!row_pending_) {
      row_ = Row{point.step, point.timestamp_ms, {}};
      row_pending_ = true;
    }
    row_.timestamp_ms = std::max(row_.timestamp_ms, point.timestamp_ms);
    auto same_key = [&](const auto& kv) { return kv.first == point.key; };
    auto it = std::find_if(row_.values.begin(), row_.values.end(), same_key);
    if (it == row_.values.end()) {
      row_.values.emplace_back(point.key, point.value);
    } else {
      it->second = point.value;  // the last value of a step wins, as in wandb
    }
  }
  return absl::OkStatus();
}

absl::Status WandbExporter::write_summary(const Summary& summary) {
  absl::Status status = open(nullptr);
  // The pending row goes first, so records stay in the order things happened.
  if (status.ok()) status = emit_row();
  if (!status.ok()) return status;
  ProtoWriter update;
  for (const SummaryEntry& entry : summary.entries) {
    if (std::isnan(entry.stats.mean)) continue;  // only warm-up samples: no mean
    update.message(field::kItems, item(summary_key(options_.summary_prefix, summary, entry),
                                       wandb_detail::json_number(entry.stats.mean)));
  }
  if (update.bytes().empty()) return absl::OkStatus();
  ProtoWriter record;
  record.message(field::kRecordSummary, update);
  return write_record(record.bytes());
}

absl::Status WandbExporter::write_run_info(const RunInfo& info) {
  const bool first = file_ == nullptr;
  absl::Status status = open(&info);
  if (!status.ok()) return status;
  if (!first) {
    status = write_config_changes(info);
    if (!status.ok()) return status;
  }
  status = write_tag_changes(info);
  if (!status.ok()) return status;
  if (info.status == RunStatus::kRunning) return absl::OkStatus();
  return finish(info);
}

absl::Status WandbExporter::finish(const RunInfo& info) {
  absl::Status status = emit_row();
  if (!status.ok()) return status;
  const std::int64_t end_ms = info.end_time_ms > 0 ? info.end_time_ms : detail::unix_now_ms();
  ProtoWriter exit;
  exit.varint(field::kExitCode, info.status == RunStatus::kFinished ? 0 : 1)
      .varint(field::kExitRuntime, std::max<std::int64_t>(0, (end_ms - start_time_ms_) / 1000));
  ProtoWriter record;
  record.message(field::kRecordExit, exit);
  status = write_record(record.bytes());
  if (!status.ok()) return status;
  ended_ = true;
  const bool flushed = std::fflush(file_) == 0;
  const int error = errno;
  close_file();
  if (flushed) return absl::OkStatus();
  return absl::ErrnoToStatus(
      error, fmt::format("cannot write W&B run file \"{}\"", absl::Utf8SafeCHexEscape(path_)));
}

absl::Status WandbExporter::flush() {
  if (file_ == nullptr) {
    if (failed_)
      return absl::FailedPreconditionError(fmt::format("{}: an earlier write failed", name()));
    return absl::OkStatus();
  }
  absl::Status status = emit_row();
  if (!status.ok()) return status;
  if (std::fflush(file_) == 0) return absl::OkStatus();
  const int error = errno;
  failed_ = true;
  close_file();
  return absl::ErrnoToStatus(
      error, fmt::format("cannot write W&B run file \"{}\"", absl::Utf8SafeCHexEscape(path_)));
}

void WandbExporter::close_file() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace trainscope
