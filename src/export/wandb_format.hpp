// The bytes of a W&B offline run file (internal): the LevelDB-log framing
// with CRC-32, the file header and the few protobuf wire-format fields the
// records need, so WandbExporter writes byte-identical files to wandb's own
// writer (docs/exporters.md). Tests reach these as "export/wandb_format.hpp".
#ifndef TRAINSCOPE_SRC_EXPORT_WANDB_FORMAT_HPP_
#define TRAINSCOPE_SRC_EXPORT_WANDB_FORMAT_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainscope {

namespace wandb_detail {

inline constexpr std::size_t kBlockSize = 32 * 1024;
inline constexpr std::size_t kChunkHeaderSize = 7;
enum ChunkType : std::uint8_t { kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };

// CRC-32 (IEEE 802.3, zlib's crc32), continuing from `crc`.
std::uint32_t crc32_ieee(std::string_view data, std::uint32_t crc = 0) noexcept;

// The 7-byte file header: ":W&B", 0xBEE1 little-endian, version 0.
std::string file_header();

// Appends `record` to `out` as LevelDB-log chunks: each chunk is CRC-32 of
// (type byte + payload) little-endian, u16 LE payload length, type, payload;
// chunks never cross a 32 KiB block, and a block tail shorter than a chunk
// header is zero-filled. `block_offset` is the position in the current block
// (the file header counts as the first 7 bytes of block 0) and is advanced.
void append_framed(std::string_view record, std::size_t* block_offset, std::string* out);

// Protobuf wire format for the few field kinds the records need. Fields are
// appended in call order; callers add them in field-number order, as
// protobuf serializers do, so output is byte-identical to theirs.
class ProtoWriter {
 public:
  // Varint fields (int32, int64, bool); zero is omitted (proto3 default).
  ProtoWriter& varint(std::uint32_t field, std::int64_t value);
  // Length-delimited: strings (empty omitted, proto3) and messages (always
  // written, empty ones too: their presence matters).
  ProtoWriter& string(std::uint32_t field, std::string_view value);
  ProtoWriter& message(std::uint32_t field, const ProtoWriter& value);
  const std::string& bytes() const noexcept { return bytes_; }

 private:
  void tag(std::uint32_t field, std::uint32_t wire_type);
  void raw_varint(std::uint64_t value);
  std::string bytes_;
};

// JSON text of a double as W&B's value_json holds it: shortest round-trip
// decimal; NaN and infinities as Python's json writes them.
std::string json_number(double value);
// 8 characters of [0-9a-z], deterministic in (trainscope run id, rank).
std::string derive_run_id(std::string_view trainscope_id, std::uint32_t rank);

}  // namespace wandb_detail
}  // namespace trainscope

#endif  // TRAINSCOPE_SRC_EXPORT_WANDB_FORMAT_HPP_
