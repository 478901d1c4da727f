// Captures asked for by a label: the pure step (new_capture_requests), the
// request file's writer and the launcher's watch that concludes the labels
// live. trainscope/diagnosis/capture_request.hpp.
#include "trainscope/diagnosis/capture_request.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "fmt/format.h"
#include "fmt/ranges.h"
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

std::function<WatchVerdict(const std::string& run_dir)> with_capture_requests(
    std::function<WatchVerdict(const std::string& run_dir)> inner, Thresholds thresholds) {
  struct State {
    std::optional<Follower> follower;
    std::vector<CaptureRequest> asked;
    bool failed = false;  // the request file could not be written: said once, then off
  };
  auto state = std::make_shared<State>();
  return [state, inner = std::move(inner), thresholds](const std::string& run_dir) -> WatchVerdict {
    WatchVerdict verdict = inner ? inner(run_dir) : WatchVerdict{};
    if (state->failed || verdict.action == WatchVerdict::Action::kStop) return verdict;
    if (!state->follower) {
      FollowOptions options = live_options();
      options.thresholds = thresholds;
      absl::StatusOr<Follower> opened = Follower::Open(run_dir, options);
      if (!opened.ok()) return verdict;  // no run yet: the next call
      state->follower = *std::move(opened);
    }
    if (!state->follower->poll().ok()) return verdict;  // a damaged file: said by the reader
    const std::vector<CaptureRequest> fresh =
        new_capture_requests(state->follower->diagnose(), state->asked);
    if (fresh.empty()) return verdict;
    std::vector<CaptureRequest> all = state->asked;
    all.insert(all.end(), fresh.begin(), fresh.end());
    std::string said;
    if (absl::Status written = write_capture_requests(run_dir, all); !written.ok()) {
      state->failed = true;
      said =
          fmt::format("trainscope run: no capture on labels: {}", std::string(written.message()));
    } else {
      state->asked = std::move(all);
      for (const CaptureRequest& r : fresh) {
        said += fmt::format(
            "{}trainscope run: {} appeared at step {}: asked rank{} {} for a "
            "capture of the next steps (captures/)",
            said.empty() ? "" : "\n", label_name(r.label), r.step, r.ranks.size() == 1 ? "" : "s",
            fmt::join(r.ranks, ", "));
      }
    }
    verdict.message = verdict.message.empty() ? said : verdict.message + "\n" + said;
    return verdict;
  };
}

std::function<WatchVerdict(const std::string& run_dir)> launcher_watch(OnHang on_hang,
                                                                       const Thresholds& thresholds,
                                                                       bool capture_on_labels) {
  std::function<WatchVerdict(const std::string& run_dir)> watch = hang_watch(on_hang, thresholds);
  if (!capture_on_labels) return watch;
  return with_capture_requests(std::move(watch), thresholds);
}

}  // namespace trainscope::diagnosis
