// Every RunReader method on a run directory whose files are built from
// arbitrary bytes: run.json, a rank file, a launcher file, the summary, both
// CSV files, environment.json and a log; then the steps of what it read.
// Nothing may crash, hang or trip a sanitizer; errors are fine.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string>

#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/steps/steps.hpp"

namespace {

namespace fs = std::filesystem;
using trainscope::testing::RankJson;
using trainscope::testing::RunJson;
using trainscope::testing::TempDir;

constexpr const char* kFiles[] = {"run.json",         "rank-0.json",   "launcher-h-1.json",
                                  "summary-0.json",   "regions-0.csv", "metrics-0.csv",
                                  "environment.json", "stdout.log"};

// Valid starts, one per file of kFiles: the fuzzer reaches past the first
// check sooner.
const std::array<std::string, std::size(kFiles)>& seeds() {
  static const std::array<std::string, std::size(kFiles)> seeds = {
      RunJson{}.text(),
      RankJson{}.text(),
      R"({"format":"trainscope.launcher","version":2,"host":"h","pid":1,"status":"RUNNING",)"
      R"("start_time_ms":0,"end_time_ms":0,"heartbeat_ms":0,"flush_interval_ms":1000})",
      R"({"format":"trainscope.stats","version":1,"has_gpu_section":false,"entries":[]})",
      // Every row shape: without and with a GPU region's device start and stream, and a
      // step with its run-queue wait.
      std::string(trainscope::testing::kRegionsHeader) + "BATCH,CPU,0,0,100,50,0,0\n" +
          "FORWARD,GPU,0,0,110,20,0,0,-5,1\n" + "BATCH,CPU,0,0,200,50,1,0,,,7\n",
      trainscope::testing::kMetricsHeader,
      R"({"hostname":"h"})",
      "line\n",
  };
  return seeds;
}

// A valid run directory of one rank to start from, with an artifacts
// directory; removed at exit.
const fs::path& run_dir() {
  static const TempDir dir("run_reader_fuzz");
  static const fs::path path = [] {
    trainscope::testing::write_run_dir(dir.path(), RunJson{}, {RankJson{}});
    dir.subdir("artifacts");
    return dir.path();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  FuzzedDataProvider data(bytes, size);
  for (std::size_t i = 0; i < std::size(kFiles); ++i) {
    std::string contents = data.ConsumeBool() ? seeds()[i] : std::string();
    contents += data.ConsumeRandomLengthString(512);
    trainscope::testing::write_file(run_dir() / kFiles[i], contents);
  }
  const std::uint64_t offset = data.ConsumeIntegralInRange<std::uint64_t>(0, 1024);

  absl::StatusOr<trainscope::RunReader> reader = trainscope::RunReader::Open(run_dir().string());
  if (!reader.ok()) return 0;
  (void)reader->crashed();
  (void)reader->artifacts();
  (void)reader->files();
  (void)reader->environment();
  if (absl::StatusOr<trainscope::EnvironmentRecord> env = reader->environment_record(); env.ok()) {
    // The artifacts a damaged document names: never outside the run directory.
    for (const std::string* path : {&env->pip_freeze, &env->conda_list, &env->nvidia_smi}) {
      (void)reader->read_run_relative_file(*path);
    }
    (void)env->hardware();
  }
  (void)reader->read_run_relative_file(data.ConsumeRandomLengthString(32));
  const std::size_t tail = data.ConsumeIntegralInRange<std::size_t>(0, 64);
  for (trainscope::RunLog log : {trainscope::RunLog::kStdout, trainscope::RunLog::kStderr}) {
    absl::StatusOr<std::string> text = reader->log_tail(log, tail);
    if (text.ok() && text->size() > tail) std::abort();  // never more than asked
  }
  for (std::uint32_t rank : {0u, 1u}) {
    (void)reader->read_summary(rank);
    for (std::uint64_t from : {std::uint64_t{0}, offset}) {
      absl::StatusOr<trainscope::Chunk<trainscope::RegionRow>> regions =
          reader->read_regions(rank, from);
      absl::StatusOr<trainscope::Chunk<trainscope::MetricPoint>> metrics =
          reader->read_metrics(rank, from);
      // A chunk never ends before it starts.
      for (std::uint64_t next : {regions.ok() ? regions->next_offset : from,
                                 metrics.ok() ? metrics->next_offset : from}) {
        if (next < from) std::abort();
      }
    }
  }
  // The steps of what was read: periods, phases and the device union of
  // arbitrary device starts and durations.
  (void)trainscope::steps::read_steps(*reader);
  return 0;
}
