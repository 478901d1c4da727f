#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope::detail {
namespace {

// Indices wrap with a mask, so the capacity must be a power of two; 2 is the
// smallest for which a full ring is distinguishable from an empty one.
std::uint64_t round_up_capacity(std::size_t requested) {
  constexpr std::uint64_t kLargest = std::uint64_t{1} << 63;
  if (requested >= kLargest) return kLargest;
  std::uint64_t capacity = 2;
  while (capacity < requested) capacity <<= 1;
  return capacity;
}

}  // namespace

SampleRing::SampleRing(std::size_t capacity_pow2)
    : capacity_(round_up_capacity(capacity_pow2)),
      mask_(capacity_ - 1),
      slots_(new RegionSample[capacity_]) {}

std::size_t SampleRing::pop_all(std::vector<RegionSample>* out) {
  // Only this (consumer) side writes tail_; acquiring head_ makes the
  // producer's slot writes before it visible.
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  for (std::uint64_t i = tail; i != head; ++i) out->push_back(slots_[i & mask_]);
  // Releasing tail_ hands the slots back only after they were copied.
  tail_.store(head, std::memory_order_release);
  return static_cast<std::size_t>(head - tail);
}

}  // namespace trainscope::detail
