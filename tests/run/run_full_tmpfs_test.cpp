// A run on a really full disk (a small tmpfs; support/small_tmpfs.hpp): region
// rows fill it, then stop (counted as dropped); every metric, the summary
// (every region's statistics) and the rank's status are still written; the
// heartbeat goes on, so a reader never takes the live run for a crashed one;
// and ending the run succeeds.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "run/run_format.hpp"
#include "run/run_store_exporter.hpp"
#include "support/run_dir_test.hpp"
#include "support/small_tmpfs.hpp"
#include "support/warnings.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kTmpfsBytes = std::size_t{4} << 20;
constexpr int kMetrics = 3000;
constexpr int kRegionsPerMetric = 100;  // 300,000 rows: ~16 MB of CSV for 4 MiB

std::int64_t heartbeat_of(const std::string& dir, std::string* failures) {
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  if (!reader.ok() || reader->ranks().empty()) {
    *failures += fmt::format("reading the live run: {}\n",
                             reader.ok() ? "no rank" : reader.status().ToString());
    return 0;
  }
  const RankState& rank = reader->ranks()[0];
  if (reader->info().status != RunStatus::kRunning || rank.crashed) {
    *failures +=
        fmt::format("the live run reads {}{} on a full disk\n",
                    run_status_name(reader->info().status), rank.crashed ? " (crashed)" : "");
  }
  return rank.heartbeat_ms;
}

bool disk_is_full(const std::string& dir) {
  struct statvfs fs {};
  return ::statvfs(dir.c_str(), &fs) == 0 && fs.f_bavail * fs.f_frsize < (64u << 10);
}

// In the child, on the tmpfs: the failures, one per line.
std::string fill_the_disk(const std::string& mount) {
  std::string failures;
  const trainscope::testing::CapturedWarnings warnings;
  RunOptions options;
  options.dir = mount + "/run";
  options.handle_signals = false;
  options.mlflow_from_environment = false;
  options.flush_interval = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) return "Run::Start: " + run.status().ToString() + "\n";
  Timer timer;
  (*run)->attach(timer);
  for (int i = 0; i < kMetrics; ++i) {
    for (int j = 0; j < kRegionsPerMetric; ++j) {
      timer.start(TimeType::BATCH);
      timer.end(TimeType::BATCH);
    }
    if (!(*run)->log_metric("loss", 1.0 + i, i).ok()) failures += "log_metric failed\n";
    if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Everything queued reached the store (and the disk is full by now).
  (*run)->pipeline().flush();
  if (!disk_is_full(options.dir)) failures += "the region rows did not fill the disk\n";
  // The heartbeat goes on while the disk is full.
  const std::int64_t before = heartbeat_of(options.dir, &failures);
  for (int wait = 0; wait < 200 && heartbeat_of(options.dir, &failures) <= before; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (heartbeat_of(options.dir, &failures) <= before) {
    failures += "the heartbeat stopped on the full disk\n";
  }
  const absl::Status ended = (*run)->end();
  if (!ended.ok()) failures += "end() on a full disk: " + ended.ToString() + "\n";
  if (!warnings.contains("region rows are not written while the disk is full")) {
    failures += "no warning that region rows stopped; got:\n" + warnings.joined() + "\n";
  }

  absl::StatusOr<RunReader> reader = RunReader::Open(options.dir);
  if (!reader.ok()) return failures + "RunReader::Open: " + reader.status().ToString() + "\n";
  if (reader->info().status != RunStatus::kFinished) {
    failures += fmt::format("status {}, not FINISHED\n", run_status_name(reader->info().status));
  }
  absl::StatusOr<Chunk<MetricPoint>> metrics = reader->read_metrics(0);
  if (!metrics.ok()) return failures + "read_metrics: " + metrics.status().ToString() + "\n";
  if (metrics->rows.size() != static_cast<std::size_t>(kMetrics)) {
    failures += fmt::format("{} of {} metric points kept\n", metrics->rows.size(), kMetrics);
  }
  absl::StatusOr<Chunk<RegionRow>> regions = reader->read_regions(0);
  if (!regions.ok()) return failures + "read_regions: " + regions.status().ToString() + "\n";
  const std::uint64_t total = static_cast<std::uint64_t>(kMetrics) * kRegionsPerMetric;
  const std::uint64_t dropped = reader->ranks()[0].dropped_region_rows;
  std::fprintf(stderr, "[figures] region rows kept %zu, dropped %llu of %llu; metrics kept %zu\n",
               regions->rows.size(), static_cast<unsigned long long>(dropped),
               static_cast<unsigned long long>(total), metrics->rows.size());
  if (dropped == 0) failures += "the rank file does not say that region rows were dropped\n";
  if (regions->rows.size() + dropped != total) {
    failures += fmt::format("{} rows kept + {} dropped != {} timed\n", regions->rows.size(),
                            dropped, total);
  }
  absl::StatusOr<Summary> summary = reader->read_summary(0);
  if (!summary.ok()) return failures + "summary: " + summary.status().ToString() + "\n";
  bool found = false;
  for (const SummaryEntry& entry : summary->entries) {
    if (entry.key != "BATCH" || entry.device != Device::kCPU) continue;
    found = true;
    if (entry.stats.count != total) {
      failures +=
          fmt::format("the summary counts {} BATCH regions, not {}\n", entry.stats.count, total);
    }
  }
  if (!found) failures += "summary-0.json has no BATCH entry\n";
  // Nothing of the store's own is left behind (the reserve, the spare record).
  for (const auto& entry : fs::directory_iterator(options.dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) failures += "left behind: " + name + "\n";
  }
  return failures;
}

// In the child: a filler takes most of the disk, region rows stop; the filler
// goes, and rows are written again, with the steps counted meanwhile.
std::string fill_then_free(const std::string& mount) {
  std::string failures;
  const trainscope::testing::CapturedWarnings warnings;
  const std::string filler = mount + "/filler";
  {
    const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    const std::string block(std::size_t{64} << 10, 'x');
    for (int i = 0; i < 40 && fd >= 0; ++i) (void)!::write(fd, block.data(), block.size());
    if (fd >= 0) ::close(fd);
  }
  RunOptions options;
  options.dir = mount + "/run";
  options.handle_signals = false;
  options.mlflow_from_environment = false;
  options.flush_interval = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) return "Run::Start: " + run.status().ToString() + "\n";
  Timer timer;
  (*run)->attach(timer);
  const auto time_batches = [&timer](int n) {
    for (int i = 0; i < n; ++i) {
      timer.start(TimeType::BATCH);
      timer.end(TimeType::BATCH);
    }
  };
  constexpr int kFirst = 40000;  // ~2 MB of rows for what is left of 4 MiB
  constexpr int kAfter = 1000;
  time_batches(kFirst);
  (*run)->pipeline().flush();
  if (!warnings.contains("region rows are not written while the disk is full")) {
    failures += "the filler did not fill the disk: " + warnings.joined() + "\n";
  }
  ::unlink(filler.c_str());
  for (int wait = 0; wait < 200 && !warnings.contains("region rows are written again"); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!warnings.contains("region rows are written again")) {
    failures += "region rows did not resume once space was back: " + warnings.joined() + "\n";
  }
  time_batches(kAfter);
  const absl::Status ended = (*run)->end();
  if (!ended.ok()) failures += "end(): " + ended.ToString() + "\n";
  absl::StatusOr<RunReader> reader = RunReader::Open(options.dir);
  if (!reader.ok()) return failures + "RunReader::Open: " + reader.status().ToString() + "\n";
  absl::StatusOr<Chunk<RegionRow>> regions = reader->read_regions(0);
  if (!regions.ok()) return failures + "read_regions: " + regions.status().ToString() + "\n";
  const std::uint64_t dropped = reader->ranks()[0].dropped_region_rows;
  std::fprintf(stderr, "[figures] filler freed: rows kept %zu, dropped %llu of %d\n",
               regions->rows.size(), static_cast<unsigned long long>(dropped), kFirst + kAfter);
  if (dropped == 0 || regions->rows.size() + dropped != kFirst + kAfter) {
    failures += fmt::format("{} rows kept + {} dropped != {}\n", regions->rows.size(), dropped,
                            kFirst + kAfter);
  }
  if (regions->rows.size() < kAfter || regions->rows.back().step != kFirst + kAfter - 1) {
    failures += "the rows after the disk had space again are missing or miscounted\n";
  }
  return failures;
}

// Writes a filler file until the disk is full.
void fill(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const std::string block(4096, 'x');
  while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
  }
  if (fd >= 0) ::close(fd);
}

// In the child: a store without a reserve. The summary that finds the disk
// full is written at the first flush after space is back; at the end, one
// that never made it is printed in a warning instead of lost.
std::string summary_waits_for_space(const std::string& mount) {
  std::string failures;
  const trainscope::testing::CapturedWarnings warnings;
  const std::string dir = mount + "/run";
  ::mkdir(dir.c_str(), 0755);
  RunInfo info;
  info.id = std::string(32, 'a');
  if (!trainscope::detail::write_file_atomically(dir + "/run.json",
                                                 run::detail::format_run_file(info))
           .ok()) {
    return "cannot write run.json\n";
  }
  run::detail::RunStoreExporter::Options options;
  options.dir = dir;
  options.reserve_bytes = 0;
  absl::StatusOr<std::shared_ptr<run::detail::RunStoreExporter>> store =
      run::detail::RunStoreExporter::Create(options);
  if (!store.ok()) return "Create: " + store.status().ToString() + "\n";
  Timer timer;
  for (int i = 0; i < 10; ++i) {
    timer.start(TimeType::BATCH);
    timer.end(TimeType::BATCH);
  }
  const std::string filler = mount + "/filler";
  const std::string summary_path = dir + "/summary-0.json";
  fill(filler);
  if ((*store)->write_summary(timer.summary()).ok()) failures += "the disk was not full\n";
  if (fs::exists(summary_path)) failures += "a summary was written on a full disk\n";
  ::unlink(filler.c_str());
  if (!(*store)->flush().ok()) failures += "flush() with space back failed\n";
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(summary_path);
  if (!text.ok() || text->find("\"BATCH\"") == std::string::npos) {
    failures += "the kept summary was not written once space was back\n";
  }

  timer.start(TimeType::EPOCH);
  timer.end(TimeType::EPOCH);
  fill(filler);
  (void)(*store)->write_summary(timer.summary());
  info.status = RunStatus::kFinished;
  info.end_time_ms = 1;
  (void)(*store)->write_run_info(info);
  if (!warnings.contains("summary follows") || !warnings.contains("\"EPOCH\"")) {
    failures += "the unwritten summary was not printed: " + warnings.joined() + "\n";
  }
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  if (!reader.ok() || reader->ranks().empty() ||
      reader->ranks()[0].status != RunStatus::kFinished) {
    failures += "the rank's final status is not FINISHED on the full disk\n";
  }
  return failures;
}

class RunFullTmpfsTest : public trainscope::testing::RunDirTest {
 protected:
  // Runs `body` in a child on a small tmpfs under the test's directory; skips
  // with the reason when no tmpfs can be mounted.
  template <typename Body>
  void on_small_tmpfs(Body body) {
    const fs::path mount = root_ / "tmpfs";
    fs::create_directories(mount);
    const trainscope::testing::TmpfsOutcome outcome =
        trainscope::testing::run_on_small_tmpfs(mount.string(), kTmpfsBytes, body);
    if (!outcome.mounted) GTEST_SKIP() << "no small tmpfs to fill: " << outcome.skip_reason;
    EXPECT_EQ(outcome.failures, "");
  }
};

TEST_F(RunFullTmpfsTest, SummaryIsWrittenWhenSpaceIsBackOrPrinted) {
  on_small_tmpfs(summary_waits_for_space);
}

TEST_F(RunFullTmpfsTest, RegionRowsResumeWhenSpaceIsBack) { on_small_tmpfs(fill_then_free); }

TEST_F(RunFullTmpfsTest, MetricsSummaryAndHeartbeatOutliveRegionRows) {
  on_small_tmpfs(fill_the_disk);
}

}  // namespace
}  // namespace trainscope
