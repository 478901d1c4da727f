// What the MLflow side parses: server error bodies, keys, and the sync cursor
// (<run-dir>/mlflow-sync.json), which a crash or a user can leave in any
// state. Nothing may crash, hang or trip a sanitizer; errors are fine.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "export/mlflow/mlflow_client.hpp"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"

namespace {

namespace fs = std::filesystem;

// A valid run directory, so that sync reaches the cursor.
const fs::path& run_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mlflow_fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d / "artifacts");
    std::ofstream(d / "run.json")
        << R"({"format":"trainscope.run","version":1,"id":"0123456789abcdef0123456789abcdef",)"
           R"("name":"n","experiment":"e","start_time_ms":1,"params":{},"tags":{}})";
    std::ofstream(d / "rank-0.json")
        << R"({"format":"trainscope.rank","version":1,"rank":0,"local_rank":0,"world_size":1,)"
           R"("host":"h","pid":1,"status":"FINISHED","start_time_ms":1,"end_time_ms":2,)"
           R"("heartbeat_ms":2,"flush_interval_ms":1000})";
    std::ofstream(d / "regions-0.csv") << "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n";
    std::ofstream(d / "metrics-0.csv") << "key,value,step,timestamp_ms,rank\n";
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const long http_status = input.ConsumeIntegralInRange<long>(100, 599);
  const std::string body = input.ConsumeRandomLengthString(4096);
  (void)trainscope::mlflow::error_from_response("runs/log-batch", http_status, body);
  (void)trainscope::mlflow::validate_key(body);

  const std::string cursor = input.ConsumeRemainingBytesAsString();
  std::ofstream(run_dir() / "mlflow-sync.json", std::ios::binary | std::ios::trunc) << cursor;
  trainscope::MlflowConfig config;
  // Port 9 (discard) on loopback: nothing listens, so a cursor that parses
  // and names this server fails fast with "connection refused".
  config.tracking_uri = "http://127.0.0.1:9";
  config.max_retries = 0;
  config.connect_timeout = std::chrono::milliseconds(50);
  config.request_timeout = std::chrono::milliseconds(100);
  (void)trainscope::sync_run_dir(run_dir().string(), config);
  return 0;
}
