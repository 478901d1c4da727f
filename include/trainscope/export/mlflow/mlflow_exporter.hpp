// Export of a run to an MLflow tracking server over its REST API (libcurl),
// switched on the way MLflow's own client is: MLFLOW_TRACKING_URI (plus
// MLFLOW_EXPERIMENT_NAME / MLFLOW_EXPERIMENT_ID), or a config built in code.
//
// The local run directory is the source of truth: a syncer reads rows the
// run store appended (RunReader, from a persisted cursor), uploads them with
// runs/log-batch and advances the cursor in <run-dir>/mlflow-sync.json only
// after the server accepted them. The live exporter runs that syncer from the
// pipeline thread; `trainscope sync <run-dir>` runs it to completion later.
// Either way every row reaches the server once, across outages and restarts.
//
// What is sent: region rows as `{DEVICE}/{KEY}` (seconds; step = the row's
// step; ranks other than 0 as `rank{r}/{DEVICE}/{KEY}`), user metrics as
// logged, params and tags from run.json (+ mlflow.runName), at the end the
// mean of every summary entry as `{summary_prefix}/{DEVICE}/{KEY}` (Deep500's
// `train/CPU/EPOCH`), then the status and end time (a crashed run: FAILED).
// Credentials are never written to the cursor, logs or error messages.
#ifndef TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_EXPORTER_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/export/exporter.hpp"
#include "trainscope/export/mlflow/mlflow_config.hpp"
#include "trainscope/export/run_source.hpp"

namespace trainscope {

struct SyncStats {
  std::uint64_t requests = 0;  // HTTP requests sent, retries included
  std::uint64_t retries = 0;
  std::uint64_t metrics_sent = 0;  // metric values the server accepted
  std::uint64_t params_sent = 0;
  std::uint64_t tags_sent = 0;
  std::uint64_t skipped_invalid = 0;  // rows whose key MLflow would reject
  bool status_sent = false;           // the run's final status reached the server
  std::string mlflow_run_id;
  std::string experiment_id;
};

// Opens a run directory for reading (RunReader, trainscope/run/run_reader.hpp,
// is the one the library uses: see open_run_source there).
using RunSourceOpener =
    std::function<absl::StatusOr<std::unique_ptr<RunSource>>(const std::string& run_dir)>;

// Uploads everything in `run_dir` not yet accepted by the server and, if the
// run has ended, its summaries and status. Resumes from and advances
// <run-dir>/mlflow-sync.json. On error what was accepted stays recorded, so
// the next call continues from there. `stats` (optional) accumulates.
// sync_run_dir (trainscope/run/sync.hpp) calls this with RunReader.
absl::Status sync_run(const std::string& run_dir, const RunSourceOpener& open,
                      const MlflowConfig& config, SyncStats* stats = nullptr);

// Live export: syncs the run directory from the pipeline thread, at most
// every `min_interval` while the run is going (right away once it ends).
// After a failed attempt the next waits an exponentially growing backoff
// (up to a minute), so a stopped server costs one refused connection per
// backoff period and never data: the rows stay in the run directory. Add it
// after the run store's exporter. Requests are bounded by the config's
// timeouts and made without retries inside an attempt.
class MlflowExporter final : public Exporter {
 public:
  MlflowExporter(std::string run_dir, RunSourceOpener open, MlflowConfig config,
                 std::chrono::milliseconds min_interval = std::chrono::milliseconds(1000));
  ~MlflowExporter() override;

  std::string name() const override;
  absl::Status write_samples(absl::Span<const RegionSample> samples) override;
  absl::Status write_summary(const Summary& summary) override;
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override;
  absl::Status write_run_info(const RunInfo& info) override;
  absl::Status flush() override;

  // Totals so far (thread-safe).
  SyncStats stats() const;

 private:
  absl::Status maybe_sync(bool force);

  std::string run_dir_;
  RunSourceOpener open_;
  MlflowConfig config_;
  std::chrono::milliseconds min_interval_;
  // Pipeline thread only:
  bool run_ended_ = false;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
  // Guarded by mu_ (stats() may be called from any thread):
  mutable std::mutex mu_;
  SyncStats stats_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_MLFLOW_MLFLOW_EXPORTER_HPP_
