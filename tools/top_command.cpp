// `trainscope top [RUN | ROOT | SWEEP_DIR]`: a live terminal view of a run
// (ncurses): status, ranks, hosts, steps/s and its trend, the diagnosis with
// its evidence, the phase table, a per-key table, data-wait share and the
// hosts' hardware. It follows the run with one diagnosis::Follower (opened
// once, then poll() + diagnose() every interval: it reads only what the run
// appended). Not a terminal, or --once: one plain snapshot; --json: the
// diagnosis document (diagnosis_json). docs/top.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/top/top_view.hpp"

// Last: curses defines OK, ERR, TRUE, FALSE (its function-like macros are off).
#define NCURSES_NOMACROS 1
#include <curses.h>
#include <langinfo.h>

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace top_cmd {

using top::TopLine;
using top::TopSession;
using top::TopSort;
using top::TopStyle;

constexpr char kDescription[] =
    "A live view of a run, refreshed every --interval seconds: status, ranks (host,\n"
    "status, steps), hosts, elapsed time, steps/s with its trend (the window's\n"
    "against the run's), the diagnosis (labels with their evidence), the step's\n"
    "phases (median, p95, share, worst rank, skew), a per-key table (count, rate,\n"
    "p50 and p95 over the window, share of the step), data-wait share, host CPU and\n"
    "memory, GPU utilisation and memory per device. It reads only what the run\n"
    "appends, so following a run costs what the run writes, not its size.\n"
    "\n"
    "What it follows:\n"
    "  RUN        a run directory\n"
    "  ROOT       a directory of runs: the newest running one, else the newest\n"
    "  SWEEP_DIR  a `trainscope sweep` directory: its jobs (running, done, failed,\n"
    "             ETA) and the running job's run\n"
    "  (none)     TRAINSCOPE_RUN_DIR when it is a run, else the newest running run\n"
    "             (else the newest) under TRAINSCOPE_RUNS_ROOT or ./trainscope-runs\n"
    "\n"
    "Keys: q quit, s/S next/previous per-key sort (share, p95, count, name),\n"
    "w/W halve/double the window (re-reads the run once), r refresh now.\n";

constexpr char kFooter[] =
    "Not a terminal, or --once: one plain-text snapshot; --json: the diagnosis\n"
    "document of `trainscope diagnose --json` (of the followed run for a sweep).\n"
    "Exit status: 0 done (q, or a snapshot printed), 1 nothing to follow (no such\n"
    "run, not a run, a vanished or damaged run or one whose region rows are lost,\n"
    "with --once or --json), 2 bad usage.\n";

struct Args {
  std::vector<std::string> targets;
  double interval_s = 1.0;
  top::TopSettings top;
  bool once = false;
  bool json = false;
};

std::optional<Args> parse(const std::vector<std::string>& raw, int* exit_code) {
  Args args;
  CommandLine line({"top",
                    "trainscope top [RUN | ROOT | SWEEP_DIR] [--interval S] [--window K]\n"
                    "                      [--once] [--json] [--phase P=KEY]... "
                    "[--threshold NAME=V]...",
                    kDescription, kFooter});
  line.add_value("--interval", "S", "seconds between refreshes (default 1)",
                 [&](const std::string& v) { args.interval_s = seconds("--interval", v); });
  add_diagnosis_options(&line, &args.top.follow);
  line.add_flag("--once", "print one plain-text snapshot and exit", &args.once);
  line.add_flag("--json", "print one JSON snapshot (the diagnosis document) and exit", &args.json);
  line.add_value("--sort", "BY", "the per-key table's order: share, p95, count, name",
                 [&](const std::string& v) {
                   for (TopSort order : top::kTopSorts) {
                     if (top::top_sort_name(order) == v) {
                       args.top.sort = order;
                       return;
                     }
                   }
                   bad_value("--sort needs share, p95, count or name, got '" + v + "'");
                 });
  line.add_positionals("RUN | ROOT | SWEEP_DIR", &args.targets, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(raw)) {
    *exit_code = *done;
    return std::nullopt;
  }
  if (args.targets.size() > 1) {
    *exit_code = line.usage_error(fmt::format("one run, root or sweep at a time (got {} and {})",
                                              args.targets[0], args.targets[1]));
    return std::nullopt;
  }
  if (args.once && args.json) {
    *exit_code = line.usage_error("--once and --json: give one of them");
    return std::nullopt;
  }
  return args;
}

bool utf8_locale() {
  const char* codeset = nl_langinfo(CODESET);
  return codeset != nullptr && std::string_view(codeset) == "UTF-8";
}

int snapshot(TopSession* session, bool json) {
  const std::optional<std::string> text = session->snapshot(json, utf8_locale());
  if (!text) {
    std::fprintf(stderr, "trainscope top: %s\n", session->alert().c_str());
    return kExitFailed;
  }
  std::fputs(text->c_str(), stdout);
  return kExitOk;
}

// ---------------------------------------------------------------------------
// The terminal

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

class Screen {
 public:
  bool start() {
    screen_ = newterm(nullptr, stdout, stdin);
    if (screen_ == nullptr) return false;
    set_term(screen_);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    if (has_colors()) {
      start_color();
      use_default_colors();
      init_pair(1, COLOR_RED, -1);
      init_pair(2, COLOR_GREEN, -1);
      init_pair(3, COLOR_YELLOW, -1);
      colors_ = true;
    }
    return true;
  }
  ~Screen() {
    if (screen_ != nullptr) {
      endwin();
      delscreen(screen_);
    }
  }

  int rows() const { return std::max(0, LINES); }
  int columns() const { return std::max(0, COLS); }

  void draw(const std::vector<TopLine>& lines, const std::string& footer) {
    erase();
    const int rows = this->rows(), columns = this->columns();
    const int body = std::max(0, rows - 1);
    int y = 0;
    for (const TopLine& line : lines) {
      if (y >= body) break;
      attrset(attribute(line.style));
      mvaddstr(y++, 0, top::fit_columns(line.text, columns).c_str());
    }
    if (rows > 0) {
      attrset(A_REVERSE);
      // Never the bottom-right cell: writing it would scroll.
      mvaddstr(rows - 1, 0, top::fit_columns(footer, std::max(0, columns - 1)).c_str());
    }
    attrset(A_NORMAL);
    refresh();
  }

 private:
  attr_t attribute(TopStyle style) const {
    switch (style) {
      case TopStyle::kTitle:
        return A_BOLD;
      case TopStyle::kHeader:
        return A_UNDERLINE;
      case TopStyle::kLabel:
        return A_BOLD | (colors_ ? COLOR_PAIR(3) : 0);
      case TopStyle::kAlert:
        return A_BOLD | (colors_ ? COLOR_PAIR(1) : 0);
      case TopStyle::kGood:
        return colors_ ? COLOR_PAIR(2) : A_NORMAL;
      case TopStyle::kDim:
        return A_DIM;
      case TopStyle::kNormal:
        break;
    }
    return A_NORMAL;
  }

  SCREEN* screen_ = nullptr;
  bool colors_ = false;
};

int live(TopSession* session, double interval_s) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);

  const bool utf8 = utf8_locale();
  Screen screen;
  if (!screen.start()) {
    std::fprintf(stderr, "trainscope top: cannot drive this terminal (TERM=%s): a snapshot\n",
                 std::getenv("TERM") != nullptr ? std::getenv("TERM") : "");
    return snapshot(session, false);
  }
  using Clock = std::chrono::steady_clock;
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s));
  Clock::time_point next = Clock::now();
  bool redraw = true;
  const auto draw = [&] {
    const std::size_t width = static_cast<std::size_t>(std::max(20, screen.columns()));
    const std::size_t job_lines = static_cast<std::size_t>(std::max(2, screen.rows() / 4));
    screen.draw(session->lines(utf8, width, job_lines, true), session->footer(interval_s));
  };
  while (g_stop == 0) {
    const Clock::time_point now = Clock::now();
    if (now >= next) {
      session->refresh();
      redraw = true;
      next = now + interval;
    }
    if (redraw) {
      draw();
      redraw = false;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    timeout(static_cast<int>(std::clamp<std::int64_t>(wait.count(), 0, 1000)));
    const int key = getch();
    if (key == KEY_RESIZE) redraw = true;
    switch (session->press(key)) {
      case TopSession::KeyAction::kQuit:
        return kExitOk;
      case TopSession::KeyAction::kRedraw:
        redraw = true;
        break;
      case TopSession::KeyAction::kRefresh:
        next = Clock::now();
        break;
      case TopSession::KeyAction::kNone:
        break;
    }
  }
  return kExitOk;
}

}  // namespace top_cmd

int top_command(const std::vector<std::string>& raw_args) {
  using namespace top_cmd;  // NOLINT(build/namespaces): this file's own names
  int exit_code = kExitOk;
  std::optional<Args> args = parse(raw_args, &exit_code);
  if (!args) return exit_code;
  std::setlocale(LC_ALL, "");
  absl::StatusOr<top::TopTarget> target = top::resolve_top_target(args->targets);
  if (!target.ok()) {
    std::fprintf(stderr, "trainscope top: %s\n", std::string(target.status().message()).c_str());
    return kExitFailed;
  }
  const bool terminal = ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDIN_FILENO) == 1;
  const bool once = args->once || args->json || !terminal;
  const bool json = args->json;
  const double interval_s = args->interval_s;
  TopSession session(std::move(args->top), *std::move(target));
  return once ? snapshot(&session, json) : live(&session, interval_s);
}

}  // namespace trainscope::cli
