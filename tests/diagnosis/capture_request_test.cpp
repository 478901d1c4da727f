// A label's capture (trainscope/diagnosis/capture_request.hpp): which labels
// ask, which ranks, once per label; the request file; the captures named for
// a label in the diagnosis and its document.
#include "trainscope/diagnosis/capture_request.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/diagnosis/hang.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

RankNow rank_now(std::uint32_t rank, std::uint64_t steps, bool running = true) {
  RankNow r;
  r.rank = rank;
  r.steps = steps;
  if (!running) r.status.recorded = RunStatus::kFinished;
  return r;
}

Label label(LabelName name, std::optional<std::uint32_t> rank = std::nullopt) {
  Label l;
  l.name = name;
  l.rank = rank;
  return l;
}

Diagnosis three_ranks() {
  Diagnosis d;
  d.start_time_ms = 1000;
  d.elapsed_ms = 500;
  d.ranks = {rank_now(2, 50), rank_now(0, 57), rank_now(1, 55, /*running=*/false)};
  return d;
}

TEST(CaptureRequest, OnlyStragglerMemoryCreepAndDriftAsk) {
  EXPECT_TRUE(asks_capture(LabelName::kStraggler));
  EXPECT_TRUE(asks_capture(LabelName::kMemoryCreep));
  EXPECT_TRUE(asks_capture(LabelName::kThroughputDrift));
  EXPECT_FALSE(asks_capture(LabelName::kHang));
  EXPECT_FALSE(asks_capture(LabelName::kInputBound));
  Diagnosis d = three_ranks();
  d.window.labels = {label(LabelName::kInputBound), label(LabelName::kHostPressure)};
  EXPECT_TRUE(new_capture_requests(d, {}).empty());
}

TEST(CaptureRequest, EachLabelAsksOnceWithTheRanksItConcerns) {
  Diagnosis d = three_ranks();
  d.window.labels = {label(LabelName::kStraggler, 2u), label(LabelName::kMemoryCreep, 0u)};
  d.run.labels = {label(LabelName::kStraggler, 2u), label(LabelName::kThroughputDrift)};
  const std::vector<CaptureRequest> fresh = new_capture_requests(d, {});
  ASSERT_EQ(fresh.size(), 3u);
  EXPECT_EQ(fresh[0].label, LabelName::kStraggler);
  EXPECT_THAT(fresh[0].ranks, ElementsAre(0u, 2u));  // every rank that runs, not rank 1
  EXPECT_EQ(fresh[0].step, 57u);                     // the most steps of any rank
  EXPECT_EQ(fresh[0].time_ms, 1500);
  EXPECT_EQ(fresh[1].label, LabelName::kMemoryCreep);
  EXPECT_THAT(fresh[1].ranks, ElementsAre(0u));  // the rank it names
  EXPECT_EQ(fresh[2].label, LabelName::kThroughputDrift);
  EXPECT_THAT(fresh[2].ranks, ElementsAre(0u, 2u));
  // Asked already: nothing again, whatever the scope or the rank.
  d.window.labels = {label(LabelName::kStraggler, 0u)};
  EXPECT_TRUE(new_capture_requests(d, fresh).empty());
}

TEST(CaptureRequest, NothingWhenNoRankRunsOrTheCreepingRankEnded) {
  Diagnosis d = three_ranks();
  d.window.labels = {label(LabelName::kMemoryCreep, 1u)};  // rank 1 ended
  EXPECT_TRUE(new_capture_requests(d, {}).empty());
  d.ranks = {rank_now(0, 9, false)};
  d.window.labels = {label(LabelName::kStraggler, 0u)};
  EXPECT_TRUE(new_capture_requests(d, {}).empty());
}

TEST(CaptureRequest, TheFileHoldsEveryRequestOldestFirst) {
  TempDir tmp;
  const std::string dir = tmp.file("run");
  std::filesystem::create_directories(dir);
  CaptureRequest a;
  a.label = LabelName::kMemoryCreep;
  a.step = 85;
  a.ranks = {0};
  a.time_ms = 7;
  CaptureRequest b = a;
  b.label = LabelName::kStraggler;
  b.ranks = {0, 1};
  ASSERT_TRUE(write_capture_requests(dir, {a, b}).ok());
  const auto doc = nlohmann::json::parse(
      testing::read_file(std::filesystem::path(dir) / std::string(kCaptureRequestFile)));
  EXPECT_EQ(doc["format"], "trainscope.capture_request");
  EXPECT_EQ(doc["version"], 1);
  ASSERT_EQ(doc["requests"].size(), 2u);
  EXPECT_EQ(doc["requests"][0]["label"], "MEMORY-CREEP");
  EXPECT_EQ(doc["requests"][0]["step"], 85);
  EXPECT_EQ(doc["requests"][1]["ranks"], nlohmann::json::array({0, 1}));
  // No directory: the error names the file.
  const absl::Status bad = write_capture_requests(tmp.file("nowhere"), {a});
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("capture-request.json"));
}

TEST(CaptureRequest, CapturesNamedForALabelAreReadWrittenAndSaid) {
  TempDir tmp;
  const std::filesystem::path captures = std::filesystem::path(tmp.file("run")) / "captures";
  std::filesystem::create_directories(captures);
  testing::write_file(captures / "capture-r0-s128-memory-creep.json", "[]");
  testing::write_file(captures / "capture-r1-s9-straggler.json", "[]");
  testing::write_file(captures / "capture-r0-s40.json", "[]");
  testing::write_file(captures / "capture-r0-s41-hang.json", "[]");      // no label's capture
  testing::write_file(captures / "capture-r0-s42-nonsense.json", "[]");  // no label
  testing::write_file(captures / "capture-r0-s43-.json", "[]");
  const std::vector<Capture> found = find_captures(tmp.file("run"));
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].step, 40);
  EXPECT_FALSE(found[0].label);
  EXPECT_EQ(found[1].step, 128);
  EXPECT_EQ(found[1].label, LabelName::kMemoryCreep);
  EXPECT_EQ(found[1].path, "captures/capture-r0-s128-memory-creep.json");
  EXPECT_EQ(found[2].label, LabelName::kStraggler);
  Diagnosis d;
  d.captures = found;
  EXPECT_THAT(format_diagnosis(d),
              HasSubstr("rank 0: MEMORY-CREEP appeared by step 128: the steps after it are "
                        "captured in captures/capture-r0-s128-memory-creep.json"));
  absl::StatusOr<Diagnosis> back = parse_diagnosis(diagnosis_json(d), "test");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->captures.size(), 3u);
  EXPECT_FALSE(back->captures[0].label);
  EXPECT_EQ(back->captures[1].label, LabelName::kMemoryCreep);
  EXPECT_EQ(back->captures[2].label, LabelName::kStraggler);
  // A label no capture has: an error naming the key.
  std::string text = diagnosis_json(d);
  const std::string straggler = "\"label\":\"STRAGGLER\"";
  ASSERT_NE(text.find(straggler), std::string::npos) << text;
  text.replace(text.find(straggler), straggler.size(), "\"label\":\"SLOW\"");
  absl::StatusOr<Diagnosis> bad = parse_diagnosis(text, "doc.json");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace trainscope::diagnosis
