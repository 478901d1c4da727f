#include "trainscope/export/wandb_exporter.hpp"

#include "export/wandb_format.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"

namespace trainscope {
namespace {

using wandb_detail::append_framed;
using wandb_detail::crc32_ieee;
using wandb_detail::kBlockSize;
using wandb_detail::kChunkHeaderSize;
using wandb_detail::ProtoWriter;

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

struct Chunk {
  std::size_t offset;
  std::uint8_t type;
  std::string payload;
};

// An independent reader of the framing, following LevelDB's log_format.md:
// checks every CRC, that no chunk crosses a block and that block tails are zero.
std::vector<Chunk> read_chunks(const std::string& file, std::size_t start) {
  std::vector<Chunk> chunks;
  std::size_t pos = start;
  while (pos < file.size()) {
    const std::size_t left = kBlockSize - pos % kBlockSize;
    if (left < kChunkHeaderSize) {
      EXPECT_EQ(file.substr(pos, left), std::string(left, '\0')) << "trailer at " << pos;
      pos += left;
      continue;
    }
    const std::uint32_t crc = le32(file, pos);
    const std::size_t length = static_cast<unsigned char>(file[pos + 4]) |
                               (static_cast<unsigned char>(file[pos + 5]) << 8);
    EXPECT_LE(kChunkHeaderSize + length, left) << "chunk crosses a block at " << pos;
    const std::string typed = file.substr(pos + 6, 1 + length);
    EXPECT_EQ(crc, crc32_ieee(typed)) << "crc at " << pos;
    chunks.push_back({pos, static_cast<std::uint8_t>(file[pos + 6]), typed.substr(1)});
    pos += kChunkHeaderSize + length;
  }
  EXPECT_EQ(pos, file.size());
  return chunks;
}

std::vector<std::string> reassemble(const std::vector<Chunk>& chunks) {
  std::vector<std::string> records;
  std::string partial;
  for (const Chunk& c : chunks) {
    switch (c.type) {
      case wandb_detail::kFull:
        records.push_back(c.payload);
        break;
      case wandb_detail::kFirst:
        partial = c.payload;
        break;
      case wandb_detail::kMiddle:
        partial += c.payload;
        break;
      case wandb_detail::kLast:
        records.push_back(partial + c.payload);
        break;
      default:
        ADD_FAILURE() << "chunk type " << int{c.type};
    }
  }
  return records;
}

TEST(WandbCrc32, MatchesKnownVectors) {
  EXPECT_EQ(crc32_ieee(""), 0u);
  EXPECT_EQ(crc32_ieee("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32_ieee("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  EXPECT_EQ(crc32_ieee("56789", crc32_ieee("1234")), 0xCBF43926u);
}

TEST(WandbFormat, FileHeaderIsMagicAndVersionZero) {
  EXPECT_EQ(wandb_detail::file_header(), std::string(":W&B\xE1\xBE\x00", 7));
}

// Expected bytes from the real protobuf runtime (wandb 0.31.0's descriptors):
//   r = wandb_internal_pb2.Record(); r.num = 300
//   r.history.item.add(key="loss", value_json="0.25")
//   r.history.item.add(key="_step", value_json="7"); r.history.step.num = 7
//   r._info.stream_id = "ab12cd34"; r.SerializeToString()
TEST(WandbProtoWriter, MatchesProtobufSerializer) {
  const std::string expected(
      "\x08\xac\x02\x12\x20\x0a\x0d\x0a\x04\x6c\x6f\x73\x73\x82\x01\x04\x30\x2e\x32\x35\x0a\x0b"
      "\x0a\x05\x5f\x73\x74\x65\x70\x82\x01\x01\x37\x12\x02\x08\x07\xc2\x0c\x0a\x0a\x08\x61\x62"
      "\x31\x32\x63\x64\x33\x34",
      50);
  ProtoWriter loss, step_item, step, history, info, record;
  loss.string(1, "loss").string(16, "0.25");
  step_item.string(1, "_step").string(16, "7");
  step.varint(1, 7);
  history.message(1, loss).message(1, step_item).message(2, step);
  info.string(1, "ab12cd34");
  record.varint(1, 300).message(2, history).message(200, info);
  EXPECT_EQ(record.bytes(), expected);
}

// e = Record(); e.num = 2; e.exit.exit_code = -1; e.exit.runtime = 150
TEST(WandbProtoWriter, NegativeInt32IsTenByteVarint) {
  const std::string expected(
      "\x08\x02\x92\x01\x0e\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x10\x96\x01", 19);
  ProtoWriter exit, record;
  exit.varint(1, -1).varint(2, 150);
  record.varint(1, 2).message(18, exit);
  EXPECT_EQ(record.bytes(), expected);
}

TEST(WandbFraming, SmallRecordIsOneFullChunk) {
  std::string out = wandb_detail::file_header();
  std::size_t offset = out.size();
  append_framed("hello", &offset, &out);
  ASSERT_EQ(out.size(), 7u + 7u + 5u);
  EXPECT_EQ(offset, out.size());
  EXPECT_EQ(le32(out, 7), crc32_ieee(std::string("\x01hello", 6)));
  EXPECT_EQ(out.substr(11, 3), std::string("\x05\x00\x01", 3));
  const std::vector<Chunk> chunks = read_chunks(out, 7);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].type, wandb_detail::kFull);
}

TEST(WandbFraming, LargeRecordSplitsFirstMiddleLast) {
  std::string big(3 * kBlockSize, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  std::string out = wandb_detail::file_header();
  std::size_t offset = out.size();
  append_framed("before", &offset, &out);
  append_framed(big, &offset, &out);
  append_framed("after", &offset, &out);
  const std::vector<Chunk> chunks = read_chunks(out, 7);
  std::vector<int> types;
  for (const Chunk& c : chunks) types.push_back(c.type);
  EXPECT_THAT(types, ::testing::ElementsAre(1, 2, 3, 3, 4, 1));
  // Every chunk of the big record but the last fills its block exactly.
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_EQ((chunks[i].offset + kChunkHeaderSize + chunks[i].payload.size()) % kBlockSize, 0u);
  }
  EXPECT_THAT(reassemble(chunks), ::testing::ElementsAre("before", big, "after"));
}

TEST(WandbFraming, ShortBlockTailIsZeroPadded) {
  std::string out;
  std::size_t offset = kBlockSize - 3;  // as if the block were almost full
  append_framed("next", &offset, &out);
  EXPECT_EQ(out.substr(0, 3), std::string(3, '\0'));
  EXPECT_EQ(out[3 + 6], wandb_detail::kFull);
  EXPECT_EQ(offset, kChunkHeaderSize + 4);
}

TEST(WandbFraming, ExactlyAHeaderLeftGivesEmptyFirstChunk) {
  std::string out;
  std::size_t offset = kBlockSize - kChunkHeaderSize;
  append_framed("data", &offset, &out);
  ASSERT_EQ(out.size(), 2 * kChunkHeaderSize + 4);
  EXPECT_EQ(out.substr(4, 3), std::string("\x00\x00\x02", 3));  // length 0, FIRST
  EXPECT_EQ(out[kChunkHeaderSize + 6], wandb_detail::kLast);
}

TEST(WandbFormat, JsonNumbersRoundTripAndSpellNonFinite) {
  EXPECT_EQ(wandb_detail::json_number(0.1), "0.1");
  EXPECT_EQ(wandb_detail::json_number(3.0), "3");
  EXPECT_EQ(wandb_detail::json_number(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(wandb_detail::json_number(std::nan("")), "NaN");
  EXPECT_EQ(wandb_detail::json_number(-1.0 / 0.0), "-Infinity");
}

TEST(WandbFormat, DerivedRunIdIsStableAndPerRank) {
  const std::string id = wandb_detail::derive_run_id("0123456789abcdef0123456789abcdef", 0);
  EXPECT_THAT(id, ::testing::MatchesRegex("[0-9a-z]{8}"));
  EXPECT_EQ(id, wandb_detail::derive_run_id("0123456789abcdef0123456789abcdef", 0));
  EXPECT_NE(id, wandb_detail::derive_run_id("0123456789abcdef0123456789abcdef", 1));
}

// Top-level field numbers of a serialized Record (enough to check sequence).
std::vector<std::uint32_t> record_fields(const std::string& bytes) {
  std::vector<std::uint32_t> fields;
  std::size_t pos = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<unsigned char>(bytes.at(pos++));
      v |= std::uint64_t{b & 0x7Fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
  };
  while (pos < bytes.size()) {
    const std::uint64_t tag = varint();
    fields.push_back(static_cast<std::uint32_t>(tag >> 3));
    if ((tag & 7) == 0) {
      varint();
    } else {
      EXPECT_EQ(tag & 7, 2u);
      pos += varint();
    }
  }
  return fields;
}

// dir_: a directory for W&B that does not exist yet, in a fresh one per test.
class WandbExporterTest : public ::testing::Test {
 protected:
  trainscope::testing::TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path() / "wandb";
};

TEST_F(WandbExporterTest, WritesRecordSequenceOfAnOfflineRun) {
  WandbOptions options;
  options.wandb_dir = dir_.string();
  auto exporter = WandbExporter::Create(options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  RunInfo info;
  info.id = "0123456789abcdef0123456789abcdef";
  info.name = "resnet";
  info.experiment = "imagenet";
  info.start_time_ms = 1700000000000;
  info.params = {{"lr", "0.1"}};
  ASSERT_TRUE((*exporter)->write_run_info(info).ok());
  const std::vector<MetricPoint> metrics = {{"loss", 1.0, 0, 1700000001000, 0},
                                            {"acc", 0.5, 0, 1700000001000, 0},
                                            {"loss", 0.5, 1, 1700000002000, 0}};
  ASSERT_TRUE((*exporter)->write_metrics(metrics).ok());
  Summary summary;
  summary.entries.push_back({"BATCH", Device::kCPU, {}});
  summary.entries.back().stats.mean = 0.25;
  ASSERT_TRUE((*exporter)->write_summary(summary).ok());
  info.status = RunStatus::kFinished;
  info.end_time_ms = 1700000010000;
  ASSERT_TRUE((*exporter)->write_run_info(info).ok());

  const std::string id = wandb_detail::derive_run_id(info.id, 0);
  const std::string run_dir = (*exporter)->run_dir();
  EXPECT_THAT(run_dir, ::testing::MatchesRegex(".*/offline-run-[0-9]{8}_[0-9]{6}-" + id));
  EXPECT_TRUE(std::filesystem::is_directory(run_dir + "/files"));
  std::ifstream in(run_dir + "/run-" + id + ".wandb", std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(file.size(), 7u);
  EXPECT_EQ(file.substr(0, 7), wandb_detail::file_header());
  std::vector<std::uint32_t> kinds;
  for (const std::string& record : reassemble(read_chunks(file, 7))) {
    const std::vector<std::uint32_t> fields = record_fields(record);
    ASSERT_EQ(fields.size(), 3u);  // num, the record's body, _info
    EXPECT_EQ(fields[0], 1u);
    EXPECT_EQ(fields[2], 200u);
    kinds.push_back(fields[1]);
  }
  // header, run, (summary, history) per step, region summary, exit.
  EXPECT_THAT(kinds, ::testing::ElementsAre(21, 17, 3, 2, 3, 2, 3, 18));
  // Writing after the end is an error, not a crash or a silent loss.
  EXPECT_FALSE((*exporter)->write_metrics(metrics).ok());
}

TEST_F(WandbExporterTest, UnwritableDirectoryIsAnErrorEveryTime) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "file") << "not a directory";
  WandbOptions options;
  options.wandb_dir = (dir_ / "file" / "wandb").string();
  auto exporter = WandbExporter::Create(options);
  ASSERT_TRUE(exporter.ok());
  const MetricPoint point{"loss", 1.0, 0, 1700000000000, 0};
  EXPECT_FALSE((*exporter)->write_metrics({&point, 1}).ok());
  EXPECT_FALSE((*exporter)->write_metrics({&point, 1}).ok());
  EXPECT_FALSE((*exporter)->flush().ok());
}

TEST_F(WandbExporterTest, RejectsRunIdsWandbCannotUse) {
  WandbOptions options;
  options.run_id = "a/b";
  EXPECT_EQ(WandbExporter::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace trainscope
