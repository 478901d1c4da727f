#include "trainscope/run/run_filter.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/run/step_work.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "trainscope/stats/numbers.hpp"
#include "trainscope/stats/summary.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope {
namespace {

// --- Text as Python sees it: code points, white space, word characters, repr()

// One code point of UTF-8 text and its length in bytes. A byte that starts no
// valid sequence is one code point U+DC80..U+DCFF, as Python's surrogateescape
// decodes it.
struct CodePoint {
  char32_t value = 0;
  std::size_t size = 1;
};

CodePoint decode(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char first = byte(pos);
  if (first < 0x80) return {first, 1};
  std::size_t size = 0;
  char32_t value = 0;
  char32_t min = 0;
  if (first >= 0xC2 && first <= 0xDF) {
    size = 2, value = first & 0x1F, min = 0x80;
  } else if (first >= 0xE0 && first <= 0xEF) {
    size = 3, value = first & 0x0F, min = 0x800;
  } else if (first >= 0xF0 && first <= 0xF4) {
    size = 4, value = first & 0x07, min = 0x10000;
  }
  if (size == 0 || pos + size > text.size()) return {0xDC00u + first, 1};
  for (std::size_t i = 1; i < size; ++i) {
    const unsigned char next = byte(pos + i);
    if ((next & 0xC0) != 0x80) return {0xDC00u + first, 1};
    value = (value << 6) | (next & 0x3F);
  }
  if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return {0xDC00u + first, 1};
  }
  return {value, size};
}

struct Range {
  char32_t first;
  char32_t last;
};

// Whether `c` is in one of `table`'s ranges (sorted, apart).
template <std::size_t N>
bool in_table(char32_t c, const Range (&table)[N]) {
  const Range* after = std::upper_bound(std::begin(table), std::end(table), c,
                                        [](char32_t v, const Range& r) { return v < r.first; });
  return after != std::begin(table) && c <= (after - 1)->last;
}

// Unicode's classes as Python 3.11 (Unicode 14.0) has them, outside ASCII;
// unassigned code points join the range beside them. Generated with
//   [runs of cp in range(0x80, 0x110000) with chr(cp).isalnum() (kWord) or
//    not chr(cp).isprintable() (kUnprintable), skipping category Cn]
//   [cp for cp in range(0x80, 0x110000) if unicodedata.decimal(chr(cp), -1) == 0]
// (each zero of kDecimalZeros starts ten digits).
constexpr Range kWord[] = {
    {0xAA, 0xAA},       {0xB2, 0xB3},       {0xB5, 0xB5},       {0xB9, 0xBA},
    {0xBC, 0xBE},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},
    {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},
    {0x388, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x559},     {0x560, 0x588},
    {0x5D0, 0x5F2},     {0x620, 0x64A},     {0x660, 0x669},     {0x66E, 0x66F},
    {0x671, 0x6D3},     {0x6D5, 0x6D5},     {0x6E5, 0x6E6},     {0x6EE, 0x6FC},
    {0x6FF, 0x6FF},     {0x710, 0x710},     {0x712, 0x72F},     {0x74D, 0x7A5},
    {0x7B1, 0x7EA},     {0x7F4, 0x7F5},     {0x7FA, 0x7FA},     {0x800, 0x815},
    {0x81A, 0x81A},     {0x824, 0x824},     {0x828, 0x828},     {0x840, 0x858},
    {0x860, 0x887},     {0x889, 0x88E},     {0x8A0, 0x8C9},     {0x904, 0x939},
    {0x93D, 0x93D},     {0x950, 0x950},     {0x958, 0x961},     {0x966, 0x96F},
    {0x971, 0x980},     {0x985, 0x9B9},     {0x9BD, 0x9BD},     {0x9CE, 0x9CE},
    {0x9DC, 0x9E1},     {0x9E6, 0x9F1},     {0x9F4, 0x9F9},     {0x9FC, 0x9FC},
    {0xA05, 0xA39},     {0xA59, 0xA6F},     {0xA72, 0xA74},     {0xA85, 0xAB9},
    {0xABD, 0xABD},     {0xAD0, 0xAE1},     {0xAE6, 0xAEF},     {0xAF9, 0xAF9},
    {0xB05, 0xB39},     {0xB3D, 0xB3D},     {0xB5C, 0xB61},     {0xB66, 0xB6F},
    {0xB71, 0xB77},     {0xB83, 0xBB9},     {0xBD0, 0xBD0},     {0xBE6, 0xBF2},
    {0xC05, 0xC39},     {0xC3D, 0xC3D},     {0xC58, 0xC61},     {0xC66, 0xC6F},
    {0xC78, 0xC7E},     {0xC80, 0xC80},     {0xC85, 0xCB9},     {0xCBD, 0xCBD},
    {0xCDD, 0xCE1},     {0xCE6, 0xCF2},     {0xD04, 0xD3A},     {0xD3D, 0xD3D},
    {0xD4E, 0xD4E},     {0xD54, 0xD56},     {0xD58, 0xD61},     {0xD66, 0xD78},
    {0xD7A, 0xD7F},     {0xD85, 0xDC6},     {0xDE6, 0xDEF},     {0xE01, 0xE30},
    {0xE32, 0xE33},     {0xE40, 0xE46},     {0xE50, 0xE59},     {0xE81, 0xEB0},
    {0xEB2, 0xEB3},     {0xEBD, 0xEC6},     {0xED0, 0xF00},     {0xF20, 0xF33},
    {0xF40, 0xF6C},     {0xF88, 0xF8C},     {0x1000, 0x102A},   {0x103F, 0x1049},
    {0x1050, 0x1055},   {0x105A, 0x105D},   {0x1061, 0x1061},   {0x1065, 0x1066},
    {0x106E, 0x1070},   {0x1075, 0x1081},   {0x108E, 0x108E},   {0x1090, 0x1099},
    {0x10A0, 0x10FA},   {0x10FC, 0x135A},   {0x1369, 0x138F},   {0x13A0, 0x13FD},
    {0x1401, 0x166C},   {0x166F, 0x167F},   {0x1681, 0x169A},   {0x16A0, 0x16EA},
    {0x16EE, 0x1711},   {0x171F, 0x1731},   {0x1740, 0x1751},   {0x1760, 0x1770},
    {0x1780, 0x17B3},   {0x17D7, 0x17D7},   {0x17DC, 0x17DC},   {0x17E0, 0x17F9},
    {0x1810, 0x1884},   {0x1887, 0x18A8},   {0x18AA, 0x191E},   {0x1946, 0x19DA},
    {0x1A00, 0x1A16},   {0x1A20, 0x1A54},   {0x1A80, 0x1A99},   {0x1AA7, 0x1AA7},
    {0x1B05, 0x1B33},   {0x1B45, 0x1B59},   {0x1B83, 0x1BA0},   {0x1BAE, 0x1BE5},
    {0x1C00, 0x1C23},   {0x1C40, 0x1C7D},   {0x1C80, 0x1CBF},   {0x1CE9, 0x1CEC},
    {0x1CEE, 0x1CF3},   {0x1CF5, 0x1CF6},   {0x1CFA, 0x1DBF},   {0x1E00, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FCC},   {0x1FD0, 0x1FDB},   {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FFC},   {0x2070, 0x2079},   {0x207F, 0x2089},   {0x2090, 0x209C},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2139},   {0x213C, 0x213F},   {0x2145, 0x2149},
    {0x214E, 0x214E},   {0x2150, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF},
    {0x2776, 0x2793},   {0x2C00, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},
    {0x2CFD, 0x2CFD},   {0x2D00, 0x2D6F},   {0x2D80, 0x2DDE},   {0x2E2F, 0x2E2F},
    {0x3005, 0x3007},   {0x3021, 0x3029},   {0x3031, 0x3035},   {0x3038, 0x303C},
    {0x3041, 0x3096},   {0x309D, 0x309F},   {0x30A1, 0x30FA},   {0x30FC, 0x318E},
    {0x3192, 0x3195},   {0x31A0, 0x31BF},   {0x31F0, 0x31FF},   {0x3220, 0x3229},
    {0x3248, 0x324F},   {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF},
    {0x3400, 0x4DBF},   {0x4E00, 0xA48C},   {0xA4D0, 0xA4FD},   {0xA500, 0xA60C},
    {0xA610, 0xA66E},   {0xA67F, 0xA69D},   {0xA6A0, 0xA6EF},   {0xA717, 0xA71F},
    {0xA722, 0xA788},   {0xA78B, 0xA801},   {0xA803, 0xA805},   {0xA807, 0xA80A},
    {0xA80C, 0xA822},   {0xA830, 0xA835},   {0xA840, 0xA873},   {0xA882, 0xA8B3},
    {0xA8D0, 0xA8D9},   {0xA8F2, 0xA8F7},   {0xA8FB, 0xA8FB},   {0xA8FD, 0xA8FE},
    {0xA900, 0xA925},   {0xA930, 0xA946},   {0xA960, 0xA97C},   {0xA984, 0xA9B2},
    {0xA9CF, 0xA9D9},   {0xA9E0, 0xA9E4},   {0xA9E6, 0xAA28},   {0xAA40, 0xAA42},
    {0xAA44, 0xAA4B},   {0xAA50, 0xAA59},   {0xAA60, 0xAA76},   {0xAA7A, 0xAA7A},
    {0xAA7E, 0xAAAF},   {0xAAB1, 0xAAB1},   {0xAAB5, 0xAAB6},   {0xAAB9, 0xAABD},
    {0xAAC0, 0xAAC0},   {0xAAC2, 0xAADD},   {0xAAE0, 0xAAEA},   {0xAAF2, 0xAAF4},
    {0xAB01, 0xAB5A},   {0xAB5C, 0xAB69},   {0xAB70, 0xABE2},   {0xABF0, 0xD7FB},
    {0xF900, 0xFB1D},   {0xFB1F, 0xFB28},   {0xFB2A, 0xFBB1},   {0xFBD3, 0xFD3D},
    {0xFD50, 0xFDC7},   {0xFDF0, 0xFDFB},   {0xFE70, 0xFEFC},   {0xFF10, 0xFF19},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0xFF66, 0xFFDC},   {0x10000, 0x100FA},
    {0x10107, 0x10133}, {0x10140, 0x10178}, {0x1018A, 0x1018B}, {0x10280, 0x102D0},
    {0x102E1, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103CF}, {0x103D1, 0x10563},
    {0x10570, 0x10855}, {0x10858, 0x10876}, {0x10879, 0x1091B}, {0x10920, 0x10939},
    {0x10980, 0x10A00}, {0x10A10, 0x10A35}, {0x10A40, 0x10A48}, {0x10A60, 0x10A7E},
    {0x10A80, 0x10AC7}, {0x10AC9, 0x10AE4}, {0x10AEB, 0x10AEF}, {0x10B00, 0x10B35},
    {0x10B40, 0x10B91}, {0x10BA9, 0x10D23}, {0x10D30, 0x10EA9}, {0x10EB0, 0x10F45},
    {0x10F51, 0x10F54}, {0x10F70, 0x10F81}, {0x10FB0, 0x10FF6}, {0x11003, 0x11037},
    {0x11052, 0x1106F}, {0x11071, 0x11072}, {0x11075, 0x11075}, {0x11083, 0x110AF},
    {0x110D0, 0x110F9}, {0x11103, 0x11126}, {0x11136, 0x1113F}, {0x11144, 0x11144},
    {0x11147, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4},
    {0x111D0, 0x111DA}, {0x111DC, 0x111DC}, {0x111E1, 0x1122B}, {0x11280, 0x112A8},
    {0x112B0, 0x112DE}, {0x112F0, 0x112F9}, {0x11305, 0x11339}, {0x1133D, 0x1133D},
    {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11400, 0x11434}, {0x11447, 0x1144A},
    {0x11450, 0x11459}, {0x1145F, 0x114AF}, {0x114C4, 0x114C5}, {0x114C7, 0x115AE},
    {0x115D8, 0x115DB}, {0x11600, 0x1162F}, {0x11644, 0x11659}, {0x11680, 0x116AA},
    {0x116B8, 0x116B8}, {0x116C0, 0x1171A}, {0x11730, 0x1173B}, {0x11740, 0x1182B},
    {0x118A0, 0x1192F}, {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x11950, 0x119D0},
    {0x119E1, 0x119E1}, {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32},
    {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50}, {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D},
    {0x11AB0, 0x11C2E}, {0x11C40, 0x11C40}, {0x11C50, 0x11C6C}, {0x11C72, 0x11C8F},
    {0x11D00, 0x11D30}, {0x11D46, 0x11D46}, {0x11D50, 0x11D89}, {0x11D98, 0x11EF2},
    {0x11FB0, 0x11FD4}, {0x12000, 0x1246E}, {0x12480, 0x12FF0}, {0x13000, 0x1342E},
    {0x14400, 0x16A69}, {0x16A70, 0x16AED}, {0x16B00, 0x16B2F}, {0x16B40, 0x16B43},
    {0x16B50, 0x16E96}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16FE1},
    {0x16FE3, 0x16FE3}, {0x17000, 0x1BC99}, {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D6C0},
    {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA}, {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734},
    {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8},
    {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7FF}, {0x1DF00, 0x1DF1E}, {0x1E100, 0x1E12C},
    {0x1E137, 0x1E14E}, {0x1E290, 0x1E2AD}, {0x1E2C0, 0x1E2EB}, {0x1E2F0, 0x1E2F9},
    {0x1E7E0, 0x1E8CF}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E959}, {0x1EC71, 0x1ECAB},
    {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ED2D}, {0x1ED2F, 0x1EEBB}, {0x1F100, 0x1F10C},
    {0x1FBF0, 0x3134A}};

constexpr Range kUnprintable[] = {
    {0x80, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},
    {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},
    {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
    {0x205F, 0x206F},   {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},
    {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x13438},
    {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE007F}, {0xF0000, 0x10FFFD}};

constexpr char32_t kDecimalZeros[] = {
    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,   0xC66,
    0xCE6,   0xD66,   0xDE6,   0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,  0x1810,
    0x1946,  0x19D0,  0x1A80,  0x1A90,  0x1B50,  0x1BB0,  0x1C40,  0x1C50,  0xA620,  0xA8D0,
    0xA900,  0xA9D0,  0xA9F0,  0xAA50,  0xABF0,  0xFF10,  0x104A0, 0x10D30, 0x11066, 0x110F0,
    0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950,
    0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC,
    0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0};

// Python's str.isspace() (re's \s, str.strip()).
bool is_space(char32_t c) {
  static constexpr Range kSpace[] = {
      {0x09, 0x0D},     {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
      {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
  return in_table(c, kSpace);
}

// The value of a decimal digit (re's \d, str.isdecimal()), or -1.
int decimal_value(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9' ? static_cast<int>(c - '0') : -1;
  const char32_t* after = std::upper_bound(std::begin(kDecimalZeros), std::end(kDecimalZeros), c);
  if (after == std::begin(kDecimalZeros) || c - *(after - 1) > 9) return -1;
  return static_cast<int>(c - *(after - 1));
}

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_name_start(char32_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

// re's \w: str.isalnum() or `_`.
bool is_word(char32_t c) {
  if (c < 0x80) return is_name_start(c) || is_ascii_digit(c);
  return in_table(c, kWord);
}

// What repr() escapes: not str.isprintable().
bool is_unprintable(char32_t c) { return c < 0x20 || c == 0x7F || in_table(c, kUnprintable); }

// Python's repr() of the str `text` decodes to.
std::string py_repr(std::string_view text) {
  const bool single = text.find('\'') != std::string_view::npos;
  const bool dbl = text.find('"') != std::string_view::npos;
  const char quote = single && !dbl ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0; pos < text.size();) {
    const CodePoint c = decode(text, pos);
    if (c.value == static_cast<char32_t>(quote) || c.value == '\\') {
      out += '\\';
      out += static_cast<char>(c.value);
    } else if (c.value == '\t') {
      out += "\\t";
    } else if (c.value == '\n') {
      out += "\\n";
    } else if (c.value == '\r') {
      out += "\\r";
    } else if (is_unprintable(c.value)) {
      char escaped[12];
      const auto value = static_cast<unsigned long>(c.value);
      if (c.value < 0x100) {
        std::snprintf(escaped, sizeof(escaped), "\\x%02lx", value);
      } else if (c.value < 0x10000) {
        std::snprintf(escaped, sizeof(escaped), "\\u%04lx", value);
      } else {
        std::snprintf(escaped, sizeof(escaped), "\\U%08lx", value);
      }
      out += escaped;
    } else {
      out.append(text.substr(pos, c.size));
    }
    pos += c.size;
  }
  out += quote;
  return out;
}

// Python's str.strip().
std::string_view py_strip(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const CodePoint c = decode(text, begin);
    if (!is_space(c.value)) break;
    begin += c.size;
  }
  std::size_t end = begin;  // past the last code point that is no white space
  for (std::size_t pos = begin; pos < text.size();) {
    const CodePoint c = decode(text, pos);
    pos += c.size;
    if (!is_space(c.value)) end = pos;
  }
  return text.substr(begin, end - begin);
}

// Python's text[:count], in code points.
std::string_view py_prefix(std::string_view text, std::size_t count) {
  std::size_t pos = 0;
  for (std::size_t i = 0; i < count && pos < text.size(); ++i) pos += decode(text, pos).size;
  return text.substr(0, pos);
}

// --- Tokens

enum class TokenKind { kName, kOp, kString, kNumber };

struct Token {
  TokenKind kind;
  std::string_view value;
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  // Each: the end of its kind of token at `pos` (the regular expressions of
  // run_filter.hpp), or npos when there is none.
  std::size_t name(std::size_t pos) const {
    // (?:[A-Za-z_]\w*\.)* greedily, then the last part, giving back one
    // prefix at a time as the regular expression backtracks.
    std::vector<std::size_t> starts = {pos};
    for (std::size_t at = pos; at < text_.size() && is_name_start(at_(at));) {
      std::size_t end = at + 1;
      for (CodePoint c; end < text_.size() && is_word((c = decode(text_, end)).value);) {
        end += c.size;
      }
      if (end >= text_.size() || text_[end] != '.') break;
      at = end + 1;
      starts.push_back(at);
    }
    for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
      const std::size_t end = last_name_part(*it);
      if (end != std::string_view::npos) return end;
    }
    return std::string_view::npos;
  }

  std::size_t op(std::size_t pos) const {
    for (std::string_view op : {"<=", ">=", "!=", "=", "<", ">"}) {
      if (text_.substr(pos, op.size()) == op) return pos + op.size();
    }
    return std::string_view::npos;
  }

  std::size_t string(std::size_t pos) const {
    if (text_[pos] != '\'' && text_[pos] != '"') return std::string_view::npos;
    const std::size_t close = text_.find(text_[pos], pos + 1);
    return close == std::string_view::npos ? close : close + 1;
  }

  std::size_t number(std::size_t pos) const {
    std::size_t at = pos;
    if (at < text_.size() && (text_[at] == '-' || text_[at] == '+')) ++at;
    if (digit(at)) {
      at = digits(at);
      if (at < text_.size() && text_[at] == '.') at = digits(at + 1);
    } else if (at < text_.size() && text_[at] == '.' && digit(at + 1)) {
      at = digits(at + 1);
    } else {
      return std::string_view::npos;
    }
    if (at < text_.size() && (text_[at] == 'e' || text_[at] == 'E')) {
      std::size_t exponent = at + 1;
      if (exponent < text_.size() && (text_[exponent] == '-' || text_[exponent] == '+')) {
        ++exponent;
      }
      if (digit(exponent)) at = digits(exponent);
    }
    return at;
  }

 private:
  char32_t at_(std::size_t pos) const { return static_cast<unsigned char>(text_[pos]); }
  // The end of the decimal digit (\d: any script's) at `pos`, or npos.
  std::size_t digit_end(std::size_t pos) const {
    if (pos >= text_.size()) return std::string_view::npos;
    const CodePoint c = decode(text_, pos);
    return decimal_value(c.value) >= 0 ? pos + c.size : std::string_view::npos;
  }
  bool digit(std::size_t pos) const { return digit_end(pos) != std::string_view::npos; }
  std::size_t digits(std::size_t pos) const {
    for (std::size_t end; (end = digit_end(pos)) != std::string_view::npos;) pos = end;
    return pos;
  }

  // `[^`]+` or [A-Za-z_][\w.:/-]*
  std::size_t last_name_part(std::size_t pos) const {
    if (pos >= text_.size()) return std::string_view::npos;
    if (text_[pos] == '`') {
      const std::size_t close = text_.find('`', pos + 1);
      if (close != std::string_view::npos && close > pos + 1) return close + 1;
      return std::string_view::npos;
    }
    if (!is_name_start(at_(pos))) return std::string_view::npos;
    std::size_t end = pos + 1;
    while (end < text_.size()) {
      const CodePoint c = decode(text_, end);
      if (!is_word(c.value) && c.value != '.' && c.value != ':' && c.value != '/' &&
          c.value != '-') {
        break;
      }
      end += c.size;
    }
    return end;
  }

  std::string_view text_;
};

constexpr char kOps[] = "op one of = != < > <= >=";

absl::Status bad_filter(std::string_view text, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bad filter ", py_repr(text), ": ",
                                                 absl::string_view(what.data(), what.size())));
}

absl::StatusOr<std::vector<Token>> tokenize(std::string_view text) {
  const Scanner scanner(text);
  std::vector<Token> tokens;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t start = pos;
    while (start < text.size() && is_space(decode(text, start).value)) {
      start += decode(text, start).size;
    }
    if (start == text.size()) break;
    // In the regular expression's order: the first that matches is the token.
    using Scan = std::size_t (Scanner::*)(std::size_t) const;
    static constexpr std::pair<TokenKind, Scan> kScans[] = {{TokenKind::kName, &Scanner::name},
                                                            {TokenKind::kOp, &Scanner::op},
                                                            {TokenKind::kString, &Scanner::string},
                                                            {TokenKind::kNumber, &Scanner::number}};
    std::optional<Token> token;
    std::size_t end = std::string_view::npos;
    for (const auto& [kind, scan] : kScans) {
      end = (scanner.*scan)(start);
      if (end != std::string_view::npos) {
        token = Token{kind, text.substr(start, end - start)};
        break;
      }
    }
    if (!token) {
      return bad_filter(
          text, absl::StrCat("cannot read ", py_repr(py_prefix(py_strip(text.substr(pos)), 40)),
                             " (expected: column op value [and ...], ", kOps, ")"));
    }
    tokens.push_back(*token);
    pos = end;
  }
  return tokens;
}

// --- Clauses

bool is_attribute(std::string_view name) {
  return std::find(std::begin(kRunFilterAttributes), std::end(kRunFilterAttributes), name) !=
         std::end(kRunFilterAttributes);
}

absl::StatusOr<std::string> filter_column(std::string_view name, std::string_view text) {
  std::string column;
  for (char c : name) {
    if (c != '`') column += c;
  }
  if (absl::StartsWith(column, "attributes.")) {
    column.erase(0, std::string_view("attributes.").size());
    if (column == "id") column = "run_id";
  }
  if (is_attribute(column)) return column;
  for (std::string_view prefix : {"params.", "tags.", "regions.", "metrics.", "ledger."}) {
    if (absl::StartsWith(column, absl::string_view(prefix.data(), prefix.size())) &&
        column.size() > prefix.size() && !is_space(decode(column, prefix.size()).value)) {
      return column;
    }
  }
  return bad_filter(
      text, absl::StrCat("unknown column ", py_repr(column), " (one of ",
                         absl::StrJoin(
                             std::begin(kRunFilterAttributes), std::end(kRunFilterAttributes), ", ",
                             [](std::string* out, std::string_view name) { out->append(name); }),
                         ", params.<k>, tags.<k>, regions.<KEY>.<stat>, metrics.<k>, "
                         "ledger.<figure>)"));
}

// Python's float() of a str: its white space and decimal digits (of any
// script) made ASCII first, as _PyUnicode_TransformDecimalAndSpaceToASCII
// does, then ASCII white space around, `_` between digits, inf, infinity
// and nan in any case.
std::optional<double> py_float(std::string_view value) {
  std::string ascii;
  for (std::size_t pos = 0; pos < value.size();) {
    const CodePoint c = decode(value, pos);
    pos += c.size;
    const int digit = decimal_value(c.value);
    if (c.value < 0x7F) {
      ascii += static_cast<char>(c.value);
    } else if (is_space(c.value)) {
      ascii += ' ';
    } else if (digit >= 0) {
      ascii += static_cast<char>('0' + digit);
    } else {
      return std::nullopt;
    }
  }
  const absl::string_view stripped = absl::StripAsciiWhitespace(ascii);
  const std::string_view text(stripped.data(), stripped.size());
  std::string plain;
  std::size_t pos = 0;
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    if (text[pos] == '-') plain += '-';
    ++pos;
  }
  const std::string rest =
      absl::AsciiStrToLower(absl::string_view(text.data() + pos, text.size() - pos));
  if (rest == "inf" || rest == "infinity") return plain == "-" ? -HUGE_VAL : HUGE_VAL;
  if (rest == "nan") return stats::kNaN;
  // digits (`_` digit)*, returning whether there was one.
  const auto digits = [&] {
    if (pos >= text.size() || !is_ascii_digit(static_cast<unsigned char>(text[pos]))) return false;
    plain += text[pos++];
    while (pos < text.size()) {
      const bool underscore = text[pos] == '_';
      const std::size_t digit = underscore ? pos + 1 : pos;
      if (digit >= text.size() || !is_ascii_digit(static_cast<unsigned char>(text[digit]))) break;
      plain += text[digit];
      pos = digit + 1;
    }
    return true;
  };
  bool any = digits();
  if (pos < text.size() && text[pos] == '.') {
    plain += text[pos++];
    any = digits() || any;
  }
  if (!any) return std::nullopt;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    plain += text[pos++];
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      if (text[pos] == '-') plain += '-';
      ++pos;
    }
    if (!digits()) return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  double number = 0;
  if (!absl::SimpleAtod(plain, &number)) return std::nullopt;
  return number;
}

}  // namespace

absl::StatusOr<RunFilter> parse_run_filter(std::string_view text) {
  RunFilter filter;
  filter.text = std::string(text);
  absl::StatusOr<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty()) return filter;
  for (std::size_t i = 0;;) {
    const std::size_t n = std::min<std::size_t>(3, tokens->size() - i);
    const Token* part = tokens->data() + i;
    if (n < 3 || part[0].kind != TokenKind::kName || part[1].kind != TokenKind::kOp ||
        (part[2].kind != TokenKind::kString && part[2].kind != TokenKind::kNumber)) {
      std::string shown;
      for (std::size_t j = 0; j < n; ++j) {
        absl::StrAppend(&shown, j ? " " : "",
                        absl::string_view(part[j].value.data(), part[j].value.size()));
      }
      if (shown.empty()) shown = "nothing";
      return bad_filter(text, absl::StrCat("expected `column op value` at ", py_repr(shown), " (",
                                           kOps, "; quote strings: params.lr = '0.1')"));
    }
    absl::StatusOr<std::string> column = filter_column(part[0].value, text);
    if (!column.ok()) return column.status();
    RunFilterClause clause;
    clause.column = *std::move(column);
    clause.op = std::string(part[1].value);
    clause.numeric = part[2].kind == TokenKind::kNumber;
    if (clause.numeric) {
      clause.text = std::string(part[2].value);
      // The token is in float()'s syntax: only its range can go wrong, and
      // that rounds to inf or 0 as in Python.
      clause.number = py_float(clause.text).value_or(0.0);
    } else {
      clause.text = std::string(part[2].value.substr(1, part[2].value.size() - 2));
    }
    filter.clauses.push_back(std::move(clause));
    i += 3;
    if (i == tokens->size()) break;
    const Token& joint = (*tokens)[i];
    if (joint.kind != TokenKind::kName ||
        !absl::EqualsIgnoreCase(absl::string_view(joint.value.data(), joint.value.size()), "and")) {
      return bad_filter(text, absl::StrCat("expected `and` at ", py_repr(joint.value),
                                           " (only `and` joins comparisons)"));
    }
    ++i;
    if (i == tokens->size()) return bad_filter(text, "nothing after the last `and`");
  }
  return filter;
}

namespace {

// --- Values

// Python's repr() of a float: the shortest text that reads back, in
// positional notation from 1e-4 to below 1e16 ("361.2", "3.0"), else in
// scientific ("1e+16", "1.5e-05").
std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
  // "-d.ddde+XX"
  const bool negative = text.front() == '-';
  const std::size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  const std::string_view exp_text = text.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text.front() == '+' ? 1 : 0),
                  exp_text.data() + exp_text.size(), exponent);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (digits.size() <= static_cast<std::size_t>(exponent) + 1) {
      out +=
          digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<std::size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

// A fixed number of decimal digits at `pos` (advanced past them).
std::optional<int> fixed_digits(std::string_view text, std::size_t* pos, std::size_t count) {
  if (*pos + count > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char c = text[*pos + i];
    if (!is_ascii_digit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  *pos += count;
  return value;
}

// An ISO 8601 date or time as pandas.Timestamp reads one: YYYY[-MM[-DD[(T|
// )HH[[:]MM[[:]SS[.fraction]]][Z|(+|-)HH[[:]MM]]]]], UTC unless it has an offset.
std::optional<absl::Time> parse_utc_time(std::string_view text) {
  std::size_t pos = 0;
  const std::optional<int> year = fixed_digits(text, &pos, 4);
  if (!year) return std::nullopt;
  int month = 1, day = 1, hour = 0, minute = 0, second = 0;
  absl::Duration fraction;
  absl::Duration offset;
  const auto next = [&](char c) {
    if (pos >= text.size() || text[pos] != c) return false;
    ++pos;
    return true;
  };
  const auto field = [&](int* out, int min, int max) {
    const std::optional<int> value = fixed_digits(text, &pos, 2);
    if (!value || *value < min || *value > max) return false;
    *out = *value;
    return true;
  };
  if (next('-')) {
    if (!field(&month, 1, 12)) return std::nullopt;
    if (next('-')) {
      const int days = (absl::CivilDay(*year, month + 1, 1) - 1).day();  // in the month
      if (!field(&day, 1, days)) return std::nullopt;
      if (next('T') || next('t') || next(' ')) {
        if (!field(&hour, 0, 23)) return std::nullopt;
        // The colons are optional: T0600 is 06:00.
        const auto more = [&] {
          return next(':') ||
                 (pos < text.size() && is_ascii_digit(static_cast<unsigned char>(text[pos])));
        };
        if (more()) {
          if (!field(&minute, 0, 59)) return std::nullopt;
          if (more()) {
            if (!field(&second, 0, 59)) return std::nullopt;
            if (next('.')) {
              const std::size_t start = pos;
              std::int64_t nanos = 0;
              for (; pos < text.size() && is_ascii_digit(static_cast<unsigned char>(text[pos]));
                   ++pos) {
                if (pos - start < 9) nanos = nanos * 10 + (text[pos] - '0');
              }
              for (std::size_t i = pos - start; i < 9; ++i) nanos *= 10;
              fraction = absl::Nanoseconds(nanos);
            }
          }
        }
        if (!next('Z') && pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
          const int sign = text[pos++] == '-' ? -1 : 1;
          int hours = 0, minutes = 0;
          if (!field(&hours, 0, 23)) return std::nullopt;
          if (pos < text.size()) {
            next(':');
            if (!field(&minutes, 0, 59)) return std::nullopt;
          }
          offset = sign * (absl::Hours(hours) + absl::Minutes(minutes));
        }
      }
    }
  }
  if (pos != text.size()) return std::nullopt;
  return absl::FromCivil(absl::CivilSecond(*year, month, day, hour, minute, second),
                         absl::UTCTimeZone()) +
         fraction - offset;
}

template <typename T>
bool compare(const T& value, std::string_view op, const T& literal) {
  if (op == "=") return value == literal;
  if (op == "!=") return value != literal;
  if (op == "<") return value < literal;
  if (op == ">") return value > literal;
  if (op == "<=") return value <= literal;
  return value >= literal;
}

bool clause_matches(const RunFilterClause& clause, const std::string& value) {
  if (clause.column == "start_time" || clause.column == "end_time") {
    std::int64_t ms = 0;
    if (absl::SimpleAtoi(value, &ms)) {
      if (clause.numeric) {
        // As Python's Timestamp.value / 1e6: the nanoseconds rounded to a
        // double first, so a few ms values differ from themselves (then the
        // literal of the same digits is not `=`, as in search_runs).
        constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max() / 1000000;
        const double number = ms > -kMaxMs && ms < kMaxMs ? static_cast<double>(ms * 1000000) / 1e6
                                                          : static_cast<double>(ms);
        return compare(number, clause.op, clause.number);
      }
      // pandas reads these as NaT, unequal to every time.
      const std::string lower = absl::AsciiStrToLower(clause.text);
      if (lower.empty() || lower == "nat" || lower == "nan") return clause.op == "!=";
      const std::optional<absl::Time> literal = parse_utc_time(clause.text);
      return literal && compare(absl::FromUnixMillis(ms), clause.op, *literal);
    }
  }
  if (clause.numeric) {
    const std::optional<double> number = py_float(value);
    return number && !std::isnan(*number) && compare(*number, clause.op, clause.number);
  }
  if (clause.column == "duration_s" || absl::StartsWith(clause.column, "regions.") ||
      absl::StartsWith(clause.column, "metrics.") || absl::StartsWith(clause.column, "ledger.")) {
    const std::optional<double> number = py_float(value);
    if (number && std::isnan(*number)) return false;
  }
  return compare(std::string_view(value), clause.op, std::string_view(clause.text));
}

}  // namespace

RunFilterRowOptions row_options_for(const RunFilter& filter, Device device) {
  RunFilterRowOptions options;
  options.device = device;
  options.regions = options.metrics = false;
  for (const RunFilterClause& clause : filter.clauses) {
    options.regions = options.regions || absl::StartsWith(clause.column, "regions.");
    // ledger.*: derived for runs whose metrics hold work.
    options.metrics = options.metrics || absl::StartsWith(clause.column, "metrics.") ||
                      absl::StartsWith(clause.column, "ledger.");
  }
  return options;
}

absl::StatusOr<std::map<std::string, std::string>> run_filter_row(
    const RunReader& run, const RunFilterRowOptions& options) {
  const RunInfo& info = run.info();
  std::map<std::string, std::string> row = {
      {"run_id", info.id},
      {"name", info.name},
      {"experiment", info.experiment},
      {"status", std::string(run_status_name(info.status))},
      {"start_time", absl::StrCat(info.start_time_ms)},
      {"world_size", absl::StrCat(run.world_size())},
      {"dir", run.dir()},
  };
  if (!run.in_progress()) row["end_time"] = absl::StrCat(info.end_time_ms);
  // While running, up to the latest sign of life of any rank or launcher.
  std::optional<std::int64_t> until_ms;
  if (!run.in_progress()) {
    until_ms = info.end_time_ms;
  } else {
    const auto alive = [&](std::int64_t heartbeat_ms, std::int64_t end_ms) {
      until_ms = std::max(until_ms.value_or(heartbeat_ms), std::max(heartbeat_ms, end_ms));
    };
    for (const RankState& rank : run.ranks()) alive(rank.heartbeat_ms, rank.end_time_ms);
    for (const LauncherState& launcher : run.launchers()) {
      alive(launcher.heartbeat_ms, launcher.end_time_ms);
    }
  }
  if (until_ms) {
    const std::int64_t ms = std::max<std::int64_t>(0, *until_ms - info.start_time_ms);
    row["duration_s"] = py_float_repr(static_cast<double>(ms) / 1000.0);
  }
  for (const auto& [key, value] : info.params) row[absl::StrCat("params.", key)] = value;
  for (const auto& [key, value] : info.tags) row[absl::StrCat("tags.", key)] = value;

  // The mean of the values that are numbers, "nan" when none is.
  struct Mean {
    double sum = 0;
    std::size_t n = 0;
    void add(double x) {
      if (!std::isnan(x)) sum += x, ++n;
    }
    std::string text() const {
      return py_float_repr(n ? sum / static_cast<double>(n) : stats::kNaN);
    }
  };
  const std::vector<RunFile> files =
      options.regions || options.metrics ? run.files() : std::vector<RunFile>{};
  if (options.regions) {
    std::map<std::string, Mean> stats;  // "regions.<KEY>.<stat>"
    for (const RunFile& file : files) {
      if (file.kind != RunFileKind::kSummary) continue;
      const absl::StatusOr<Summary> summary = run.read_summary(file.rank);
      if (!summary.ok()) continue;  // damaged: check_run names it
      for (const SummaryEntry& entry : summary->entries) {
        if (entry.device != options.device) continue;
        for (const TimeStatsField& f : kTimeStatsFields) {
          if (f.kind == TimeStatsFieldKind::kBoolean) continue;
          const double value = f.kind == TimeStatsFieldKind::kInteger
                                   ? static_cast<double>(entry.stats.*f.integer)
                                   : entry.stats.*f.number;
          stats[absl::StrCat("regions.", entry.key, ".", f.name)].add(value);
        }
      }
    }
    for (const auto& [column, mean] : stats) row[column] = mean.text();
  }
  if (options.metrics) {
    std::map<std::string, std::map<std::uint32_t, double>> last;  // key -> rank -> value
    for (const RunFile& file : files) {
      if (file.kind != RunFileKind::kMetrics) continue;
      absl::StatusOr<Chunk<MetricPoint>> chunk = run.read_metrics(file.rank);
      if (!chunk.ok()) return chunk.status();
      for (const MetricPoint& m : chunk->rows) {
        // Format 1: `trainscope run` recorded the hardware as metrics.
        if (run.version() == 1 && absl::StartsWith(m.key, host::kSystemMetricPrefix)) continue;
        last[m.key][m.rank] = m.value;  // the reader takes finite values only
      }
    }
    for (const auto& [key, by_rank] : last) {
      Mean mean;
      for (const auto& [rank, value] : by_rank) mean.add(value);
      row[absl::StrCat("metrics.", key)] = mean.text();
    }
    if (options.ledger_columns && (row.count("metrics." + std::string(kStepSamplesMetric)) > 0 ||
                                   row.count("metrics." + std::string(kStepTokensMetric)) > 0)) {
      if (absl::Status derived = options.ledger_columns(run, &row); !derived.ok()) return derived;
    }
  }
  return row;
}

bool run_filter_matches(const RunFilter& filter, const std::map<std::string, std::string>& row) {
  return std::all_of(filter.clauses.begin(), filter.clauses.end(),
                     [&](const RunFilterClause& clause) {
                       const auto it = row.find(clause.column);
                       return it != row.end() && clause_matches(clause, it->second);
                     });
}

}  // namespace trainscope
