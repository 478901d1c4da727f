// CSV helpers shared by the CSV summary and the samples file (internal).
#ifndef TRAINSCOPE_SRC_COMMON_CSV_HPP_
#define TRAINSCOPE_SRC_COMMON_CSV_HPP_

#include <string>
#include <string_view>

namespace trainscope::detail {

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
inline void append_csv_field(std::string_view field, std::string* out) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(field);
    return;
  }
  out->push_back('"');
  for (char c : field) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

inline std::string csv_field(std::string_view field) {
  std::string out;
  append_csv_field(field, &out);
  return out;
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_CSV_HPP_
