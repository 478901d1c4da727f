// The Prometheus endpoint: an HTTP server (cpp-httplib) that answers
// `GET /metrics` with the exposition (trainscope/prometheus/exposition.hpp)
// of the runs it follows, read from their run directories through the
// diagnosis follower at each scrape (nothing on the training's step path).
// `trainscope run --prometheus [ADDR:]PORT` follows the run it launches (its
// host's ranks); `trainscope serve --prometheus PORT [ROOT]` every live run
// under a root. Anything but GET (or HEAD) /metrics is 404. docs/prometheus.md.
#ifndef TRAINSCOPE_PROMETHEUS_ENDPOINT_HPP_
#define TRAINSCOPE_PROMETHEUS_ENDPOINT_HPP_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/launch/launch.hpp"
#include "trainscope/prometheus/exposition.hpp"

namespace trainscope::prometheus {

// The port of the examples (OpenTelemetry's Prometheus exporter's default;
// Prometheus' list of exporter ports has no entry for trainscope).
inline constexpr int kExamplePort = 9464;

struct EndpointOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0: any free port (Endpoint::port() says which)
  std::vector<ParamLabel> labels;
  // Only this host's ranks and GPUs (`trainscope run`: the ranks it started);
  // false: every host's.
  bool this_host_only = false;
  // Connections served at once (worker threads), and accepted ones waiting for
  // a worker; past both the server stops accepting (the kernel's backlog, then
  // refusal): many clients never grow its memory nor reach the run.
  std::size_t workers = 4;
  std::size_t max_waiting = 16;
  // A client that sends or reads nothing for this long is dropped; an idle
  // kept-alive connection is closed after keep_alive_s.
  double timeout_s = 5;
  double keep_alive_s = 2;
  // `serve`: a run that ended stays in the output this long, then leaves.
  double grace_s = 300;
};

// "[ADDR:]PORT" (ADDR a host name or IPv4 address, or [IPv6]) into
// options->address and ->port; the address stays when the text has none.
// InvalidArgument naming the text.
absl::Status parse_listen_address(std::string_view text, EndpointOptions* options);
// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(std::string_view address);

class Endpoint {
 public:
  // Binds ADDR:PORT (an error naming it: in use, no such address, or
  // FailedPrecondition when trainscope was built without cpp-httplib) and
  // serves on threads of its own until destroyed.
  static absl::StatusOr<std::unique_ptr<Endpoint>> Start(EndpointOptions options);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Follows this run from the next scrape on (`trainscope run`). An error
  // opening it is said in the exposition's scrape (and tried again).
  void follow(const std::string& run_dir);
  // Follows every live run under `root` (find_run_dirs' sense), looked for
  // again at each scrape (`trainscope serve`); runs that ended stay
  // grace_s, then leave.
  void follow_root(const std::string& root);
  // What GET /metrics answers: polls the followers, the exposition.
  std::string scrape();
  // Stops serving (waits for the workers; the destructor calls it).
  void stop();

  int port() const;
  const std::string& address() const;

 private:
  struct Impl;
  explicit Endpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "http://ADDR:PORT/metrics" ([ADDR] for IPv6).
std::string metrics_url(const Endpoint& endpoint);

// `trainscope run --prometheus`: starts the endpoint before the command (a port
// in use is the error, and nothing is launched) and makes `launch` follow the
// run it starts (LaunchOptions::run_started). `start_line` gets the line to
// show: where the metrics are, and whether other machines can read them.
absl::StatusOr<std::shared_ptr<Endpoint>> serve_launch(EndpointOptions options,
                                                       LaunchOptions* launch,
                                                       std::string* start_line);

// `trainscope serve --prometheus [ADDR:]PORT [ROOT]`: Start + follow_root,
// then serves until SIGINT or SIGTERM (blocked in the calling thread while it
// serves). An empty root: TRAINSCOPE_RUNS_ROOT, else ./trainscope-runs (where
// `trainscope run` puts runs). `on_ready` is called once the port is bound
// (the CLI's line).
absl::Status serve_root(EndpointOptions options, const std::string& root,
                        const std::function<void(const Endpoint&)>& on_ready);

}  // namespace trainscope::prometheus

#endif  // TRAINSCOPE_PROMETHEUS_ENDPOINT_HPP_
