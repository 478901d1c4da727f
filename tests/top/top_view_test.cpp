// trainscope top's view without a terminal: the lines of a followed run, a
// vanished run as an alert naming it, and targets that are no run.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/damaged_run.hpp"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/top/top_view.hpp"

namespace trainscope::top {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// A run whose rank ended FINISHED with 800 regions in its summary and no
// regions file: top said "NO-DATA: no step key" and exited 0 while diagnose
// said the timings are lost. One rule (check_run): the loss is the alert, and
// a snapshot (--once, --json) fails with it.
TEST(TopView, LostRegionRowsAreTheAlertAndNoSnapshot) {
  testing::TempDir tmp;
  testing::FinishedRun spec;
  spec.rows = 800;
  const auto dir = testing::write_finished_run(tmp.file("run"), spec);
  std::filesystem::remove(dir / "regions-0.csv");
  const absl::StatusOr<diagnosis::Diagnosis> diagnosed = diagnosis::diagnose_run(dir.string());
  ASSERT_FALSE(diagnosed.ok());

  TopSession session(TopSettings{}, TopTarget{false, dir.string(), ""});
  EXPECT_FALSE(session.refresh());
  EXPECT_THAT(session.alert(), HasSubstr(std::string(diagnosed.status().message())));
  EXPECT_THAT(session.alert(), HasSubstr("regions-0.csv: no such file"));
  EXPECT_THAT(session.alert(), HasSubstr("counts 800 regions: the run's timings are lost"));
  EXPECT_THAT(all_text(session.lines(false, 200, 10, true)), HasSubstr("timings are lost"));
  EXPECT_FALSE(session.snapshot(false, false).has_value());
  EXPECT_FALSE(session.snapshot(true, false).has_value());

  // A regions file cut short is a warning on the view (the run stays readable).
  testing::write_finished_run(dir, spec);
  testing::cut_regions(dir, 453);
  TopSession cut(TopSettings{}, TopTarget{false, dir.string(), ""});
  ASSERT_TRUE(cut.refresh()) << cut.alert();
  EXPECT_THAT(all_text(cut.lines(false, 400, 10, false)),
              HasSubstr("warning: " + dir.string() + "/regions-0.csv holds 453 rows of BATCH"));
}

// run.json that is a FIFO, a directory or a symlink loop: top said "no
// run.json"; it says what it is (and never blocks on the FIFO).
TEST(TopView, ARunJsonThatIsNoFileIsNamedForWhatItIs) {
  testing::TempDir tmp;
  const auto fifo = testing::write_finished_run(tmp.file("fifo"));
  const auto directory = testing::write_finished_run(tmp.file("directory"));
  const auto loop = testing::write_finished_run(tmp.file("loop"));
  for (const auto& dir : {fifo, directory, loop}) std::filesystem::remove(dir / "run.json");
  ASSERT_EQ(::mkfifo((fifo / "run.json").c_str(), 0600), 0);
  std::filesystem::create_directory(directory / "run.json");
  std::filesystem::create_symlink("run.json", loop / "run.json");
  for (const auto& [dir, what] :
       {std::pair{fifo, "it is a FIFO"}, std::pair{directory, "it is a directory"},
        std::pair{loop, "symbolic links"}}) {
    const absl::StatusOr<TopTarget> target = resolve_top_target({dir.string()});
    ASSERT_TRUE(target.ok()) << target.status();
    TopSession session(TopSettings{}, *target);
    EXPECT_FALSE(session.refresh());
    EXPECT_THAT(session.alert(), HasSubstr(what)) << dir;
    EXPECT_THAT(session.alert(), HasSubstr((dir / "run.json").string()));
    EXPECT_THAT(session.alert(), Not(HasSubstr("no run.json")));
  }

  // ... also when it turns into one while followed.
  const auto followed = testing::write_finished_run(tmp.file("followed"));
  TopSession session(TopSettings{}, TopTarget{false, followed.string(), ""});
  ASSERT_TRUE(session.refresh()) << session.alert();
  std::filesystem::remove(followed / "run.json");
  ASSERT_EQ(::mkfifo((followed / "run.json").c_str(), 0600), 0);
  EXPECT_FALSE(session.refresh());
  EXPECT_THAT(session.alert(), HasSubstr("it is a FIFO"));
  EXPECT_THAT(session.alert(), Not(HasSubstr("vanished")));
}

// The directory deleted and created again at the same path: top follows the
// new run (its id), says so, and reads its files from their start.
TEST(TopView, ANewRunAtTheFollowedPathIsFollowed) {
  testing::TempDir tmp;
  const auto dir = testing::write_finished_run(tmp.file("run"));
  TopSession session(TopSettings{}, TopTarget{false, dir.string(), ""});
  ASSERT_TRUE(session.refresh()) << session.alert();
  ASSERT_EQ(session.diagnosis()->run_id, testing::kRunId);
  std::filesystem::remove_all(dir);
  testing::FinishedRun spec;
  spec.id = "fedcba9876543210fedcba9876543210";
  spec.rows = 300;
  spec.batch_s = 0.02;
  testing::write_finished_run(dir, spec);
  ASSERT_TRUE(session.refresh()) << session.alert();
  EXPECT_EQ(session.diagnosis()->run_id, spec.id);
  EXPECT_EQ(session.diagnosis()->ranks.at(0).steps, 300u);
  EXPECT_THAT(all_text(session.lines(false, 200, 10, false)),
              HasSubstr("a new run at this path: n (" + spec.id + ") (the run " +
                        std::string(testing::kRunId) + " was replaced)"));
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

// No argument: the newest run under default_runs_root(), listed by
// find_run_dirs, so a directory whose runs/ holds the runs (a sweep copied
// without its sweep.json) is followed too; top listed only one level down and
// said it held no run.
TEST(TopView, NoArgumentFollowsTheNewestRunUnderTheRunsRoot) {
  testing::TempDir tmp;
  testing::FinishedRun older;
  older.id = "0123456789abcdef0123456789abcde0";
  testing::write_finished_run(tmp.file("copied-sweep/runs/a"), older);
  testing::FinishedRun newer;
  newer.id = "0123456789abcdef0123456789abcde1";
  const auto b = testing::write_finished_run(tmp.file("copied-sweep/runs/b"), newer);
  const char* run_dir = std::getenv("TRAINSCOPE_RUN_DIR");
  const char* root = std::getenv("TRAINSCOPE_RUNS_ROOT");
  const std::string saved_run_dir = run_dir != nullptr ? run_dir : "";
  const std::string saved_root = root != nullptr ? root : "";
  ::unsetenv("TRAINSCOPE_RUN_DIR");
  ::setenv("TRAINSCOPE_RUNS_ROOT", tmp.file("copied-sweep").c_str(), 1);
  const absl::StatusOr<TopTarget> target = resolve_top_target({});
  ::setenv("TRAINSCOPE_RUNS_ROOT", tmp.file("nowhere").c_str(), 1);
  const absl::StatusOr<TopTarget> none = resolve_top_target({});
  if (run_dir != nullptr) ::setenv("TRAINSCOPE_RUN_DIR", saved_run_dir.c_str(), 1);
  if (root != nullptr) {
    ::setenv("TRAINSCOPE_RUNS_ROOT", saved_root.c_str(), 1);
  } else {
    ::unsetenv("TRAINSCOPE_RUNS_ROOT");
  }
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_FALSE(target->sweep);
  // Both started at the same time: the later name wins the tie.
  EXPECT_EQ(target->path, b.string());
  EXPECT_THAT(target->note, HasSubstr("the newest run under " + tmp.file("copied-sweep")));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr(tmp.file("nowhere")));
  EXPECT_THAT(none.status().message(), HasSubstr("TRAINSCOPE_RUNS_ROOT"));
}

TEST(TopView, TargetsThatAreNoRunAreErrorsNamingThem) {
  testing::TempDir tmp;
  const absl::StatusOr<TopTarget> missing = resolve_top_target({tmp.file("nope")});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  EXPECT_EQ(top_sort_name(next_top_sort(TopSort::kName, 1)), "share");
  EXPECT_EQ(top_sort_name(next_top_sort(TopSort::kShare, -1)), "name");
}

// The job's threads' run-queue wait (the contention share of the last 10 s,
// docs/steps.md) and its step thread's in its steps (the step wait share) are on
// the host's line, and HOST-PRESSURE is raised.
TEST(TopView, TheHostLineShowsHowLongTheJobWaitedForACpu) {
  testing::TempDir tmp;
  testing::RankJson rank;
  rank.status = "FINISHED";
  rank.end_time_ms = 2;
  const auto dir = testing::write_run_dir(tmp.file("run"), testing::RunJson{}, {rank});
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t s = kT0 + i * 10 * kMs;
    // Each step's own wait: 2 ms of 10 (a regions row's last field, cpu_wait_ns).
    rows += "BATCH,CPU,0,0," + std::to_string(s) + "," + std::to_string(10 * kMs) + ",0,0,,," +
            std::to_string(2 * kMs) + "\n";
  }
  testing::write_file(dir / "regions-0.csv", rows, true);
  std::string host = testing::kMetricsHeader;
  for (int i = 0; i < 6; ++i) {
    const std::string t = std::to_string(kT0 / kMs + i * 1000);
    host += "system/cpu.util_pct,60,0," + t + ",\n";
    host += "system/proc.cpu_pct,100,0," + t + ",0\n";
    host += "system/proc.cpu_wait_pct,50,0," + t + ",0\n";  // half of each second
  }
  testing::write_file(dir / "host-h.csv", host);

  TopSession session(TopSettings{}, TopTarget{false, dir.string(), ""});
  ASSERT_TRUE(session.refresh()) << session.alert();
  const std::string text = all_text(session.lines(false, 160, 40, false));
  EXPECT_THAT(text, HasSubstr("waited 50.0%"));
  EXPECT_THAT(text, HasSubstr("step thread waited 20.0%"));
  EXPECT_THAT(text, HasSubstr("HOST-PRESSURE"));
}

}  // namespace
}  // namespace trainscope::top
