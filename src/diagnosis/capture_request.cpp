// Captures asked for by a label: the pure step (new_capture_requests) and the
// request file's writer (the launcher's live watch, live_watch.cpp, asks).
// trainscope/diagnosis/capture_request.hpp.
#include "trainscope/diagnosis/capture_request.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "nlohmann/json.hpp"

namespace trainscope::diagnosis {

bool asks_capture(LabelName name) noexcept {
  return name == LabelName::kStraggler || name == LabelName::kMemoryCreep ||
         name == LabelName::kThroughputDrift;
}

std::vector<CaptureRequest> new_capture_requests(const Diagnosis& diagnosis,
                                                 const std::vector<CaptureRequest>& asked) {
  std::vector<CaptureRequest> out;
  std::vector<std::uint32_t> running;
  std::uint64_t step = 0;
  for (const RankNow& r : diagnosis.ranks) {
    if (r.status.running()) running.push_back(r.rank);
    step = std::max(step, r.steps);
  }
  if (running.empty()) return out;
  std::sort(running.begin(), running.end());
  const auto known = [&](LabelName name) {
    const auto same = [name](const CaptureRequest& c) { return c.label == name; };
    return std::any_of(asked.begin(), asked.end(), same) ||
           std::any_of(out.begin(), out.end(), same);
  };
  for (const Scope* scope : {&diagnosis.window, &diagnosis.run}) {
    for (const Label& label : scope->labels) {
      if (!asks_capture(label.name) || known(label.name)) continue;
      CaptureRequest request;
      request.label = label.name;
      request.step = step;
      request.time_ms = diagnosis.start_time_ms + diagnosis.elapsed_ms;
      if (label.name == LabelName::kMemoryCreep && label.rank) {
        if (!std::binary_search(running.begin(), running.end(), *label.rank)) continue;
        request.ranks = {*label.rank};
      } else {
        request.ranks = running;
      }
      out.push_back(std::move(request));
    }
  }
  return out;
}

std::string capture_requests_json(const std::vector<CaptureRequest>& requests) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const CaptureRequest& r : requests) {
    list.push_back({{"label", std::string(label_name(r.label))},
                    {"step", r.step},
                    {"ranks", r.ranks},
                    {"time_ms", r.time_ms}});
  }
  nlohmann::ordered_json doc = {
      {"format", "trainscope.capture_request"}, {"version", 1}, {"requests", std::move(list)}};
  return doc.dump(1) + "\n";
}

absl::Status write_capture_requests(const std::string& run_dir,
                                    const std::vector<CaptureRequest>& requests) {
  const std::string path = (std::filesystem::path(run_dir) / kCaptureRequestFile).string();
  return trainscope::detail::write_file_atomically(path, capture_requests_json(requests));
}

}  // namespace trainscope::diagnosis
