// The name a user most likely meant ("did you mean"), for every command and
// reader that rejects an unknown name.
#ifndef TRAINSCOPE_COMMON_CLOSEST_NAME_HPP_
#define TRAINSCOPE_COMMON_CLOSEST_NAME_HPP_

#include <string>
#include <string_view>
#include <vector>

namespace trainscope {

// The candidate closest to `word` by optimal string alignment distance
// (Levenshtein with adjacent swaps) when it is a likely misspelling: at most 2
// edits, and fewer than half the word's length; else "". The first of equals.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace trainscope

#endif  // TRAINSCOPE_COMMON_CLOSEST_NAME_HPP_
