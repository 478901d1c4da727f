#include "trainscope/stats/format_numbers.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "trainscope/stats/numbers.hpp"
#include "trainscope/stats/stats_format.hpp"

namespace trainscope::stats {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(FormatNumbersTest, TimeUnitsAndTheirBoundaries) {
  EXPECT_EQ(kTimeUnits[time_unit_index(0)].suffix, "ns");
  EXPECT_EQ(kTimeUnits[time_unit_index(0.5e-9)].suffix, "ns");
  EXPECT_EQ(kTimeUnits[time_unit_index(999e-9)].suffix, "ns");
  EXPECT_EQ(kTimeUnits[time_unit_index(1e-6)].suffix, "us");
  EXPECT_EQ(kTimeUnits[time_unit_index(1e-3)].suffix, "ms");
  EXPECT_EQ(kTimeUnits[time_unit_index(1)].suffix, "s");
  EXPECT_EQ(kTimeUnits[time_unit_index(1e9)].suffix, "s");
}

TEST(FormatNumbersTest, Seconds) {
  EXPECT_EQ(format_seconds(812e-9), "812 ns");
  EXPECT_EQ(format_seconds(12.34e-6), "12.3 us");
  EXPECT_EQ(format_seconds(0.01234), "12.3 ms");
  EXPECT_EQ(format_seconds(1.234), "1.23 s");
  EXPECT_EQ(format_seconds(0.01234, 4), "12.34 ms");
  // Below a nanosecond, zero, negative.
  EXPECT_EQ(format_seconds(2e-10), "0.2 ns");
  EXPECT_EQ(format_seconds(0), "0 s");
  EXPECT_EQ(format_seconds(-0.01234), "-12.3 ms");
  // A value that rounds up to 1000 of its unit is shown in the next one.
  EXPECT_EQ(format_seconds(0.9994), "999 ms");
  EXPECT_EQ(format_seconds(0.9996), "1 s");
  EXPECT_EQ(format_seconds(999.96e-6, 4), "1 ms");
  EXPECT_EQ(format_seconds(999.94e-6, 4), "999.9 us");
  // Huge: whole seconds, no exponent.
  EXPECT_EQ(format_seconds(4000.4), "4000 s");
  EXPECT_EQ(format_seconds(1.5e7), "15000000 s");
  EXPECT_EQ(format_seconds(kNaN), "-");
  EXPECT_EQ(format_seconds(kInf, 3, "n/a"), "n/a");
}

TEST(FormatNumbersTest, SecondsCompact) {
  EXPECT_EQ(format_seconds_compact(812e-9), "812ns");
  EXPECT_EQ(format_seconds_compact(12.44e-6), "12.4us");
  EXPECT_EQ(format_seconds_compact(0.0123456), "12.35ms");
  EXPECT_EQ(format_seconds_compact(1.234), "1.23s");
  EXPECT_EQ(format_seconds_compact(250.4), "250s");
  EXPECT_EQ(format_seconds_compact(0), "0");
  EXPECT_EQ(format_seconds_compact(-0.0123456), "-12.35ms");
  EXPECT_EQ(format_seconds_compact(0.999999), "1.00s");  // not "1000.00ms"
  EXPECT_EQ(format_seconds_compact(1e9), "1000000000s");
  EXPECT_EQ(format_seconds_compact(kNaN), "-");
}

TEST(FormatNumbersTest, SharesPercentsAndChanges) {
  EXPECT_EQ(format_share(0.456), "45.6%");
  EXPECT_EQ(format_share(0.456, 0), "46%");
  EXPECT_EQ(format_share(0), "0.0%");
  EXPECT_EQ(format_share(-0.25), "-25.0%");
  EXPECT_EQ(format_share(1e6), "100000000.0%");
  EXPECT_EQ(format_share(kNaN), "-");
  EXPECT_EQ(format_share(kNaN, 1, "n/a"), "n/a");
  EXPECT_EQ(format_percent(45.6), "46%");
  EXPECT_EQ(format_percent(45.64, 1), "45.6%");
  EXPECT_EQ(format_percent(-kInf), "-");
  EXPECT_EQ(format_change(1.123), "+12.3%");
  EXPECT_EQ(format_change(0.9), "-10.0%");
  EXPECT_EQ(format_change(1), "+0.0%");
  EXPECT_EQ(format_change(kNaN), "-");
  EXPECT_EQ(format_change_interval(0.99, 1.03), "[-1.0%, +3.0%]");
  EXPECT_EQ(format_change_interval(0.99, kNaN), "-");
  EXPECT_EQ(format_share_interval(0.456, 0.401, 0.502), "45.6% [40.1%, 50.2%]");
  EXPECT_EQ(format_share_interval(0.456, kNaN, kNaN), "45.6%");
  EXPECT_EQ(format_share_interval(kNaN, 0.1, 0.2, "n/a"), "n/a");
}

TEST(FormatNumbersTest, TheSummaryTableUsesTheSameUnits) {
  // stats_format's duration (the end-of-run table: 3-4 digits) picks its unit here too.
  EXPECT_EQ(format_duration(999.9996e-3), "1.000 s");
  EXPECT_EQ(format_duration(812e-9), "812 ns");
  EXPECT_EQ(format_seconds(812e-9), "812 ns");
}

}  // namespace
}  // namespace trainscope::stats
