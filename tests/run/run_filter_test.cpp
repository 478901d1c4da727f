// parse_run_filter against the grammar and the messages search_runs had in
// Python (the expected messages are what that parser said), and
// run_filter_matches on rows and on runs written with the Run API.
#include "trainscope/run/run_filter.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "support/run_dir_test.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"

namespace trainscope {
namespace {

using ::testing::Contains;
using ::testing::Key;
using ::testing::Not;
using trainscope::testing::RunPtr;
using Row = std::map<std::string, std::string>;

RunFilter parse(const std::string& text) {
  absl::StatusOr<RunFilter> filter = parse_run_filter(text);
  EXPECT_TRUE(filter.ok()) << text << ": " << filter.status();
  return filter.ok() ? *std::move(filter) : RunFilter{};
}

std::string error(const std::string& text) {
  absl::StatusOr<RunFilter> filter = parse_run_filter(text);
  if (filter.ok()) return "parsed";
  EXPECT_TRUE(absl::IsInvalidArgument(filter.status())) << filter.status();
  return std::string(filter.status().message());
}

bool matches(const std::string& text, const Row& row) {
  return run_filter_matches(parse(text), row);
}

// (column, op, numeric, text, number) of each clause.
struct Clause {
  std::string column, op;
  bool numeric;
  std::string text;
  double number;
};
std::vector<Clause> clauses(const std::string& text) {
  std::vector<Clause> out;
  for (const RunFilterClause& c : parse(text).clauses) {
    out.push_back({c.column, c.op, c.numeric, c.text, c.number});
  }
  return out;
}
void expect_clause(const Clause& c, const std::string& column, const std::string& op,
                   const std::string& text) {
  EXPECT_EQ(c.column, column);
  EXPECT_EQ(c.op, op);
  EXPECT_FALSE(c.numeric) << column;
  EXPECT_EQ(c.text, text);
}
void expect_number(const Clause& c, const std::string& column, const std::string& op,
                   const std::string& text, double number) {
  EXPECT_EQ(c.column, column);
  EXPECT_EQ(c.op, op);
  EXPECT_TRUE(c.numeric) << column;
  EXPECT_EQ(c.text, text);
  EXPECT_EQ(c.number, number) << text;
}

// --- Grammar

TEST(RunFilterTest, EmptyOrBlankKeepsEveryRun) {
  for (const char* text : {"", "  ", " \t\n\r\v\f", "\xC2\xA0\xE3\x80\x80"}) {
    RunFilter filter = parse(text);
    EXPECT_TRUE(filter.clauses.empty()) << text;
    EXPECT_EQ(filter.text, text);
    EXPECT_TRUE(run_filter_matches(filter, {}));
  }
}

TEST(RunFilterTest, ReadsComparisonsJoinedByAndInAnyCase) {
  const std::string text =
      "params.lr = '0.1' and status = \"FINISHED\" AND regions.BATCH.median < 0.5 aNd "
      "world_size>=2 and tags.team != 'perf' and duration_s > 1 and name <= 'b'";
  EXPECT_EQ(parse(text).text, text);
  const std::vector<Clause> c = clauses(text);
  ASSERT_EQ(c.size(), 7u);
  expect_clause(c[0], "params.lr", "=", "0.1");
  expect_clause(c[1], "status", "=", "FINISHED");
  expect_number(c[2], "regions.BATCH.median", "<", "0.5", 0.5);
  expect_number(c[3], "world_size", ">=", "2", 2);
  expect_clause(c[4], "tags.team", "!=", "perf");
  expect_number(c[5], "duration_s", ">", "1", 1);
  expect_clause(c[6], "name", "<=", "b");
}

TEST(RunFilterTest, NeedsNoSpaceBetweenTokens) {
  const std::vector<Clause> c = clauses("world_size>=2and status='FINISHED'");
  ASSERT_EQ(c.size(), 2u);
  expect_number(c[0], "world_size", ">=", "2", 2);
  expect_clause(c[1], "status", "=", "FINISHED");
}

TEST(RunFilterTest, BackticksQuoteNamesWithSpaces) {
  std::vector<Clause> c = clauses("params.`batch size` >= 32 and params.a.`b c` = ''");
  ASSERT_EQ(c.size(), 2u);
  expect_number(c[0], "params.batch size", ">=", "32", 32);
  expect_clause(c[1], "params.a.b c", "=", "");
  // Names also take : / - and dots without backticks.
  c = clauses("tags.mlflow.source:name/x-y = 'z'");
  ASSERT_EQ(c.size(), 1u);
  expect_clause(c[0], "tags.mlflow.source:name/x-y", "=", "z");
}

TEST(RunFilterTest, AttributesPrefixAndId) {
  const std::vector<Clause> c = clauses(
      "attributes.id = 'abc' and attributes.status != 'KILLED' and attributes.run_id = 'x' and "
      "run_id = 'y' and attributes.params.lr = '1'");
  ASSERT_EQ(c.size(), 5u);
  expect_clause(c[0], "run_id", "=", "abc");
  expect_clause(c[1], "status", "!=", "KILLED");
  expect_clause(c[2], "run_id", "=", "x");
  expect_clause(c[3], "run_id", "=", "y");
  expect_clause(c[4], "params.lr", "=", "1");  // as Python: the prefix goes, then the check
  for (std::string_view attribute : kRunFilterAttributes) {
    ASSERT_EQ(clauses(std::string(attribute) + " = 1").size(), 1u) << attribute;
  }
}

TEST(RunFilterTest, StringsInEitherQuoteWithoutEscapes) {
  const std::vector<Clause> c =
      clauses("name = 'say \"hi\"' and name = \"it's\" and name = 'a and b' and name = 'x\ny'");
  ASSERT_EQ(c.size(), 4u);
  expect_clause(c[0], "name", "=", "say \"hi\"");
  expect_clause(c[1], "name", "=", "it's");
  expect_clause(c[2], "name", "=", "a and b");
  expect_clause(c[3], "name", "=", "x\ny");
}

TEST(RunFilterTest, NumbersWithSignsFractionsAndExponents) {
  const std::vector<Clause> c = clauses(
      "params.x = 1e3 and params.x = -2.5E-2 and params.x = .5 and params.x = +7 and "
      "params.x = 3. and params.x=1e999 and params.x=-1E+999 and params.x=1e-999 and "
      "params.x = 0012");
  ASSERT_EQ(c.size(), 9u);
  expect_number(c[0], "params.x", "=", "1e3", 1000);
  expect_number(c[1], "params.x", "=", "-2.5E-2", -0.025);
  expect_number(c[2], "params.x", "=", ".5", 0.5);
  expect_number(c[3], "params.x", "=", "+7", 7);
  expect_number(c[4], "params.x", "=", "3.", 3);
  expect_number(c[5], "params.x", "=", "1e999", HUGE_VAL);  // Python's float(): inf
  expect_number(c[6], "params.x", "=", "-1E+999", -HUGE_VAL);
  expect_number(c[7], "params.x", "=", "1e-999", 0);
  expect_number(c[8], "params.x", "=", "0012", 12);
}

TEST(RunFilterTest, DigitsOfAnyScript) {
  // \d and float() take every decimal digit: Arabic-Indic 12, fullwidth 1.5.
  const std::vector<Clause> c =
      clauses("params.x = \xD9\xA1\xD9\xA2 and params.y < \xEF\xBC\x91.\xEF\xBC\x95");
  ASSERT_EQ(c.size(), 2u);
  expect_number(c[0], "params.x", "=", "\xD9\xA1\xD9\xA2", 12);
  expect_number(c[1], "params.y", "<", "\xEF\xBC\x91.\xEF\xBC\x95", 1.5);
  EXPECT_TRUE(matches("params.x = 12", {{"params.x", "\xD9\xA1\xD9\xA2"}}));
  EXPECT_TRUE(matches("params.x = 1", {{"params.x",
                                        "\xC2\xA0"
                                        "1\xE3\x80\x80"}}));
  EXPECT_FALSE(matches("params.x = 1", {{"params.x",
                                         "\x1C"
                                         "1"}}));  // float() keeps \x1c
}

// --- Messages (Python's, word for word)

constexpr char kColumns[] =
    "(one of run_id, name, experiment, status, start_time, end_time, duration_s, world_size, "
    "dir, params.<k>, tags.<k>, regions.<KEY>.<stat>, metrics.<k>, ledger.<figure>)";
constexpr char kCannotRead[] = "(expected: column op value [and ...], op one of = != < > <= >=)";
constexpr char kExpected[] = "(op one of = != < > <= >=; quote strings: params.lr = '0.1')";

TEST(RunFilterTest, CannotReadQuotesTheRestTrimmedTo40Characters) {
  EXPECT_EQ(
      error("params.lr ~ '0.1'"),
      absl::StrCat("bad filter \"params.lr ~ '0.1'\": cannot read \"~ '0.1'\" ", kCannotRead));
  EXPECT_EQ(error("params.lr = '0.1 and status"),
            absl::StrCat("bad filter \"params.lr = '0.1 and status\": cannot read \"'0.1 and "
                         "status\" ",
                         kCannotRead));
  EXPECT_EQ(error("x\\y = 1"),
            absl::StrCat("bad filter 'x\\\\y = 1': cannot read '\\\\y = 1' ", kCannotRead));
  EXPECT_EQ(error("params.x = - 1"),
            absl::StrCat("bad filter 'params.x = - 1': cannot read '- 1' ", kCannotRead));
  EXPECT_EQ(error("params.`` = 1"),
            absl::StrCat("bad filter 'params.`` = 1': cannot read '`` = 1' ", kCannotRead));
  // 40 code points (é is two bytes).
  std::string tildes(30, '~');
  std::string accents;
  for (int i = 0; i < 20; ++i) accents += "\xC3\xA9";
  EXPECT_EQ(error("params.x = 1 and " + tildes + accents),
            absl::StrCat("bad filter 'params.x = 1 and ", tildes, accents, "': cannot read '",
                         tildes, accents.substr(0, 20), "' ", kCannotRead));
  // Python's repr(): \t, \xNN for controls and no-break spaces, \udcNN for a
  // byte that is not UTF-8 (surrogateescape).
  EXPECT_EQ(error("\xC2\xA0name = 'a' \xC2\xA0~\x01"),
            absl::StrCat("bad filter \"\\xa0name = 'a' \\xa0~\\x01\": cannot read '~\\x01' ",
                         kCannotRead));
  EXPECT_EQ(error("status = 'x'\t@"),
            absl::StrCat("bad filter \"status = 'x'\\t@\": cannot read '@' ", kCannotRead));
  EXPECT_EQ(error("name = 1 \xFF"),
            absl::StrCat("bad filter 'name = 1 \\udcff': cannot read '\\udcff' ", kCannotRead));
  // Not a word character: a symbol after a name.
  EXPECT_EQ(error("params.a\xE2\x82\xAC = 1"),
            absl::StrCat("bad filter 'params.a\xE2\x82\xAC = 1': cannot read '\xE2\x82\xAC = 1' ",
                         kCannotRead));
  // A letter is one.
  ASSERT_EQ(clauses("params.gr\xC3\xB6\xC3\x9F"
                    "e = 1")
                .size(),
            1u);
}

TEST(RunFilterTest, ExpectedColumnOpValueShowsTheTokens) {
  EXPECT_EQ(error("params.lr = "),
            absl::StrCat("bad filter 'params.lr = ': expected `column op value` at 'params.lr =' ",
                         kExpected));
  EXPECT_EQ(error("= 1"),
            absl::StrCat("bad filter '= 1': expected `column op value` at '= 1' ", kExpected));
  EXPECT_EQ(
      error("status"),
      absl::StrCat("bad filter 'status': expected `column op value` at 'status' ", kExpected));
  EXPECT_EQ(error("params.a-b.`c` = 1"),
            absl::StrCat("bad filter 'params.a-b.`c` = 1': expected `column op value` at "
                         "'params.a-b. `c` =' ",
                         kExpected));
  EXPECT_EQ(error("status = status"),
            absl::StrCat("bad filter 'status = status': expected `column op value` at "
                         "'status = status' ",
                         kExpected));
}

TEST(RunFilterTest, UnknownColumn) {
  EXPECT_EQ(error("bogus = 1"),
            absl::StrCat("bad filter 'bogus = 1': unknown column 'bogus' ", kColumns));
  EXPECT_EQ(error("attributes.bogus = 1"),
            absl::StrCat("bad filter 'attributes.bogus = 1': unknown column 'bogus' ", kColumns));
  EXPECT_EQ(error("params.` x` = 1"),
            absl::StrCat("bad filter 'params.` x` = 1': unknown column 'params. x' ", kColumns));
  EXPECT_EQ(error("a.1x = 1"),
            absl::StrCat("bad filter 'a.1x = 1': unknown column 'a.1x' ", kColumns));
  // The first bad clause is reported, before a later grammar error.
  EXPECT_EQ(error("params.a = 1 AnD b = 2 and"),
            absl::StrCat("bad filter 'params.a = 1 AnD b = 2 and': unknown column 'b' ", kColumns));
}

TEST(RunFilterTest, OnlyAndJoins) {
  EXPECT_EQ(error("params.lr = '0.1' or status = 'FAILED'"),
            "bad filter \"params.lr = '0.1' or status = 'FAILED'\": expected `and` at 'or' (only "
            "`and` joins comparisons)");
  EXPECT_EQ(error("status = \"it's\" x"),
            "bad filter 'status = \"it\\'s\" x': expected `and` at 'x' (only `and` joins "
            "comparisons)");
  EXPECT_EQ(error("params.x = 1.5.3"),
            "bad filter 'params.x = 1.5.3': expected `and` at '.3' (only `and` joins comparisons)");
  EXPECT_EQ(error("params.x = 1e"),
            "bad filter 'params.x = 1e': expected `and` at 'e' (only `and` joins comparisons)");
  EXPECT_EQ(error("params.x = 1 `and` status = 'x'"),
            "bad filter \"params.x = 1 `and` status = 'x'\": expected `and` at '`and`' (only "
            "`and` joins comparisons)");
}

TEST(RunFilterTest, NothingAfterTheLastAnd) {
  EXPECT_EQ(error("params.lr = '0.1' and"),
            "bad filter \"params.lr = '0.1' and\": nothing after the last `and`");
  EXPECT_EQ(error("params.x = 1 and\n"),
            "bad filter 'params.x = 1 and\\n': nothing after the last `and`");
}

// --- Evaluation

TEST(RunFilterTest, NumberLiteralsCompareNumerically) {
  const Row row = {{"params.lr", "0.1"},  {"params.n", " 1_000 "}, {"params.name", "abc"},
                   {"params.nan", "NaN"}, {"params.inf", "-inf"},  {"world_size", "2"},
                   {"params.exp", "1E3"}, {"params.bad", "1__0"}};
  EXPECT_TRUE(matches("params.lr > 0.05", row));
  EXPECT_TRUE(matches("params.lr = 1e-1", row));
  EXPECT_FALSE(matches("params.lr < 0.05", row));
  EXPECT_TRUE(matches("params.n = 1000", row));  // float(' 1_000 ')
  EXPECT_TRUE(matches("params.exp = 1000", row));
  EXPECT_TRUE(matches("params.inf < -1e308", row));
  EXPECT_TRUE(matches("world_size >= 2 and world_size < 3", row));
  // Unreadable or NaN: no comparison holds, not even !=.
  for (const char* column : {"params.name", "params.nan", "params.bad"}) {
    EXPECT_FALSE(matches(absl::StrCat(column, " != 1"), row)) << column;
    EXPECT_FALSE(matches(absl::StrCat(column, " = 1"), row)) << column;
  }
}

TEST(RunFilterTest, StringLiteralsCompareAsStrings) {
  const Row row = {
      {"params.lr", "0.1"}, {"name", "run-b"}, {"duration_s", "nan"}, {"params.nan", "nan"}};
  EXPECT_TRUE(matches("params.lr = '0.1'", row));
  EXPECT_FALSE(matches("params.lr = '0.10'", row));  // not as numbers
  EXPECT_TRUE(matches("params.lr != '0.10'", row));
  EXPECT_TRUE(matches("params.lr < '1'", row));
  EXPECT_TRUE(matches("name > 'run-a' and name <= \"run-b\"", row));
  EXPECT_FALSE(matches("name = 'run-B'", row));
  EXPECT_TRUE(matches("params.nan = 'nan'", row));  // a str param is its text
  EXPECT_FALSE(matches("duration_s != 'x'", row));  // a NaN float never matches
  EXPECT_TRUE(matches("name < '\xC3\xA9'", row));   // code point order
}

TEST(RunFilterTest, AColumnTheRowLacksNeverMatches) {
  const Row row = {{"params.lr", "0.1"}};
  EXPECT_FALSE(matches("params.missing = 'x'", row));
  EXPECT_FALSE(matches("params.missing != 'x'", row));
  EXPECT_FALSE(matches("regions.BATCH.median < 1", row));
  EXPECT_FALSE(matches("metrics.loss < 1", row));
  EXPECT_FALSE(matches("params.lr = '0.1' and end_time > 0", row));
}

TEST(RunFilterTest, TimesCompareWithMillisecondsOrUtcDates) {
  const Row row = {{"start_time", "1795672800000"}};  // 2026-11-26T06:00:00Z
  EXPECT_TRUE(matches("start_time = 1795672800000", row));
  EXPECT_TRUE(matches("start_time > 1.7e12", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T06:00:00'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T06:00:00Z'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26 06:00:00.000'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T07:00:00+01:00'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T05:30-0030'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T06'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T0600'", row));
  EXPECT_TRUE(matches("start_time > '2026-11-26' and start_time < '2026-11-27'", row));
  EXPECT_TRUE(matches("start_time > '2026-11' and start_time < '2027'", row));
  EXPECT_TRUE(matches("start_time < '2026-11-26T06:00:00.000000001'", row));
  EXPECT_TRUE(matches("start_time >= '2026-11-26T06:00:00.0000000009'", row));  // 9 digits kept
  EXPECT_FALSE(matches("start_time < '2026-11-26T06:00:00'", row));
  EXPECT_TRUE(matches("start_time = '2026-11-26T06:00:00.'", row));  // pandas reads it
  // A number compares with Python's Timestamp.value / 1e6: nanoseconds
  // rounded to a double, a little above some millisecond values.
  EXPECT_TRUE(matches("start_time > 1004042346007", {{"start_time", "1004042346007"}}));
  EXPECT_TRUE(matches("start_time = 1004042346008", {{"start_time", "1004042346008"}}));
  // Unreadable dates (and what pandas rejects) match nothing, not even !=.
  for (const char* bad : {"yesterday", "2026-02-30", "2026-13-01", "2026-11-26T24:00",
                          "2026-11-26Z", "26-11-2026", "2026/11/26", "now"}) {
    EXPECT_FALSE(matches(absl::StrCat("start_time != '", bad, "'"), row)) << bad;
  }
  // pandas' NaT: unequal to every time, and nothing else.
  for (const char* nat : {"", "NaT", "nan"}) {
    EXPECT_TRUE(matches(absl::StrCat("start_time != '", nat, "'"), row)) << nat;
    EXPECT_FALSE(matches(absl::StrCat("start_time = '", nat, "'"), row)) << nat;
    EXPECT_FALSE(matches(absl::StrCat("start_time < '", nat, "'"), row)) << nat;
  }
  EXPECT_TRUE(matches("start_time < '2028-02-29T06:00:00+00:00'", row));  // a leap day
}

// --- Runs written with the Run API

using RunFilterRunTest = trainscope::testing::RunDirTest;

TEST_F(RunFilterRunTest, FiltersARecordedRun) {
  RunOptions o = options();
  o.name = "filter me";
  o.experiment = "sweep";
  o.params = {{"lr", "0.1"}, {"batch size", "32"}};
  o.tags = {{"team", "perf"}};
  RunPtr run = start(o);
  ASSERT_NE(run, nullptr);
  const std::string dir = run->dir();

  // While it runs: no end_time; the duration runs to the latest heartbeat.
  Row row = run_filter_row(open_run(dir)).value();
  EXPECT_THAT(row, Not(Contains(Key("end_time"))));
  EXPECT_THAT(row, Contains(Key("duration_s")));
  EXPECT_EQ(row.at("status"), "RUNNING");
  EXPECT_FALSE(matches("end_time > 0", row));
  EXPECT_TRUE(matches("status = 'RUNNING' and duration_s >= 0", row));

  ASSERT_TRUE(run->end().ok());
  RunReader reader = open_run(dir);
  row = run_filter_row(reader).value();
  EXPECT_EQ(row.at("run_id"), reader.info().id);
  EXPECT_EQ(row.at("name"), "filter me");
  EXPECT_EQ(row.at("experiment"), "sweep");
  EXPECT_EQ(row.at("status"), "FINISHED");
  EXPECT_EQ(row.at("start_time"), absl::StrCat(reader.info().start_time_ms));
  EXPECT_EQ(row.at("end_time"), absl::StrCat(reader.info().end_time_ms));
  EXPECT_EQ(row.at("world_size"), "1");
  EXPECT_EQ(row.at("dir"), reader.dir());
  EXPECT_EQ(row.at("params.lr"), "0.1");
  EXPECT_EQ(row.at("params.batch size"), "32");
  EXPECT_EQ(row.at("tags.team"), "perf");
  EXPECT_THAT(row, Not(Contains(Key("regions.BATCH.median"))));
  // Seconds as Python prints the float: at least one decimal.
  const std::string& duration = row.at("duration_s");
  EXPECT_NE(duration.find('.'), std::string::npos) << duration;
  EXPECT_NEAR(std::stod(duration),
              (reader.info().end_time_ms - reader.info().start_time_ms) / 1000.0, 1e-9);

  EXPECT_TRUE(
      matches("params.lr = '0.1' and status = 'FINISHED' and params.`batch size` >= 32 and "
              "attributes.experiment = 'sweep' and world_size = 1 and duration_s >= 0",
              row));
  EXPECT_TRUE(matches(absl::StrCat("attributes.id = '", reader.info().id, "'"), row));
  EXPECT_TRUE(matches("start_time > '2020-01-01' and end_time >= '2020-01-01T00:00:00Z'", row));
  EXPECT_TRUE(matches(absl::StrCat("end_time >= ", reader.info().start_time_ms), row));
  EXPECT_FALSE(matches("end_time < '2020-01-01'", row));
  EXPECT_FALSE(matches("params.lr > 0.1", row));
  EXPECT_FALSE(matches("tags.team != 'perf'", row));
  EXPECT_FALSE(matches("metrics.BATCH.median < 1", row));
  EXPECT_FALSE(matches("params.missing != 'x'", row));
}

// The row's regions.* and metrics.* columns (search_runs' and compare's, built
// once here): each statistic of each key on the device, the mean over the
// ranks; each metric's last value per rank, the mean over ranks; a damaged
// summary left out.
TEST_F(RunFilterRunTest, RegionStatisticsAndMetricsAreColumnsOfTheRow) {
  std::vector<testing::RankJson> ranks(3);
  for (std::uint32_t r = 0; r < 3; ++r) ranks[r].rank = r;
  const auto dir = write_run_dir("stats", testing::RunJson{}, ranks);
  for (const auto& [rank, seconds] : {std::pair{0, 1.0}, std::pair{1, 3.0}}) {
    Summary summary;
    summary.entries.push_back(
        {"BATCH", Device::kCPU, compute_time_stats(std::vector<double>(10, seconds))});
    summary.entries.push_back(
        {"BATCH", Device::kGPU, compute_time_stats(std::vector<double>(10, 100.0))});
    testing::write_file(dir / ("summary-" + std::to_string(rank) + ".json"),
                        format_summary(summary, StatsFormat::kJson));
  }
  testing::write_file(dir / "summary-2.json", "{not json");
  testing::write_file(dir / "metrics-0.csv", "loss,1,0,1,0\nloss,0.5,1,2,0\nacc,0.9,1,2,0\n",
                      /*append=*/true);
  testing::write_file(dir / "metrics-1.csv", "loss,2,0,1,1\nloss,1.5,1,2,1\n", /*append=*/true);
  const RunReader reader = open_run(dir.string());
  const Row row = run_filter_row(reader).value();
  EXPECT_EQ(row.at("regions.BATCH.median"), "2.0");
  EXPECT_EQ(row.at("regions.BATCH.count"), "10.0");
  EXPECT_EQ(row.at("regions.BATCH.max"), "2.0");
  EXPECT_THAT(row, Not(Contains(Key("regions.BATCH.approximate"))));
  EXPECT_EQ(row.at("metrics.loss"), "1.0");  // (0.5 + 1.5) / 2: each rank's last
  EXPECT_EQ(row.at("metrics.acc"), "0.9");
  EXPECT_TRUE(
      matches("regions.BATCH.median < 2.5 and metrics.loss >= 1 and metrics.acc = 0.9", row));
  EXPECT_FALSE(matches("regions.BATCH.median < 0.5", row));
  RunFilterRowOptions gpu;
  gpu.device = Device::kGPU;
  EXPECT_EQ(run_filter_row(reader, gpu).value().at("regions.BATCH.p95"), "100.0");
  // What a filter needs: only the columns it names are read.
  const RunFilterRowOptions only = row_options_for(parse("params.a = 'b' and metrics.loss < 1"));
  EXPECT_FALSE(only.regions);
  EXPECT_TRUE(only.metrics);
  const Row lean = run_filter_row(reader, only).value();
  EXPECT_THAT(lean, Not(Contains(Key("regions.BATCH.median"))));
  EXPECT_THAT(lean, Contains(Key("metrics.loss")));
  // ledger.*: by the caller's deriver, for runs whose metrics hold work only (this one has none).
  const RunFilterRowOptions ledger = row_options_for(parse("ledger.tokens_per_s > 1"));
  EXPECT_TRUE(ledger.metrics);
  RunFilterRowOptions derived;
  int calls = 0;
  derived.ledger_columns = [&calls](const RunReader&, std::map<std::string, std::string>* out) {
    ++calls;
    (*out)["ledger.tokens_per_s"] = "5.0";
    return absl::OkStatus();
  };
  EXPECT_THAT(run_filter_row(reader, derived).value(), Not(Contains(Key("ledger.tokens_per_s"))));
  EXPECT_EQ(calls, 0);
  testing::write_file(dir / "metrics-0.csv", "work/samples,4,0,1,0\n", /*append=*/true);
  const Row with_work = run_filter_row(open_run(dir.string()), derived).value();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(matches("ledger.tokens_per_s > 1", with_work));
  EXPECT_FALSE(matches("ledger.tokens_per_s > 1", row));  // a run without it never matches
  // A metrics file that cannot be read is an error naming it.
  testing::write_file(dir / "metrics-1.csv", "loss,x,0,1,1\n", /*append=*/true);
  const absl::StatusOr<Row> bad = run_filter_row(open_run(dir.string()));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("metrics-1.csv"));
}

TEST_F(RunFilterRunTest, ARunWithoutRanksHasNoDuration) {
  RunReader reader = open_run(write_run_dir("bare").string());
  const Row row = run_filter_row(reader).value();
  EXPECT_THAT(row, Not(Contains(Key("duration_s"))));
  EXPECT_THAT(row, Not(Contains(Key("end_time"))));
  EXPECT_FALSE(matches("duration_s >= 0", row));
  EXPECT_EQ(row.at("world_size"), "0");
}

}  // namespace
}  // namespace trainscope
