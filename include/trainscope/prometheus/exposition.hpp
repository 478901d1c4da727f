// The Prometheus exposition of live runs: the diagnosis follower's state
// (per rank the window's step time, steps/s, phase shares, process CPU and
// memory; per host its GPUs; per run its status, diagnosis and stragglers) as
// the Prometheus text format 0.0.4, every family with # HELP and # TYPE, in
// base units (seconds, bytes, ratios), counters ending in _total. The pure
// step of the endpoint (trainscope/prometheus/endpoint.hpp): unit-tested on
// hand-made diagnoses; docs/prometheus.md lists every metric.
#ifndef TRAINSCOPE_PROMETHEUS_EXPOSITION_HPP_
#define TRAINSCOPE_PROMETHEUS_EXPOSITION_HPP_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::prometheus {

// The Content-Type of the exposition.
inline constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// A run param that becomes a label (`--prometheus-labels lr,batch_size`):
// the param's name and its label's name (the param's with every character
// outside [a-zA-Z0-9_] made '_').
struct ParamLabel {
  std::string param;
  std::string label;
};
// "lr,batch_size" -> params and their labels. InvalidArgument naming the
// entry: empty, a label name starting with a digit or "__", one of the
// exposition's own labels (run, run_name, rank, host, phase, gpu, status,
// label, kind, scope), or named twice.
absl::StatusOr<std::vector<ParamLabel>> parse_param_labels(std::string_view list);

// What one run adds to the exposition.
struct RunMetrics {
  diagnosis::Diagnosis diagnosis;
  // The values of the named params, in ParamLabel order (label name, value;
  // a param the run does not have: an empty value, which Prometheus reads as
  // no label).
  std::vector<std::pair<std::string, std::string>> params;
  // Only the ranks (and GPUs) of this host; empty: every host's.
  std::string only_host;
};

// The exposition of the runs, in the order given (pure).
std::string exposition(const std::vector<RunMetrics>& runs);

// A label value with \, " and newline escaped, as the text format wants it.
std::string escape_label_value(std::string_view value);

}  // namespace trainscope::prometheus

#endif  // TRAINSCOPE_PROMETHEUS_EXPOSITION_HPP_
