#include "export/wandb_format.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/stable_hash.hpp"
#include "fmt/format.h"

namespace trainscope {
namespace wandb_detail {
namespace {

// A CRC-32 lookup table for the reflected IEEE polynomial, built at compile time.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

void put_le(std::uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

constexpr std::string_view kBase36 = "0123456789abcdefghijklmnopqrstuvwxyz";
constexpr int kRunIdLength = 8;

std::string base36_id(std::uint64_t value) {
  std::string id(kRunIdLength, '0');
  for (char& c : id) {
    c = kBase36[value % kBase36.size()];
    value /= kBase36.size();
  }
  return id;
}

}  // namespace

std::uint32_t crc32_ieee(std::string_view data, std::uint32_t crc) noexcept {
  crc = ~crc;
  for (unsigned char byte : data) crc = kCrcTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string file_header() {
  std::string header = ":W&B";
  put_le(0xBEE1, 2, &header);
  header.push_back('\0');  // version 0, what wandb 0.31 writes and reads
  return header;
}

// LevelDB's log writer (wandb-core's leveldb.Writer is a port of it): a
// record that does not fit in the current block continues in the next one.
void append_framed(std::string_view record, std::size_t* block_offset, std::string* out) {
  bool begin = true;
  do {
    const std::size_t leftover = kBlockSize - *block_offset;
    if (leftover < kChunkHeaderSize) {
      out->append(leftover, '\0');
      *block_offset = 0;
    }
    const std::size_t avail = kBlockSize - *block_offset - kChunkHeaderSize;
    const std::size_t length = std::min(record.size(), avail);
    const bool end = length == record.size();
    const ChunkType type = begin && end ? kFull : begin ? kFirst : end ? kLast : kMiddle;
    const char type_byte = static_cast<char>(type);
    const std::string_view payload = record.substr(0, length);
    put_le(crc32_ieee(payload, crc32_ieee(std::string_view(&type_byte, 1))), 4, out);
    put_le(length, 2, out);
    out->push_back(type_byte);
    out->append(payload);
    *block_offset += kChunkHeaderSize + length;
    record.remove_prefix(length);
    begin = false;
  } while (!record.empty());
}

ProtoWriter& ProtoWriter::varint(std::uint32_t field, std::int64_t value) {
  if (value == 0) return *this;
  tag(field, 0);
  // Negative int32/int64 values are sign-extended to 64 bits (10 bytes).
  raw_varint(static_cast<std::uint64_t>(value));
  return *this;
}

ProtoWriter& ProtoWriter::string(std::uint32_t field, std::string_view value) {
  if (value.empty()) return *this;
  tag(field, 2);
  raw_varint(value.size());
  bytes_.append(value);
  return *this;
}

ProtoWriter& ProtoWriter::message(std::uint32_t field, const ProtoWriter& value) {
  tag(field, 2);
  raw_varint(value.bytes_.size());
  bytes_.append(value.bytes_);
  return *this;
}

void ProtoWriter::tag(std::uint32_t field, std::uint32_t wire_type) {
  raw_varint((std::uint64_t{field} << 3) | wire_type);
}

void ProtoWriter::raw_varint(std::uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<char>(value));
}

std::string json_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{}", value);
}

// A stable hash: the same id for the same run and rank in every process.
std::string derive_run_id(std::string_view trainscope_id, std::uint32_t rank) {
  return base36_id(::trainscope::detail::stable_hash(fmt::format("{}/{}", trainscope_id, rank)));
}

}  // namespace wandb_detail

}  // namespace trainscope
