// What the MLflow side parses: server error bodies, keys, and the sync cursor
// (<run-dir>/mlflow-sync.json), which a crash or a user can leave in any
// state. Nothing may crash, hang or trip a sanitizer; errors are fine.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "export/mlflow/mlflow_client.hpp"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"

namespace {

namespace fs = std::filesystem;
using trainscope::testing::RankJson;
using trainscope::testing::RunJson;
using trainscope::testing::TempDir;

// A valid run directory (one finished rank), so that sync reaches the
// cursor; removed at exit.
const fs::path& run_dir() {
  static const TempDir dir("mlflow_fuzz");
  static const fs::path path = [] {
    RankJson rank;
    rank.status = "FINISHED";
    rank.end_time_ms = 2;
    rank.heartbeat_ms = 2;
    trainscope::testing::write_run_dir(dir.path(), RunJson{}, {rank});
    dir.subdir("artifacts");
    return dir.path();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const long http_status = input.ConsumeIntegralInRange<long>(100, 599);
  const std::string body = input.ConsumeRandomLengthString(4096);
  (void)trainscope::mlflow::error_from_response("runs/log-batch", http_status, body);
  (void)trainscope::mlflow::validate_key(body);

  const std::string cursor = input.ConsumeRemainingBytesAsString();
  trainscope::testing::write_file(run_dir() / "mlflow-sync.json", cursor);
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
