#include "trainscope/export/mlflow/mlflow_exporter.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/files.hpp"
#include "export/mlflow/mlflow_client.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/export/run_record.hpp"

namespace trainscope {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kCursorFile = "mlflow-sync.json";
constexpr const char* kLockFile = "mlflow-sync.lock";
constexpr int kCursorVersion = 1;
// The live exporter's backoff between failed attempts.
constexpr std::chrono::milliseconds kLiveMinBackoff{1000};
constexpr std::chrono::milliseconds kLiveMaxBackoff{60000};

std::string to_std(absl::string_view text) { return std::string(text.data(), text.size()); }

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

absl::StatusOr<bool> env_bool(const char* name) {
  const std::string value = absl::AsciiStrToLower(env(name));
  if (value.empty() || value == "false" || value == "0") return false;
  if (value == "true" || value == "1") return true;
  return absl::InvalidArgumentError(
      fmt::format("{}='{}' is not a boolean (true, false, 1 or 0)", name, env(name)));
}

// Where the upload stands, persisted in <run-dir>/mlflow-sync.json. A row
// file's position is the offset of the chunk being sent plus how many of its
// rows the server already accepted, so a batch accepted just before a crash
// is never sent again.
struct FileCursor {
  std::uint64_t offset = 0;
  std::uint64_t rows_sent = 0;
};
struct Cursor {
  std::string tracking_uri;  // redacted
  std::string experiment_id;
  std::string run_id;
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> tags;
  std::map<std::string, FileCursor> files;
  bool summary_sent = false;
  std::string status;  // the last status runs/update accepted
};

std::string cursor_path(const std::string& run_dir) { return run_dir + "/" + kCursorFile; }

absl::StatusOr<Cursor> load_cursor(const std::string& run_dir) {
  const std::string path = cursor_path(run_dir);
  std::ifstream in(path);
  if (!in) return Cursor{};
  const json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || parsed.value("version", 0) != kCursorVersion) {
    return absl::DataLossError(fmt::format(
        "{} is not a trainscope MLflow cursor (version {}); move it away to upload the run again "
        "as a new MLflow run",
        path, kCursorVersion));
  }
  try {
    Cursor cursor;
    cursor.tracking_uri = parsed.at("tracking_uri").get<std::string>();
    cursor.experiment_id = parsed.at("experiment_id").get<std::string>();
    cursor.run_id = parsed.at("run_id").get<std::string>();
    cursor.params = parsed.at("params").get<std::map<std::string, std::string>>();
    cursor.tags = parsed.at("tags").get<std::map<std::string, std::string>>();
    for (const auto& [name, file] : parsed.at("files").items()) {
      cursor.files[name] = {file.at("offset").get<std::uint64_t>(),
                            file.at("rows_sent").get<std::uint64_t>()};
    }
    cursor.summary_sent = parsed.at("summary_sent").get<bool>();
    cursor.status = parsed.at("status").get<std::string>();
    return cursor;
  } catch (const json::exception& error) {
    return absl::DataLossError(fmt::format("{}: {}", path, error.what()));
  }
}

// Written to a temporary file and renamed over the old one: a crash leaves
// the old cursor or the new one, never half of one.
absl::Status save_cursor(const std::string& run_dir, const Cursor& cursor) {
  json out = {{"version", kCursorVersion},
              {"tracking_uri", cursor.tracking_uri},
              {"experiment_id", cursor.experiment_id},
              {"run_id", cursor.run_id},
              {"params", cursor.params},
              {"tags", cursor.tags},
              {"files", json::object()},
              {"summary_sent", cursor.summary_sent},
              {"status", cursor.status}};
  for (const auto& [name, file] : cursor.files) {
    out["files"][name] = {{"offset", file.offset}, {"rows_sent", file.rows_sent}};
  }
  return detail::write_file_atomically(
      cursor_path(run_dir), out.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

// One syncer per run directory at a time (the live exporter and a `trainscope
// sync` would otherwise both send the same rows).
class DirLock {
 public:
  static absl::StatusOr<DirLock> Acquire(const std::string& run_dir) {
    const std::string path = run_dir + "/" + kLockFile;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return absl::PermissionDeniedError(fmt::format("cannot open {}", path));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return absl::UnavailableError(
          fmt::format("another process is syncing {} to MLflow right now", run_dir));
    }
    return DirLock(fd);
  }
  DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

struct SyncOptions {
  // Stop (successfully) after the batch that passes this time; the rest is
  // sent by the next call. Lets the live exporter keep the pipeline moving.
  std::optional<Clock::time_point> deadline;
};

std::string rank_prefix(std::uint32_t rank) {
  return rank == 0 ? std::string() : fmt::format("rank{}/", rank);
}

mlflow::Metric region_metric(const RegionRow& row) {
  return {fmt::format("{}{}/{}", rank_prefix(row.rank), device_name(row.device), row.key),
          static_cast<double>(row.duration_ns) / 1e9, row.start_unix_ns / 1000000, row.step};
}

mlflow::Metric user_metric(const MetricPoint& point) {
  return {point.key, point.value, point.timestamp_ms, point.step};
}

// A host's hardware reading: its name (kSystemMetricPrefix...) as MLflow's own
// system metrics; with several hosts the host after the prefix; a rank's process tree (other than
// rank 0's) under "rank<r>/".
mlflow::Metric host_metric(const MetricPoint& point, const std::string& host, bool several_hosts) {
  constexpr std::string_view kPrefix = kSystemMetricPrefix;
  std::string key = point.key;
  if (several_hosts && key.rfind(kPrefix, 0) == 0) {
    key = fmt::format("{}{}/{}", kPrefix, host, key.substr(kPrefix.size()));
  }
  if (point.rank != kNoRank) key = rank_prefix(point.rank) + key;
  return {std::move(key), point.value, point.timestamp_ms, point.step};
}

class Syncer {
 public:
  Syncer(const std::string& run_dir, const RunSource& reader, mlflow::Client* client,
         Cursor* cursor, SyncStats* stats, SyncOptions options)
      : run_dir_(run_dir),
        reader_(reader),
        client_(client),
        cursor_(cursor),
        stats_(stats),
        options_(options) {
    limits_.max_metrics =
        static_cast<std::size_t>(std::clamp(client->config().max_metrics_per_request, 1, 1000));
  }

  absl::Status run() {
    if (absl::Status s = ensure_mlflow_run(); !s.ok()) return s;
    if (absl::Status s = sync_params_and_tags(); !s.ok()) return s;
    for (const RankState& state : reader_.ranks()) {
      const std::uint32_t rank = state.rank.rank;
      absl::Status s = sync_rows(
          fmt::format("regions-{}.csv", rank),
          [&](std::uint64_t offset) { return reader_.read_regions(rank, offset); }, region_metric);
      if (s.ok()) {
        s = sync_rows(
            fmt::format("metrics-{}.csv", rank),
            [&](std::uint64_t offset) { return reader_.read_metrics(rank, offset); }, user_metric);
      }
      if (!s.ok()) return s;
      if (out_of_time()) return absl::OkStatus();
    }
    const bool several_hosts = reader_.hosts().size() > 1;
    for (const std::string& host : reader_.hosts()) {
      absl::Status s = sync_rows(
          fmt::format("host-{}.csv", host),
          [&](std::uint64_t offset) { return reader_.read_host_metrics(host, offset); },
          [&](const MetricPoint& point) { return host_metric(point, host, several_hosts); });
      if (!s.ok()) return s;
      if (out_of_time()) return absl::OkStatus();
    }
    if (reader_.info().status == RunStatus::kRunning) return absl::OkStatus();
    if (absl::Status s = sync_summaries(); !s.ok()) return s;
    return sync_status();
  }

  std::uint64_t skipped() const { return skipped_; }
  const std::string& first_skip_reason() const { return first_skip_reason_; }

 private:
  bool out_of_time() const { return options_.deadline && Clock::now() >= *options_.deadline; }

  absl::Status save() { return save_cursor(run_dir_, *cursor_); }

  std::string experiment_name() const {
    const MlflowConfig& config = client_->config();
    if (!config.experiment_name.empty()) return config.experiment_name;
    if (!reader_.info().experiment.empty()) return reader_.info().experiment;
    return "Default";
  }

  absl::Status ensure_mlflow_run() {
    if (!cursor_->run_id.empty()) return absl::OkStatus();
    const RunInfo& info = reader_.info();
    std::string experiment_id = client_->config().experiment_id;
    if (experiment_id.empty()) {
      absl::StatusOr<std::string> found = client_->get_or_create_experiment(experiment_name());
      if (!found.ok()) return found.status();
      experiment_id = *found;
    }
    const std::string name = info.name.empty() ? info.id : info.name;
    absl::StatusOr<std::string> run_id =
        client_->create_run(experiment_id, name, info.start_time_ms);
    if (!run_id.ok()) return run_id.status();
    cursor_->tracking_uri = redact_uri(client_->config().tracking_uri);
    cursor_->experiment_id = experiment_id;
    cursor_->run_id = *run_id;
    cursor_->tags["mlflow.runName"] = name;  // runs/create set it
    return save();
  }

  // Params and tags not yet accepted with their current value.
  absl::Status sync_params_and_tags() {
    mlflow::Batch pending;
    const RunInfo& info = reader_.info();
    std::map<std::string, std::string> tags = info.tags;
    tags.emplace("trainscope.run_id", info.id);
    for (const auto& [key, value] : info.params) {
      if (auto it = cursor_->params.find(key); it == cursor_->params.end() || it->second != value) {
        if (accept_key(key)) {
          pending.params.push_back({key, value.substr(0, mlflow::kMaxParamValueLength)});
        }
      }
    }
    for (const auto& [key, value] : tags) {
      if (auto it = cursor_->tags.find(key); it == cursor_->tags.end() || it->second != value) {
        if (accept_key(key)) {
          pending.tags.push_back({key, value.substr(0, mlflow::kMaxTagValueLength)});
        }
      }
    }
    if (pending.empty()) return absl::OkStatus();
    absl::StatusOr<std::vector<mlflow::Batch>> batches =
        mlflow::split_batch(cursor_->run_id, pending, limits_);
    if (!batches.ok()) return batches.status();
    for (const mlflow::Batch& batch : *batches) {
      if (absl::Status s = send(batch); !s.ok()) return s;
      // Recorded as the run directory has them (the server got a prefix if truncated).
      for (const mlflow::KeyValue& param : batch.params) {
        cursor_->params[param.key] = info.params.at(param.key);
      }
      for (const mlflow::KeyValue& tag : batch.tags) cursor_->tags[tag.key] = tags.at(tag.key);
      if (absl::Status s = save(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Rows of one file from the cursor on; `read(offset)` is RunReader's.
  template <typename Read, typename Convert>
  absl::Status sync_rows(const std::string& file, Read read, Convert convert) {
    FileCursor& at = cursor_->files[file];
    auto chunk = read(at.offset);
    if (!chunk.ok()) {
      // A rank that has not written this file yet.
      return absl::IsNotFound(chunk.status()) ? absl::OkStatus() : chunk.status();
    }
    mlflow::Batch all;
    std::vector<std::uint64_t> row_of_metric;  // row index of each metric in `chunk->rows`
    for (std::uint64_t row = at.rows_sent; row < chunk->rows.size(); ++row) {
      mlflow::Metric metric = convert(chunk->rows[row]);
      if (!accept_key(metric.key)) continue;
      all.metrics.push_back(std::move(metric));
      row_of_metric.push_back(row);
    }
    absl::StatusOr<std::vector<mlflow::Batch>> batches =
        mlflow::split_batch(cursor_->run_id, all, limits_);
    if (!batches.ok()) return batches.status();
    std::size_t next_metric = 0;
    for (const mlflow::Batch& batch : *batches) {
      if (absl::Status s = send(batch); !s.ok()) return s;
      next_metric += batch.metrics.size();
      // Rows skipped as invalid count as done once a later row is accepted.
      at.rows_sent =
          next_metric < row_of_metric.size() ? row_of_metric[next_metric] : chunk->rows.size();
      if (absl::Status s = save(); !s.ok()) return s;
      if (out_of_time() && next_metric < row_of_metric.size()) return absl::OkStatus();
    }
    if (chunk->next_offset != at.offset || at.rows_sent != 0) {
      at = {chunk->next_offset, 0};
      return save();
    }
    return absl::OkStatus();
  }

  // Deep500's keys: `train/CPU/EPOCH` = mean, per rank.
  absl::Status sync_summaries() {
    if (cursor_->summary_sent) return absl::OkStatus();
    mlflow::Batch all;
    const std::int64_t timestamp = end_time_ms();
    const std::string& prefix = client_->config().summary_prefix;
    for (const RankState& state : reader_.ranks()) {
      absl::StatusOr<Summary> summary = reader_.read_summary(state.rank.rank);
      if (!summary.ok()) return summary.status();
      for (const SummaryEntry& entry : summary->entries) {
        if (entry.stats.count == 0 || !std::isfinite(entry.stats.mean)) continue;
        std::string key =
            fmt::format("{}{}{}/{}", prefix.empty() ? "" : prefix + "/",
                        rank_prefix(state.rank.rank), device_name(entry.device), entry.key);
        if (!accept_key(key)) continue;
        all.metrics.push_back({std::move(key), entry.stats.mean, timestamp, 0});
      }
    }
    absl::StatusOr<std::vector<mlflow::Batch>> batches =
        mlflow::split_batch(cursor_->run_id, all, limits_);
    if (!batches.ok()) return batches.status();
    // Resending after a partial failure is harmless: MLflow keeps one copy of
    // a metric with the same key, value, timestamp and step.
    for (const mlflow::Batch& batch : *batches) {
      if (absl::Status s = send(batch); !s.ok()) return s;
    }
    cursor_->summary_sent = true;
    return save();
  }

  absl::Status sync_status() {
    const RunStatus status = reader_.info().status;
    const std::string name(run_status_name(status));
    if (cursor_->status == name) {
      stats_->status_sent = true;
      return absl::OkStatus();
    }
    if (absl::Status s = client_->update_run(cursor_->run_id, status, end_time_ms()); !s.ok()) {
      return s;
    }
    cursor_->status = name;
    stats_->status_sent = true;
    return save();
  }

  // A crashed run has no end time: its last sign of life.
  std::int64_t end_time_ms() const {
    std::int64_t end = reader_.info().end_time_ms;
    if (end > 0) return end;
    for (const RankState& state : reader_.ranks()) {
      end = std::max({end, state.end_time_ms, state.heartbeat_ms});
    }
    return end;
  }

  absl::Status send(const mlflow::Batch& batch) {
    if (absl::Status s = client_->log_batch(cursor_->run_id, batch); !s.ok()) return s;
    stats_->metrics_sent += batch.metrics.size();
    stats_->params_sent += batch.params.size();
    stats_->tags_sent += batch.tags.size();
    return absl::OkStatus();
  }

  // Keys MLflow would reject are skipped (counted and reported), not sent: one
  // bad key must not hold back every row after it forever.
  bool accept_key(const std::string& key) {
    absl::Status valid = mlflow::validate_key(key);
    if (valid.ok()) return true;
    if (skipped_++ == 0) first_skip_reason_ = to_std(valid.message());
    return false;
  }

  const std::string& run_dir_;
  const RunSource& reader_;
  mlflow::Client* client_;
  Cursor* cursor_;
  SyncStats* stats_;
  SyncOptions options_;
  mlflow::BatchLimits limits_;
  std::uint64_t skipped_ = 0;
  std::string first_skip_reason_;
};

absl::Status sync_once(const std::string& run_dir, const RunSourceOpener& open,
                       const MlflowConfig& config, SyncOptions options, SyncStats* stats) {
  absl::StatusOr<DirLock> lock = DirLock::Acquire(run_dir);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::unique_ptr<RunSource>> reader = open(run_dir);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<Cursor> cursor = load_cursor(run_dir);
  if (!cursor.ok()) return cursor.status();
  const std::string uri = redact_uri(config.tracking_uri);
  if (!cursor->tracking_uri.empty() && cursor->tracking_uri != uri) {
    return absl::FailedPreconditionError(fmt::format(
        "{} was synced to {}, not {}: sync it there, or move {} away to upload it to {} as a new "
        "run",
        run_dir, cursor->tracking_uri, uri, cursor_path(run_dir), uri));
  }
  absl::StatusOr<std::unique_ptr<mlflow::Client>> client = mlflow::Client::Create(config);
  if (!client.ok()) return client.status();
  Syncer syncer(run_dir, **reader, client->get(), &*cursor, stats, options);
  const absl::Status status = syncer.run();
  stats->requests += (*client)->requests();
  stats->retries += (*client)->retries();
  stats->skipped_invalid += syncer.skipped();
  stats->mlflow_run_id = cursor->run_id;
  stats->experiment_id = cursor->experiment_id;
  if (syncer.skipped() > 0) {
    warn(
        fmt::format("MLflow sync of {}: skipped {} row(s) with keys MLflow rejects ({}); they "
                    "stay in the run directory",
                    run_dir, syncer.skipped(), syncer.first_skip_reason()));
  }
  if (status.ok()) return status;
  return absl::Status(status.code(), mlflow::redact(to_std(status.message()), config));
}

}  // namespace

std::string redact_uri(const std::string& uri) {
  const std::size_t scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  const std::size_t host = scheme + 3;
  const std::size_t authority_end = std::min(uri.find_first_of("/?#", host), uri.size());
  const std::size_t at = uri.rfind('@', authority_end);
  if (at == std::string::npos || at < host) return uri;
  return uri.substr(0, host) + "***" + uri.substr(at);
}

absl::StatusOr<std::optional<MlflowConfig>> mlflow_config_from_environment() {
  MlflowConfig config;
  config.tracking_uri = env("MLFLOW_TRACKING_URI");
  if (config.tracking_uri.empty()) return std::optional<MlflowConfig>();
  if (!absl::StartsWith(config.tracking_uri, "http://") &&
      !absl::StartsWith(config.tracking_uri, "https://")) {
    return absl::InvalidArgumentError(fmt::format(
        "MLFLOW_TRACKING_URI='{}': trainscope exports to MLflow tracking servers (http:// or "
        "https://) only; unset it or point it at `mlflow server`",
        redact_uri(config.tracking_uri)));
  }
  config.experiment_name = env("MLFLOW_EXPERIMENT_NAME");
  config.experiment_id = env("MLFLOW_EXPERIMENT_ID");
  config.username = env("MLFLOW_TRACKING_USERNAME");
  config.password = env("MLFLOW_TRACKING_PASSWORD");
  config.token = env("MLFLOW_TRACKING_TOKEN");
  config.ca_bundle = env("MLFLOW_TRACKING_SERVER_CERT_PATH");
  absl::StatusOr<bool> insecure = env_bool("MLFLOW_TRACKING_INSECURE_TLS");
  if (!insecure.ok()) return insecure.status();
  config.insecure_tls = *insecure;
  return std::optional<MlflowConfig>(std::move(config));
}

absl::Status sync_run(const std::string& run_dir, const RunSourceOpener& open,
                      const MlflowConfig& config, SyncStats* stats) {
  SyncStats local;
  return sync_once(run_dir, open, config, SyncOptions{}, stats != nullptr ? stats : &local);
}

MlflowExporter::MlflowExporter(std::string run_dir, RunSourceOpener open, MlflowConfig config,
                               std::chrono::milliseconds min_interval)
    : run_dir_(std::move(run_dir)),
      open_(std::move(open)),
      config_(std::move(config)),
      min_interval_(min_interval) {
  // The backoff between attempts replaces retries inside one: a sleeping
  // pipeline thread would let the timers' rings overflow.
  config_.max_retries = 0;
}

MlflowExporter::~MlflowExporter() = default;

std::string MlflowExporter::name() const { return "mlflow:" + redact_uri(config_.tracking_uri); }

absl::Status MlflowExporter::write_samples(absl::Span<const RegionSample>) {
  return maybe_sync(false);
}

absl::Status MlflowExporter::write_summary(const Summary&) { return maybe_sync(false); }

absl::Status MlflowExporter::write_metrics(absl::Span<const MetricPoint>) {
  return maybe_sync(false);
}

absl::Status MlflowExporter::write_run_info(const RunInfo& info) {
  if (info.status != RunStatus::kRunning) run_ended_ = true;
  return maybe_sync(false);
}

// The run store wrote its part of this drain before (it was added first), so
// a flush after the run ended uploads everything, including the status.
absl::Status MlflowExporter::flush() { return maybe_sync(run_ended_); }

SyncStats MlflowExporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::Status MlflowExporter::maybe_sync(bool force) {
  const Clock::time_point now = Clock::now();
  if (!force && now < next_attempt_) return absl::OkStatus();
  SyncStats pass;
  // Bounded so a large backlog (after an outage) is sent over several drains.
  const absl::Status status =
      sync_once(run_dir_, open_, config_, SyncOptions{now + min_interval_}, &pass);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests += pass.requests;
    stats_.retries += pass.retries;
    stats_.metrics_sent += pass.metrics_sent;
    stats_.params_sent += pass.params_sent;
    stats_.tags_sent += pass.tags_sent;
    stats_.skipped_invalid += pass.skipped_invalid;
    stats_.status_sent = stats_.status_sent || pass.status_sent;
    if (!pass.mlflow_run_id.empty()) stats_.mlflow_run_id = pass.mlflow_run_id;
    if (!pass.experiment_id.empty()) stats_.experiment_id = pass.experiment_id;
  }
  if (status.ok()) {
    backoff_ = std::chrono::milliseconds(0);
    next_attempt_ = Clock::now() + min_interval_;
    return status;
  }
  backoff_ = std::clamp(backoff_ * 2, kLiveMinBackoff, kLiveMaxBackoff);
  next_attempt_ = Clock::now() + backoff_;
  const std::string next = run_ended_
                               ? fmt::format("`trainscope sync {}` uploads the rest", run_dir_)
                               : fmt::format("next attempt in {} s; the rows stay in {}",
                                             backoff_.count() / 1000, run_dir_);
  return absl::Status(status.code(), fmt::format("{} ({})", to_std(status.message()), next));
}

}  // namespace trainscope
