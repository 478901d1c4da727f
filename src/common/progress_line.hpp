// One progress line for long commands (internal): on a terminal it is
// rewritten in place ("\r...\33[K"), elsewhere (a log file, CI) only the
// lines worth keeping are printed, each on its own line with a prefix.
#ifndef TRAINSCOPE_SRC_COMMON_PROGRESS_LINE_HPP_
#define TRAINSCOPE_SRC_COMMON_PROGRESS_LINE_HPP_

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace trainscope::detail {

class ProgressLine {
 public:
  // `prefix` starts the plain lines ("sweep" -> "sweep: TEXT").
  ProgressLine(std::FILE* out, bool terminal, std::string prefix)
      : out_(out), terminal_(terminal), prefix_(std::move(prefix)) {}

  bool terminal() const noexcept { return terminal_; }
  // A passing state: shown in place on a terminal, not printed elsewhere.
  void show(std::string_view text);
  // A line to keep: on a terminal it replaces the shown line and stays.
  void print(std::string_view text);
  // Like show() on a terminal, like print() elsewhere.
  void update(std::string_view text);

 private:
  std::FILE* out_;
  bool terminal_;
  std::string prefix_;
};

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_PROGRESS_LINE_HPP_
