// Finished runs written by hand with their summaries, and the damage readers
// must notice (run_check.hpp): a regions file cut short, lost or emptied, a
// corrupt summary, a lost run.json.
//
//   write_finished_run(dir, 900);   // rank 0 FINISHED, 900 BATCH rows, a summary of 900
//   cut_regions(dir, 453);          // the file now holds 453 of them
#ifndef TRAINSCOPE_TESTS_SUPPORT_DAMAGED_RUN_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_DAMAGED_RUN_HPP_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/summary.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope::testing {

struct FinishedRun {
  std::uint64_t rows = 900;  // BATCH rows on CPU, one per step
  std::uint64_t warmup = 0;  // of them, left out of the summary's statistics
  double batch_s = 0.01;     // each row's duration
  std::uint32_t ranks = 1;   // each rank the same
  std::map<std::string, std::string> params;
  std::string id = kRunId;
};

// A FINISHED run in `dir`: run.json, and per rank its file, `rows` BATCH rows
// and a summary that counts them (count = rows - warmup, warmup_excluded).
inline std::filesystem::path write_finished_run(const std::filesystem::path& dir,
                                                const FinishedRun& spec = {}) {
  RunJson run;
  run.id = spec.id;
  run.params = spec.params;
  std::vector<RankJson> ranks;
  for (std::uint32_t r = 0; r < spec.ranks; ++r) {
    RankJson rank;
    rank.rank = r;
    rank.world_size = spec.ranks;
    rank.status = "FINISHED";
    rank.end_time_ms = 2;
    rank.heartbeat_ms = 2;
    ranks.push_back(rank);
  }
  write_run_dir(dir, run, ranks);
  const auto ns = static_cast<std::int64_t>(spec.batch_s * 1e9);
  for (std::uint32_t r = 0; r < spec.ranks; ++r) {
    std::string rows;
    std::vector<double> seconds;
    for (std::uint64_t i = 0; i < spec.rows; ++i) {
      rows += "BATCH,CPU," + std::to_string(r) + ",0," +
              std::to_string(1'000'000'000 + static_cast<std::int64_t>(i) * ns) + "," +
              std::to_string(ns) + "," + std::to_string(i) + ",0\n";
      if (i >= spec.warmup) seconds.push_back(spec.batch_s);
    }
    write_file(dir / ("regions-" + std::to_string(r) + ".csv"), rows, /*append=*/true);
    Summary summary;
    SummaryEntry entry{"BATCH", Device::kCPU, compute_time_stats(seconds)};
    entry.stats.warmup_excluded = spec.rows < spec.warmup ? spec.rows : spec.warmup;
    summary.entries.push_back(entry);
    write_file(dir / ("summary-" + std::to_string(r) + ".json"),
               format_summary(summary, StatsFormat::kJson));
  }
  return dir;
}

// Keeps the header and the first `keep` rows of rank's regions file.
inline void cut_regions(const std::filesystem::path& dir, std::uint64_t keep,
                        std::uint32_t rank = 0) {
  const std::filesystem::path path = dir / ("regions-" + std::to_string(rank) + ".csv");
  const std::string text = read_file(path);
  std::uint64_t newlines = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && ++newlines == keep + 1) {
      write_file(path, text.substr(0, i + 1));
      return;
    }
  }
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_DAMAGED_RUN_HPP_
