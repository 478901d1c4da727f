// A strict reader of a JSON document's fields that names each by its path
// when it is missing or of the wrong type ("runs.cold.time_s: a string, not a
// number"): the readers of the analyses' documents (stalls.json, the
// diagnosis, the comparison) read through parse_document, which turns a
// DocumentError into an error naming the file.
#ifndef TRAINSCOPE_SRC_COMMON_JSON_FIELD_HPP_
#define TRAINSCOPE_SRC_COMMON_JSON_FIELD_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace trainscope::detail {

// What is wrong with a document: thrown by Field, caught by the document's
// reader (which names the file).
struct DocumentError {
  std::string problem;  // "<path>: <what>"
};

// One value of a document and where it is.
class Field {
 public:
  Field(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  // A member of this object: DocumentError when this is not an object or the
  // member is missing.
  Field operator[](const std::string& key) const;
  // The member when it is there (this must be an object).
  std::optional<Field> find(const std::string& key) const;
  // The members of this object, in the document's order.
  std::vector<std::pair<std::string, Field>> members() const;
  // The items of this array.
  std::vector<Field> items() const;

  // null reads as NaN: a value JSON cannot hold, written as null.
  double number() const;
  std::int64_t integer(std::int64_t minimum) const;
  std::uint64_t unsigned_integer() const;
  int int_at_least(int minimum) const;
  std::string string() const;
  bool boolean() const;
  std::vector<std::string> strings() const;

  [[noreturn]] void fail(const std::string& what) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
};

// How a JSON value is named in an error: "a string", "an array", ...
std::string type_name(const nlohmann::json& value);

// The errors of parse_document (InvalidArgument): "<source>: not valid JSON:
// <where and what>" and "<source>: not a trainscope <what>: <path>: <problem>".
absl::Status not_json_error(std::string_view source, const char* exception_what);
absl::Status not_a_document_error(std::string_view source, std::string_view what,
                                  const DocumentError& error);

// `text` parsed and read by `read(Field)` (which throws DocumentError): the one
// way the analyses' documents are read, so that every reader words its errors
// alike. `what` names the document ("comparison", "diagnosis").
template <typename T, typename Read>
absl::StatusOr<T> parse_document(std::string_view text, std::string_view source,
                                 std::string_view what, Read read) {
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return not_json_error(source, e.what());
  }
  try {
    return read(Field(parsed, ""));
  } catch (const DocumentError& e) {
    return not_a_document_error(source, what, e);
  }
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_JSON_FIELD_HPP_
