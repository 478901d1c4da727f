// Words as sh reads them back: the command a run records (`trainscope.command`),
// the commands a sweep names in its messages, the lines of a Slurm script.
#ifndef TRAINSCOPE_SRC_COMMON_SHELL_QUOTE_HPP_
#define TRAINSCOPE_SRC_COMMON_SHELL_QUOTE_HPP_

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::detail {

// Always single-quoted ('it'\''s').
inline std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string_view("'\\''") : std::string_view(&c, 1);
  return out + "'";
}

// As is when every byte is one sh takes literally ([A-Za-z0-9] and _-./=:,+@%),
// else single-quoted.
inline std::string shell_word(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./=:,+@%", c) != nullptr;
  });
  return plain ? std::string(word) : shell_quote(word);
}

// The words joined by spaces, each a shell_word: a command line to paste.
inline std::string shell_command(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += ' ';
    out += shell_word(word);
  }
  return out;
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_SHELL_QUOTE_HPP_
