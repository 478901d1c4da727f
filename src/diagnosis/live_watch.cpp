// `trainscope run`'s live watch (trainscope/diagnosis/live_watch.hpp).
#include "trainscope/diagnosis/live_watch.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/diagnosis/capture_request.hpp"

namespace trainscope::diagnosis {

std::vector<RunMetric> ledger_run_metrics(const steps::Ledger& ledger) {
  std::vector<RunMetric> out;
  if (ledger.ranks.empty()) return out;
  std::uint64_t step = 0;
  for (const steps::RankLedger& rank : ledger.ranks) step = std::max(step, rank.steps);
  for (const auto& [name, value] : steps::ledger_metrics(ledger)) {
    out.push_back({std::string(name), value, static_cast<std::int64_t>(step)});
  }
  return out;
}

namespace {

// The capture requests a diagnosis asks for that were not asked yet: written,
// and said ("" when none; the error, once, when the file cannot be written).
struct CaptureState {
  std::vector<CaptureRequest> asked;
  bool failed = false;  // the request file could not be written: said once, then off
};

std::string ask_captures(const Diagnosis& d, const std::string& run_dir, CaptureState* state) {
  const std::vector<CaptureRequest> fresh = new_capture_requests(d, state->asked);
  if (fresh.empty()) return "";
  std::vector<CaptureRequest> all = state->asked;
  all.insert(all.end(), fresh.begin(), fresh.end());
  if (absl::Status written = write_capture_requests(run_dir, all); !written.ok()) {
    state->failed = true;
    return fmt::format("trainscope run: no capture on labels: {}", std::string(written.message()));
  }
  state->asked = std::move(all);
  std::string said;
  for (const CaptureRequest& r : fresh) {
    said += fmt::format(
        "{}trainscope run: {} appeared at step {}: asked rank{} {} for a "
        "capture of the next steps (captures/)",
        said.empty() ? "" : "\n", label_name(r.label), r.step, r.ranks.size() == 1 ? "" : "s",
        fmt::join(r.ranks, ", "));
  }
  return said;
}

}  // namespace

std::function<WatchVerdict(const std::string& run_dir)> with_live_follower(
    std::function<WatchVerdict(const std::string& run_dir)> inner, LiveWatchOptions options) {
  if (!options.capture_on_labels && !options.ledger_metrics) {
    if (inner) return inner;
    return [](const std::string&) { return WatchVerdict{}; };
  }
  struct State {
    std::optional<Follower> follower;
    CaptureState captures;
    std::int64_t ledger_step = -1;  // the step of the ledger logged last
  };
  auto state = std::make_shared<State>();
  return [state, inner = std::move(inner), options](const std::string& run_dir) -> WatchVerdict {
    WatchVerdict verdict = inner ? inner(run_dir) : WatchVerdict{};
    if (verdict.action == WatchVerdict::Action::kStop) return verdict;
    const bool captures = options.capture_on_labels && !state->captures.failed;
    if (!captures && !options.ledger_metrics) return verdict;
    if (!state->follower) {
      FollowOptions follow = live_options();
      follow.thresholds = options.thresholds;
      follow.ledger = options.ledger;
      absl::StatusOr<Follower> opened = Follower::Open(run_dir, follow);
      if (!opened.ok()) return verdict;  // no run yet: the next call
      state->follower = *std::move(opened);
    }
    if (!state->follower->poll().ok()) return verdict;  // a damaged file: said by the reader
    const Diagnosis d = state->follower->diagnose();
    if (captures) {
      const std::string said = ask_captures(d, run_dir, &state->captures);
      if (!said.empty())
        verdict.message = verdict.message.empty() ? said : verdict.message + "\n" + said;
    }
    // The live follower concludes the ledger at most every run_refresh_s
    // (live_options: 10 s); a ledger over more steps than the last is logged.
    if (options.ledger_metrics && d.ledger) {
      std::vector<RunMetric> metrics = ledger_run_metrics(*d.ledger);
      if (!metrics.empty() && metrics.front().step > state->ledger_step) {
        state->ledger_step = metrics.front().step;
        verdict.metrics = std::move(metrics);
      }
    }
    return verdict;
  };
}

std::function<WatchVerdict(const std::string& run_dir)> launcher_watch(OnHang on_hang,
                                                                       LiveWatchOptions options) {
  std::function<WatchVerdict(const std::string& run_dir)> watch =
      hang_watch(on_hang, options.thresholds);
  return with_live_follower(std::move(watch), std::move(options));
}

}  // namespace trainscope::diagnosis
