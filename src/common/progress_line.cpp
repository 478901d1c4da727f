#include "common/progress_line.hpp"

namespace trainscope::detail {

void ProgressLine::show(std::string_view text) {
  if (!terminal_) return;
  // \33[K clears what a longer previous line left.
  std::fprintf(out_, "\r%.*s\33[K", static_cast<int>(text.size()), text.data());
  std::fflush(out_);
}

void ProgressLine::print(std::string_view text) {
  if (terminal_) {
    show(text);
    std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "%s: %.*s\n", prefix_.c_str(), static_cast<int>(text.size()), text.data());
  }
  std::fflush(out_);
}

void ProgressLine::update(std::string_view text) {
  if (terminal_) {
    show(text);
  } else {
    print(text);
  }
}

}  // namespace trainscope::detail
