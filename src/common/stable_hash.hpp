// A hash that is the same on every platform, in every process and release
// (64-bit FNV-1a), for names and ids derived from text: run ids of a job,
// W&B run ids, a grid's sweep name, cache keys. absl::Hash and std::hash are
// not: the first is seeded per process, the second is the library's own.
#ifndef TRAINSCOPE_SRC_COMMON_STABLE_HASH_HPP_
#define TRAINSCOPE_SRC_COMMON_STABLE_HASH_HPP_

#include <cstdint>
#include <string_view>

namespace trainscope::detail {

inline constexpr std::uint64_t kStableHashBasis = 0xcbf29ce484222325ULL;

// FNV-1a 64 of `text`, from `basis` (another basis gives an independent hash).
inline std::uint64_t stable_hash(std::string_view text, std::uint64_t basis = kStableHashBasis) {
  std::uint64_t hash = basis;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_STABLE_HASH_HPP_
