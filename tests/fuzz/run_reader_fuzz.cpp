// Every RunReader method on a run directory whose files are built from
// arbitrary bytes: run.json, a rank file, the summary and both CSV files.
// Nothing may crash, hang or trip a sanitizer; errors are fine.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "trainscope/run/run_reader.hpp"

namespace {

namespace fs = std::filesystem;

// Valid starts make the fuzzer reach past the first check sooner.
constexpr const char* kSeeds[] = {
    R"({"format":"trainscope.run","version":1,"id":"x","name":"n","experiment":"e",)"
    R"("start_time_ms":1,"params":{},"tags":{}})",
    R"({"format":"trainscope.rank","version":1,"rank":0,"local_rank":0,"world_size":1,)"
    R"("host":"h","pid":1,"status":"RUNNING","start_time_ms":1,"end_time_ms":0,)"
    R"("heartbeat_ms":1,"flush_interval_ms":1000})",
    R"({"format":"trainscope.stats","version":1,"has_gpu_section":false,"entries":[]})",
    "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n",
    "key,value,step,timestamp_ms,rank\n",
};
constexpr const char* kFiles[] = {"run.json", "rank-0.json", "summary-0.json", "regions-0.csv",
                                  "metrics-0.csv"};

const fs::path& run_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("run_reader_fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d / "artifacts");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  FuzzedDataProvider data(bytes, size);
  for (std::size_t i = 0; i < std::size(kFiles); ++i) {
    std::string contents = data.ConsumeBool() ? kSeeds[i] : std::string();
    contents += data.ConsumeRandomLengthString(512);
    std::ofstream(run_dir() / kFiles[i], std::ios::binary | std::ios::trunc) << contents;
  }
  const std::uint64_t offset = data.ConsumeIntegralInRange<std::uint64_t>(0, 1024);

  absl::StatusOr<trainscope::RunReader> reader = trainscope::RunReader::Open(run_dir().string());
  if (!reader.ok()) return 0;
  (void)reader->crashed();
  (void)reader->artifacts();
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
  return 0;
}
