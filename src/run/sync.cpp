#include "trainscope/run/sync.hpp"

#include <utility>

#include "trainscope/run/run_reader.hpp"

namespace trainscope {

absl::StatusOr<std::unique_ptr<RunSource>> open_run_source(const std::string& run_dir) {
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return reader.status();
  return std::make_unique<RunReader>(*std::move(reader));
}

absl::Status sync_run_dir(const std::string& run_dir, const MlflowConfig& config,
                          SyncStats* stats) {
  return sync_run(run_dir, open_run_source, config, stats);
}

std::shared_ptr<MlflowExporter> make_mlflow_exporter(std::string run_dir, MlflowConfig config,
                                                     std::chrono::milliseconds min_interval) {
  return std::make_shared<MlflowExporter>(std::move(run_dir), open_run_source, std::move(config),
                                          min_interval);
}

}  // namespace trainscope
