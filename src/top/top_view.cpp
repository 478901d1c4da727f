// trainscope top's view (include/trainscope/top/top_view.hpp): what to
// follow, a sweep's jobs, the followed run's Follower and the lines drawn.
#include "trainscope/top/top_view.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "trainscope/common/clock.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/steps/ledger.hpp"
#include "trainscope/sweep/sweep_state.hpp"

namespace trainscope::top {

using namespace diagnosis;  // NOLINT: top draws the diagnosis' types throughout

std::string_view top_sort_name(TopSort order) {
  switch (order) {
    case TopSort::kShare:
      return "share";
    case TopSort::kP95:
      return "p95";
    case TopSort::kCount:
      return "count";
    case TopSort::kName:
      return "name";
  }
  return "share";
}

TopSort next_top_sort(TopSort order, int step) {
  const int n = static_cast<int>(std::size(kTopSorts));
  return kTopSorts[(static_cast<int>(order) + step + n) % n];
}

// Following live: the run scope is concluded again at most every 10 s
// (docs/diagnosis.md, "Cost"); the window is fresh at every refresh.
// "<name> (<id>)", or the id alone when the run has no name of its own.
std::string name_and_id(const Diagnosis& d) {
  if (d.run_name.empty() || d.run_name == d.run_id) return d.run_id;
  return fmt::format("{} ({})", d.run_name, d.run_id);
}

namespace {

namespace fs = std::filesystem;
using SortOrder = TopSort;
using Style = TopStyle;
using Line = TopLine;
using Target = TopTarget;
std::string_view sort_name(SortOrder order) { return top_sort_name(order); }

// ---------------------------------------------------------------------------
// What to follow

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : std::move(fallback);
}

// The newest running run of the set of runs `root` names (find_run_dirs: its
// runs, or those of its runs/), else the newest (by start time); NotFound
// naming the root when it holds none.
absl::StatusOr<Target> newest_run_in(const std::string& root) {
  absl::StatusOr<std::vector<std::string>> dirs = find_run_dirs({root});
  if (!dirs.ok() && !absl::IsNotFound(dirs.status())) return dirs.status();
  struct Candidate {
    std::string dir;
    std::int64_t start_ms = 0;
    bool running = false;
  };
  std::optional<Candidate> newest, newest_running;
  for (const std::string& dir : dirs.ok() ? *dirs : std::vector<std::string>{}) {
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    if (!reader.ok()) continue;  // a damaged run is never the one to follow
    const Candidate candidate{dir, reader->info().start_time_ms, reader->in_progress()};
    const auto newer = [&](const std::optional<Candidate>& best) {
      return !best || candidate.start_ms > best->start_ms ||
             (candidate.start_ms == best->start_ms && candidate.dir > best->dir);
    };
    if (newer(newest)) newest = candidate;
    if (candidate.running && newer(newest_running)) newest_running = candidate;
  }
  if (newest_running) {
    return Target{false, newest_running->dir, "the newest running run under " + root};
  }
  if (newest) return Target{false, newest->dir, "the newest run under " + root + " (none runs)"};
  return absl::NotFoundError(
      fmt::format("{} is not a run, a directory of runs or a sweep directory (no run.json, "
                  "no sweep.json, no run in it)",
                  root));
}

// Whether `dir` has anything named run.json (lstat: also a dangling link).
bool holds_run_json(const std::string& dir) {
  struct stat st;
  return ::lstat((fs::path(dir) / "run.json").c_str(), &st) == 0;
}

absl::StatusOr<Target> resolve_target(const std::vector<std::string>& targets) {
  if (targets.empty()) {
    const std::string run_dir = env_or("TRAINSCOPE_RUN_DIR", "");
    if (!run_dir.empty() && is_run_directory(run_dir)) {
      return Target{false, run_dir, "TRAINSCOPE_RUN_DIR"};
    }
    const std::string root = default_runs_root();
    if (!fs::is_directory(root)) {
      return absl::NotFoundError(fmt::format(
          "no run to follow: {} is no directory (give a run, a directory of runs or a sweep "
          "directory, or set TRAINSCOPE_RUNS_ROOT)",
          root));
    }
    return newest_run_in(root);
  }
  const std::string& path = targets.front();
  // A run.json that is no regular file (a FIFO, a directory, a symlink loop)
  // still makes the path a run, whose reading then says what is wrong.
  if (is_run_directory(path) || holds_run_json(path)) return Target{false, path, ""};
  if (sweep::is_sweep_dir(path)) return Target{true, path, ""};
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(path + ": no such file or directory");
  if (!fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        path + " is not a run, a directory of runs or a sweep directory (a file)");
  }
  return newest_run_in(path);
}

// ---------------------------------------------------------------------------
// A sweep's jobs

struct JobLine {
  std::string id;
  sweep::JobStatus status = sweep::JobStatus::kQueued;
  std::string params;  // "lr=0.1 batch=32"
  std::string run_dir;
  double seconds = -1;  // a finished job's duration, a running one's elapsed; -1 unknown
};

struct SweepView {
  std::string dir;
  std::string name;
  std::vector<JobLine> jobs;
  int queued = 0, running = 0, done = 0, failed = 0;
  double median_job_s = -1;  // of the finished jobs
  double eta_s = -1;         // -1: unknown (no job finished yet)
  std::string error;         // the sweep state could not be read (the last view stays)
};

std::string job_params(const sweep::StoredJob& job) {
  std::string out;
  for (const auto& [key, value] : job.params) {
    if (!out.empty()) out += ' ';
    out += key + "=" + value;
  }
  return out;
}

// Reads sweep.json (small) every refresh; a run's start and end are read once
// per job (cached) for durations and the ETA.
class SweepWatcher {
 public:
  explicit SweepWatcher(std::string dir) { view_.dir = std::move(dir); }

  // The view as of now; an unreadable state keeps the last view with `error`.
  const SweepView& refresh() {
    absl::StatusOr<sweep::StoredSweep> state = sweep::read_sweep_state(view_.dir);
    if (!state.ok()) {
      view_.error = std::string(state.status().message());
      return view_;
    }
    SweepView view;
    view.dir = view_.dir;
    view.name = state->name;
    std::vector<double> finished;
    const std::int64_t now = trainscope::detail::unix_now_ms();
    for (const sweep::StoredJob& job : state->jobs) {
      JobLine line{job.id, job.status, job_params(job), job.run_dir, -1};
      const Times times = run_times(job);
      switch (job.status) {
        case sweep::JobStatus::kQueued:
          ++view.queued;
          break;
        case sweep::JobStatus::kRunning:
          ++view.running;
          if (times.start_ms > 0) line.seconds = static_cast<double>(now - times.start_ms) / 1e3;
          break;
        case sweep::JobStatus::kFinished:
          ++view.done;
          break;
        case sweep::JobStatus::kFailed:
        case sweep::JobStatus::kKilled:
          ++view.failed;
          break;
      }
      if (job.status != sweep::JobStatus::kRunning && times.end_ms > times.start_ms &&
          times.start_ms > 0) {
        line.seconds = static_cast<double>(times.end_ms - times.start_ms) / 1e3;
        if (job.status == sweep::JobStatus::kFinished) finished.push_back(line.seconds);
      }
      view.jobs.push_back(std::move(line));
    }
    if (!finished.empty()) {
      std::sort(finished.begin(), finished.end());
      const std::size_t n = finished.size();
      view.median_job_s = n % 2 ? finished[n / 2] : (finished[n / 2 - 1] + finished[n / 2]) / 2;
      // What is left: each running job's expected remainder and every queued
      // job, spread over as many jobs as run at once now.
      double left = view.median_job_s * view.queued;
      for (const JobLine& job : view.jobs) {
        if (job.status == sweep::JobStatus::kRunning) {
          left += std::max(0.0, view.median_job_s - std::max(0.0, job.seconds));
        }
      }
      view.eta_s = left / std::max(1, view.running);
    }
    view_ = std::move(view);
    return view_;
  }

  const SweepView& view() const { return view_; }

 private:
  struct Times {
    std::int64_t start_ms = 0;
    std::int64_t end_ms = 0;
  };

  // A job's run start and end: read from its run once it ended (cached), its
  // start once while it runs.
  Times run_times(const sweep::StoredJob& job) {
    if (job.run_dir.empty()) return {};
    const std::string key = job.id + "\n" + job.run_id;
    auto cached = times_.find(key);
    const bool ended =
        job.status != sweep::JobStatus::kRunning && job.status != sweep::JobStatus::kQueued;
    if (cached != times_.end() && (cached->second.end_ms > 0 || !ended)) return cached->second;
    absl::StatusOr<RunReader> reader = RunReader::Open(job.run_dir);
    Times times;
    if (reader.ok()) times = {reader->info().start_time_ms, reader->info().end_time_ms};
    if (times.start_ms > 0) times_[key] = times;
    return times;
  }

  SweepView view_;
  std::map<std::string, Times> times_;
};

// The run a sweep view follows: the current one while its job runs, else the
// first running job's, else the current one, else the last job's that has a run.
std::string sweep_run_to_follow(const SweepView& view, const std::string& current) {
  for (const JobLine& job : view.jobs) {
    if (job.status == sweep::JobStatus::kRunning && job.run_dir == current && !current.empty()) {
      return current;
    }
  }
  for (const JobLine& job : view.jobs) {
    if (job.status == sweep::JobStatus::kRunning && !job.run_dir.empty()) return job.run_dir;
  }
  if (!current.empty()) return current;
  for (auto job = view.jobs.rbegin(); job != view.jobs.rend(); ++job) {
    if (!job->run_dir.empty()) return job->run_dir;
  }
  return "";
}

// ---------------------------------------------------------------------------
// Formatting

std::string fmt_clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const auto total = static_cast<std::int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, static_cast<int>(total / 60 % 60),
                     static_cast<int>(total % 60));
}

std::string fmt_rate(double rate) {
  if (!std::isfinite(rate)) return "-";
  if (rate >= 1e6) return fmt::format("{:.2f}M", rate / 1e6);
  if (rate >= 1e4) return fmt::format("{:.1f}k", rate / 1e3);
  if (rate >= 100) return fmt::format("{:.0f}", rate);
  return fmt::format("{:.2f}", rate);
}

std::string fmt_count(std::uint64_t n) {
  if (n >= 100000000ULL) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  return std::to_string(n);
}

// A key's count over the run; estimated ("~") from the rows read when sampled.
std::string run_count(const diagnosis::KeyRow& row, double read_share) {
  if (read_share >= 1 || !(read_share > 0)) return fmt_count(row.count);
  return "~" + fmt_count(static_cast<std::uint64_t>(static_cast<double>(row.count) / read_share));
}

std::string fmt_bytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f}GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f}MiB", b / (1024.0 * 1024));
  return fmt::format("{:.0f}KiB", b / 1024);
}

std::string fmt_mb(double mb) {
  if (!std::isfinite(mb)) return "-";
  if (mb >= 1024) return fmt::format("{:.1f}G", mb / 1024);
  return fmt::format("{:.0f}M", mb);
}

// Breaks `text` into lines of at most `width` characters at spaces (a word
// longer than a line is cut); the first keeps the text's own indentation, the
// others are indented by `indent`.
std::vector<std::string> wrap(const std::string& text, std::size_t width, std::size_t indent) {
  width = std::max(width, indent + 8);
  const std::size_t lead = text.find_first_not_of(' ');
  if (lead == std::string::npos) return {text};
  std::vector<std::string> out;
  std::string line = text.substr(0, std::min(lead, width - 1));
  bool has_word = false;
  std::size_t pos = lead;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    while (!word.empty()) {
      if (line.size() + word.size() + (has_word ? 1 : 0) <= width) {
        if (has_word) line += ' ';
        line += word;
        has_word = true;
        word.clear();
      } else if (!has_word) {  // longer than a whole line: cut it
        const std::size_t room = width - line.size();
        line += word.substr(0, room);
        word.erase(0, room);
        out.push_back(std::move(line));
        line = std::string(indent, ' ');
      } else {
        out.push_back(std::move(line));
        line = std::string(indent, ' ');
        has_word = false;
      }
    }
  }
  if (has_word) out.push_back(std::move(line));
  return out;
}

// ---------------------------------------------------------------------------
// The view as lines: the same content for the terminal and the snapshot

struct ViewState {
  const Diagnosis* diagnosis = nullptr;  // the last one read (nullptr: none yet)
  std::string run_dir;                   // followed
  std::string follow_note;               // how it was chosen
  std::string alert;                     // vanished, damaged, nothing to follow
  // What is wrong with the run's data but leaves it readable (Diagnosis::
  // warnings, check_run's warnings), and a new run at the followed path.
  std::vector<std::string> warnings;
  std::string replaced;
  const SweepView* sweep = nullptr;
  SortOrder sort = SortOrder::kShare;
  bool utf8 = false;
  std::size_t width = 120;
  std::size_t max_job_lines = 1000000;
  bool live = false;  // drawn in the terminal (keys work)
};

// The steps/s trend: the window's rate against the run's.
std::string trend(const Diagnosis& d, bool utf8) {
  const double window = d.window.steps_per_s, run = d.run.steps_per_s;
  if (!(window > 0) || !(run > 0)) return "";
  const double ratio = window / run;
  if (ratio > 1.05) return utf8 ? "\u2191 rising" : "^ rising";
  if (ratio < 0.95) return utf8 ? "\u2193 falling" : "v falling";
  return utf8 ? "\u2192 steady" : "= steady";
}

const diagnosis::PhaseRow* find_phase(const diagnosis::Scope& scope, diagnosis::Phase phase,
                                      Device device) {
  for (const diagnosis::PhaseRow& row : scope.phases) {
    if (row.phase == phase && row.device == device) return &row;
  }
  return nullptr;
}

void add_sweep_lines(const SweepView& sweep, const ViewState& state, std::vector<Line>* out) {
  std::string head = fmt::format(
      "sweep {} ({}): {} jobs: {} running, {} done, {} failed, {} queued", sweep.name, sweep.dir,
      sweep.jobs.size(), sweep.running, sweep.done, sweep.failed, sweep.queued);
  if (sweep.eta_s >= 0) {
    head += fmt::format("; ETA {} (median job {})", fmt_clock(sweep.eta_s),
                        fmt_clock(sweep.median_job_s));
  } else if (sweep.queued + sweep.running > 0) {
    head += "; ETA - (no job finished yet)";
  }
  out->push_back({head, Style::kTitle});
  if (!sweep.error.empty()) out->push_back({"sweep state: " + sweep.error, Style::kAlert});
  // Running jobs first, then failed, then the rest in plan order.
  std::vector<const JobLine*> order;
  for (const JobLine& job : sweep.jobs) {
    if (job.status == sweep::JobStatus::kRunning) order.push_back(&job);
  }
  for (const JobLine& job : sweep.jobs) {
    if (job.status == sweep::JobStatus::kFailed || job.status == sweep::JobStatus::kKilled) {
      order.push_back(&job);
    }
  }
  for (const JobLine& job : sweep.jobs) {
    if (job.status == sweep::JobStatus::kFinished || job.status == sweep::JobStatus::kQueued) {
      order.push_back(&job);
    }
  }
  std::size_t shown = 0;
  for (const JobLine* job : order) {
    if (shown == state.max_job_lines) {
      out->push_back({fmt::format("  ... {} more jobs", order.size() - shown), Style::kDim});
      break;
    }
    const bool followed = !job->run_dir.empty() && job->run_dir == state.run_dir;
    const std::string_view status = sweep::job_status_name(job->status);
    out->push_back(
        {fmt::format("{} {:<10} {:<9} {:>9}  {}", followed ? '>' : ' ', job->id, status,
                     job->seconds >= 0 ? fmt_clock(job->seconds) : "-", job->params),
         job->status == sweep::JobStatus::kFailed || job->status == sweep::JobStatus::kKilled
             ? Style::kAlert
             : (job->status == sweep::JobStatus::kRunning ? Style::kGood : Style::kNormal)});
    ++shown;
  }
  out->push_back({"", Style::kNormal});
}

void add_rank_lines(const Diagnosis& d, const ViewState& state, std::vector<Line>* out) {
  out->push_back(
      {fmt::format("ranks {} (world {}) on {} host{}: {}", d.ranks.size(), d.world_size,
                   d.hosts.size(), d.hosts.size() == 1 ? "" : "s", fmt::join(d.hosts, ", ")),
       Style::kHeader});
  std::vector<std::string> cells;
  std::size_t cell_width = 0;
  for (const diagnosis::RankNow& rank : d.ranks) {
    // A running rank with a HANG label is HUNG (trainscope/diagnosis/hang.hpp).
    bool hung = false;
    for (const diagnosis::Label& l : d.window.labels) {
      hung = hung || (l.name == diagnosis::LabelName::kHang && l.rank == rank.rank);
    }
    cells.push_back(fmt::format("r{} {} {} {} steps", rank.rank, rank.host,
                                hung ? std::string_view("HUNG") : process_status_name(rank.status),
                                rank.steps));
    cell_width = std::max(cell_width, cells.back().size());
  }
  cell_width += 3;
  const std::size_t per_line = std::max<std::size_t>(1, (state.width - 2) / cell_width);
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += fmt::format("{:<{}}", cells[i], cell_width);
    if ((i + 1) % per_line == 0 || i + 1 == cells.size()) {
      line.erase(line.find_last_not_of(' ') + 1);
      out->push_back({"  " + line, Style::kNormal});
      line.clear();
    }
  }
  if (d.ranks.empty()) out->push_back({"  no rank has recorded anything yet", Style::kDim});
}

void add_phase_lines(const diagnosis::Scope& scope, std::vector<Line>* out) {
  out->push_back(
      {fmt::format("{:<12} {:<4} {:>9} {:>9} {:>7}  {:<16} {:>6}   ({} of {} steps)", "phase",
                   "dev", "median", "p95", "share", "worst rank", "skew", scope.name, scope.steps),
       Style::kHeader});
  if (scope.phases.empty()) out->push_back({"  no step phases yet", Style::kDim});
  for (const diagnosis::PhaseRow& row : scope.phases) {
    out->push_back(
        {fmt::format(
             "{:<12} {:<4} {:>9} {:>9} {:>7}  {:<16} {:>6}", diagnosis::phase_name(row.phase),
             device_name(row.device), stats::format_seconds_compact(row.median_s),
             stats::format_seconds_compact(row.p95_s), stats::format_share(row.share),
             fmt::format("r{} {}", row.worst_rank, stats::format_seconds_compact(row.worst_rank_s)),
             fmt::format("{:+.0f}%", row.skew * 100)),
         Style::kNormal});
  }
}

void add_key_lines(const Diagnosis& d, const ViewState& state, std::vector<Line>* out) {
  std::vector<const diagnosis::KeyRow*> rows;
  std::size_t key_width = 3;
  for (const diagnosis::KeyRow& row : d.keys) {
    rows.push_back(&row);
    key_width = std::max(key_width, std::min<std::size_t>(row.key.size(), 28));
  }
  const auto by = [&](const diagnosis::KeyRow* a, const diagnosis::KeyRow* b) {
    switch (state.sort) {
      case SortOrder::kShare:
        if (a->share != b->share) return a->share > b->share;
        break;
      case SortOrder::kP95:
        if (a->p95_s != b->p95_s) return a->p95_s > b->p95_s;
        break;
      case SortOrder::kCount:
        if (a->count != b->count) return a->count > b->count;
        break;
      case SortOrder::kName:
        break;
    }
    return std::tie(a->key, a->device) < std::tie(b->key, b->device);
  };
  std::stable_sort(rows.begin(), rows.end(), by);
  out->push_back({fmt::format("{:<{}} {:<4} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7}   (by {})", "key",
                              key_width, "dev", "count", "window", "rate/s", "p50", "p95", "share",
                              sort_name(state.sort)),
                  Style::kHeader});
  if (rows.empty()) out->push_back({"  no regions yet", Style::kDim});
  for (const diagnosis::KeyRow* row : rows) {
    const std::string key =
        row->key.size() > key_width ? row->key.substr(0, key_width - 1) + "~" : row->key;
    out->push_back(
        {fmt::format("{:<{}} {:<4} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7}{}{}", key, key_width,
                     device_name(row->device), run_count(*row, d.read_share),
                     fmt_count(row->window_count), fmt_rate(row->rate_per_s),
                     stats::format_seconds_compact(row->p50_s),
                     stats::format_seconds_compact(row->p95_s), stats::format_share(row->share),
                     row->callers.empty() ? "" : "  (mixes " + row->callers + ")",
                     row->sampled_every > 1 ? fmt::format("  (1 step in {})", row->sampled_every)
                                            : std::string()),
         Style::kNormal});
  }
}

void add_host_lines(const Diagnosis& d, std::vector<Line>* out) {
  out->push_back({"hosts now", Style::kHeader});
  if (d.host_now.empty()) {
    out->push_back({"  no hardware readings (sampled by `trainscope run`)", Style::kDim});
  }
  const std::int64_t now = trainscope::detail::unix_now_ms();
  for (const diagnosis::HostNow& host : d.host_now) {
    std::string line = fmt::format(
        "  {}  cpu {}  mem {}  swap {}", host.host, stats::format_percent(host.cpu_util_pct),
        stats::format_percent(host.mem_used_pct), fmt_mb(host.swap_used_mb));
    if (host.contention.known()) {  // the job's threads' run-queue wait (docs/steps.md)
      line += fmt::format("  waited {}",
                          stats::format_share_interval(host.contention.share, host.contention.low,
                                                       host.contention.high, stats::kNotAvailable));
    }
    if (host.step_wait.known()) {  // the step threads' own, in their steps (docs/steps.md)
      line += fmt::format("  step thread waited {}",
                          stats::format_share_interval(host.step_wait.share, host.step_wait.low,
                                                       host.step_wait.high, stats::kNotAvailable));
    }
    for (const diagnosis::GpuNow& gpu : host.gpus) {
      line += fmt::format("  gpu{} {} {}/{}", gpu.index, stats::format_percent(gpu.util_pct),
                          fmt_mb(gpu.mem_used_mb), fmt_mb(gpu.mem_total_mb));
    }
    if (host.time_ms > 0 && d.status == RunStatus::kRunning) {
      line += fmt::format("  ({}s ago)", std::max<std::int64_t>(0, (now - host.time_ms) / 1000));
    }
    out->push_back({line, Style::kNormal});
  }
}

std::vector<Line> view_lines(const ViewState& state) {
  std::vector<Line> out;
  if (state.sweep != nullptr) add_sweep_lines(*state.sweep, state, &out);
  if (!state.alert.empty()) {
    for (std::string& text : wrap(state.alert, state.width, 2)) {
      out.push_back({std::move(text), Style::kAlert});
    }
  }
  if (state.diagnosis == nullptr) {
    if (state.alert.empty()) {
      out.push_back({state.run_dir.empty() ? "no run to follow yet" : "reading " + state.run_dir,
                     Style::kDim});
    }
    return out;
  }
  const Diagnosis& d = *state.diagnosis;
  const bool running = d.status == RunStatus::kRunning;
  out.push_back(
      {fmt::format("run {}  {}  elapsed {}  {}", name_and_id(d), run_status_name(d.status),
                   fmt_clock(static_cast<double>(d.elapsed_ms) / 1e3), d.run_dir),
       Style::kTitle});
  if (!state.follow_note.empty()) out.push_back({"  following " + state.follow_note, Style::kDim});
  if (!state.replaced.empty()) out.push_back({"  " + state.replaced, Style::kAlert});
  for (const std::string& warning : state.warnings) {
    for (std::string& text : wrap("warning: " + warning, state.width, 2)) {
      out.push_back({std::move(text), Style::kAlert});
    }
  }
  if (!running) {
    out.push_back({fmt::format("the run ended: {}{}", run_status_name(d.status),
                               state.live ? " (q quits)" : ""),
                   d.status == RunStatus::kFinished ? Style::kGood : Style::kAlert});
  }
  std::uint64_t steps = 0;
  for (const diagnosis::RankNow& rank : d.ranks) steps = std::max(steps, rank.steps);
  std::string rate = fmt::format("steps {}  steps/s {}", steps, fmt_rate(d.window.steps_per_s));
  const std::string arrow = trend(d, state.utf8);
  if (!arrow.empty()) {
    rate += fmt::format(" {} (run {})", arrow, fmt_rate(d.run.steps_per_s));
  }
  rate += fmt::format("  step {}", stats::format_seconds_compact(d.window.step_s.value));
  rate += fmt::format("  window {} steps", d.window_steps);
  const diagnosis::PhaseRow* wait = find_phase(d.window, diagnosis::Phase::kDataWait, Device::kCPU);
  rate += fmt::format("  data wait {}", wait != nullptr ? stats::format_share(wait->share) : "-");
  // The run appends faster than top reads (FollowOptions::read_budget_bytes_per_s).
  if (d.read_share < 1) rate += fmt::format("  sampled {}", stats::format_share(d.read_share));
  out.push_back({rate, Style::kNormal});
  // The efficiency ledger over the steps with work read (docs/ledger.md), without its notes.
  if (d.ledger) {
    for (std::string& text : wrap(steps::format_ledger_line(*d.ledger, false), state.width, 8)) {
      out.push_back({std::move(text), Style::kNormal});
    }
  }

  // The labels of the run while it runs are the window's (Diagnosis::headline).
  const diagnosis::Scope& scope = running ? d.window : d.run;
  out.push_back({"diagnosis: " + d.headline(), Style::kLabel});
  for (const diagnosis::Label& label : scope.labels) {
    for (std::string& text :
         wrap(fmt::format("  {}: {}", label_name(label.name), label.evidence), state.width, 4)) {
      out.push_back({std::move(text), Style::kNormal});
    }
    if (!label.next_step.empty()) {
      for (std::string& text : wrap("    next: " + label.next_step, state.width, 10)) {
        out.push_back({std::move(text), Style::kDim});
      }
    }
  }
  out.push_back({"", Style::kNormal});
  add_rank_lines(d, state, &out);
  out.push_back({"", Style::kNormal});
  add_phase_lines(d.window, &out);
  out.push_back({"", Style::kNormal});
  add_key_lines(d, state, &out);
  out.push_back({"", Style::kNormal});
  add_host_lines(d, &out);
  if (!scope.notes.empty()) {
    out.push_back({"", Style::kNormal});
    for (const std::string& note : scope.notes) {
      for (std::string& text : wrap("note: " + note, state.width, 6)) {
        out.push_back({std::move(text), Style::kDim});
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Following

constexpr std::int64_t kRediagnoseMs = 10000;

// One followed run: its Follower (opened once; re-opened only for a new
// window) and the last diagnosis read.
class Session {
 public:
  Session(TopSettings args, Target target) : args_(std::move(args)), target_(std::move(target)) {
    if (target_.sweep) sweep_.emplace(target_.path);
  }

  // Polls (and, for a sweep, re-reads its jobs and switches to the running
  // job's run). False when the run could not be read this time (alert()).
  bool refresh() {
    if (sweep_) {
      const SweepView& view = sweep_->refresh();
      const std::string next = sweep_run_to_follow(view, run_dir_);
      if (next != run_dir_) {
        run_dir_ = next;
        follower_.reset();
        diagnosis_.reset();
        last_run_id_.clear();
        replaced_.clear();
        check_key_.clear();
        damage_.clear();
        check_warnings_.clear();
      }
      if (run_dir_.empty()) {
        alert_.clear();
        return true;
      }
    } else if (run_dir_.empty()) {
      run_dir_ = target_.path;
    }
    if (!follower_) {
      absl::StatusOr<Follower> opened = Follower::Open(run_dir_, args_.follow);
      if (!opened.ok()) {
        alert_ = fmt::format("run {}: {}", run_dir_, std::string(opened.status().message()));
        return false;
      }
      follower_.emplace(*std::move(opened));
    }
    const absl::Status polled = follower_->poll();
    if (!polled.ok() && !holds_run_json(run_dir_)) {
      alert_ = fmt::format(
          "run {} vanished: {} no longer holds a run (no run.json); showing what was read before",
          run_name(), run_dir_);
      return false;
    }
    if (!polled.ok()) {  // what run.json is when it is no file, a damaged file: named
      alert_ = fmt::format("run {}: {}; showing what was read before", run_name(),
                           std::string(polled.message()));
      return false;
    }
    alert_.clear();
    // Nothing appended since the last diagnosis: keep it (an ended run stays
    // on the screen until q without a diagnosis per refresh; a quiet running
    // one is diagnosed again every kRediagnoseMs, for its ranks' states).
    const std::uint64_t bytes = follower_->bytes_read();
    const bool in_progress = follower_->in_progress();
    const std::int64_t now = trainscope::detail::unix_now_ms();
    if (diagnosis_ && bytes == diagnosed_bytes_ && in_progress == diagnosed_in_progress_ &&
        (!in_progress || now - diagnosed_at_ms_ < kRediagnoseMs)) {
      if (in_progress) diagnosis_->elapsed_ms = now - diagnosis_->start_time_ms;
      return checked();
    }
    const std::string previous_id = diagnosis_ ? diagnosis_->run_id : last_run_id_;
    diagnosis_ = follower_->diagnose();
    diagnosed_bytes_ = bytes;
    diagnosed_in_progress_ = in_progress;
    diagnosed_at_ms_ = now;
    if (!previous_id.empty() && previous_id != diagnosis_->run_id) {
      replaced_ = fmt::format("a new run at this path: {} (the run {} was replaced)",
                              name_and_id(*diagnosis_), previous_id);
      check_key_.clear();
    }
    last_run_id_ = diagnosis_->run_id;
    // The run held to its summaries, as every reader (check_run): again when
    // ranks ended (only ended ranks are held to theirs), at most every
    // kRediagnoseMs while the run goes on (each check reads every summary).
    std::size_t ended = 0;
    for (const RankNow& rank : diagnosis_->ranks) ended += !rank.status.running();
    const std::string key = fmt::format("{} {} {}", diagnosis_->run_id, ended, in_progress);
    if (key != check_key_ &&
        (check_key_.empty() || !in_progress || now - checked_at_ms_ >= kRediagnoseMs)) {
      check_key_ = key;
      checked_at_ms_ = now;
      damage_.clear();
      check_warnings_.clear();
      absl::StatusOr<std::vector<RunProblem>> problems = follower_->check();
      if (problems.ok()) {
        if (absl::Status lost = run_problems_error(*problems); !lost.ok()) {
          damage_ = std::string(lost.message());
        }
        check_warnings_ = run_problem_warnings(*problems);
      }
    }
    return checked();
  }

  // False, with the loss as the alert, when the run's region rows are lost.
  bool checked() {
    if (damage_.empty()) return true;
    alert_ = fmt::format("run {}: {}", run_name(), damage_);
    return false;
  }

  // A new window: the follower is opened again (it reads the run once more).
  void set_window(std::size_t window) {
    if (window == args_.follow.window_steps) return;
    args_.follow.window_steps = window;
    follower_.reset();
    diagnosis_.reset();
  }

  ViewState view(bool utf8, std::size_t width, std::size_t max_job_lines, bool live) const {
    ViewState state;
    state.live = live;
    state.diagnosis = diagnosis_ ? &*diagnosis_ : nullptr;
    state.run_dir = run_dir_;
    state.follow_note = target_.note;
    state.alert = alert_;
    state.warnings = check_warnings_;
    if (diagnosis_) {
      state.warnings.insert(state.warnings.end(), diagnosis_->warnings.begin(),
                            diagnosis_->warnings.end());
    }
    state.replaced = replaced_;
    state.sweep = sweep_ ? &sweep_->view() : nullptr;
    state.sort = args_.sort;
    state.utf8 = utf8;
    state.width = width;
    state.max_job_lines = max_job_lines;
    if (sweep_ && run_dir_.empty() && alert_.empty()) state.alert = "no job has a run yet";
    return state;
  }

  TopSettings& args() { return args_; }
  const std::optional<Diagnosis>& diagnosis() const { return diagnosis_; }
  const std::string& alert() const { return alert_; }
  const std::string& run_dir() const { return run_dir_; }
  std::uint64_t bytes_read() const { return follower_ ? follower_->bytes_read() : 0; }

 private:
  // "<name> (<id>)" as last read, else the directory's name.
  std::string run_name() const {
    if (diagnosis_) return name_and_id(*diagnosis_);
    return fs::path(run_dir_).filename().string();
  }

  TopSettings args_;
  Target target_;
  std::optional<SweepWatcher> sweep_;
  std::string run_dir_;
  std::optional<Follower> follower_;
  std::optional<Diagnosis> diagnosis_;
  // bytes_read(), in_progress() and the time when diagnosis_ was made.
  std::uint64_t diagnosed_bytes_ = 0;
  bool diagnosed_in_progress_ = true;
  std::int64_t diagnosed_at_ms_ = 0;
  std::string alert_;
  std::string last_run_id_;  // of the last diagnosis (kept across a new window)
  std::string replaced_;     // a new run at the path, said
  // check_run as of the run id, ended ranks and whether the run goes on.
  std::string check_key_;
  std::int64_t checked_at_ms_ = 0;
  std::string damage_;  // its error: the run's region rows are lost
  std::vector<std::string> check_warnings_;
};

}  // namespace

struct TopSession::Impl {
  Session session;
};

TopSession::TopSession(TopSettings settings, TopTarget target)
    : impl_(std::make_unique<Impl>(Impl{Session(std::move(settings), std::move(target))})) {}
TopSession::TopSession(TopSession&&) noexcept = default;
TopSession& TopSession::operator=(TopSession&&) noexcept = default;
TopSession::~TopSession() = default;

bool TopSession::refresh() { return impl_->session.refresh(); }
void TopSession::set_window(std::size_t window) { impl_->session.set_window(window); }
std::vector<TopLine> TopSession::lines(bool utf8, std::size_t width, std::size_t max_job_lines,
                                       bool live) const {
  return view_lines(impl_->session.view(utf8, width, max_job_lines, live));
}
TopSession::KeyAction TopSession::press(int key) {
  constexpr std::size_t kMinWindow = 2;
  constexpr std::size_t kMaxWindow = 1000000;
  TopSettings& s = settings();
  switch (key) {
    case 'q':
    case 'Q':
      return KeyAction::kQuit;
    case 's':
    case 'S':
      s.sort = next_top_sort(s.sort, key == 's' ? 1 : -1);
      return KeyAction::kRedraw;
    case 'w':
    case 'W': {
      const std::size_t window = s.follow.window_steps;
      set_window(key == 'w' ? std::max(kMinWindow, window / 2) : std::min(kMaxWindow, window * 2));
      return KeyAction::kRefresh;  // read again at once
    }
    case 'r':
    case 'R':
      return KeyAction::kRefresh;
    default:
      return KeyAction::kNone;
  }
}

std::optional<std::string> TopSession::snapshot(bool json, bool utf8) {
  const bool ok = refresh();
  if (json) {
    if (!ok || !diagnosis()) return std::nullopt;
    return diagnosis_json(*diagnosis(), 2) + "\n";
  }
  if (!ok) return std::nullopt;
  std::string out;
  for (const TopLine& line : lines(utf8, 120, 1000000, false)) out += line.text + "\n";
  return out;
}

std::string TopSession::footer(double interval_s) {
  return fmt::format(" q quit  s/S sort: {}  w/W window: {}  r refresh  every {}s  read {}",
                     top_sort_name(settings().sort), settings().follow.window_steps, interval_s,
                     format_bytes(bytes_read()));
}

std::string fit_columns(const std::string& text, int columns) {
  int cells = 0;
  std::size_t i = 0;
  while (i < text.size() && cells < columns) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    i = std::min(text.size(), i + len);
    ++cells;
  }
  return text.substr(0, i);
}

TopSettings& TopSession::settings() { return impl_->session.args(); }
const std::optional<Diagnosis>& TopSession::diagnosis() const { return impl_->session.diagnosis(); }
std::string TopSession::alert() const { return impl_->session.view(false, 120, 0, false).alert; }
std::uint64_t TopSession::bytes_read() const { return impl_->session.bytes_read(); }

absl::StatusOr<TopTarget> resolve_top_target(const std::vector<std::string>& targets) {
  return resolve_target(targets);
}

std::string format_bytes(std::uint64_t bytes) { return fmt_bytes(bytes); }

}  // namespace trainscope::top
