// The local run store's writer (internal): the exporter that appends one
// rank's records to a run directory (formats: run_format.hpp).
#ifndef TRAINSCOPE_SRC_RUN_RUN_STORE_EXPORTER_HPP_
#define TRAINSCOPE_SRC_RUN_RUN_STORE_EXPORTER_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "run/rank_claim.hpp"
#include "run/run_format.hpp"
#include "trainscope/export/exporter.hpp"
#include "trainscope/export/run_record.hpp"
#include "trainscope/timing/detail/series_table.hpp"

namespace trainscope::run::detail {

// Appends one rank's regions and metrics to its CSV files and keeps its rank
// file's heartbeat. Called only from the pipeline thread, except
// stream_summary() and the counters.
//
// The first process of a rank (it holds an flock on rank-<r>.lock for its
// lifetime: rank_claim.hpp) owns the rank: it repairs the CSV files and writes
// the rank file. Its descendants with the same rank (a data-loader worker, a
// child script) append whole lines to the same CSV files with O_APPEND and
// leave the rank file to the owner; other processes claiming it record nothing.
class RunStoreExporter final : public Exporter {
 public:
  struct Options {
    std::string dir;
    RankInfo rank;
    absl::Duration flush_interval = absl::Seconds(1);
    std::int64_t start_time_ms = 0;
    // Records waiting for a writable disk beyond this are dropped (counted).
    std::size_t max_buffered_bytes = std::size_t{64} << 20;
    // A launcher's store (`trainscope run`): it is no rank. Its readings go
    // to host-<host>.csv (shared by the launchers of the host, appended in
    // whole lines), its record to launcher-<host>-<pid>.json; no regions, no
    // summary.
    bool launcher = false;
    std::vector<std::string> command;  // a launcher's command
    // A rank's launcher, "<host>:<pid>" (TRAINSCOPE_LAUNCHER), if any.
    std::string launched_by;
    // How Run::Start claimed the rank (rank_claim.hpp). kUnclaimed: the store
    // takes rank-<r>.lock itself. kOwner hands over its lock descriptor, which
    // the store holds and closes; kRefused records nothing at all.
    RankClaimKind claim = RankClaimKind::kUnclaimed;
    int claimed_lock_fd = -1;
  };

  // Opens (and if needed creates or repairs) this rank's files and, as the
  // rank's owner, writes its rank file as RUNNING.
  static absl::StatusOr<std::shared_ptr<RunStoreExporter>> Create(Options options);
  ~RunStoreExporter() override;
  RunStoreExporter(const RunStoreExporter&) = delete;
  RunStoreExporter& operator=(const RunStoreExporter&) = delete;

  std::string name() const override { return "run-store:" + options_.dir; }
  absl::Status write_samples(absl::Span<const RegionSample> samples) override;
  absl::Status write_summary(const Summary& summary) override;
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override;
  absl::Status write_run_info(const RunInfo& info) override;
  // Appends what is buffered (one write() per file) and renews the heartbeat.
  absl::Status flush() override;

  // The first process of a rank owns it (a launcher owns its own record).
  bool owns_rank() const noexcept { return owner_; }
  // The first launcher of this host (it samples the host-wide sources and
  // repairs the host file).
  bool owns_host() const noexcept { return host_lock_fd_ >= 0; }
  // A launcher's command ended so (any thread); recorded at the next flush.
  void set_exit(int exit_code, int term_signal);
  // Statistics of the regions this exporter received, for the (key, device)
  // pairs that no submitted summary covers (any thread): what end() adds so
  // that attached timers are summarized even if they are gone by then.
  Summary stream_summary() const;
  // Records dropped because the disk did not take them in time (any thread).
  std::uint64_t dropped_records() const;
  // What the last flush() returned (any thread): end() reports it.
  absl::Status last_flush_status() const;

 private:
  // Per producing thread, for the step and epoch columns.
  struct ThreadProgress {
    std::int64_t batches = 0;
    std::int64_t epochs = 0;
  };
  // One append-only CSV file and what is waiting to go into it.
  struct CsvFile {
    std::string path;
    int fd = -1;
    std::string pending;
  };

  explicit RunStoreExporter(Options options);
  absl::Status open_files();
  absl::Status write_rank_file();
  absl::Status lock_rank_or_host();
  const std::string& key_field(KeyId id);
  bool make_room(std::size_t records);
  absl::Status append_pending(CsvFile* file);

  Options options_;
  int lock_fd_ = -1;
  int host_lock_fd_ = -1;
  bool owner_ = false;
  std::string host_;
  CsvFile regions_;
  CsvFile metrics_;
  RankState rank_state_;
  LauncherState launcher_state_;          // guarded by mu_ (set_exit)
  std::vector<std::string> key_fields_;   // CSV-quoted key names by id
  std::vector<ThreadProgress> progress_;  // by thread index
  bool drop_warned_ = false;
  mutable std::mutex mu_;  // guards the members below (read from other threads)
  Summary summary_;        // submitted summaries merged by (key, device)
  timing::detail::SeriesTable cpu_;
  timing::detail::SeriesTable gpu_;
  bool saw_gpu_ = false;
  std::uint64_t dropped_ = 0;
  absl::Status last_flush_;
};

}  // namespace trainscope::run::detail

#endif  // TRAINSCOPE_SRC_RUN_RUN_STORE_EXPORTER_HPP_
