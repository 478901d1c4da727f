// Extra-P input files and run directories read into MeasurementSets, and the
// messages a user sees for every kind of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "support/run_dir_test.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/run_input.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope::scaling {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The error message, or a note that there was none.
template <typename T>
std::string error_of(const absl::StatusOr<T>& result) {
  if (result.ok()) return "<no error>";
  return std::string(result.status().message());
}

std::vector<std::vector<double>> coordinates(const Series& series) {
  std::vector<std::vector<double>> out;
  for (const Point& p : series.points) out.push_back(p.coordinate);
  return out;
}

// --- text ------------------------------------------------------------------

// Extra-P counts the coordinates of a file (its POINTS, a legacy file's
// "coordinates", else every measured point) and refuses a file where a series
// lacks one; the set records them so the modelers can refuse or warn.
TEST(ExtrapCoordinates, EverySeriesIsCheckedAgainstTheFilesCoordinates) {
  absl::StatusOr<MeasurementSet> text = parse_extrap_text(
      "PARAMETER p\nPOINTS 4 8 16\nREGION a\nMETRIC t\nDATA 1\nDATA 2\nDATA 3\n"
      "REGION b\nDATA 1\nDATA 2\n",
      "in.txt");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->coordinates, (std::vector<std::vector<double>>{{4}, {8}, {16}}));
  EXPECT_TRUE(missing_coordinates(*text, text->series[0]).empty());
  EXPECT_EQ(missing_coordinates(*text, text->series[1]), (std::vector<std::vector<double>>{{16}}));

  absl::StatusOr<MeasurementSet> legacy = parse_extrap_json(
      R"({"parameters": [{"id": 1, "name": "x"}], "callpaths": [{"id": 1, "name": "sweep"}],
          "metrics": [{"id": 1, "name": "time"}],
          "coordinates": [{"id": 1, "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 4}]},
                          {"id": 2, "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 8}]}],
          "measurements": [{"coordinate_id": 1, "callpath_id": 1, "metric_id": 1, "value": 2.5}]})",
      "legacy.json");
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(missing_coordinates(*legacy, legacy->series[0]),
            (std::vector<std::vector<double>>{{8}}));

  absl::StatusOr<MeasurementSet> lines = parse_extrap_jsonl(
      "{\"params\": {\"p\": 1, \"q\": 2}, \"value\": 1, \"metric\": \"a\"}\n"
      "{\"params\": {\"p\": 2, \"q\": 2}, \"value\": 1, \"metric\": \"a\"}\n"
      "{\"params\": {\"p\": 2, \"q\": 2}, \"value\": 1, \"metric\": \"b\"}\n",
      "in.jsonl");
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(lines->coordinates.size(), 2u);
  EXPECT_TRUE(missing_coordinates(*lines, *lines->find("<root>", "a")).empty());
  EXPECT_EQ(missing_coordinates(*lines, *lines->find("<root>", "b")),
            (std::vector<std::vector<double>>{{1, 2}}));
  EXPECT_THAT(std::string(check_coordinates(*lines, *lines->find("<root>", "b")).message()),
              HasSubstr("callpath '<root>', metric 'b' has no measurement at (p=1, q=2) (1 of 2"));
}

// Extra-P counts a text block given again, or a point listed twice in a JSON
// series, as more measurements than coordinates (and refuses the file); JSON
// Lines and legacy JSON repetitions are repetitions.
TEST(ExtrapCoordinates, APointGivenTwiceWhereExtraPCountsItTwiceIsRecorded) {
  absl::StatusOr<MeasurementSet> text = parse_extrap_text(
      "PARAMETER p\nPOINTS 4 8\nREGION a\nDATA 1\nDATA 2\nREGION b\nDATA 1\nDATA 2\n"
      "REGION a\nDATA 1.5\n",
      "in.txt");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->repeated.size(), 1u);
  EXPECT_EQ(text->repeated[0].callpath, "a");
  EXPECT_EQ(text->repeated[0].coordinate, std::vector<double>{4});
  EXPECT_THAT(text->find("a", "")->points[0].values, ElementsAre(1, 1.5));  // merged
  EXPECT_THAT(std::string(check_coordinates(*text, *text->find("a", "")).message()),
              HasSubstr("callpath 'a', metric '' is measured twice at (p=4)"));
  EXPECT_TRUE(check_coordinates(*text, *text->find("b", "")).ok());

  absl::StatusOr<MeasurementSet> json = parse_extrap_json(
      R"({"parameters": ["p"], "measurements": {"m": {"t": [{"point": [2], "values": [1]},
          {"point": [4], "values": [2]}, {"point": [2], "values": [3]}]}}})",
      "in.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->repeated.size(), 1u);

  absl::StatusOr<MeasurementSet> lines = parse_extrap_jsonl(
      "{\"params\": {\"p\": 1}, \"value\": 1}\n{\"params\": {\"p\": 1}, \"value\": 2}\n",
      "in.jsonl");
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_TRUE(lines->repeated.empty());
}

TEST(ExtrapText, ReadsRegionsMetricsAndRepetitions) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(
      "# a comment\n"
      "\n"
      "PARAMETER p\n"
      "POINTS 4 8\n"
      "POINTS ( 16 ) (32)\n"
      "REGION epoch\n"
      "METRIC time\n"
      "DATA 1 2 3\n"
      "DATA 2\n"
      "DATA 3 3\n"
      "DATA 4e0 +4 4.\n"
      "METRIC bytes\n"
      "DATA 10\n"
      "REGION  data   load \n"
      "DATA 7\r\n",
      "in.txt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p"));
  ASSERT_EQ(set->series.size(), 3u);
  const Series* time = set->find("epoch", "time");
  ASSERT_NE(time, nullptr);
  EXPECT_EQ(&set->series[0], time);
  EXPECT_EQ(coordinates(*time), (std::vector<std::vector<double>>{{4}, {8}, {16}, {32}}));
  EXPECT_THAT(time->points[0].values, ElementsAre(1, 2, 3));
  EXPECT_THAT(time->points[3].values, ElementsAre(4, 4, 4));
  const Series* bytes = set->find("epoch", "bytes");
  ASSERT_NE(bytes, nullptr);
  ASSERT_EQ(bytes->points.size(), 1u);  // METRIC restarts at the first point
  EXPECT_THAT(bytes->points[0].coordinate, ElementsAre(4));
  // REGION restarts too, keeps the metric, and collapses whitespace in the name.
  const Series* load = set->find("data load", "bytes");
  ASSERT_NE(load, nullptr);
  EXPECT_THAT(load->points[0].values, ElementsAre(7));
}

TEST(ExtrapText, SeveralParametersAndDefaultNames) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(
      "PARAMETER p q\n"
      "PARAMETER r\n"
      "POINTS ( 4 64 1 ) ( 8  64 1 )\n"
      "POINTS (16 64 2)(32 128 2)\n"
      "DATA 1\nDATA 2\nDATA 3\nDATA 4\n",
      "in.txt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p", "q", "r"));
  ASSERT_EQ(set->series.size(), 1u);
  EXPECT_EQ(set->series[0].callpath, "");  // Extra-P's Callpath("") and Metric("")
  EXPECT_EQ(set->series[0].metric, "");
  EXPECT_EQ(coordinates(set->series[0]),
            (std::vector<std::vector<double>>{{4, 64, 1}, {8, 64, 1}, {16, 64, 2}, {32, 128, 2}}));
}

TEST(ExtrapText, ARegionSeenTwiceAddsToItsSeries) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(
      "PARAMETER p\nPOINTS 4 8 16\n"
      "REGION a\nDATA 1\nDATA 2\n"
      "REGION b\nDATA 5\n"
      "REGION a\nDATA 3\nDATA 4\nDATA 6\n",
      "in.txt");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series.size(), 2u);
  EXPECT_EQ(set->series[0].callpath, "a");
  EXPECT_EQ(set->series[1].callpath, "b");
  const Series& a = set->series[0];
  EXPECT_EQ(coordinates(a), (std::vector<std::vector<double>>{{4}, {8}, {16}}));
  EXPECT_THAT(a.points[0].values, ElementsAre(1, 3));  // same point: more repetitions
  EXPECT_THAT(a.points[1].values, ElementsAre(2, 4));
  EXPECT_THAT(a.points[2].values, ElementsAre(6));
}

struct BadInput {
  const char* text;
  const char* error;  // the whole message must start with it
};

class ExtrapTextErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(ExtrapTextErrors, NameTheLineAndTheProblem) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(GetParam().text, "in.txt");
  ASSERT_FALSE(set.ok()) << GetParam().text;
  EXPECT_TRUE(absl::IsInvalidArgument(set.status()));
  EXPECT_THAT(error_of(set), StartsWith(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    All, ExtrapTextErrors,
    ::testing::Values(
        BadInput{"", "in.txt:1: empty file"}, BadInput{"\n  \n\t\n", "in.txt:1: empty file"},
        BadInput{"# only\n# comments\n", "in.txt:2: no PARAMETER line"},
        BadInput{"PARAMETER p\n", "in.txt:1: no POINTS line"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nREGION r\n", "in.txt:3: no DATA line"},
        BadInput{"DATA 1 2\n", "in.txt:1: DATA before PARAMETER"},
        BadInput{"PARAMETER p\nREGION r\nDATA 1\n", "in.txt:3: DATA before POINTS"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA 1\nDATA 2\nDATA 3\n",
                 "in.txt:5: more DATA lines than POINTS (2) for region \"\", metric \"\""},
        BadInput{"PARAMETER p\nPOINTS 1 2\nMETRIC t\nDATA 1 abc 3\n",
                 "in.txt:4: DATA: \"abc\" is not a number"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA 1,5\n", "in.txt:3: DATA: \"1,5\" is not a number"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA 1 inf\n",
                 "in.txt:3: DATA: \"inf\" is not a finite number"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA nan\n",
                 "in.txt:3: DATA: \"nan\" is not a finite number"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA 1e999\n",
                 "in.txt:3: DATA: \"1e999\" is not a finite number"},
        BadInput{"PARAMETER p\nPOINTS 1 2\nDATA\n", "in.txt:3: DATA without values"},
        BadInput{"PARAMETER p\nPOINTS 1 x2\n",
                 "in.txt:2: POINTS: coordinate value \"x2\" is not a number"},
        BadInput{"PARAMETER p\nPOINTS 1 -inf\n",
                 "in.txt:2: POINTS: coordinate value \"-inf\" is not a finite"},
        BadInput{"PARAMETER p q\nPOINTS ( 4 64 ) ( 8 64 1 )\n",
                 "in.txt:2: POINTS: coordinate (8 64 1) has 3 values, expected 2 (one per "
                 "parameter: \"p\", "
                 "\"q\")"},
        BadInput{"PARAMETER p q\nPOINTS ( 4 )\n",
                 "in.txt:2: POINTS: coordinate (4) has 1 value, expected 2"},
        BadInput{"PARAMETER p q\nPOINTS () (1 2)\n",
                 "in.txt:2: POINTS: coordinate () has 0 values"},
        BadInput{"PARAMETER p q\nPOINTS 4 64\n",
                 "in.txt:2: POINTS: with 2 parameters each point needs parentheses"},
        BadInput{
            "PARAMETER p q\nPOINTS ( 4 64 ( 8 64 )\n",
            "in.txt:2: POINTS: unbalanced parentheses: \"(\" at \"( 4 64 ( 8 64 )\" is not closed"},
        BadInput{"PARAMETER p q\nPOINTS ( 4 64\n", "in.txt:2: POINTS: unbalanced parentheses"},
        BadInput{"PARAMETER p q\nPOINTS ( 4 64 ) 8 64 )\n",
                 "in.txt:2: POINTS: expected \"(\" at \"8 64 )\": put every point in parentheses, "
                 "or none"},
        BadInput{"PARAMETER p\nPOINTS 4 8 )\n", "in.txt:2: POINTS: expected \"(\" at \"4 8 )\""},
        BadInput{"PARAMETER p\nPOINTS (4) ) (8)\n",
                 "in.txt:2: POINTS: unbalanced parentheses: \")\" without \"(\" at \") (8)\""},
        BadInput{"PARAMETER p\nPOINTS\n", "in.txt:2: POINTS without coordinates"},
        BadInput{"POINTS 1 2\n", "in.txt:1: POINTS before PARAMETER"},
        BadInput{"PARAMETER a b c\nPARAMETER d e\n",
                 "in.txt:2: more than 4 parameters (\"a\", \"b\", \"c\", \"d\", \"e\"): the text "
                 "format supports "
                 "at most 4"},
        BadInput{"PARAMETER p q p\n", "in.txt:1: duplicate parameter \"p\""},
        BadInput{"PARAMETER p\nPARAMETER p\n", "in.txt:2: duplicate parameter \"p\""},
        BadInput{"PARAMETER p\nPOINTS 1 2\nPARAMETER q\n",
                 "in.txt:3: PARAMETER after POINTS or DATA"},
        BadInput{"PARAMETER\n", "in.txt:1: PARAMETER without a name"},
        BadInput{"PARAMETER p\nPOINTS 1\nREGION\n", "in.txt:3: REGION without a name"},
        BadInput{"PARAMETER p\nPOINTS 1\nMETRIC \t\n", "in.txt:3: METRIC without a name"},
        BadInput{"PARAMETER p\nPOINTS 1\nDATA 1\nREGON r\n",
                 "in.txt:4: Encountered wrong field \"REGON\": expected PARAMETER, POINTS, REGION, "
                 "METRIC or "
                 "DATA"},
        BadInput{"PARAMETER p\ndata 1\n", "in.txt:2: Encountered wrong field \"data\""}));

TEST(ExtrapText, IgnoresAByteOrderMark) {
  absl::StatusOr<MeasurementSet> set =
      parse_extrap_text("\xEF\xBB\xBFPARAMETER p\r\nPOINTS 1\r\nDATA 1\r\n", "in.txt");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p"));
  set = parse_extrap_json(
      "\xEF\xBB\xBF{\"params\": {\"p\": 1}, \"value\": 1}\n{\"params\": {\"p\": 2}, \"value\": "
      "1}\n",
      "in.json");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->series[0].points.size(), 2u);
}

TEST(ExtrapText, MessagesEscapeControlCharactersAndCutLongTokens) {
  const std::string junk(500, 'x');
  EXPECT_EQ(
      error_of(parse_extrap_text("PARAMETER p\nPOINTS 1\nDATA a\x01" + junk + "\n", "in.txt")),
      "in.txt:3: DATA: \"a\\x01" + std::string(58, 'x') + "...\" is not a number");
}

// --- JSON ------------------------------------------------------------------

TEST(ExtrapJson, ReadsTheCurrentLayoutInFileOrder) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_json(R"({
    "parameters": ["p", "q"],
    "measurements": {
      "train": {"time": [{"point": [4, 64], "values": [1, 2]}, {"point": [8, 64], "values": [3]},
                         {"point": [4, 64], "values": [1.5]}]},
      "data aug": {"time": [{"point": [4, 64], "values": [5]}],
                  "bytes": [{"point": [4, 64], "values": 9}]}
    }})",
                                                         "in.json");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p", "q"));
  ASSERT_EQ(set->series.size(), 3u);
  EXPECT_EQ(set->series[0].callpath, "train");  // not sorted: as in the file
  EXPECT_EQ(set->series[1].callpath, "data aug");
  EXPECT_EQ(set->series[2].metric, "bytes");
  const Series& train = set->series[0];
  EXPECT_EQ(coordinates(train), (std::vector<std::vector<double>>{{4, 64}, {8, 64}}));
  EXPECT_THAT(train.points[0].values, ElementsAre(1, 2, 1.5));
  EXPECT_THAT(set->series[2].points[0].values, ElementsAre(9));
}

TEST(ExtrapJson, ReadsTheLegacyLayout) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_json(R"({
    "parameters": [{"id": 2, "name": "q"}, {"id": 1, "name": "p"}],
    "callpaths": [{"id": 1, "name": "main"}, {"id": 2, "name": "main->solve"}],
    "metrics": [{"id": 1, "name": "time"}],
    "coordinates": [
      {"id": 1, "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 4},
                                          {"parameter_id": 2, "parameter_value": "64"}]},
      {"id": 2, "parameter_value_pairs": [{"parameter_id": 2, "parameter_value": 64},
                                          {"parameter_id": 1, "parameter_value": 8}]}],
    "measurements": [
      {"coordinate_id": 1, "callpath_id": 2, "metric_id": 1, "value": 1.0},
      {"coordinate_id": 2, "callpath_id": 2, "metric_id": 1, "value": 2.0},
      {"coordinate_id": 1, "callpath_id": 2, "metric_id": 1, "value": "1.5"},
      {"coordinate_id": 1, "callpath_id": 1, "metric_id": 1, "value": 7}]})",
                                                         "old.json");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p", "q"));  // sorted by id
  ASSERT_EQ(set->series.size(), 2u);
  EXPECT_EQ(set->series[0].callpath, "main");  // by id, as Extra-P
  const Series& solve = set->series[1];
  EXPECT_EQ(solve.callpath, "main->solve");
  EXPECT_EQ(solve.metric, "time");
  EXPECT_EQ(coordinates(solve), (std::vector<std::vector<double>>{{4, 64}, {8, 64}}));
  EXPECT_THAT(solve.points[0].values, ElementsAre(1.0, 1.5));  // repetitions aggregated
}

TEST(ExtrapJson, FallsBackToJsonLinesAsExtraPDoes) {
  const char* lines =
      "{\"params\": {\"p\": 4}, \"value\": 1}\n"
      "\n"
      "{\"params\": {\"p\": 8}, \"value\": 2}\n";
  absl::StatusOr<MeasurementSet> set = parse_extrap_json(lines, "lines.json");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series.size(), 1u);
  EXPECT_EQ(set->series[0].points.size(), 2u);
  // A single record is one JSON document too.
  set = parse_extrap_json("{\"params\": {\"p\": 4}, \"value\": 1}\n", "one.json");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->series[0].callpath, "<root>");
  // Lines that are not all objects stay a JSON error.
  EXPECT_EQ(error_of(parse_extrap_json("{\"params\": {\"p\": 4}, \"value\": 1}\n[1]\n", "x.json")),
            "x.json:2: not valid JSON: syntax error while parsing value - unexpected '['; expected "
            "end of input");
}

class ExtrapJsonErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(ExtrapJsonErrors, NameTheLineOrThePath) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_json(GetParam().text, "in.json");
  ASSERT_FALSE(set.ok()) << GetParam().text;
  EXPECT_TRUE(absl::IsInvalidArgument(set.status()));
  EXPECT_THAT(error_of(set), StartsWith(GetParam().error));
}

constexpr const char* kLegacyHead =
    R"({"parameters": [{"id": 1, "name": "p"}], "callpaths": [{"id": 1, "name": "c"}],
    "metrics": [{"id": 1, "name": "m"}],
    "coordinates": [{"id": 1,
                      "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 4}]}],
    "measurements": )";

std::string legacy(const char* measurements) {
  return std::string(kLegacyHead) + measurements + "}";
}

// Kept alive for the parameterized cases below.
const std::string kLegacyBadCallpath =
    legacy(R"([{"coordinate_id": 1, "callpath_id": 5, "metric_id": 1, "value": 1}])");
const std::string kLegacyBadCoordinate =
    legacy(R"([{"coordinate_id": 0, "callpath_id": 1, "metric_id": 1, "value": 1}])");
const std::string kLegacyBadValue =
    legacy(R"([{"coordinate_id": 1, "callpath_id": 1, "metric_id": 1, "value": "fast"}])");
const std::string kLegacyNoId = legacy(R"([{"callpath_id": 1, "metric_id": 1, "value": 1}])");

INSTANTIATE_TEST_SUITE_P(
    All, ExtrapJsonErrors,
    ::testing::Values(
        BadInput{"", "in.json:1: empty file"},
        BadInput{"{\"parameters\": [\"p\"],\n \"measurements\": {\n  \"a\": tru }}",
                 "in.json:3: not valid JSON: syntax error while parsing value - invalid literal; "
                 "last read: "
                 "'\"a\": tru '"},
        BadInput{"{\"parameters\": [\"p\"],\n \"measurements\": {\"a\": {\"t\": [\n{\"point\": "
                 "[1], \"values\": "
                 "[1e999]}]}}}",
                 "in.json:3: not valid JSON: number overflow parsing '1e999'"},
        BadInput{"[1, 2]", "in.json:1: expected a JSON object at the top level, got array"},
        BadInput{"{\"measurements\": {}}",
                 "in.json: parameters: missing (expected a list of parameter names)"},
        BadInput{"{\"parameters\": \"p\", \"measurements\": {}}",
                 "in.json: parameters: expected a list of parameter names, got string \"p\""},
        BadInput{"{\"parameters\": [], \"measurements\": {}}",
                 "in.json: parameters: no parameters"},
        BadInput{"{\"parameters\": [\"p\", 3], \"measurements\": {}}",
                 "in.json: parameters[1]: expected a name, got number 3"},
        BadInput{"{\"parameters\": [\"p\", \"p\"], \"measurements\": {}}",
                 "in.json: parameters: duplicate parameter \"p\""},
        BadInput{"{\"parameters\": [\"p\"]}", "in.json: measurements: missing"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {}}",
                 "in.json: measurements: no measurements: nothing to model"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {\"epoch\": [1]}}",
                 "in.json: measurements.epoch: expected an object of metrics, got array"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {\"epoch\": {\"time\": {}}}}",
                 "in.json: measurements.epoch.time: expected a list of"},
        BadInput{"{\"parameters\": [\"p\", \"q\"], \"measurements\": {\"epoch\": {\"time\": [\n"
                 "{\"point\": [1, 2], \"values\": [1]}, {\"point\": [1, 2], \"values\": [1]},\n"
                 "{\"point\": [4], \"values\": [1]}]}}}",
                 "in.json: measurements.epoch.time[2].point: has 1 value, expected 2 (one per "
                 "parameter: \"p\", "
                 "\"q\")"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {\"data aug\": {\"time\": "
                 "[{\"point\": [\"4\"], "
                 "\"values\": [1]}]}}}",
                 "in.json: measurements[\"data aug\"].time[0].point[0]: expected a number, got "
                 "string \"4\""},
        BadInput{
            "{\"parameters\": [\"p\"], \"measurements\": {\"e\": {\"t\": [{\"values\": [1]}]}}}",
            "in.json: measurements.e.t[0].point: missing"},
        BadInput{
            "{\"parameters\": [\"p\"], \"measurements\": {\"e\": {\"t\": [{\"point\": [1]}]}}}",
            "in.json: measurements.e.t[0].values: missing"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {\"e\": {\"t\": [{\"point\": [1], "
                 "\"values\": "
                 "[]}]}}}",
                 "in.json: measurements.e.t[0].values: expected a non-empty list of numbers, got "
                 "an empty list"},
        BadInput{"{\"parameters\": [\"p\"], \"measurements\": {\"e\": {\"t\": [{\"point\": [1], "
                 "\"values\": "
                 "[1, \"x\"]}]}}}",
                 "in.json: measurements.e.t[0].values[1]: expected a number, got string \"x\""},
        BadInput{
            "{\"parameters\": [\"p\"], \"measurements\": {\"e\": {\"t\": [{\"point\": [1], "
            "\"values\": "
            "null}]}}}",
            "in.json: measurements.e.t[0].values: expected a non-empty list of numbers, got null"},
        BadInput{kLegacyBadCallpath.c_str(),
                 "in.json: measurements[0].callpath_id: 5 is out of range: not the id of any "
                 "callpath (ids are "
                 "1..1)"},
        BadInput{kLegacyBadCoordinate.c_str(),
                 "in.json: measurements[0].coordinate_id: 0 is out of range: not the id of any "
                 "coordinate"},
        BadInput{kLegacyBadValue.c_str(),
                 "in.json: measurements[0].value: \"fast\" is not a number"},
        BadInput{kLegacyNoId.c_str(), "in.json: measurements[0].coordinate_id: missing"},
        BadInput{R"({"parameters": [{"id": 1, "name": "p"}], "callpaths": [], "metrics": [],
                     "coordinates": [{"id": 1, "parameter_value_pairs": []}], "measurements": []})",
                 "in.json: coordinates[0].parameter_value_pairs: has 0 values, expected 1"},
        BadInput{
            R"({"parameters": [{"id": 1, "name": "p"}], "callpaths": [], "metrics": [],
                     "coordinates": [{"id": 1, "parameter_value_pairs": [{"parameter_id": 3,
                     "parameter_value": 1}]}], "measurements": []})",
            "in.json: coordinates[0].parameter_value_pairs[0].parameter_id: 3 is not the id of a "
            "parameter"},
        BadInput{
            R"({"parameters": [{"id": 1, "name": "p"}, {"id": 1, "name": "q"}], "callpaths": []})",
            "in.json: parameters[1].id: duplicate id 1"}));

// --- JSON Lines ------------------------------------------------------------

TEST(ExtrapJsonLines, ReadsRecordsAndMergesRepetitions) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_jsonl(
      R"({"params": {"q": 64, "p": 4}, "value": 1.5, "callpath": "epoch", "metric": "time"}
{"params": {"p": 8, "q": 64}, "value": [2, 2.5], "callpath": "epoch", "metric": "time"}

{"params": {"p": 4, "q": 64}, "value": [1.25], "callpath": "epoch", "metric": "time"}
{"params": {"p": 4, "q": 64}, "value": 7}
)",
      "in.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("q", "p"));  // the first line's order
  ASSERT_EQ(set->series.size(), 2u);
  const Series& epoch = set->series[0];
  EXPECT_EQ(epoch.callpath, "epoch");
  EXPECT_EQ(epoch.metric, "time");
  EXPECT_EQ(coordinates(epoch), (std::vector<std::vector<double>>{{64, 4}, {64, 8}}));
  EXPECT_THAT(epoch.points[0].values, ElementsAre(1.5, 1.25));
  EXPECT_THAT(epoch.points[1].values, ElementsAre(2, 2.5));
  EXPECT_EQ(set->series[1].callpath, "<root>");
  EXPECT_EQ(set->series[1].metric, "<default>");
}

class ExtrapJsonLinesErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(ExtrapJsonLinesErrors, NameTheLine) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_jsonl(GetParam().text, "in.jsonl");
  ASSERT_FALSE(set.ok()) << GetParam().text;
  EXPECT_TRUE(absl::IsInvalidArgument(set.status()));
  EXPECT_THAT(error_of(set), StartsWith(GetParam().error));
}

#define LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": 1}\n"
INSTANTIATE_TEST_SUITE_P(
    All, ExtrapJsonLinesErrors,
    ::testing::Values(
        BadInput{"\n\n", "in.jsonl:1: empty file"},
        BadInput{LINE1 "\n{\"params\": {\"p\": 4, \"q\": 1}, \"value\": }\n",
                 "in.jsonl:3: not valid JSON: syntax error while parsing value - unexpected '}'"},
        BadInput{LINE1 "p=4 value=1\n",
                 "in.jsonl:2: not valid JSON: syntax error while parsing value - invalid "
                 "literal; last read: 'p'"},
        BadInput{LINE1 "[1]\n", "in.jsonl:2: expected a JSON object, got array"},
        BadInput{LINE1 "{\"value\": 1}\n", "in.jsonl:2: missing \"params\""},
        BadInput{LINE1 "{\"params\": [4, 1], \"value\": 1}\n",
                 "in.jsonl:2: \"params\" must be an object of parameter values, got array"},
        BadInput{"{\"params\": {}, \"value\": 1}\n", "in.jsonl:1: \"params\" is empty"},
        BadInput{LINE1 "{\"params\": {\"p\": 4}, \"value\": 1}\n",
                 "in.jsonl:2: \"params\" lacks parameter \"q\" (line 1 has \"p\", \"q\")"},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1, \"r\": 2}, \"value\": 1}\n",
                 "in.jsonl:2: \"params\" has parameter \"r\", which line 1 does not have (it has "
                 "\"p\", \"q\")"},
        BadInput{LINE1 "{\"params\": {\"p\": \"4\", \"q\": 1}, \"value\": 1}\n",
                 "in.jsonl:2: params.p: expected a number, got string \"4\""},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}}\n", "in.jsonl:2: missing \"value\""},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": []}\n",
                 "in.jsonl:2: value: expected a non-empty list of numbers, got an empty list"},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": [1, true]}\n",
                 "in.jsonl:2: value[1]: expected a number, got true"},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": \"1\"}\n",
                 "in.jsonl:2: value: expected a non-empty list of numbers, got string \"1\""},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": 1e400}\n",
                 "in.jsonl:2: not valid JSON: number overflow parsing '1e400'"},
        BadInput{LINE1 "{\"params\": {\"p\": 4, \"q\": 1}, \"value\": 1, \"callpath\": 3}\n",
                 "in.jsonl:2: \"callpath\" must be a string, got number 3"}));
#undef LINE1

// --- files -----------------------------------------------------------------

class ExtrapFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(TRAINSCOPE_TEST_TMPDIR) / "scaling_input_test" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string write(const std::string& name, const std::string& contents) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << contents;
    return path.string();
  }
  fs::path dir_;
};

TEST_F(ExtrapFile, PicksTheFormatFromTheExtensionOrTheContent) {
  const std::string text = "PARAMETER p\nPOINTS 1 2\nDATA 1\nDATA 2\n";
  const std::string json =
      R"({"parameters": ["p"], "measurements": {"c": {"m": [{"point": [1], "values": [1]}]}}})";
  const std::string lines =
      "{\"params\": {\"p\": 1}, \"value\": 1}\n{\"params\": {\"p\": 2}, \"value\": 1}\n";
  for (const auto& [name, contents, callpath] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"a.txt", text, ""},
                                                                      {"a.TXT", text, ""},
                                                                      {"b.json", json, "c"},
                                                                      {"c.jsonl", lines, "<root>"},
                                                                      {"c.json", lines, "<root>"},
                                                                      {"noext", json, "c"},
                                                                      {"noext2", lines, "<root>"},
                                                                      {"noext3", text, ""}}) {
    absl::StatusOr<MeasurementSet> set = read_extrap_file(write(name, contents));
    ASSERT_TRUE(set.ok()) << name << ": " << set.status();
    ASSERT_EQ(set->series.size(), 1u) << name;
    EXPECT_EQ(set->series[0].callpath, callpath) << name;
  }
}

TEST_F(ExtrapFile, ErrorsNameThePath) {
  const std::string path = write("bad.txt", "PARAMETER p\nPOINTS 1\nDATA x\n");
  EXPECT_EQ(error_of(read_extrap_file(path)), path + ":3: DATA: \"x\" is not a number");
  const std::string empty = write("empty.json", "");
  EXPECT_EQ(error_of(read_extrap_file(empty)), empty + ":1: empty file: expected a JSON object");

  absl::StatusOr<MeasurementSet> missing = read_extrap_file((dir_ / "missing.txt").string());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(error_of(missing), HasSubstr("missing.txt: cannot open"));
  absl::StatusOr<MeasurementSet> directory = read_extrap_file(dir_.string());
  EXPECT_FALSE(directory.ok());
  EXPECT_THAT(error_of(directory), HasSubstr(dir_.string()));
}

// --- run directories -------------------------------------------------------

using trainscope::testing::RunPtr;

class RunInput : public trainscope::testing::RunDirTest {
 protected:
  void SetUp() override {
    RunDirTest::SetUp();
    fs::create_directories(root_ / "runs");
  }

  // One run of two ranks in runs/<name>. Rank r logs "loss" = base + r and
  // base + r + 2 (mean base + r + 1) and times `batches + r` BATCH regions.
  void record(const std::string& name, const std::map<std::string, std::string>& params,
              double base, int batches) {
    const fs::path dir = root_ / "runs" / name;
    ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
    ::setenv("WORLD_SIZE", "2", 1);
    for (int rank : {0, 1}) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      RunOptions o = options();
      o.params = params;
      RunPtr run = start(o);
      ASSERT_NE(run, nullptr);
      ASSERT_TRUE(run->log_metric("loss", base + rank).ok());
      ASSERT_TRUE(run->log_metric("loss", base + rank + 2).ok());
      Timer timer;
      run->attach(timer);
      for (int i = 0; i < batches + rank; ++i) {
        timer.start(TimeType::BATCH);
        timer.end(TimeType::BATCH);
      }
      ASSERT_TRUE(run->end().ok());
    }
    clear_rank_variables();
  }

  // p = 1, 2, 4, two repetitions each; base = 100 p + 10 rep, batches = p.
  void record_sweep() {
    for (int p : {1, 2, 4}) {
      for (int rep : {0, 1}) {
        record(fmt_name(p, rep), {{"p", std::to_string(p)}, {"seed", std::to_string(rep)}},
               100.0 * p + 10 * rep, p);
      }
    }
  }
  static std::string fmt_name(int p, int rep) {
    return "p" + std::to_string(p) + "-rep" + std::to_string(rep);
  }

  std::string runs() const { return (root_ / "runs").string(); }
};

TEST_F(RunInput, OnePointPerParamValueWithRunsAsRepetitions) {
  record_sweep();
  RunSelection selection;
  selection.parameters = {"p"};
  selection.repetitions = {"seed"};  // the runs at one p differ in their seed only
  selection.what = "metric:loss";
  selection.stat = "mean";
  selection.ranks = RankAggregation::kMean;
  std::vector<std::string> warnings;
  absl::StatusOr<MeasurementSet> set = read_runs({runs()}, selection, &warnings);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(warnings.empty());
  EXPECT_THAT(set->parameters, ElementsAre("p"));
  ASSERT_EQ(set->series.size(), 1u);
  const Series& loss = set->series[0];
  EXPECT_EQ(loss.callpath, "loss");
  EXPECT_EQ(loss.metric, "mean");
  ASSERT_EQ(coordinates(loss), (std::vector<std::vector<double>>{{1}, {2}, {4}}));
  // Rank means base + 1 and base + 2; their mean base + 1.5.
  EXPECT_THAT(loss.points[0].values, ElementsAre(101.5, 111.5));
  EXPECT_THAT(loss.points[1].values, ElementsAre(201.5, 211.5));
  EXPECT_THAT(loss.points[2].values, ElementsAre(401.5, 411.5));

  selection.ranks = RankAggregation::kMax;  // the slowest rank
  set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->series[0].points[2].values, ElementsAre(402, 412));

  selection.ranks = RankAggregation::kMin;
  selection.stat = "max";
  selection.scale = 2;
  set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->series[0].points[0].values, ElementsAre(2 * 102.0, 2 * 112.0));

  selection.stat = "last";
  selection.ranks = RankAggregation::kSum;
  selection.scale = 1;
  set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->series[0].points[0].values, ElementsAre(102 + 103, 112 + 113));
}

TEST_F(RunInput, RegionStatisticsOverEveryRank) {
  record_sweep();
  RunSelection selection;
  selection.parameters = {"p", "seed"};
  selection.what = "BATCH";
  selection.stat = "count";
  selection.ranks = RankAggregation::kSum;
  absl::StatusOr<MeasurementSet> set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->parameters, ElementsAre("p", "seed"));
  const Series& batches = set->series[0];
  EXPECT_EQ(batches.callpath, "BATCH");
  EXPECT_EQ(batches.metric, "count");
  ASSERT_EQ(coordinates(batches),
            (std::vector<std::vector<double>>{{1, 0}, {1, 1}, {2, 0}, {2, 1}, {4, 0}, {4, 1}}));
  EXPECT_THAT(batches.points[4].values, ElementsAre(4 + 5));

  // The mean duration of the slowest rank, as the durations stored say.
  selection.parameters = {"p"};
  selection.repetitions = {"seed"};
  selection.stat = "mean";
  selection.ranks = RankAggregation::kMax;
  set = read_runs({runs() + "/" + fmt_name(2, 0), runs() + "/" + fmt_name(2, 1)}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series[0].points.size(), 1u);
  ASSERT_EQ(set->series[0].points[0].values.size(), 2u);
  for (int rep : {0, 1}) {
    absl::StatusOr<RunReader> reader = RunReader::Open(runs() + "/" + fmt_name(2, rep));
    ASSERT_TRUE(reader.ok()) << reader.status();
    double slowest = 0;
    for (std::uint32_t rank : {0u, 1u}) {
      absl::StatusOr<Chunk<RegionRow>> rows = reader->read_regions(rank);
      ASSERT_TRUE(rows.ok()) << rows.status();
      std::vector<double> seconds;
      for (const RegionRow& row : rows->rows) {
        if (row.key == "BATCH" && row.device == Device::kCPU)
          seconds.push_back(row.duration_ns * 1e-9);
      }
      ASSERT_EQ(seconds.size(), 2u + rank);
      slowest = std::max(slowest, compute_time_stats(seconds).mean);
    }
    EXPECT_DOUBLE_EQ(set->series[0].points[0].values[rep], slowest);
  }

  selection.stat = "rate";
  selection.ranks = RankAggregation::kMean;
  set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_GT(set->series[0].points[0].values[0], 0);
}

TEST_F(RunInput, AMissingParamIsAnErrorNamingTheRun) {
  record("only", {{"p", "4"}}, 1, 1);
  RunSelection selection;
  selection.parameters = {"p", "batch_size"};
  const std::string dir = runs() + "/only";
  EXPECT_EQ(error_of(read_runs({dir}, selection)),
            dir + ": the run has no param \"batch_size\" (its params: \"p\")");
}

TEST_F(RunInput, AParamThatIsNotANumberIsAnError) {
  record("only", {{"p", "four"}}, 1, 1);
  RunSelection selection;
  selection.parameters = {"p"};
  const std::string dir = runs() + "/only";
  EXPECT_EQ(error_of(read_runs({dir}, selection)),
            dir + ": param \"p\" is \"four\", not a finite number");
}

TEST_F(RunInput, AMissingKeyIsAnErrorListingWhatThereIs) {
  record("only", {{"p", "4"}}, 1, 1);
  const std::string dir = runs() + "/only";
  RunSelection selection;
  selection.parameters = {"p"};
  selection.what = "FORWARD";
  EXPECT_EQ(error_of(read_runs({dir}, selection)),
            dir + ": no rank recorded the region \"FORWARD\" on CPU (recorded regions: \"BATCH\")");
  selection.device = "gpu";
  selection.what = "BATCH";
  EXPECT_EQ(error_of(read_runs({dir}, selection)),
            dir + ": no rank recorded the region \"BATCH\" on GPU (no regions: none)");
  selection.device = "cpu";
  selection.what = "metric:accuracy";
  EXPECT_EQ(error_of(read_runs({dir}, selection)),
            dir + ": no rank recorded the metric \"accuracy\" (recorded metrics: \"loss\")");
}

TEST_F(RunInput, RunningRunsAreSkippedWithAWarning) {
  record("done", {{"p", "4"}}, 1, 1);
  RunOptions o = options();
  o.params = {{"p", "8"}};
  ::setenv("TRAINSCOPE_RUN_DIR", (root_ / "runs" / "live").c_str(), 1);
  RunPtr live = start(o);
  ASSERT_NE(live, nullptr);
  ::unsetenv("TRAINSCOPE_RUN_DIR");
  RunSelection selection;
  selection.parameters = {"p"};
  selection.what = "metric:loss";
  std::vector<std::string> warnings;
  absl::StatusOr<MeasurementSet> set = read_runs({runs()}, selection, &warnings);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(coordinates(set->series[0]), (std::vector<std::vector<double>>{{4}}));
  EXPECT_THAT(warnings, ElementsAre(runs() + "/live: skipped: the run is still RUNNING"));

  // Only a killed run left: nothing to measure.
  ASSERT_TRUE(live->end(RunStatus::kKilled).ok());
  warnings.clear();
  absl::StatusOr<MeasurementSet> none = read_runs({runs() + "/live"}, selection, &warnings);
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
  EXPECT_THAT(error_of(none), HasSubstr("no finished run"));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], StartsWith(runs() + "/live: skipped: the run was KILLED"));
}

TEST_F(RunInput, BadPathsAndSelections) {
  record("only", {{"p", "4"}}, 1, 1);
  RunSelection selection;
  selection.parameters = {"p"};
  EXPECT_EQ(error_of(read_runs({(root_ / "nope").string()}, selection)),
            (root_ / "nope").string() + ": no such run directory");
  const std::string empty = (root_ / "empty").string();
  fs::create_directories(empty);
  EXPECT_EQ(error_of(read_runs({empty}, selection)),
            empty + ": not a run (no run.json), and neither " + empty + " nor " + empty +
                "/runs has a run directory");
  EXPECT_EQ(error_of(read_runs({}, selection)), "no run directories given");

  RunSelection twice = selection;
  twice.by = {"p"};
  EXPECT_EQ(error_of(read_runs({runs()}, twice)),
            "param \"p\" is both a model parameter and in by");
  twice = selection;
  twice.by = {"lr"};
  twice.repetitions = {"lr"};
  EXPECT_EQ(error_of(read_runs({runs()}, twice)), "param \"lr\" is both in by and in repetitions");
  twice = selection;
  twice.by = {"lr"};
  EXPECT_EQ(error_of(read_runs({runs()}, twice)),
            runs() + "/only: the run has no param \"lr\" (by) (its params: \"p\")");

  RunSelection bad = selection;
  bad.parameters = {};
  EXPECT_THAT(error_of(read_runs({runs()}, bad)), StartsWith("no run parameters selected"));
  bad = selection;
  bad.stat = "average";
  EXPECT_THAT(error_of(read_runs({runs()}, bad)), StartsWith("unknown statistic \"average\""));
  bad = selection;
  bad.stat = "last";
  EXPECT_THAT(error_of(read_runs({runs()}, bad)),
              StartsWith("statistic \"last\" applies to metrics"));
  bad = selection;
  bad.device = "tpu";
  EXPECT_THAT(error_of(read_runs({runs()}, bad)), StartsWith("unknown device \"tpu\""));
}

// A sweep directory (or a stalls analysis) holds its runs in runs/: read
// through it as `trainscope report` reads it.
TEST_F(RunInput, ASweepDirectoryIsReadThroughItsRunsFolder) {
  record_sweep();
  std::ofstream(root_ / "sweep.json") << "{}";
  RunSelection selection;
  selection.parameters = {"p"};
  selection.repetitions = {"seed"};
  selection.what = "metric:loss";
  absl::StatusOr<MeasurementSet> set = read_runs({root_.string()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series.size(), 1u);
  EXPECT_EQ(coordinates(set->series[0]), (std::vector<std::vector<double>>{{1}, {2}, {4}}));
  EXPECT_THAT(set->series[0].points[0].values, ElementsAre(101.5, 111.5));
}

// p = 1, 2, 4 crossed with lr = 0.1, 0.01 (the loss is 100 p, plus 1000 for
// lr 0.01), seed 7 everywhere.
class RunInputCross : public RunInput {
 protected:
  void record_cross() {
    for (int p : {1, 2, 4}) {
      for (const char* lr : {"0.1", "0.01"}) {
        record("p" + std::to_string(p) + "-lr" + lr,
               {{"p", std::to_string(p)}, {"lr", lr}, {"seed", "7"}},
               100.0 * p + (std::string(lr) == "0.01" ? 1000 : 0), 1);
      }
    }
  }
};

TEST_F(RunInputCross, RunsAtOnePointThatDifferInAnotherParamAreRefusedNamingIt) {
  record_cross();
  RunSelection selection;
  selection.parameters = {"p"};
  selection.what = "metric:loss";
  const absl::StatusOr<MeasurementSet> set = read_runs({runs()}, selection);
  EXPECT_TRUE(absl::IsInvalidArgument(set.status())) << set.status();
  EXPECT_EQ(error_of(set),
            runs() +
                ": the runs at one point differ in lr (0.01, 0.1): as repetitions their values "
                "would be averaged into one\n"
                "  (e.g. " +
                runs() + "/p1-lr0.01 and " + runs() +
                "/p1-lr0.1 at p=1: lr: 0.01 and 0.1)\n"
                "  fit one model per value: --by lr (Python: by=[...]); model it too: --params "
                "p,lr;\n"
                "  or, if its values are repetitions (a seed): --repetition lr (Python: "
                "repetitions=[...])");
}

TEST_F(RunInputCross, ByGivesOneSeriesPerValueWithItsGroup) {
  record_cross();
  RunSelection selection;
  selection.parameters = {"p"};
  selection.by = {"lr"};
  selection.what = "metric:loss";
  selection.stat = "mean";
  absl::StatusOr<MeasurementSet> set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series.size(), 2u);
  // Sorted as numbers: 0.01 before 0.1.
  using Group = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(set->series[0].group, (Group{{"lr", "0.01"}}));
  EXPECT_EQ(set->series[1].group, (Group{{"lr", "0.1"}}));
  for (const Series& series : set->series) {
    EXPECT_EQ(series.callpath, "loss");
    EXPECT_EQ(coordinates(series), (std::vector<std::vector<double>>{{1}, {2}, {4}}));
  }
  EXPECT_THAT(set->series[0].points[0].values, ElementsAre(1101.5));
  EXPECT_THAT(set->series[1].points[2].values, ElementsAre(401.5));

  // Naming lr a repetition averages the two as one point, on purpose.
  selection.by = {};
  selection.repetitions = {"lr"};
  set = read_runs({runs()}, selection);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->series.size(), 1u);
  EXPECT_TRUE(set->series[0].group.empty());
  EXPECT_THAT(set->series[0].points[0].values, ElementsAre(1101.5, 101.5));
}

TEST_F(RunInputCross, AParamSetInSomeRunsOnlyDiffers) {
  record("a", {{"p", "1"}}, 1, 1);
  record("b", {{"p", "1"}, {"note", "x"}}, 2, 1);
  RunSelection selection;
  selection.parameters = {"p"};
  selection.what = "metric:loss";
  EXPECT_THAT(error_of(read_runs({runs()}, selection)), HasSubstr("differ in note ((unset), x)"));
  // A param that differs only between points is no repetition problem.
  record("c", {{"p", "2"}, {"note", "y"}}, 3, 1);
  EXPECT_TRUE(read_runs({runs() + "/a", runs() + "/c"}, selection).ok());
  selection.repetitions = {"note"};
  EXPECT_TRUE(read_runs({runs()}, selection).ok());
}

}  // namespace
}  // namespace trainscope::scaling
