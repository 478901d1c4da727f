// Helpers shared by the sweep input readers (internal).
#ifndef TRAINSCOPE_SRC_SWEEP_INPUTS_UTIL_HPP_
#define TRAINSCOPE_SRC_SWEEP_INPUTS_UTIL_HPP_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stable_hash.hpp"

namespace trainscope::sweep::detail {

// A hash that is the same on every platform and in every process, for names
// derived from an input (job ids, a grid's sweep name).
// Its own basis (the ids of sweeps recorded before stay the same).
inline std::uint64_t stable_hash(absl::string_view text) {
  return ::trainscope::detail::stable_hash(std::string_view(text.data(), text.size()),
                                           1469598103934665603ull);
}

// `value`'s last `digits` hex digits (lower case, zero-padded).
inline std::string hex_digits(std::uint64_t value, int digits) {
  static const char* kHex = "0123456789abcdef";
  std::string hex(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4)
    hex[static_cast<std::size_t>(i)] = kHex[value & 15];
  return hex;
}

// A file name without directory and extension ("cfg/example.json" -> "example").
inline std::string stem_of(absl::string_view path) {
  absl::string_view base = path.substr(path.find_last_of('/') + 1);
  const std::size_t dot = base.find_last_of('.');
  if (dot != absl::string_view::npos && dot > 0) base = base.substr(0, dot);
  return std::string(base);
}

// A job id usable as a directory name: every byte outside [A-Za-z0-9._=-]
// becomes '-'; an empty id "run"; past 120 bytes, the first 100 and a hash of
// the whole (stable_hash).
inline std::string safe_id(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '=' || c == '-';
    out.push_back(ok ? c : '-');
  }
  if (out.empty() || out == "." || out == "..") out = "run" + out;
  if (out.size() > 120)
    out = absl::StrCat(out.substr(0, 100), "-", hex_digits(stable_hash(text), 16));
  return out;
}

// "k=v_k2=v2" (then safe_id) for a job named by its params.
inline std::string params_id(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string text;
  for (const auto& [key, value] : params) {
    if (!text.empty()) text += '_';
    absl::StrAppend(&text, key, "=", value);
  }
  return safe_id(text);
}

// Makes ids unique in input order: a repeated id gets "-2", "-3", ... (the
// base shortened so that the id stays within safe_id's 120 bytes).
class UniqueIds {
 public:
  std::string take(const std::string& base) {
    constexpr std::size_t kMaxId = 120;
    std::string id = base;
    for (int n = 2; !used_.insert(id).second; ++n) {
      const std::string suffix = absl::StrCat("-", n);
      id = absl::StrCat(base.substr(0, std::min(base.size(), kMaxId - suffix.size())), suffix);
    }
    return id;
  }

 private:
  std::set<std::string> used_;
};

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_INPUTS_UTIL_HPP_
