// trainscope top's view without a terminal: the lines of a followed run, a
// vanished run as an alert naming it, and targets that are no run.
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/top_view.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;
constexpr std::int64_t kMs = 1'000'000;

std::string all_text(const std::vector<TopLine>& lines) {
  std::string out;
  for (const TopLine& line : lines) out += line.text + "\n";
  return out;
}

TEST(TopView, LinesOfAFollowedRunAndAnAlertWhenItVanishes) {
  testing::TempDir tmp;
  testing::RankJson rank;
  rank.status = "FINISHED";
  rank.end_time_ms = 2;
  const auto dir = testing::write_run_dir(tmp.file("run"), testing::RunJson{}, {rank});
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += "IO,CPU,0,0," + std::to_string(s) + "," + std::to_string(5 * kMs) + ",0,0\n";
    rows += "BATCH,CPU,0,0," + std::to_string(s) + "," + std::to_string(10 * kMs) + ",0,0\n";
  }
  testing::write_file(dir / "regions-0.csv", rows, true);

  TopSession session(TopSettings{}, TopTarget{false, dir.string(), ""});
  ASSERT_TRUE(session.refresh()) << session.alert();
  ASSERT_TRUE(session.diagnosis().has_value());
  const std::string text = all_text(session.lines(false, 100, 10, false));
  EXPECT_THAT(text, HasSubstr("INPUT-BOUND"));
  EXPECT_THAT(text, HasSubstr("r0"));
  EXPECT_THAT(text, HasSubstr("FINISHED"));

  // Keys: sort and window change the view; the snapshot and the footer show it.
  EXPECT_EQ(session.press('s'), TopSession::KeyAction::kRedraw);
  EXPECT_EQ(session.settings().sort, TopSort::kP95);
  EXPECT_EQ(session.press('S'), TopSession::KeyAction::kRedraw);
  EXPECT_EQ(session.settings().sort, TopSort::kShare);
  EXPECT_EQ(session.press('w'), TopSession::KeyAction::kRefresh);
  EXPECT_EQ(session.settings().follow.window_steps, 50u);
  EXPECT_EQ(session.press('x'), TopSession::KeyAction::kNone);
  EXPECT_EQ(session.press('q'), TopSession::KeyAction::kQuit);
  EXPECT_THAT(session.footer(1), HasSubstr("window: 50"));
  const std::optional<std::string> once = session.snapshot(false, false);
  ASSERT_TRUE(once.has_value());
  EXPECT_THAT(*once, HasSubstr("INPUT-BOUND"));
  const std::optional<std::string> json = session.snapshot(true, false);
  ASSERT_TRUE(json.has_value());
  EXPECT_THAT(*json, HasSubstr("\"window_steps\": 50"));

  std::filesystem::remove_all(dir);
  EXPECT_FALSE(session.snapshot(false, false).has_value());
  EXPECT_FALSE(session.refresh());
  EXPECT_THAT(session.alert(), HasSubstr("vanished"));
  EXPECT_TRUE(session.diagnosis().has_value());  // what was read before stays
}

TEST(TopView, AKeyThatMixesTwoModulesSaysSo) {
  // Issue 37: --auto's FORWARD of two model classes (the run's tag) is one row
  // whose statistics mix both; top's key line says so.
  testing::TempDir tmp;
  testing::RankJson rank;
  rank.status = "FINISHED";
  rank.end_time_ms = 2;
  testing::RunJson run;
  run.tags = {{"trainscope.auto", "on"}, {"trainscope.auto.callers.FORWARD", "Net, Head"}};
  const auto dir = testing::write_run_dir(tmp.file("run"), run, {rank});
  std::string rows;
  for (int i = 0; i < 20; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    rows += "FORWARD,CPU,0,0," + std::to_string(s) + "," + std::to_string(5 * kMs) + ",0,0\n";
    rows += "BATCH,CPU,0,0," + std::to_string(s) + "," + std::to_string(10 * kMs) + ",0,0\n";
  }
  testing::write_file(dir / "regions-0.csv", rows, true);
  TopSession session(TopSettings{}, TopTarget{false, dir.string(), ""});
  ASSERT_TRUE(session.refresh()) << session.alert();
  const std::string text = all_text(session.lines(false, 160, 10, false));
  EXPECT_THAT(text, HasSubstr("(mixes Net, Head)"));
}

TEST(TopView, FitColumnsCountsCodePointsNotBytes) {
  EXPECT_EQ(fit_columns("abcdef", 4), "abcd");
  EXPECT_EQ(fit_columns("ab", 4), "ab");
  EXPECT_EQ(fit_columns("a\u2191b\u2192c", 3), "a\u2191b");  // arrows: 3 bytes, one cell
  EXPECT_EQ(fit_columns("abc", 0), "");
  EXPECT_EQ(fit_columns("\xe2\x86", 5), "\xe2\x86");  // a cut code point is kept whole
}

TEST(TopView, TargetsThatAreNoRunAreErrorsNamingThem) {
  testing::TempDir tmp;
  const absl::StatusOr<TopTarget> missing = resolve_top_target({tmp.file("nope")});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  EXPECT_EQ(top_sort_name(next_top_sort(TopSort::kName, 1)), "share");
  EXPECT_EQ(top_sort_name(next_top_sort(TopSort::kShare, -1)), "name");
}

}  // namespace
}  // namespace trainscope::diagnosis
