// Text for HTML and XML (SVG) element content and attribute values: &, <, >,
// " and ' escaped; the control characters XML 1.0 forbids (all but tab,
// newline and carriage return) replaced by '?'. One of each: the report's
// pages and the scaling room's SVG plots use it.
#ifndef TRAINSCOPE_SRC_COMMON_MARKUP_HPP_
#define TRAINSCOPE_SRC_COMMON_MARKUP_HPP_

#include <string>
#include <string_view>

namespace trainscope::detail {

inline std::string escape_markup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_MARKUP_HPP_
