// Run directories written by hand in the documented format
// (docs/run-format.md), for tests and fuzzers of the readers: run.json,
// rank-<r>.json and the record files' headers. Needs no GoogleTest.
//
//   RunJson run;                     // every field has a valid default
//   run.params = {{"a", "1"}};
//   RankJson rank;
//   rank.status = "FINISHED";
//   write_run_dir(dir, run, {rank});  // run.json, rank-0.json, regions-0.csv, metrics-0.csv
#ifndef TRAINSCOPE_TESTS_SUPPORT_RUN_FILES_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_RUN_FILES_HPP_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::testing {

inline constexpr char kRunId[] = "0123456789abcdef0123456789abcdef";
inline constexpr char kRegionsHeader[] =
    "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n";
inline constexpr char kMetricsHeader[] = "key,value,step,timestamp_ms,rank\n";

// run.json.
struct RunJson {
  std::string id = kRunId;
  std::string name = "n";
  std::string experiment = "e";
  std::int64_t start_time_ms = 1;
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> tags;

  std::string text() const {
    return nlohmann::json{{"format", "trainscope.run"},
                          {"version", 1},
                          {"id", id},
                          {"name", name},
                          {"experiment", experiment},
                          {"start_time_ms", start_time_ms},
                          {"params", params},
                          {"tags", tags}}
        .dump();
  }
};

// rank-<rank>.json. The defaults: a running rank on another host ("h") whose
// last heartbeat is long past, which a reader calls crashed.
struct RankJson {
  std::uint32_t rank = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t world_size = 1;
  std::string host = "h";
  std::int64_t pid = 1;
  std::string status = "RUNNING";
  std::int64_t start_time_ms = 1;
  std::int64_t end_time_ms = 0;
  std::int64_t heartbeat_ms = 1;
  std::int64_t flush_interval_ms = 1000;

  std::string file_name() const { return "rank-" + std::to_string(rank) + ".json"; }
  std::string text() const {
    return nlohmann::json{{"format", "trainscope.rank"},
                          {"version", 1},
                          {"rank", rank},
                          {"local_rank", local_rank},
                          {"world_size", world_size},
                          {"host", host},
                          {"pid", pid},
                          {"status", status},
                          {"start_time_ms", start_time_ms},
                          {"end_time_ms", end_time_ms},
                          {"heartbeat_ms", heartbeat_ms},
                          {"flush_interval_ms", flush_interval_ms}}
        .dump();
  }
};

// Creates `dir` with run.json and, for each rank, rank-<r>.json and
// regions-<r>.csv and metrics-<r>.csv holding just their headers (append rows
// with write_file(..., /*append=*/true)). Returns `dir`.
inline std::filesystem::path write_run_dir(const std::filesystem::path& dir,
                                           const RunJson& run = {},
                                           const std::vector<RankJson>& ranks = {}) {
  std::filesystem::create_directories(dir);
  write_file(dir / "run.json", run.text());
  for (const RankJson& rank : ranks) {
    const std::string r = std::to_string(rank.rank);
    write_file(dir / rank.file_name(), rank.text());
    write_file(dir / ("regions-" + r + ".csv"), kRegionsHeader);
    write_file(dir / ("metrics-" + r + ".csv"), kMetricsHeader);
  }
  return dir;
}

// Region rows (CSV lines for regions-<rank>.csv) as the timed loader records
// them, from *t_ns on (advanced past the end): per pass, one IO row per batch
// lasting wait_ns(pass, batch), an `iteration` row from each batch handed out
// to the next (step_ns of compute plus the next wait; the last pass's last
// waits for nothing) and one `loader_epoch` row.
template <class WaitNs>
std::string timed_loader_rows(int passes, int batches, std::int64_t step_ns, WaitNs wait_ns,
                              std::int64_t* t_ns, std::uint32_t rank = 0) {
  std::string rows;
  const auto row = [&](const char* key, std::int64_t start, std::int64_t ns) {
    rows += std::string(key) + ",CPU," + std::to_string(rank) + ",0," + std::to_string(start) +
            "," + std::to_string(ns) + ",0,0\n";
  };
  std::int64_t& t = *t_ns;
  for (int pass = 0; pass < passes; ++pass) {
    const std::int64_t pass_start = t;
    for (int b = 0; b < batches; ++b) {
      const std::int64_t wait = wait_ns(pass, b);
      row("IO", t, wait);
      t += wait;
      if (b > 0) row("iteration", t - wait - step_ns, step_ns + wait);
      t += step_ns;
    }
    row("iteration", t - step_ns, step_ns);
    row("loader_epoch", pass_start, t - pass_start);
  }
  return rows;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_RUN_FILES_HPP_
