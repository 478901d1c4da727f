// Weights & Biases export without a network: writes the offline run format
// that `wandb sync` uploads (what `wandb.init(mode="offline")` leaves behind),
// the usual way to reach W&B from clusters without internet access.
//
// Layout: <wandb_dir>/offline-run-YYYYMMDD_HHMMSS-<id>/run-<id>.wandb (plus an
// empty files/ directory, as wandb creates). The .wandb file is a 7-byte
// header (":W&B", magic 0xBEE1 little-endian, version 0) followed by
// LevelDB-log framed protobuf `Record`s of wandb/proto/wandb_internal.proto.
// Mapping and record sequence: docs/exporters.md.
#ifndef TRAINSCOPE_EXPORT_WANDB_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_WANDB_EXPORTER_HPP_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope {

struct WandbOptions {
  // Parent of the offline run directories. Empty: $WANDB_DIR/wandb if
  // WANDB_DIR is set, else ./wandb (where wandb itself puts them).
  std::string wandb_dir;
  // Empty: RunInfo::experiment, else "trainscope".
  std::string project;
  std::string entity;  // empty: the syncing user's default entity
  std::string group;   // W&B run group (e.g. one per distributed job)
  std::string job_type;
  // The W&B run id. Empty: 8 lowercase alphanumerics derived from the
  // trainscope run id and `rank` (so a re-created exporter of the same run
  // and rank gets the same id), or random if no RunInfo arrived first.
  std::string run_id;
  std::uint32_t rank = 0;
  // Summary keys of write_summary(): "<prefix>/<DEVICE>/<KEY>" (Deep500's
  // log_wb_all keys; no <DEVICE>/ for a CPU-only timer) = mean seconds.
  std::string summary_prefix = "train";
};

// Not thread-safe: the ExportPipeline calls it from its one thread. Each
// call appends complete records and returns an error instead of throwing;
// after a failed write the file is closed and every later call fails.
class WandbExporter final : public Exporter {
 public:
  // Checks the options; the run directory is created on the first call that
  // writes (normally write_run_info(), which supplies the id and start time).
  static absl::StatusOr<std::shared_ptr<WandbExporter>> Create(WandbOptions options = {});
  // Writes a pending history row and closes the file. Without a final
  // write_run_info() the file has no exit record: `wandb sync` then marks the
  // run failed (exit code 1), as it does for a crashed wandb process.
  ~WandbExporter() override;
  WandbExporter(const WandbExporter&) = delete;
  WandbExporter& operator=(const WandbExporter&) = delete;

  std::string name() const override;
  absl::Status write_summary(const Summary& summary) override;
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override;
  // The first call writes the run record (id, project, name, start time,
  // params as config); later ones write changed params; every call writes
  // new or changed tags as summary items (tag key = JSON string); one with a
  // final status writes the exit record (0 for FINISHED, else 1) and closes.
  absl::Status write_run_info(const RunInfo& info) override;
  absl::Status flush() override;

  // The run directory; empty until the first write.
  const std::string& run_dir() const noexcept { return run_dir_; }

 private:
  struct Row {
    std::int64_t step = 0;
    std::int64_t timestamp_ms = 0;
    std::vector<std::pair<std::string, double>> values;  // in logging order
  };

  explicit WandbExporter(WandbOptions options);
  absl::Status open(const RunInfo* info);
  absl::Status write_record(std::string body);
  absl::Status write_bytes(const std::string& bytes);
  absl::Status write_config_changes(const RunInfo& info);
  absl::Status write_tag_changes(const RunInfo& info);
  absl::Status emit_row();
  absl::Status finish(const RunInfo& info);
  void close_file();

  WandbOptions options_;
  std::string run_id_;
  std::string run_dir_;
  std::string path_;
  std::FILE* file_ = nullptr;
  std::int64_t record_num_ = 0;
  std::int64_t start_time_ms_ = 0;
  std::size_t block_offset_ = 0;  // bytes used in the current 32 KiB block
  bool failed_ = false;
  bool ended_ = false;
  std::map<std::string, std::string> config_;  // params as last written
  std::map<std::string, std::string> tags_;    // tags as last written (summary items)
  Row row_;
  bool row_pending_ = false;
};

// The format's building blocks, exposed for tests.
}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_WANDB_EXPORTER_HPP_
