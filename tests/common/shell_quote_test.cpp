// The one shell quoting: what sh reads back is the words given.
#include "common/shell_quote.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace trainscope::detail {
namespace {

// What `sh -c 'printf "%s\n" <line>'` prints: the words sh reads from the line.
std::vector<std::string> words_sh_reads(const std::string& line) {
  const std::string script = "printf '%s\\n' " + line;
  FILE* pipe = ::popen(("sh -c " + shell_quote(script)).c_str(), "r");
  std::vector<std::string> out;
  if (pipe == nullptr) return out;
  std::string word;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    if (c == '\n') {
      out.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(c));
    }
  }
  ::pclose(pipe);
  return out;
}

TEST(ShellQuoteTest, PlainWordsStayAsTheyAreOthersAreQuoted) {
  EXPECT_EQ(shell_word("train.py"), "train.py");
  EXPECT_EQ(shell_word("--lr=0.1"), "--lr=0.1");
  EXPECT_EQ(shell_word("a b"), "'a b'");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_command({"python", "-c", "print('x y')"}), "python -c 'print('\\''x y'\\'')'");
}

TEST(ShellQuoteTest, ShReadsBackTheWordsGiven) {
  const std::vector<std::string> words = {"python3", "-c",   "print('a b')", "", "$HOME",
                                          "x;y",     "*.py", "tab\there",    "é"};
  EXPECT_EQ(words_sh_reads(shell_command(words)), words);
}

}  // namespace
}  // namespace trainscope::detail
