#include "trainscope/export/mlflow/mlflow_keys.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "absl/strings/escaping.h"
#include "fmt/format.h"

namespace trainscope::mlflow {
namespace {

bool is_key_char(unsigned char c) {
  return std::isalnum(c) != 0 || c == '_' || c == '/' || c == '.' || c == '-' || c == ' ' ||
         c == ':' || c >= 0x80;
}

std::string quote(std::string_view text) {
  return fmt::format("\"{}\"", absl::CHexEscape(absl::string_view(text.data(), text.size())));
}

// As posixpath.normpath(key) == key, not absolute, not "..": MLflow stores
// keys as paths in some backends.
bool normalized_relative_path(std::string_view key) {
  if (key.substr(0, 2) == "..") return false;
  std::size_t begin = 0;
  while (begin <= key.size()) {
    const std::size_t end = std::min(key.find('/', begin), key.size());
    const std::string_view segment = key.substr(begin, end - begin);
    if (segment.empty() || segment == "." || segment == "..") return false;
    begin = end + 1;
  }
  return true;
}

}  // namespace

absl::Status validate_key(std::string_view key, std::string_view kind) {
  if (key.empty()) {
    return absl::InvalidArgumentError(fmt::format("{} key is empty (MLflow needs a name)", kind));
  }
  if (key.size() > kMaxKeyLength) {
    return absl::InvalidArgumentError(
        fmt::format("{} key {}... is {} characters long; MLflow allows at most {}", kind,
                    quote(key.substr(0, 40)), key.size(), kMaxKeyLength));
  }
  const auto bad = std::find_if_not(
      key.begin(), key.end(), [](char c) { return is_key_char(static_cast<unsigned char>(c)); });
  if (bad != key.end()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} key {} has the character {}, which MLflow rejects: keys may only contain letters, "
        "digits, '_', '-', '.', ' ', ':' and '/'",
        kind, quote(key), quote(std::string_view(&*bad, 1))));
  }
  if (!normalized_relative_path(key)) {
    return absl::InvalidArgumentError(fmt::format(
        "{} key {} is not a normalized relative path, which MLflow rejects (no leading, trailing "
        "or double slashes, no '.' or '..' parts)",
        kind, quote(key)));
  }
  return absl::OkStatus();
}

absl::Status validate_value(std::string_view kind, std::string_view key, std::string_view value,
                            std::size_t max_length) {
  if (value.size() <= max_length) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} {} has a value of {} characters; MLflow allows at most {}", kind, quote(key),
                  value.size(), max_length));
}

}  // namespace trainscope::mlflow
