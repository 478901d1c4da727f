#include "trainscope/stats/format_numbers.hpp"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fmt/format.h"

namespace trainscope::stats {
namespace {

std::string missing_text(std::string_view missing) { return std::string(missing); }

// The decimal exponent of `scaled` (> 0) once rounded to `significant`
// digits, as %g rounds it: 2 for 999.4 at 3 digits, 3 for 999.6.
int rounded_exponent(double scaled, int significant) {
  const std::string text = fmt::format("{:.{}e}", scaled, significant - 1);
  return std::atoi(text.c_str() + text.find('e') + 1);
}

}  // namespace

std::size_t time_unit_index(double magnitude) {
  std::size_t u = 0;
  while (u + 1 < kTimeUnitCount && magnitude >= kTimeUnits[u + 1].seconds) ++u;
  return u;
}

std::string format_seconds(double seconds, int significant, std::string_view missing) {
  if (!std::isfinite(seconds)) return missing_text(missing);
  if (seconds == 0) return "0 s";
  significant = significant < 1 ? 1 : significant;
  const double magnitude = std::fabs(seconds);
  std::size_t u = time_unit_index(magnitude);
  if (u + 1 < kTimeUnitCount &&
      rounded_exponent(magnitude / kTimeUnits[u].seconds, significant) >= 3) {
    ++u;
  }
  const double scaled = magnitude / kTimeUnits[u].seconds;
  const bool last = u + 1 == kTimeUnitCount;
  // Seconds past `significant` digits keep their whole digits (no exponent).
  const std::string digits = last && scaled >= std::pow(10.0, significant)
                                 ? fmt::format("{:.0f}", scaled)
                                 : fmt::format("{:.{}g}", scaled, significant);
  return fmt::format("{}{} {}", seconds < 0 ? "-" : "", digits, kTimeUnits[u].suffix);
}

std::string format_seconds_compact(double seconds, std::string_view missing) {
  if (!std::isfinite(seconds)) return missing_text(missing);
  if (seconds == 0) return "0";
  static constexpr int kDecimals[kTimeUnitCount] = {0, 1, 2, 2};
  const double magnitude = std::fabs(seconds);
  std::size_t u = time_unit_index(magnitude);
  const auto decimals = [](std::size_t unit, double scaled) {
    return unit + 1 == kTimeUnitCount && scaled >= 100 ? 0 : kDecimals[unit];
  };
  const auto rounded = [](double scaled, int d) {
    const double scale = std::pow(10.0, d);
    return std::round(scaled * scale) / scale;
  };
  double scaled = magnitude / kTimeUnits[u].seconds;
  if (u + 1 < kTimeUnitCount && rounded(scaled, decimals(u, scaled)) >= 1000) {
    ++u;
    scaled = magnitude / kTimeUnits[u].seconds;
  }
  return fmt::format("{}{:.{}f}{}", seconds < 0 ? "-" : "", scaled, decimals(u, scaled),
                     kTimeUnits[u].suffix);
}

std::string format_share(double share, int decimals, std::string_view missing) {
  return format_percent(share * 100, decimals, missing);
}

std::string format_share_interval(double value, double low, double high, std::string_view missing) {
  if (!std::isfinite(value)) return missing_text(missing);
  if (!std::isfinite(low) || !std::isfinite(high)) return format_share(value);
  return fmt::format("{} [{}, {}]", format_share(value), format_share(low), format_share(high));
}

std::string format_percent(double percent, int decimals, std::string_view missing) {
  if (!std::isfinite(percent)) return missing_text(missing);
  return fmt::format("{:.{}f}%", percent, decimals < 0 ? 0 : decimals);
}

std::string format_change(double ratio, std::string_view missing) {
  if (!std::isfinite(ratio)) return missing_text(missing);
  return fmt::format("{:+.1f}%", (ratio - 1) * 100);
}

std::string format_change_interval(double low, double high, std::string_view missing) {
  if (!std::isfinite(low) || !std::isfinite(high)) return missing_text(missing);
  return fmt::format("[{}, {}]", format_change(low), format_change(high));
}

}  // namespace trainscope::stats
