// `--prometheus [ADDR:]PORT` and `--prometheus-labels LIST` are typed by the
// user: any bytes. Parsing must not crash, hang or trip a sanitizer; what it
// accepts must be well-formed (a port 1-65535, a non-empty address; label
// names of [a-zA-Z0-9_], none twice), and the exposition of a run whose
// params hold the same bytes must keep every label value quoted on its line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/prometheus/endpoint.hpp"
#include "trainscope/prometheus/exposition.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainscope::prometheus;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  EndpointOptions options;
  if (parse_listen_address(text, &options).ok()) {
    if (options.port < 1 || options.port > 65535 || options.address.empty()) std::abort();
  }
  absl::StatusOr<std::vector<ParamLabel>> labels = parse_param_labels(text);
  if (labels.ok()) {
    std::set<std::string> seen;
    for (const ParamLabel& l : *labels) {
      if (l.label.empty() || !seen.insert(l.label).second) std::abort();
      for (char c : l.label) {
        const bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) std::abort();
      }
    }
  }
  // A label value of any bytes stays on its line.
  RunMetrics run;
  run.diagnosis.run_id = "r";
  run.diagnosis.run_name = std::string(text);
  const std::string out = exposition({run});
  const std::string escaped = escape_label_value(text);
  if (escaped.find('\n') != std::string::npos) std::abort();
  if (out.find("run_name=\"" + escaped + "\"") == std::string::npos) std::abort();
  return 0;
}
