// Hangs: the pure judgement on hand-made progress, and the follower and the
// watch on run directories written by hand (a running rank whose last step
// ended long ago, one that ended, one that steps on).
#include "trainscope/diagnosis/hang.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/diagnosis/end_of_run.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::HasSubstr;
using testing::RankJson;
using testing::RunJson;
using testing::TempDir;
using testing::write_file;
using testing::write_run_dir;

constexpr std::int64_t kS = 1'000'000'000;
constexpr std::int64_t kNow = 1'700'000'000 * kS;

RankProgress progress(std::uint32_t rank, double stalled_s, double step_s = 0.1,
                      std::size_t steps = 50) {
  RankProgress p;
  p.rank = rank;
  p.alive = true;
  p.steps = steps;
  p.last_step_end_ns = kNow - static_cast<std::int64_t>(stalled_s * 1e9);
  p.recent_step_s.assign(steps, step_s);
  return p;
}

TEST(Hang, LimitIsTheLargerOfFactorTimesP99AndTheMinimum) {
  Thresholds t;  // hang_factor 10, hang_min_s 60
  EXPECT_DOUBLE_EQ(hang_limit_s({0.1, 0.1, 0.2}, t), 60.0);
  EXPECT_NEAR(hang_limit_s(std::vector<double>(100, 30.0), t), 300.0, 1e-9);
  EXPECT_DOUBLE_EQ(hang_limit_s({}, t), 60.0);  // no step period: the minimum
  t.hang_min_s = 5;
  t.hang_factor = 2;
  EXPECT_NEAR(hang_limit_s(std::vector<double>(100, 4.0), t), 8.0, 1e-9);
}

TEST(Hang, ARunningRankStalledPastTheLimitIsHungOthersAreNot) {
  Thresholds t;
  t.hang_min_s = 5;
  std::vector<RankProgress> ranks = {progress(0, 1.0), progress(1, 7.5), progress(2, 4.9)};
  std::vector<HungRank> hung = find_hung(ranks, kNow, t);
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rank, 1u);
  EXPECT_EQ(hung[0].step, 50u);
  EXPECT_EQ(hung[0].since_ns, kNow - 7'500'000'000);
  EXPECT_NEAR(hung[0].stalled_s, 7.5, 1e-9);
  EXPECT_DOUBLE_EQ(hung[0].limit_s, 5.0);
  EXPECT_NEAR(hung[0].p99_s, 0.1, 1e-12);
}

TEST(Hang, SlowStepsRaiseTheLimit) {
  Thresholds t;
  t.hang_min_s = 5;
  // 2 s steps: the limit is 20 s, a stall of 10 s is no hang.
  EXPECT_TRUE(find_hung({progress(0, 10.0, 2.0)}, kNow, t).empty());
  EXPECT_EQ(find_hung({progress(0, 21.0, 2.0)}, kNow, t).size(), 1u);
}

TEST(Hang, EndedCrashedAndNotYetSteppingRanksAreNeverHung) {
  Thresholds t;
  t.hang_min_s = 1;
  RankProgress ended = progress(0, 100);
  ended.alive = false;
  RankProgress no_step = progress(1, 100);
  no_step.last_step_end_ns = 0;
  no_step.steps = 0;
  RankProgress future = progress(2, -3);  // a clock ahead: no stall
  EXPECT_TRUE(find_hung({ended, no_step, future}, kNow, t).empty());
}

TEST(Hang, RanksComeOutInRankOrder) {
  Thresholds t;
  t.hang_min_s = 1;
  std::vector<HungRank> hung = find_hung({progress(3, 9), progress(1, 9)}, kNow, t);
  ASSERT_EQ(hung.size(), 2u);
  EXPECT_EQ(hung[0].rank, 1u);
  EXPECT_EQ(hung[1].rank, 3u);
}

TEST(Hang, TheLabelNamesTheRankTheStepAndSinceWhen) {
  Thresholds t;
  t.hang_min_s = 5;
  HungRank h;
  h.rank = 1;
  h.step = 20;
  h.since_ns = kNow;  // 2023-11-14 22:13:20 UTC
  h.stalled_s = 12.5;
  h.limit_s = 5;
  h.p99_s = 0.012;
  const Label l = hang_label(h, t);
  EXPECT_EQ(l.name, LabelName::kHang);
  EXPECT_EQ(label_name(l.name), "HANG");
  ASSERT_TRUE(l.rank.has_value());
  EXPECT_EQ(*l.rank, 1u);
  EXPECT_EQ(l.quantity, "stalled_s");
  EXPECT_DOUBLE_EQ(l.value.value, 12.5);
  EXPECT_DOUBLE_EQ(l.threshold, 5.0);
  EXPECT_EQ(l.threshold_name, "hang_min_s");
  EXPECT_THAT(l.evidence, HasSubstr("step 20 has not ended for 12.5 s, since 22:13:20 UTC"));
  EXPECT_THAT(hang_line({h}), HasSubstr("HANG: rank 1 (step 20 not ended since 22:13:20 UTC"));
  EXPECT_EQ(*parse_label_name("HANG"), LabelName::kHang);
}

TEST(Hang, ThresholdsByName) {
  Thresholds t;
  ASSERT_TRUE(t.set("hang_min_s=5").ok());
  ASSERT_TRUE(t.set("hang_factor", 3).ok());
  EXPECT_DOUBLE_EQ(t.hang_min_s, 5.0);
  EXPECT_DOUBLE_EQ(t.hang_factor, 3.0);
}

// ---- On run directories --------------------------------------------------

std::string batch_row(std::int64_t start, std::int64_t ns, std::uint32_t rank) {
  return "BATCH,CPU," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
         std::to_string(ns) + ",0,0\n";
}

// Steps of 10 ms: rank 0's last ended 2 s before `now_ns`, ranks 1 and 2's an hour before.
void write_three_ranks(const std::filesystem::path& dir, std::int64_t now_ns) {
  const std::int64_t ms = 1'000'000;
  std::string rows0, rows1, rows2;
  for (int i = 0; i < 30; ++i) {
    rows0 += batch_row(now_ns - 2 * kS - (30 - i) * 10 * ms, 10 * ms, 0);
    rows1 += batch_row(now_ns - 3600 * kS - (30 - i) * 10 * ms, 10 * ms, 1);
    rows2 += batch_row(now_ns - 3600 * kS - (30 - i) * 10 * ms, 10 * ms, 2);
  }
  write_file(dir / "regions-0.csv", rows0, /*append=*/true);
  write_file(dir / "regions-1.csv", rows1, /*append=*/true);
  write_file(dir / "regions-2.csv", rows2, /*append=*/true);
}

// Ranks 0 and 1 run (heartbeat far ahead: alive); rank 0's last step ended
// 2 s ago, rank 1's long ago (steps of 10 ms). Rank 2 ended long ago.
std::string hung_run(const TempDir& tmp, std::int64_t now_ns) {
  RankJson r0, r1, r2;
  r0.rank = 0;
  r1.rank = 1;
  r2.rank = 2;
  r0.world_size = r1.world_size = r2.world_size = 3;
  r0.heartbeat_ms = r1.heartbeat_ms = 4'000'000'000'000;
  r2.status = "FINISHED";
  r2.end_time_ms = 2;
  r2.heartbeat_ms = 2;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {r0, r1, r2});
  write_three_ranks(dir, now_ns);
  return dir.string();
}

std::int64_t wall_now_ns() { return static_cast<std::int64_t>(absl::ToUnixNanos(absl::Now())); }

// In both scopes one HANG, rank 1's, first.
void expect_only_rank_1_hung(const Diagnosis& d) {
  for (const Scope* s : {&d.window, &d.run}) {
    ASSERT_FALSE(s->labels.empty());
    EXPECT_EQ(s->labels[0].name, LabelName::kHang);
    EXPECT_EQ(s->labels[0].rank, 1u);
    int hangs = 0;
    for (const Label& l : s->labels) hangs += l.name == LabelName::kHang;
    EXPECT_EQ(hangs, 1);
  }
}

TEST(Hang, TheDiagnosisOfARunningRunLabelsTheHungRankFirst) {
  TempDir tmp;
  const std::string dir = hung_run(tmp, wall_now_ns());
  FollowOptions options;
  options.thresholds.hang_min_s = 600;  // rank 0 (2 s) is not hung, rank 1 (an hour) is
  absl::StatusOr<Diagnosis> d = diagnose_run(dir, options);
  ASSERT_TRUE(d.ok()) << d.status();
  expect_only_rank_1_hung(*d);
  EXPECT_THAT(d->headline(), HasSubstr("HANG(rank 1)"));
  // The document carries it both ways.
  absl::StatusOr<Diagnosis> back = parse_diagnosis(diagnosis_json(*d), "test");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_NE(back->window.find(LabelName::kHang), nullptr);
  EXPECT_EQ(back->window.find(LabelName::kHang)->rank, 1u);
  EXPECT_THAT(format_diagnosis(*d), HasSubstr("has not ended for"));
}

TEST(Hang, TheWatchSeesTheSameRanks) {
  TempDir tmp;
  const std::string dir = hung_run(tmp, wall_now_ns());
  Thresholds t;
  t.hang_min_s = 600;
  absl::StatusOr<HangWatch> watch = HangWatch::Open(dir, t);
  ASSERT_TRUE(watch.ok()) << watch.status();
  absl::StatusOr<std::vector<HungRank>> hung = watch->poll();
  ASSERT_TRUE(hung.ok()) << hung.status();
  ASSERT_EQ(hung->size(), 1u);
  EXPECT_EQ((*hung)[0].rank, 1u);
  EXPECT_EQ((*hung)[0].step, 30u);
  EXPECT_GT((*hung)[0].stalled_s, 3500.0);
}

TEST(Hang, AnEndedRunHasNoHang) {
  TempDir tmp;
  RankJson r;
  r.status = "FINISHED";
  r.end_time_ms = 2;
  r.heartbeat_ms = 2;
  const auto dir = write_run_dir(tmp.file("run"), RunJson{}, {r});
  std::string rows;
  for (int i = 0; i < 30; ++i) rows += batch_row(kNow + i * 10'000'000, 10'000'000, 0);
  write_file(dir / "regions-0.csv", rows, /*append=*/true);
  FollowOptions options;
  options.thresholds.hang_min_s = 1;
  absl::StatusOr<Diagnosis> d = diagnose_run(dir.string(), options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->run.find(LabelName::kHang), nullptr);
  EXPECT_EQ(d->window.find(LabelName::kHang), nullptr);
}

// ---- Dumps ---------------------------------------------------------------

std::string dump_json(std::uint32_t rank, const std::string& main_function,
                      const std::string& collectives) {
  return R"({"format": "trainscope.dump", "version": 1, "rank": )" + std::to_string(rank) +
         R"(, "pid": 12, "time_ms": 1700000000000, "threads": [
      {"name": "lock-taker", "main": false, "frames": [
        {"file": "/x/hang.py", "line": 31, "function": "take_the_other_way"}]},
      {"name": "MainThread", "main": true, "frames": [
        {"file": "/x/hang.py", "line": 20, "function": ")" +
         main_function + R"("},
        {"file": "/x/hang.py", "line": 55, "function": "main"}]}],
    "regions": ["BATCH"], "collectives": )" +
         collectives + R"(, "notes": []})";
}

// A job ended for a hang (`--on-hang kill`): ranks 0 and 1 KILLED at kNow, rank 0's
// last step 2 s before, rank 1's an hour before; rank 2 FINISHED long before.
std::string killed_for_hang_run(const TempDir& tmp, bool tagged) {
  RankJson r0, r1, r2;
  r0.rank = 0;
  r1.rank = 1;
  r2.rank = 2;
  r0.world_size = r1.world_size = r2.world_size = 3;
  r0.status = r1.status = "KILLED";
  r0.end_time_ms = r1.end_time_ms = r0.heartbeat_ms = r1.heartbeat_ms = kNow / 1'000'000;
  r2.status = "FINISHED";
  r2.end_time_ms = r2.heartbeat_ms = (kNow - 3000 * kS) / 1'000'000;
  RunJson run;
  if (tagged) run.tags["trainscope.end_reason"] = "hang";
  const auto dir = write_run_dir(tmp.file("run"), run, {r0, r1, r2});
  write_three_ranks(dir, kNow);
  return dir.string();
}

TEST(Hang, AJobEndedForAHangIsJudgedAtItsEndAndItsSummarySaysHang) {
  TempDir tmp;
  const std::string dir = killed_for_hang_run(tmp, /*tagged=*/true);
  write_file(std::filesystem::path(dir) / "dump-1.json", dump_json(1, "sleep_forever", "[]"));
  FollowOptions options;
  options.thresholds.hang_min_s = 600;  // at the end rank 0 (2 s) is not hung, rank 1 (1 h) is
  absl::StatusOr<Diagnosis> d = diagnose_run(dir, options);
  ASSERT_TRUE(d.ok()) << d.status();
  expect_only_rank_1_hung(*d);
  const Label* hang = d->run.find(LabelName::kHang);
  EXPECT_THAT(hang->evidence, HasSubstr("step 30 has not ended for 3600 s"));
  EXPECT_THAT(hang->evidence, HasSubstr("ran until the job was ended for the hang"));
  EXPECT_THAT(hang->evidence, HasSubstr("main thread in sleep_forever"));
  // The end of `trainscope run` says it, with the launcher's thresholds.
  LaunchResult result;
  result.run_dir = dir;
  result.status = RunStatus::kKilled;
  auto end = std::make_shared<EndOfRun>();
  end_of_run_hook(end, options.thresholds)(result);
  ASSERT_TRUE(end->diagnosis.has_value()) << end->error;
  const std::string summary = end_of_run_text(*end, dir, /*quiet=*/false);
  EXPECT_THAT(summary, HasSubstr("HANG(rank 1)"));
  EXPECT_THAT(summary, HasSubstr("HANG: step 30 has not ended"));
  // Without the tag an ended run has no hang.
  TempDir other;
  absl::StatusOr<Diagnosis> untagged =
      diagnose_run(killed_for_hang_run(other, /*tagged=*/false), options);
  ASSERT_TRUE(untagged.ok()) << untagged.status();
  EXPECT_EQ(untagged->run.find(LabelName::kHang), nullptr);
}

TEST(HangDump, RegionDumpsOfCppRanks) {
  const std::string block =
      "trainscope.regions-dump 1\nrank 2 pid 77 time_ms 1700000000000\n"
      "timer 0: BATCH 12034 ms; LOAD 12030 ms\ntimer 3: EVAL 5 ms; 2 more\nend\n";
  // The last block counts (an earlier, other text before it is left alone).
  absl::StatusOr<RankDump> d =
      parse_region_dump("Thread 0x1 (most recent call first):\n" + block + block, "dump-2.txt");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rank, 2u);
  EXPECT_EQ(d->pid, 77);
  EXPECT_EQ(d->time_ms, 1'700'000'000'000);
  EXPECT_EQ(d->regions, (std::vector<std::string>{"BATCH (open 12 s)", "LOAD (open 12 s)",
                                                  "EVAL (open 5 ms)", "2 more"}));
  // Python's faulthandler stacks: no region dump, not an error.
  EXPECT_TRUE(absl::IsNotFound(
      parse_region_dump("Thread 0x1 (most recent call first):\n", "dump-2.txt").status()));
  // Cut, or a bad line: the file and the line named.
  absl::StatusOr<RankDump> cut = parse_region_dump(block.substr(0, block.size() - 4), "d.txt");
  EXPECT_THAT(cut.status().message(), HasSubstr("d.txt:5: the region dump is cut"));
  absl::StatusOr<RankDump> bad = parse_region_dump(
      "trainscope.regions-dump 1\nrank 2 pid 77 time_ms 1\ntimer 0: X\nend\n", "d.txt");
  EXPECT_THAT(bad.status().message(), HasSubstr("d.txt:3: not \"REGION MS ms\": X"));
}

TEST(HangDump, ParsesThreadsMainFirstAndTheRing) {
  absl::StatusOr<RankDump> d = parse_dump(
      dump_json(1, "sleep_forever",
                R"([{"op": "all_reduce", "group": 0, "seq": 56, "bytes": 4096, "entered": 1.0,
                     "left": 1.5}])"),
      "dump-1.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rank, 1u);
  ASSERT_EQ(d->threads.size(), 2u);
  EXPECT_TRUE(d->threads[0].main);
  EXPECT_EQ(d->threads[0].frames[0].function, "sleep_forever");
  ASSERT_EQ(d->collectives.size(), 1u);
  EXPECT_EQ(d->collectives[0].group, "0");
  EXPECT_TRUE(d->collectives[0].left);
  EXPECT_EQ(dump_text(*d),
            "main thread in sleep_forever (hang.py:20) <- main (hang.py:55); lock-taker in "
            "take_the_other_way (hang.py:31); regions open: BATCH; last left all_reduce #56 of "
            "group 0");
}

TEST(HangDump, ErrorsNameTheFileAndTheKey) {
  absl::StatusOr<RankDump> d =
      parse_dump(R"({"format": "trainscope.dump", "version": 1})", "d.json");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("d.json"));
  EXPECT_THAT(d.status().message(), HasSubstr("rank"));
  EXPECT_FALSE(parse_dump("{\"format\": \"trainscope.du", "cut.json").ok());
}

TEST(HangDump, ACutOrUnreadableDumpIsANoteAndTheOthersAreRead) {
  TempDir tmp;
  const std::filesystem::path dir = tmp.file("run");
  std::filesystem::create_directories(dir);
  write_file(dir / "dump-0.json", dump_json(0, "all_reduce", "[]"));
  const std::string whole = dump_json(1, "sleep_forever", "[]");
  write_file(dir / "dump-1.json", whole.substr(0, whole.size() / 2));
  std::filesystem::create_directories(dir / "dump-2.json");  // a directory: not readable as a file
  std::vector<std::string> notes;
  std::vector<RankDump> dumps = read_dumps(dir.string(), &notes);
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(dumps[0].rank, 0u);
  ASSERT_EQ(notes.size(), 2u);
  std::sort(notes.begin(), notes.end());
  EXPECT_THAT(notes[0], HasSubstr("dump-1.json"));
  EXPECT_THAT(notes[1], HasSubstr("dump-2.json"));
}

TEST(HangDump, TheEvidenceSaysWhoHasNotEnteredTheCollective) {
  std::vector<RankDump> dumps;
  dumps.push_back(
      *parse_dump(dump_json(0, "all_reduce",
                            R"([{"op": "all_reduce", "group": 0, "seq": 56, "left": 2.0},
                    {"op": "all_reduce", "group": 0, "seq": 57, "left": null}])"),
                  "0"));
  dumps.push_back(
      *parse_dump(dump_json(1, "sleep_forever",
                            R"([{"op": "all_reduce", "group": 0, "seq": 56, "left": 2.0}])"),
                  "1"));
  Thresholds t;
  HungRank h0, h1;
  h0.rank = 0;
  h1.rank = 1;
  std::vector<Label> hangs = {hang_label(h0, t), hang_label(h1, t)};
  add_dump_evidence(&hangs, dumps);
  EXPECT_THAT(hangs[0].evidence, HasSubstr("waits in all_reduce #57 of group 0"));
  EXPECT_THAT(hangs[0].evidence, ::testing::Not(HasSubstr("has not entered")));
  EXPECT_THAT(hangs[1].evidence, HasSubstr("main thread in sleep_forever (hang.py:20)"));
  EXPECT_THAT(hangs[1].evidence,
              HasSubstr("rank 1 has not entered all_reduce #57 of group 0; rank 0 wait in it"));
}

TEST(HangDump, TheDiagnosisOfAHungRunCarriesTheDumpAndNotesABadOne) {
  TempDir tmp;
  const std::string dir = hung_run(tmp, wall_now_ns());
  write_file(std::filesystem::path(dir) / "dump-1.json", dump_json(1, "sleep_forever", "[]"));
  write_file(std::filesystem::path(dir) / "dump-0.json", "{\"format\": \"trainscope.dump\", \"ver");
  FollowOptions options;
  options.thresholds.hang_min_s = 600;
  absl::StatusOr<Diagnosis> d = diagnose_run(dir, options);
  ASSERT_TRUE(d.ok()) << d.status();
  const Label* hang = d->window.find(LabelName::kHang);
  ASSERT_NE(hang, nullptr);
  EXPECT_THAT(hang->evidence, HasSubstr("main thread in sleep_forever"));
  bool noted = false;
  for (const std::string& w : d->warnings)
    noted = noted || w.find("dump-0.json") != std::string::npos;
  EXPECT_TRUE(noted);
}

// ---- Anomaly captures ------------------------------------------------------

TEST(Captures, TheDiagnosisNamesEachCapturedStepAndTheDocumentKeepsThem) {
  TempDir tmp;
  const std::string dir = hung_run(tmp, wall_now_ns());
  const std::filesystem::path captures = std::filesystem::path(dir) / "captures";
  std::filesystem::create_directories(captures);
  write_file(captures / "capture-r1-s40.json", "[]");
  write_file(captures / "capture-r0-s7.json", "[]");
  write_file(captures / "capture-r0-s7.json.tmp", "[");  // not a capture
  write_file(captures / "notes.txt", "x");
  absl::StatusOr<Diagnosis> d = diagnose_run(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->captures.size(), 2u);
  EXPECT_EQ(d->captures[0].rank, 0u);
  EXPECT_EQ(d->captures[0].step, 7);
  EXPECT_EQ(d->captures[1].path, "captures/capture-r1-s40.json");
  EXPECT_THAT(format_diagnosis(*d),
              HasSubstr("rank 1: step 40 was slow (past 5x the rolling p99): the steps after it "
                        "are captured in captures/capture-r1-s40.json"));
  absl::StatusOr<Diagnosis> back = parse_diagnosis(diagnosis_json(*d), "test");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->captures.size(), 2u);
  EXPECT_EQ(back->captures[1].step, 40);
  EXPECT_EQ(back->captures[1].path, "captures/capture-r1-s40.json");
}

TEST(Captures, ARunWithoutCapturesHasNone) {
  TempDir tmp;
  EXPECT_TRUE(find_captures(hung_run(tmp, wall_now_ns())).empty());
  EXPECT_TRUE(find_captures(tmp.file("nowhere")).empty());
}

}  // namespace
}  // namespace trainscope::diagnosis
