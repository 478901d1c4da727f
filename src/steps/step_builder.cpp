#include "steps/step_builder.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

namespace trainscope::steps::detail {
namespace {

std::int64_t period_end_ns(const Step& s) {
  return s.start_ns + static_cast<std::int64_t>(std::llround(s.period_s * 1e9));
}

void merge_into(Step* into, const Step& s) {
  into->period_s += s.period_s;
  into->steps += s.steps;
  into->comm_waited_s += s.comm_waited_s;
  into->collectives_s += s.collectives_s;
  into->ddp_exposed_s += s.ddp_exposed_s;
  into->gpu_busy_s += s.gpu_busy_s;
  into->gpu_union_s += s.gpu_union_s;
  into->gpu_rows_placed += s.gpu_rows_placed;
  into->gpu_rows_unplaced += s.gpu_rows_unplaced;
  into->cpu_wait_s += s.cpu_wait_s;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    into->cpu_s[p] += s.cpu_s[p];
    into->gpu_s[p] += s.gpu_s[p];
  }
}

// Whether a CPU row of a phase is longer than the whole step it starts in
// (counted, and named by the first).
bool impossible(RankSteps* out, const Step& s, const PendingRow& r) {
  if (r.gpu || r.phase < 0) return false;
  if (static_cast<double>(r.duration_ns) * 1e-9 <= s.period_s * (1 + 1e-9)) return false;
  if (out->impossible_rows++ == 0) {
    out->first_impossible = ImpossibleRow{r.key, r.duration_ns, s.step, s.period_s};
  }
  return true;
}

}  // namespace

std::int64_t DeviceIntervals::add(std::int64_t start, std::int64_t end) {
  if (end <= start) return 0;
  // The first kept interval that ends at or after `start`: those before it lie apart.
  auto first = std::lower_bound(spans_.begin(), spans_.end(), start,
                                [](const std::pair<std::int64_t, std::int64_t>& s,
                                   std::int64_t at) { return s.second < at; });
  std::int64_t covered = 0;
  std::int64_t merged_start = start;
  std::int64_t merged_end = end;
  auto last = first;
  for (; last != spans_.end() && last->first <= end; ++last) {
    covered += std::min(end, last->second) - std::max(start, last->first);
    merged_start = std::min(merged_start, last->first);
    merged_end = std::max(merged_end, last->second);
  }
  const auto at = spans_.erase(first, last);
  spans_.insert(at, {merged_start, merged_end});
  return (end - start) - covered;
}

double StepBuilder::place(std::int64_t step_start_ns, const PendingRow& r) {
  if (r.gpu_start_ns == kNoGpuStart) return -1;
  DeviceIntervals* intervals = nullptr;
  if (out_.open && step_start_ns == current_.start_ns) {
    intervals = &current_intervals_;
  } else {
    for (auto& [start, kept] : closed_intervals_) {
      if (start == step_start_ns) intervals = &kept;
    }
  }
  if (intervals == nullptr) return -1;
  const std::int64_t end =
      r.gpu_start_ns > 0 &&
              r.duration_ns > std::numeric_limits<std::int64_t>::max() - r.gpu_start_ns
          ? std::numeric_limits<std::int64_t>::max()
          : r.gpu_start_ns + r.duration_ns;
  return static_cast<double>(intervals->add(r.gpu_start_ns, end)) * 1e-9;
}

void StepBuilder::credit(Step* s, const PendingRow& r, double union_s) {
  const double seconds = static_cast<double>(r.duration_ns) * 1e-9;
  if (r.phase < 0) return;
  if (is_wait(r)) {
    const std::int64_t from = std::max(r.start_ns, s->start_ns);
    const std::int64_t to = std::min(r.end_ns, period_end_ns(*s));
    if (to > from) s->cpu_s[static_cast<std::size_t>(Phase::kDataWait)] += (to - from) * 1e-9;
    return;
  }
  if (!r.gpu && r.phase == static_cast<int>(Phase::kDataWait)) return;  // another thread's
  if (!r.gpu && (r.phase == static_cast<int>(Phase::kComm) ||
                 r.phase == static_cast<int>(Phase::kCommExposed))) {
    if (r.phase == static_cast<int>(Phase::kCommExposed)) {
      s->ddp_exposed_s += seconds;
    } else {
      (r.collective ? s->collectives_s : s->comm_waited_s) += seconds;
    }
    s->settle_comm();
    return;
  }
  (r.gpu ? s->gpu_s : s->cpu_s)[static_cast<std::size_t>(r.phase)] += seconds;
  if (is_gpu_compute(r)) {
    s->gpu_busy_s += seconds;
    if (union_s >= 0) {
      s->gpu_union_s += union_s;
      ++s->gpu_rows_placed;
    } else {
      ++s->gpu_rows_unplaced;
    }
  }
}

void StepBuilder::add_key(std::vector<KeySum>* sums, const PendingRow& r) {
  if (!key_sums_) return;
  const double seconds = static_cast<double>(r.duration_ns) * 1e-9;
  for (KeySum& k : *sums) {
    if (k.key == r.key) {
      k.seconds += seconds;
      ++k.rows;
      return;
    }
  }
  sums->push_back(KeySum{r.key, seconds, 1, r.start_ns});
}

void StepBuilder::on_row(const PendingRow& row) {
  if (row.phase < 0 && !key_sums_) return;
  if (row.phase >= 0) {
    (row.gpu ? out_.gpu_measured : out_.cpu_measured)[static_cast<std::size_t>(row.phase)] = true;
    // A COMM row is communication the step waits for: comm_exposed too.
    if (!row.gpu && row.phase == static_cast<int>(Phase::kComm) && !row.collective) {
      out_.cpu_measured[static_cast<std::size_t>(Phase::kCommExposed)] = true;
    }
  }
  if (out_.open && row.start_ns < current_.start_ns) {
    add_late(row);
    return;
  }
  pending_.push_back(row);
  if (pending_.size() > 1'000'000) pending_.erase(pending_.begin());
}

void StepBuilder::take_pending(std::int64_t until) {
  std::vector<PendingRow> keep;
  for (PendingRow r : pending_) {
    if (r.start_ns >= until) {
      keep.push_back(r);
      continue;
    }
    if (!r.carried) {
      add_key(&current_keys_, r);
      if (impossible(&out_, current_, r)) continue;
    }
    credit(&current_, r, is_gpu_compute(r) ? place(current_.start_ns, r) : -1);
    if (is_wait(r) && r.end_ns > period_end_ns(current_)) {
      r.carried = true;  // its overlap with the next steps
      keep.push_back(r);
    }
  }
  pending_ = std::move(keep);
}

void StepBuilder::finalize() {
  closed_intervals_.emplace_back(current_.start_ns, std::move(current_intervals_));
  current_intervals_ = DeviceIntervals{};
  while (closed_intervals_.size() > kKeptIntervalSteps) closed_intervals_.pop_front();
  out_.window.push_back(current_);
  while (out_.window.size() > window_steps_) out_.window.pop_front();
  if (key_sums_) out_.key_sums.push_back(std::move(current_keys_));
  current_keys_.clear();
  if (!key_sums_ && !out_.history.empty() && out_.history.back().steps < out_.merge_width) {
    merge_into(&out_.history.back(), current_);
  } else {
    out_.history.push_back(current_);
  }
  ++out_.steps;
  if (!key_sums_ && out_.history.size() >= max_history_) {
    std::vector<Step> merged;
    merged.reserve(out_.history.size() / 2 + 1);
    for (std::size_t i = 0; i < out_.history.size(); i += 2) {
      Step m = out_.history[i];
      if (i + 1 < out_.history.size()) merge_into(&m, out_.history[i + 1]);
      merged.push_back(m);
    }
    out_.history = std::move(merged);
    out_.merge_width *= 2;
  }
}

void StepBuilder::on_step(std::int64_t start_ns, std::int64_t duration_ns, std::int64_t index,
                          std::uint32_t key, std::int64_t cpu_wait_ns) {
  ++out_.step_rows;
  if (after_skip_) {
    after_skip_ = false;
    late_floor_ns_ = start_ns;
    // Its own number, unless that goes back (another process's BATCH count).
    if (index >= 0 && static_cast<std::uint64_t>(index) >= steps_at_skip_) {
      out_.steps = static_cast<std::uint64_t>(index);
    }
  }
  if (out_.open) {
    current_.period_s = static_cast<double>(start_ns - current_.start_ns) * 1e-9;
    if (current_.period_s <= 0) {
      current_.period_s = static_cast<double>(current_end_ns_ - current_.start_ns) * 1e-9;
    }
    take_pending(start_ns);
    finalize();
  } else {
    // Rows before the first step belong to no step (a data wait that reaches
    // into it: its overlap does).
    std::vector<PendingRow> keep;
    for (PendingRow& r : pending_) {
      if (r.start_ns >= start_ns) {
        keep.push_back(r);
        continue;
      }
      if (key_sums_ && !r.carried) {
        out_.unstepped.push_back(
            KeySum{r.key, static_cast<double>(r.duration_ns) * 1e-9, 1, r.start_ns});
      }
      if (is_wait(r) && r.end_ns > start_ns) {
        r.carried = true;
        keep.push_back(r);
      }
    }
    pending_ = std::move(keep);
  }
  out_.open = true;
  current_ = Step{};
  current_.step = static_cast<std::int64_t>(out_.steps);
  current_.start_ns = start_ns;
  if (cpu_wait_ns >= 0) {
    current_.cpu_wait_s = static_cast<double>(cpu_wait_ns) * 1e-9;
    out_.cpu_wait_measured = true;
  }
  current_end_ns_ = start_ns + duration_ns;
  out_.last_step_end_ns = std::max(out_.last_step_end_ns, current_end_ns_);
  current_keys_.clear();
  add_key(&current_keys_, PendingRow{start_ns, current_end_ns_, duration_ns, key, -1});
}

void StepBuilder::add_late(const PendingRow& r) {
  if (r.start_ns < late_floor_ns_) return;  // of a step skipped
  auto by_start = [&r](const Step& s) { return s.start_ns <= r.start_ns; };
  auto h = std::partition_point(out_.history.begin(), out_.history.end(), by_start);
  if (h == out_.history.begin()) {  // before the first step
    if (key_sums_) {
      out_.unstepped.push_back(
          KeySum{r.key, static_cast<double>(r.duration_ns) * 1e-9, 1, r.start_ns});
    }
    return;
  }
  auto w = std::partition_point(out_.window.begin(), out_.window.end(), by_start);
  --h;
  if (key_sums_) {
    add_key(&out_.key_sums[static_cast<std::size_t>(h - out_.history.begin())], r);
  }
  // Held to the window's step (exact) when it is there, else to the history's.
  if (impossible(&out_, w != out_.window.begin() ? *std::prev(w) : *h, r)) return;
  if (!is_wait(r)) {
    // The row's place in its step's device union, once for both copies of the step.
    const double union_s =
        is_gpu_compute(r) && w != out_.window.begin() ? place(std::prev(w)->start_ns, r) : -1;
    if (w != out_.window.begin()) credit(&*std::prev(w), r, union_s);
    credit(&*h, r, union_s);
    return;
  }
  // A data wait: its overlap with every step it reaches into, the open one too.
  for (auto s = h; s != out_.history.end() && s->start_ns < r.end_ns; ++s) credit(&*s, r);
  for (auto s = w == out_.window.begin() ? w : std::prev(w);
       s != out_.window.end() && s->start_ns < r.end_ns; ++s) {
    credit(&*s, r);
  }
  if (r.end_ns > current_.start_ns) {
    PendingRow carried = r;
    carried.carried = true;
    pending_.push_back(carried);
  }
}

void StepBuilder::close() {
  if (closed_) return;
  closed_ = true;
  if (!out_.open) return;
  current_.period_s = static_cast<double>(current_end_ns_ - current_.start_ns) * 1e-9;
  take_pending(current_end_ns_ + 1);
  finalize();
  out_.open = false;
}

void StepBuilder::flush_unstepped() {
  if (!key_sums_) return;
  for (const PendingRow& r : pending_) {
    if (!r.carried) {
      out_.unstepped.push_back(
          KeySum{r.key, static_cast<double>(r.duration_ns) * 1e-9, 1, r.start_ns});
    }
  }
  pending_.clear();
}

void StepBuilder::skip(std::uint64_t bytes) {
  out_.skipped_bytes += bytes;
  steps_at_skip_ = out_.steps + (out_.open ? 1 : 0);
  out_.open = false;
  pending_.clear();
  current_ = Step{};
  current_keys_.clear();
  current_intervals_ = DeviceIntervals{};
  closed_intervals_.clear();
  const double per_step =
      out_.step_rows ? static_cast<double>(out_.read_bytes) / static_cast<double>(out_.step_rows)
                     : 0.0;
  if (per_step > 0) {
    out_.steps += static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) / per_step));
  }
  after_skip_ = true;
  late_floor_ns_ = std::numeric_limits<std::int64_t>::max();  // until the next step
}

}  // namespace trainscope::steps::detail
