#include "trainscope/stats/stats_format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "common/csv.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/stats/format_numbers.hpp"

namespace trainscope {

std::string_view device_name(Device device) noexcept {
  return device == Device::kGPU ? "GPU" : "CPU";
}

namespace {

absl::string_view to_absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Quotes user-provided text for error messages so that control bytes stay
// visible; UTF-8 passes through.
std::string quoted(std::string_view s) {
  return fmt::format("\"{}\"", absl::Utf8SafeCHexEscape(to_absl(s)));
}

// ---------------------------------------------------------------------------
// Deep500 text

void append_deep500_block(const Summary& summary, bool filter_device, Device device,
                          std::string* out) {
  for (const SummaryEntry& e : summary.entries) {
    // Deep500 only knows keys that completed a sample.
    if (e.stats.count == 0 || (filter_device && e.device != device)) continue;
    fmt::format_to(std::back_inserter(*out), "{}\n{}\n", e.key, e.stats.to_string());
  }
  out->append("---\n");
}

std::string format_deep500(const Summary& summary) {
  std::string out;
  if (!summary.has_gpu_section) {
    append_deep500_block(summary, /*filter_device=*/false, Device::kCPU, &out);
    return out;
  }
  for (Device device : {Device::kCPU, Device::kGPU}) {
    fmt::format_to(std::back_inserter(out), "{}\n", device_name(device));
    append_deep500_block(summary, /*filter_device=*/true, device, &out);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Durations with automatic units

// The units and their boundaries: stats/format_numbers.hpp.
using stats::kTimeUnitCount;
using stats::kTimeUnits;

// Decimals that leave 3 significant digits for a value in [1, 1000) of its
// unit; seconds get one more since they have no larger unit to move to.
int decimals_for(double scaled, bool is_seconds) {
  const int extra = is_seconds ? 1 : 0;
  if (scaled < 10) return 2 + extra;
  if (scaled < 100) return 1 + extra;
  if (scaled < 1000) return 0 + extra;
  return 0;
}

double round_to(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// `magnitude` (finite) in unit `u`, without the suffix. Rounding may
// carry into the next decade, which then needs one decimal fewer.
std::string format_in_unit(double magnitude, std::size_t u) {
  const bool is_seconds = u + 1 == kTimeUnitCount;
  const double scaled = magnitude / kTimeUnits[u].seconds;
  if (scaled == 0) return "0";
  const int decimals = decimals_for(round_to(scaled, decimals_for(scaled, is_seconds)), is_seconds);
  return fmt::format("{:.{}f}", scaled, decimals);
}

// Unit that keeps `magnitude` below 1000 of it after rounding.
std::size_t display_unit(double magnitude) {
  std::size_t u = stats::time_unit_index(magnitude);
  const bool is_seconds = u + 1 == kTimeUnitCount;
  const double scaled = magnitude / kTimeUnits[u].seconds;
  if (!is_seconds && round_to(scaled, decimals_for(scaled, false)) >= 1000) ++u;
  return u;
}

// ---------------------------------------------------------------------------
// Table

constexpr std::string_view kMissing = "-";

// Control bytes would break the row layout; everything else is shown as is.
std::string printable_key(std::string_view key) {
  std::string out;
  for (char c : key) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", b);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Terminal columns of UTF-8 text: one per code point (no wide characters in
// practice in key names).
std::size_t display_width(std::string_view s) {
  std::size_t width = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  }
  return width;
}

struct TableNotes {
  bool approximate = false;
  bool warmup = false;
};

std::string count_cell(const TimeStats& s) {
  if (s.warmup_excluded == 0) return fmt::format("{}", s.count);
  return fmt::format("{} (+{})", s.count, s.warmup_excluded);
}

// "8.94 ms [8.12, 9.50]": the interval shares the median's unit.
std::string median_cell(const TimeStats& s) {
  if (std::isnan(s.median)) return std::string(kMissing);
  std::string cell = format_duration(s.median);
  if (std::isfinite(s.median) && std::isfinite(s.median_ci_low) &&
      std::isfinite(s.median_ci_high)) {
    const std::size_t u = display_unit(std::fabs(s.median));
    fmt::format_to(std::back_inserter(cell), " [{}, {}]", format_in_unit(s.median_ci_low, u),
                   format_in_unit(s.median_ci_high, u));
  }
  return cell;
}

std::string quantile_cell(const TimeStats& s, std::string cell) {
  if (s.approximate && cell != kMissing) return "~" + cell;
  return cell;
}

// count, total, median [95% CI], p95 of one device.
constexpr std::size_t kCellsPerDevice = 4;

void fill_device_cells(const SummaryEntry& e, TableNotes* notes, std::string* cells) {
  const TimeStats& s = e.stats;
  notes->warmup |= s.warmup_excluded != 0;
  cells[0] = count_cell(s);
  if (s.count == 0) return;  // the rest stays "-"
  notes->approximate |= s.approximate;
  cells[1] = format_duration(s.total);
  cells[2] = quantile_cell(s, median_cell(s));
  cells[3] = quantile_cell(s, format_duration(s.p95));
}

std::vector<std::string> table_header(bool has_gpu_section) {
  std::vector<std::string> header = {"key"};
  const std::vector<std::string> prefixes =
      has_gpu_section ? std::vector<std::string>{"cpu ", "gpu "} : std::vector<std::string>{""};
  for (const std::string& p : prefixes) {
    for (const char* name : {"count", "total", "median [95% CI]", "p95"}) {
      header.push_back(p + name);
    }
  }
  return header;
}

// One row per entry; with a GPU section the CPU and GPU entries of a key
// share a row, in the order the key first appears.
std::vector<std::vector<std::string>> table_rows(const Summary& summary, TableNotes* notes) {
  const std::size_t groups = summary.has_gpu_section ? 2 : 1;
  std::vector<std::vector<std::string>> rows;
  absl::flat_hash_map<std::string, std::size_t> row_of_key;
  for (const SummaryEntry& e : summary.entries) {
    std::size_t row = rows.size();
    if (summary.has_gpu_section) row = row_of_key.try_emplace(e.key, row).first->second;
    if (row == rows.size()) {
      rows.emplace_back(1 + groups * kCellsPerDevice, std::string(kMissing));
      rows.back()[0] = printable_key(e.key);
    }
    const std::size_t group = summary.has_gpu_section && e.device == Device::kGPU ? 1 : 0;
    fill_device_cells(e, notes, &rows[row][1 + group * kCellsPerDevice]);
  }
  return rows;
}

void append_row(const std::vector<std::string>& row, const std::vector<std::size_t>& widths,
                std::string* out) {
  std::string line;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const std::string pad(widths[i] - display_width(row[i]), ' ');
    if (i == 0) {
      line += row[i] + pad;  // key: left-aligned
    } else {
      line += "  " + pad + row[i];
    }
  }
  // Trailing blanks of a short last key would only clutter diffs.
  while (!line.empty() && line.back() == ' ') line.pop_back();
  *out += line + "\n";
}

std::string format_table(const Summary& summary) {
  TableNotes notes;
  std::vector<std::vector<std::string>> rows = table_rows(summary, &notes);
  rows.insert(rows.begin(), table_header(summary.has_gpu_section));
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i]));
  }
  std::string out;
  for (const auto& row : rows) append_row(row, widths, &out);
  if (notes.warmup) out.append("(+N): N warm-up regions excluded from the statistics\n");
  if (notes.approximate) out.append("~: approximate quantile (sketch past the exact-sample cap)\n");
  return out;
}

// ---------------------------------------------------------------------------
// JSON and CSV share the field list and order: kTimeStatsFields.

nlohmann::ordered_json json_number(double v) {
  // JSON has no NaN or infinity.
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

std::string format_json(const Summary& summary) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const SummaryEntry& e : summary.entries) {
    nlohmann::ordered_json entry;
    entry["key"] = e.key;
    entry["device"] = std::string(device_name(e.device));
    for (const TimeStatsField& f : kTimeStatsFields) {
      switch (f.kind) {
        case TimeStatsFieldKind::kInteger:
          entry[f.name] = e.stats.*f.integer;
          break;
        case TimeStatsFieldKind::kDouble:
          entry[f.name] = json_number(e.stats.*f.number);
          break;
        case TimeStatsFieldKind::kBoolean:
          entry[f.name] = e.stats.*f.boolean;
          break;
      }
    }
    entries.push_back(std::move(entry));
  }
  nlohmann::ordered_json doc;
  doc["format"] = "trainscope.stats";
  doc["version"] = 1;
  doc["has_gpu_section"] = summary.has_gpu_section;
  doc["entries"] = std::move(entries);
  // Key names are arbitrary bytes; invalid UTF-8 becomes U+FFFD instead of throwing.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// Shortest text that parses back to the same double: full precision without
// the noise of a fixed 17 digits ("0.01788", not "0.017880000000000001").
std::string csv_number(double v) { return std::isnan(v) ? std::string() : fmt::format("{}", v); }

std::string format_csv(const Summary& summary) {
  std::string out = "key,device";
  for (const TimeStatsField& f : kTimeStatsFields)
    fmt::format_to(std::back_inserter(out), ",{}", f.name);
  out.push_back('\n');
  for (const SummaryEntry& e : summary.entries) {
    auto it = std::back_inserter(out);
    fmt::format_to(it, "{},{}", detail::csv_field(e.key), device_name(e.device));
    for (const TimeStatsField& f : kTimeStatsFields) {
      switch (f.kind) {
        case TimeStatsFieldKind::kInteger:
          fmt::format_to(it, ",{}", e.stats.*f.integer);
          break;
        case TimeStatsFieldKind::kDouble:
          fmt::format_to(it, ",{}", csv_number(e.stats.*f.number));
          break;
        case TimeStatsFieldKind::kBoolean:
          fmt::format_to(it, ",{}", e.stats.*f.boolean);
          break;
      }
    }
    out.push_back('\n');
  }
  return out;
}

// ---------------------------------------------------------------------------
// Files

}  // namespace

std::string format_summary(const Summary& summary, StatsFormat format) {
  switch (format) {
    case StatsFormat::kDeep500:
      return format_deep500(summary);
    case StatsFormat::kTable:
      return format_table(summary);
    case StatsFormat::kJson:
      return format_json(summary);
    case StatsFormat::kCsv:
      return format_csv(summary);
  }
  return format_deep500(summary);
}

absl::StatusOr<StatsFormat> stats_format_for_path(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::size_t dot = file.find_last_of('.');
  if (dot == std::string_view::npos || dot == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "cannot save statistics to {}: no extension (use .txt, .json or .csv)", quoted(path)));
  }
  const std::string_view ext = file.substr(dot);
  const std::string lower = absl::AsciiStrToLower(to_absl(ext));
  if (lower == ".txt") return StatsFormat::kDeep500;
  if (lower == ".json") return StatsFormat::kJson;
  if (lower == ".csv") return StatsFormat::kCsv;
  return absl::InvalidArgumentError(
      fmt::format("cannot save statistics to {}: unknown extension {} (use .txt, .json or .csv)",
                  quoted(path), quoted(ext)));
}

absl::StatusOr<StatsFormat> parse_stats_format(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(to_absl(name));
  if (lower == "deep500") return StatsFormat::kDeep500;
  if (lower == "table") return StatsFormat::kTable;
  if (lower == "json") return StatsFormat::kJson;
  if (lower == "csv") return StatsFormat::kCsv;
  return absl::InvalidArgumentError(
      fmt::format("unknown statistics format {} (use deep500, table, json or csv)", quoted(name)));
}

std::string format_duration(double seconds) {
  if (std::isnan(seconds)) return std::string(kMissing);
  if (std::isinf(seconds)) return seconds > 0 ? "inf" : "-inf";
  const double magnitude = std::fabs(seconds);
  const std::size_t u = display_unit(magnitude);
  const char* sign = seconds < 0 ? "-" : "";
  return fmt::format("{}{} {}", sign, format_in_unit(magnitude, u), kTimeUnits[u].suffix);
}

}  // namespace trainscope
