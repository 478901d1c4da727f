// MLflow export costs, two figures (a plain program: percentiles of single
// start/end pairs are not what google/benchmark reports):
//
// 1. HTTP requests to upload 10,000 metric values, batched (runs/log-batch,
//    up to 1000 per request) vs one per metric (max_metrics_per_request = 1).
//    Requests are counted by the client (SyncStats::requests) against a tiny
//    HTTP sink on 127.0.0.1 in this process that answers every endpoint.
// 2. Timer start+end latency, p50 and p99 of single pairs, with an
//    MlflowExporter on the timer's pipeline pointed at a stopped server
//    (127.0.0.1, a closed port) vs a pipeline with no exporter. Target: at
//    most 1.1x. Blocks alternate between the two to share machine noise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/closed_port.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/export/mlflow/mlflow_exporter.hpp"
#include "trainscope/run/sync.hpp"
#include "trainscope/timing/timer.hpp"

namespace {

using ::trainscope::testing::closed_port;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kMetrics = 10000;
constexpr std::int64_t kStartMs = 1760000000000;

// Answers MLflow's endpoints with the smallest valid bodies, keep-alive.
class HttpSink {
 public:
  HttpSink() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(listen_fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpSink() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      while (answer_one(fd)) {
      }
      ::close(fd);
    }
  }

  static bool answer_one(int fd) {
    std::string data;
    char buffer[65536];
    std::size_t header_end;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    std::size_t length = 0;
    if (const std::size_t at = data.find("Content-Length: "); at != std::string::npos) {
      length = std::strtoul(data.c_str() + at + 16, nullptr, 10);
    }
    while (data.size() < header_end + 4 + length) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    std::string body = "{}";
    if (data.find("experiments/get-by-name") != std::string::npos) {
      body = R"({"experiment":{"experiment_id":"1"}})";
    } else if (data.find("runs/create") != std::string::npos) {
      body = R"({"run":{"info":{"run_id":"0123456789abcdef0123456789abcdef"}}})";
    }
    const std::string response =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    return ::send(fd, response.data(), response.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(response.size());
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A RUNNING run in the documented format (docs/run-format.md) with `metrics`
// rows of one key: no summary or status to send, only the rows. A fresh
// heartbeat, or readers would call the run crashed (and it would end).
void write_run_dir(const fs::path& dir, int metrics) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "run.json")
      << R"({"format":"trainscope.run","version":1,"id":"0123456789abcdef0123456789abcdef",)"
      << R"("name":"bench","experiment":"Default","start_time_ms":)" << kStartMs
      << R"(,"params":{},"tags":{}})";
  std::ofstream(dir / "rank-0.json")
      << R"({"format":"trainscope.rank","version":1,"rank":0,"local_rank":0,"world_size":1,)"
      << R"("host":"bench","pid":)" << ::getpid() << R"(,"status":"RUNNING","start_time_ms":)"
      << kStartMs << R"(,"end_time_ms":0,"heartbeat_ms":)" << trainscope::detail::unix_now_ms()
      << R"(,"flush_interval_ms":3600000})";
  std::ofstream(dir / "regions-0.csv")
      << "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n";
  std::ofstream rows(dir / "metrics-0.csv");
  rows << "key,value,step,timestamp_ms,rank\n";
  for (int i = 0; i < metrics; ++i) {
    rows << "loss," << 1.0 / (i + 1) << ',' << i << ',' << kStartMs + i << ",0\n";
  }
}

std::uint64_t requests_for(const fs::path& dir, int port, int per_request) {
  write_run_dir(dir, kMetrics);
  trainscope::MlflowConfig config;
  config.tracking_uri = "http://127.0.0.1:" + std::to_string(port);
  config.max_metrics_per_request = per_request;
  trainscope::SyncStats stats;
  const absl::Status status = trainscope::sync_run_dir(dir.string(), config, &stats);
  if (!status.ok() || stats.metrics_sent != kMetrics) {
    std::fprintf(stderr, "sync failed: %s\n", std::string(status.message()).c_str());
    std::exit(1);
  }
  return stats.requests;
}

struct Percentiles {
  double p50;
  double p99;
};

Percentiles percentiles(std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns[ns.size() * 99 / 100]};
}

// Single start+end pairs timed with steady_clock on two timers, each on its
// own pipeline draining every 10 ms: `base` without exporters, `with` with
// `exporter`. Blocks of 100 pairs alternate between them, a millisecond apart
// (a training loop's pace), so both see the same machine noise and a run
// lasts long enough for the exporter's backoff to expire and retry.
void pair_latency_ns(const std::shared_ptr<trainscope::Exporter>& exporter, int blocks,
                     std::vector<double>* base_ns, std::vector<double>* with_ns) {
  trainscope::ExportPipeline::Options options;
  options.flush_interval = absl::Milliseconds(10);
  trainscope::ExportPipeline base_pipeline(options);
  trainscope::ExportPipeline with_pipeline(options);
  with_pipeline.add_exporter(exporter);
  trainscope::Timer base;
  trainscope::Timer with;
  base.attach(base_pipeline);
  with.attach(with_pipeline);
  for (int block = 0; block < blocks; ++block) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    trainscope::Timer& timer = block % 2 == 0 ? base : with;
    std::vector<double>* out = block % 2 == 0 ? base_ns : with_ns;
    for (int i = 0; i < 100; ++i) {
      const Clock::time_point t0 = Clock::now();
      timer.start(trainscope::TimeType::BATCH);
      timer.end(trainscope::TimeType::BATCH);
      out->push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
  }
}

}  // namespace

int main() {
  const fs::path root =
      fs::temp_directory_path() / ("trainscope-mlflow-bench-" + std::to_string(::getpid()));
  {
    HttpSink sink;
    // Setup requests (experiments/get-by-name, runs/create, the trainscope.run_id
    // tag) are included in both counts.
    const std::uint64_t batched = requests_for(root / "batched", sink.port(), 1000);
    const std::uint64_t single = requests_for(root / "single", sink.port(), 1);
    std::printf(
        "MLflow requests for %d metric values (incl. 3 setup requests): batched %llu, "
        "one per metric %llu (%.0fx fewer)\n",
        kMetrics, static_cast<unsigned long long>(batched), static_cast<unsigned long long>(single),
        static_cast<double>(single) / static_cast<double>(batched));
  }

  const fs::path run_dir = root / "stopped-server";
  write_run_dir(run_dir, 0);
  trainscope::MlflowConfig config;
  config.tracking_uri = "http://127.0.0.1:" + std::to_string(closed_port());
  constexpr int kBlocks = 8000;  // 400,000 pairs per timer, ~9 s
  // The pipeline reports the exporter's failures through warn(): counted
  // below instead of printed.
  trainscope::set_warning_handler([](const std::string&) {});
  auto exporter =
      trainscope::make_mlflow_exporter(run_dir.string(), config, std::chrono::milliseconds(10));
  std::vector<double> base_ns;
  std::vector<double> with_ns;
  pair_latency_ns(exporter, kBlocks, &base_ns, &with_ns);
  const Percentiles base = percentiles(base_ns);
  const Percentiles with = percentiles(with_ns);
  const double r50 = with.p50 / base.p50;
  const double r99 = with.p99 / base.p99;
  std::printf("start+end pair, %zu pairs each, interleaved in blocks of 100:\n", base_ns.size());
  std::printf("  no exporter:                   p50 %.1f ns  p99 %.1f ns\n", base.p50, base.p99);
  std::printf(
      "  MlflowExporter, server down:   p50 %.1f ns  p99 %.1f ns  "
      "(%llu refused connections)\n",
      with.p50, with.p99, static_cast<unsigned long long>(exporter->stats().requests));
  std::printf("  ratio: p50 %.3fx  p99 %.3fx  (target <= 1.1x): %s\n", r50, r99,
              r50 <= 1.1 && r99 <= 1.1 ? "PASS" : "FAIL");
  std::fflush(stdout);
  fs::remove_all(root);
  return 0;
}
