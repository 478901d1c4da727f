// Hangs: the pure judgement (find_hung), its label and line, and HangWatch
// (a step reader judged at each poll). trainscope/diagnosis/hang.hpp.
#include "trainscope/diagnosis/hang.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/launch/dump.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::diagnosis {
namespace {

std::string utc_time(std::int64_t unix_ns) {
  return absl::FormatTime("%H:%M:%S UTC", absl::FromUnixNanos(unix_ns), absl::UTCTimeZone());
}

double p99_of(std::vector<double> recent_step_s) {
  if (recent_step_s.empty()) return stats::kNaN;
  return stats::quantile(std::move(recent_step_s), 0.99);
}

}  // namespace

double hang_limit_s(const std::vector<double>& recent_step_s, const Thresholds& thresholds) {
  const double p99 = p99_of(recent_step_s);
  const double by_steps = std::isfinite(p99) ? thresholds.hang_factor * p99 : 0.0;
  return std::max(by_steps, thresholds.hang_min_s);
}

std::vector<HungRank> find_hung(const std::vector<RankProgress>& ranks, std::int64_t now_ns,
                                const Thresholds& thresholds) {
  std::vector<HungRank> out;
  for (const RankProgress& r : ranks) {
    if (!r.alive || r.last_step_end_ns <= 0 || now_ns <= r.last_step_end_ns) continue;
    HungRank h;
    h.rank = r.rank;
    h.step = r.steps;
    h.since_ns = r.last_step_end_ns;
    h.stalled_s = static_cast<double>(now_ns - r.last_step_end_ns) * 1e-9;
    h.p99_s = p99_of(r.recent_step_s);
    h.limit_s = hang_limit_s(r.recent_step_s, thresholds);
    if (h.stalled_s > h.limit_s) out.push_back(h);
  }
  std::sort(out.begin(), out.end(),
            [](const HungRank& a, const HungRank& b) { return a.rank < b.rank; });
  return out;
}

RankProgress progress_of(const steps::RankSteps& rank) {
  RankProgress p;
  p.rank = rank.rank;
  p.alive = rank.status.running();
  p.steps = rank.step_count();
  p.last_step_end_ns = rank.last_step_end_ns;
  for (const steps::Step& s : rank.window) {
    if (s.steps == 1) p.recent_step_s.push_back(s.period_s);
  }
  return p;
}

Label hang_label(const HungRank& hung, const Thresholds& thresholds, bool ended) {
  Label l;
  l.name = LabelName::kHang;
  l.rank = hung.rank;
  l.quantity = "stalled_s";
  l.value.value = hung.stalled_s;
  l.threshold = hung.limit_s;
  const bool by_steps =
      std::isfinite(hung.p99_s) && thresholds.hang_factor * hung.p99_s > thresholds.hang_min_s;
  l.threshold_name = by_steps ? "hang_factor" : "hang_min_s";
  const std::string p99 = std::isfinite(hung.p99_s) ? stats::format_seconds(hung.p99_s) : "-";
  l.evidence = fmt::format(
      "step {} has not ended for {}, since {} (limit {} = max({:g} x p99 step {}, hang_min_s "
      "{})); {}",
      hung.step, stats::format_seconds(hung.stalled_s), utc_time(hung.since_ns),
      stats::format_seconds(hung.limit_s), thresholds.hang_factor, p99,
      stats::format_seconds(thresholds.hang_min_s),
      ended ? "its process ran until the job was ended for the hang" : "its process runs");
  l.next_step =
      "see where it waits: `trainscope dump RUN` writes every rank's stacks into the run; "
      "`trainscope run --on-hang kill` ends a hung job";
  return l;
}

std::string hang_line(const std::vector<HungRank>& hung) {
  std::string out = "HANG:";
  for (std::size_t i = 0; i < hung.size(); ++i) {
    const HungRank& h = hung[i];
    out += fmt::format("{} rank {} (step {} not ended since {})", i == 0 ? "" : ";", h.rank, h.step,
                       utc_time(h.since_ns));
  }
  return out;
}

struct HangWatch::State {
  explicit State(steps::StepReader r) : reader(std::move(r)) {}
  steps::StepReader reader;
  Thresholds thresholds;
};

HangWatch::HangWatch(std::unique_ptr<State> state) : state_(std::move(state)) {}
HangWatch::HangWatch(HangWatch&&) noexcept = default;
HangWatch& HangWatch::operator=(HangWatch&&) noexcept = default;
HangWatch::~HangWatch() = default;

absl::StatusOr<HangWatch> HangWatch::Open(std::string run_dir, Thresholds thresholds) {
  steps::StepOptions options;
  options.window_steps = 100;
  options.max_history_steps = 64;
  // Following a live run costs a bounded share of a core (as `trainscope top`).
  options.read_budget_bytes_per_s = kLiveReadBudget;
  absl::StatusOr<steps::StepReader> reader = steps::StepReader::Open(std::move(run_dir), options);
  if (!reader.ok()) return reader.status();
  auto state = std::make_unique<State>(*std::move(reader));
  state->thresholds = thresholds;
  return HangWatch(std::move(state));
}

absl::StatusOr<std::vector<HungRank>> HangWatch::poll() {
  if (absl::Status polled = state_->reader.poll(); !polled.ok()) return polled;
  const std::int64_t now_ms = state_->reader.last_poll_ms();
  std::vector<RankProgress> ranks;
  for (const steps::RankSteps* t : state_->reader.ranks()) ranks.push_back(progress_of(*t));
  return find_hung(ranks, now_ms * 1'000'000, state_->thresholds);
}

std::string_view on_hang_name(OnHang on_hang) noexcept {
  switch (on_hang) {
    case OnHang::kNone:
      return "none";
    case OnHang::kDump:
      return "dump";
    case OnHang::kKill:
      return "kill";
  }
  return "?";
}

absl::StatusOr<OnHang> parse_on_hang(std::string_view name) {
  for (OnHang o : {OnHang::kNone, OnHang::kDump, OnHang::kKill}) {
    if (on_hang_name(o) == name) return o;
  }
  return absl::InvalidArgumentError(fmt::format("--on-hang \"{}\": one of none, dump, kill", name));
}

std::function<WatchVerdict(const std::string& run_dir)> hang_watch(OnHang on_hang,
                                                                   Thresholds thresholds) {
  struct State {
    std::optional<HangWatch> watch;
    std::string said;  // the last hang line: each new one is acted on once
  };
  auto state = std::make_shared<State>();
  return [state, on_hang, thresholds](const std::string& run_dir) -> WatchVerdict {
    WatchVerdict verdict;
    if (!state->watch) {
      absl::StatusOr<HangWatch> opened = HangWatch::Open(run_dir, thresholds);
      if (!opened.ok()) return verdict;  // no run yet: the next call
      state->watch = *std::move(opened);
    }
    absl::StatusOr<std::vector<HungRank>> hung = state->watch->poll();
    if (!hung.ok() || hung->empty()) {
      state->said.clear();
      return verdict;
    }
    const std::string line = hang_line(*hung);
    verdict.message = "trainscope run: " + line;
    if (on_hang == OnHang::kNone) {
      verdict.message +=
          "; left running (`trainscope dump RUN` writes the ranks' stacks, --on-hang kill ends it)";
      return verdict;
    }
    if (line == state->said) return verdict;
    state->said = line;
    absl::StatusOr<DumpRequest> asked = request_dump(run_dir);
    if (asked.ok() && !asked->asked.empty()) {
      verdict.message +=
          fmt::format("; asked rank{} {} for their stacks (dump-<rank>.txt/.json)",
                      asked->asked.size() == 1 ? "" : "s", fmt::join(asked->asked, ", "));
      // Time for the ranks to write them before anything ends them.
      if (on_hang == OnHang::kKill) std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    if (on_hang == OnHang::kKill) {
      verdict.action = WatchVerdict::Action::kStop;
      verdict.reason = "hang";
      verdict.message += "; ending the job (--on-hang kill)";
    }
    return verdict;
  };
}

}  // namespace trainscope::diagnosis
