// `trainscope serve --prometheus [ADDR:]PORT [ROOT]`: one Prometheus endpoint
// for every live run under a root (trainscope::prometheus::serve_root), a
// node's service.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "trainscope/prometheus/endpoint.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace serve_cmd {

constexpr char kDescription[] =
    "Serves the live metrics of every run under ROOT (default TRAINSCOPE_RUNS_ROOT,\n"
    "else ./trainscope-runs) for Prometheus at http://ADDR:PORT/metrics: per rank\n"
    "its step time (window p50/p95), steps/s, phase shares, process CPU and memory,\n"
    "per GPU its utilisation and memory, per run its status, diagnosis and\n"
    "straggler (docs/prometheus.md). Runs are read from their directories (a\n"
    "shared filesystem: one exporter for all nodes); a run that ends leaves the\n"
    "output after --grace seconds. Runs until SIGINT or SIGTERM.\n"
    "\n"
    "examples:\n"
    "  trainscope serve --prometheus 9464\n"
    "  trainscope serve --prometheus 0.0.0.0:9464 /shared/trainscope-runs --prometheus-labels lr\n";

constexpr char kFooter[] =
    "Anything but GET /metrics is 404. Exit status: 0 stopped by a signal, 1 the\n"
    "port could not be bound (in use: said), 2 bad usage.\n";

}  // namespace serve_cmd

int serve_command(const std::vector<std::string>& args) {
  using namespace serve_cmd;  // NOLINT(build/namespaces): this file's own names
  std::optional<prometheus::EndpointOptions> options;
  std::optional<std::string> labels;
  std::vector<std::string> roots;
  double grace_s = prometheus::EndpointOptions{}.grace_s;
  CommandLine line({"serve", "trainscope serve --prometheus [ADDR:]PORT [ROOT] [options]",
                    kDescription, kFooter});
  line.add_value("--prometheus", "[ADDR:]PORT", "where to serve /metrics (ADDR default 127.0.0.1)",
                 [&options](const std::string& value) {
                   prometheus::EndpointOptions o;
                   const absl::Status status = prometheus::parse_listen_address(value, &o);
                   if (!status.ok()) bad_value("--prometheus " + std::string(status.message()));
                   options = std::move(o);
                 });
  line.add_value("--prometheus-labels", "PARAMS",
                 "the runs' params that become labels (e.g. lr,batch_size)", &labels);
  line.add_value("--grace", "SECONDS", "how long an ended run stays in the output (default 300)",
                 [&grace_s](const std::string& value) { grace_s = seconds("--grace", value); });
  line.add_positionals("ROOT", &roots, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(args)) return *done;
  if (!options) return line.usage_error("--prometheus [ADDR:]PORT is required");
  if (roots.size() > 1) return line.usage_error("give at most one ROOT");
  if (labels) {
    absl::StatusOr<std::vector<prometheus::ParamLabel>> parsed =
        prometheus::parse_param_labels(*labels);
    if (!parsed.ok()) return line.usage_error(std::string(parsed.status().message()));
    options->labels = *std::move(parsed);
  }
  options->grace_s = grace_s;
  const absl::Status status = prometheus::serve_root(
      *options, roots.empty() ? std::string() : roots.front(),
      [](const prometheus::Endpoint& endpoint) {
        std::fprintf(stderr, "trainscope serve: Prometheus metrics at %s%s\n",
                     prometheus::metrics_url(endpoint).c_str(),
                     prometheus::is_loopback(endpoint.address())
                         ? ""
                         : " (not a loopback address: other machines can read them)");
      });
  if (!status.ok()) {
    std::fprintf(stderr, "trainscope serve: %s\n", std::string(status.message()).c_str());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace trainscope::cli
