// `trainscope top`'s view, the part that is no terminal: what to follow (a
// run, the newest running run under a root, a sweep's running job), the
// followed run's Follower (opened once, polled at every refresh), a sweep's
// jobs with their ETA, and the lines drawn (the same for the live terminal
// and the plain snapshot). tools/top_command.cpp parses flags, drives the
// terminal (ncurses) and its keys over a TopSession. docs/top.md.
#ifndef TRAINSCOPE_TOP_TOP_VIEW_HPP_
#define TRAINSCOPE_TOP_TOP_VIEW_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::top {

// The per-key table's order.
enum class TopSort { kShare, kP95, kCount, kName };
inline constexpr TopSort kTopSorts[] = {TopSort::kShare, TopSort::kP95, TopSort::kCount,
                                        TopSort::kName};
std::string_view top_sort_name(TopSort order);   // "share", "p95", "count", "name"
TopSort next_top_sort(TopSort order, int step);  // step +1 / -1, cycling

// Following live: diagnosis::live_options() (diagnosis.hpp), so that top stays
// near 2% of one core however fast the run writes.
using diagnosis::kLiveHistorySteps;
using diagnosis::kLiveReadBudget;
using diagnosis::live_options;
// "<name> (<id>)", or the id alone when the run has no name of its own.
std::string name_and_id(const diagnosis::Diagnosis& d);

// What `trainscope top [RUN | ROOT | SWEEP_DIR]` follows.
struct TopTarget {
  bool sweep = false;
  std::string path;  // the run directory, or the sweep directory
  std::string note;  // how it was chosen ("the newest running run under ...")
};
// No argument: TRAINSCOPE_RUN_DIR when it is a run, else the newest running
// run (else the newest) under TRAINSCOPE_RUNS_ROOT or ./trainscope-runs. An
// error names the path and what it is not.
absl::StatusOr<TopTarget> resolve_top_target(const std::vector<std::string>& targets);

enum class TopStyle { kNormal, kTitle, kHeader, kLabel, kAlert, kGood, kDim };
struct TopLine {
  std::string text;
  TopStyle style = TopStyle::kNormal;
};

struct TopSettings {
  diagnosis::FollowOptions follow = live_options();
  TopSort sort = TopSort::kShare;
};

class TopSession {
 public:
  TopSession(TopSettings settings, TopTarget target);
  TopSession(TopSession&&) noexcept;
  TopSession& operator=(TopSession&&) noexcept;
  ~TopSession();

  // Polls (for a sweep: re-reads its jobs, follows the running job's run).
  // False when the run could not be read this time (alert() says why; what
  // was read before stays).
  bool refresh();
  // A new window: the follower is opened again (it reads the run once more).
  void set_window(std::size_t window);
  // The view in lines of at most `width` columns; `live`: drawn in a terminal.
  std::vector<TopLine> lines(bool utf8, std::size_t width, std::size_t max_job_lines,
                             bool live) const;

  // What a key does to the view (q, s/S, w/W, r; anything else nothing).
  enum class KeyAction { kNone, kQuit, kRedraw, kRefresh };
  KeyAction press(int key);
  // One refresh as `top --once` prints it: the lines (120 columns), or with
  // `json` the diagnosis document; nullopt when the run could not be read (alert()).
  std::optional<std::string> snapshot(bool json, bool utf8);
  // The live view's last line: the keys, the sort, the window, the interval, bytes read.
  std::string footer(double interval_s);

  TopSettings& settings();
  const std::optional<diagnosis::Diagnosis>& diagnosis() const;
  std::string alert() const;
  std::uint64_t bytes_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "4.2 MiB": bytes as the footer shows them.
std::string format_bytes(std::uint64_t bytes);
// The longest prefix of `text` that takes at most `columns` cells (UTF-8:
// every code point one cell; the view writes no wide characters).
std::string fit_columns(const std::string& text, int columns);

}  // namespace trainscope::top

#endif  // TRAINSCOPE_TOP_TOP_VIEW_HPP_
