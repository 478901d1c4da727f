// Numbers in measurement inputs (Extra-P files, run params): what Python's
// float() reads, but finite, so a file that Extra-P accepts reads the same.
#ifndef TRAINSCOPE_SRC_SCALING_NUMBER_TEXT_HPP_
#define TRAINSCOPE_SRC_SCALING_NUMBER_TEXT_HPP_

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>

namespace trainscope::scaling::detail {

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

// Without surrounding whitespace. (absl::StripAsciiWhitespace returns
// absl::string_view, which Debian's Abseil does not alias to std::string_view.)
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Coordinates read from different files may differ in the last bits.
inline bool same_value(double a, double b) {
  return a == b || std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b));
}

enum class NumberResult { kOk, kNotANumber, kNotFinite };

// One decimal number, the whole token (a leading '+' allowed).
inline NumberResult parse_number(std::string_view token, double* out) {
  std::string_view digits = token;
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-' && digits[1] != '+')
    digits.remove_prefix(1);
  if (digits.empty()) return NumberResult::kNotANumber;
  double value = 0.0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (end != digits.data() + digits.size()) return NumberResult::kNotANumber;
  if (error == std::errc::result_out_of_range) {
    // Overflow is not finite; underflow reads as Python reads it (0 or subnormal).
    value = std::strtod(std::string(digits).c_str(), nullptr);
  } else if (error != std::errc()) {
    return NumberResult::kNotANumber;
  }
  if (!std::isfinite(value)) return NumberResult::kNotFinite;
  *out = value;
  return NumberResult::kOk;
}

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_NUMBER_TEXT_HPP_
