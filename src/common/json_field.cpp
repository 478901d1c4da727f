#include "common/json_field.hpp"

#include <limits>
#include <utility>

#include "fmt/format.h"

namespace trainscope::detail {

using nlohmann::json;

std::string type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

absl::Status not_json_error(std::string_view source, const char* exception_what) {
  // "[json.exception.parse_error.101] parse error at line 1, ...": the part after the tag.
  std::string_view message = exception_what;
  if (!message.empty() && message.front() == '[') {
    const std::size_t end = message.find("] ");
    if (end != std::string_view::npos) message.remove_prefix(end + 2);
  }
  return absl::InvalidArgumentError(fmt::format("{}: not valid JSON: {}", source, message));
}

absl::Status not_a_document_error(std::string_view source, std::string_view what,
                                  const DocumentError& error) {
  return absl::InvalidArgumentError(
      fmt::format("{}: not a trainscope {}: {}", source, what, error.problem));
}

void Field::fail(const std::string& what) const {
  throw DocumentError{path_.empty() ? what : path_ + ": " + what};
}

Field Field::operator[](const std::string& key) const {
  std::optional<Field> member = find(key);
  if (!member) Field(*value_, path_.empty() ? key : path_ + "." + key).fail("missing");
  return *member;
}

std::optional<Field> Field::find(const std::string& key) const {
  if (!value_->is_object()) fail(type_name(*value_) + ", not an object");
  const auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return Field(*it, path_.empty() ? key : path_ + "." + key);
}

std::vector<std::pair<std::string, Field>> Field::members() const {
  if (!value_->is_object()) fail(type_name(*value_) + ", not an object");
  std::vector<std::pair<std::string, Field>> out;
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    out.emplace_back(it.key(),
                     Field(it.value(), path_.empty() ? it.key() : path_ + "." + it.key()));
  }
  return out;
}

std::vector<Field> Field::items() const {
  if (!value_->is_array()) fail(type_name(*value_) + ", not an array");
  std::vector<Field> out;
  for (std::size_t i = 0; i < value_->size(); ++i) {
    out.emplace_back((*value_)[i], fmt::format("{}[{}]", path_, i));
  }
  return out;
}

double Field::number() const {
  if (value_->is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value_->is_number()) fail(type_name(*value_) + ", not a number");
  return value_->get<double>();
}

std::int64_t Field::integer(std::int64_t minimum) const {
  std::int64_t n = 0;
  if (value_->is_number_unsigned()) {
    const std::uint64_t u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(fmt::format("{} is too large", u));
    }
    n = static_cast<std::int64_t>(u);
  } else if (value_->is_number_integer()) {
    n = value_->get<std::int64_t>();
  } else {
    fail(type_name(*value_) + ", not a whole number");
  }
  if (n < minimum) fail(fmt::format("{}, not a whole number >= {}", n, minimum));
  return n;
}

std::uint64_t Field::unsigned_integer() const {
  if (value_->is_number_unsigned()) return value_->get<std::uint64_t>();
  return static_cast<std::uint64_t>(integer(0));
}

int Field::int_at_least(int minimum) const {
  const std::int64_t n = integer(minimum);
  if (n > std::numeric_limits<int>::max()) fail(fmt::format("{} is too large", n));
  return static_cast<int>(n);
}

std::string Field::string() const {
  if (!value_->is_string()) fail(type_name(*value_) + ", not a string");
  return value_->get<std::string>();
}

bool Field::boolean() const {
  if (!value_->is_boolean()) fail(type_name(*value_) + ", not true or false");
  return value_->get<bool>();
}

std::vector<std::string> Field::strings() const {
  std::vector<std::string> out;
  for (const Field& item : items()) out.push_back(item.string());
  return out;
}

}  // namespace trainscope::detail
