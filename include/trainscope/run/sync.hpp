// Uploading a run directory to MLflow: the MLflow syncer
// (trainscope/export/mlflow/mlflow_exporter.hpp) reading it with RunReader.
#ifndef TRAINSCOPE_RUN_SYNC_HPP_
#define TRAINSCOPE_RUN_SYNC_HPP_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/export/run_source.hpp"

namespace trainscope {

// RunReader::Open as a RunSourceOpener.
absl::StatusOr<std::unique_ptr<RunSource>> open_run_source(const std::string& run_dir);

// Everything in `run_dir` the server has not accepted yet (see sync_run).
absl::Status sync_run_dir(const std::string& run_dir, const MlflowConfig& config,
                          SyncStats* stats = nullptr);

// The live MLflow exporter of a run directory (add it after the run store's).
std::shared_ptr<MlflowExporter> make_mlflow_exporter(
    std::string run_dir, MlflowConfig config,
    std::chrono::milliseconds min_interval = std::chrono::milliseconds(1000));

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_SYNC_HPP_
