// Human-readable numbers, one set for every view (diagnose, top, compare,
// stalls, the report, the end-of-run summary): durations with their unit,
// shares and changes as percentages, intervals. The unit rules live here
// once: a duration is shown in ns below 1 us, in us below 1 ms, in ms below
// 1 s, else in s (kTimeUnits), and a value that rounds up to 1000 of its unit
// is shown in the next ("1 s", never "1e+03 ms"). A figure that is not finite
// (NaN: no data) prints as `missing`: "-" in tables, "n/a" in sentences.
#ifndef TRAINSCOPE_STATS_FORMAT_NUMBERS_HPP_
#define TRAINSCOPE_STATS_FORMAT_NUMBERS_HPP_

#include <cstddef>
#include <string>
#include <string_view>

namespace trainscope::stats {

// What a figure that is not finite prints as in a table, and in a sentence.
inline constexpr std::string_view kNoFigure = "-";
inline constexpr std::string_view kNotAvailable = "n/a";

struct TimeUnit {
  std::string_view suffix;
  double seconds;
};
// ASCII "us" rather than "µs": tables must line up in any terminal and
// survive being pasted into ASCII-only tools.
inline constexpr TimeUnit kTimeUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
inline constexpr std::size_t kTimeUnitCount = sizeof(kTimeUnits) / sizeof(kTimeUnits[0]);
// The index in kTimeUnits of the largest unit not above `magnitude` seconds
// (>= 0); ns for anything below 1 ns, zero included.
std::size_t time_unit_index(double magnitude);

// A duration with `significant` significant digits in its unit: "812 ns",
// "12.3 ms", "1.23 s"; negative ones keep their sign ("-12.3 ms"); seconds
// never in exponent notation ("4000 s"); zero is "0 s".
std::string format_seconds(double seconds, int significant = 3,
                           std::string_view missing = kNoFigure);
// The same for a column: fixed decimals (ns 0, us 1, ms 2, s 2 below 100 s,
// else 0) and no space: "812ns", "12.4us", "3.21ms", "1.23s", "250s"; zero is "0".
std::string format_seconds_compact(double seconds, std::string_view missing = kNoFigure);

// A share of a whole (0.456) as a percentage with `decimals` decimals: "45.6%".
std::string format_share(double share, int decimals = 1, std::string_view missing = kNoFigure);
// A share with its interval: "45.6% [40.1%, 50.2%]"; the share alone when a
// bound is not finite.
std::string format_share_interval(double value, double low, double high,
                                  std::string_view missing = kNoFigure);
// A figure already in percent (45.6) with `decimals` decimals: "46%".
std::string format_percent(double percent, int decimals = 0, std::string_view missing = kNoFigure);
// A ratio B/A as the signed change it is: 1.123 -> "+12.3%", 0.9 -> "-10.0%".
std::string format_change(double ratio, std::string_view missing = kNoFigure);
// An interval of ratios as changes: "[-1.0%, +3.0%]"; `missing` when a bound is not finite.
std::string format_change_interval(double low, double high, std::string_view missing = kNoFigure);

}  // namespace trainscope::stats

#endif  // TRAINSCOPE_STATS_FORMAT_NUMBERS_HPP_
