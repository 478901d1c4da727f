// `trainscope run`'s watch of the running job (LaunchOptions::watch): the
// hang watch (trainscope/diagnosis/hang.hpp), then one live Follower of the
// run that, at each call, asks for captures when a label first appears
// (trainscope/diagnosis/capture_request.hpp) and hands the ledger's job
// figures to the launcher as run metrics (ledger/tokens_per_s, ...:
// docs/ledger.md), so MLflow and W&B show them while the job runs.
#ifndef TRAINSCOPE_DIAGNOSIS_LIVE_WATCH_HPP_
#define TRAINSCOPE_DIAGNOSIS_LIVE_WATCH_HPP_

#include <functional>
#include <string>
#include <vector>

#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/steps/ledger.hpp"

namespace trainscope::diagnosis {

// The ledger's job figures as run metrics (steps::ledger_metrics' names and
// values), at the step the ledger reached: the most steps with work of any
// rank. Nothing for a ledger without work.
std::vector<RunMetric> ledger_run_metrics(const steps::Ledger& ledger);

// What the live follower of `trainscope run` does.
struct LiveWatchOptions {
  // Capture requests on labels (not --capture-steps 0 nor --capture-max 0).
  bool capture_on_labels = true;
  // The ledger as run metrics: each time the follower's ledger (concluded at
  // most every 10 s, live_options()) covers more steps than the last logged.
  bool ledger_metrics = true;
  Thresholds thresholds;
  steps::LedgerOptions ledger;  // `trainscope run --peak-flops`, ...
};

// `inner` first (its stop wins: nothing more is done), then a live Follower
// of the run (live_options(), the options' thresholds and ledger) concluded
// once per call: new capture requests written and said in the message, the
// ledger's metrics in WatchVerdict::metrics. No follower when neither is on.
std::function<WatchVerdict(const std::string& run_dir)> with_live_follower(
    std::function<WatchVerdict(const std::string& run_dir)> inner, LiveWatchOptions options);

// `trainscope run`'s watch: hang_watch(on_hang, options.thresholds) with the
// live follower on top.
std::function<WatchVerdict(const std::string& run_dir)> launcher_watch(OnHang on_hang,
                                                                       LiveWatchOptions options);

}  // namespace trainscope::diagnosis

#endif  // TRAINSCOPE_DIAGNOSIS_LIVE_WATCH_HPP_
