// Single-producer single-consumer ring of RegionSamples: the timer's thread
// pushes, the pipeline thread pops. Fixed capacity, no allocation after
// construction, no lock.
#ifndef TRAINSCOPE_DETAIL_SAMPLE_RING_HPP_
#define TRAINSCOPE_DETAIL_SAMPLE_RING_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainscope/timing/region_sink.hpp"

namespace trainscope::detail {

class SampleRing {
 public:
  explicit SampleRing(std::size_t capacity_pow2);

  // Producer side. False (and counted) when full.
  bool push(const RegionSample& sample) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ >= capacity_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ >= capacity_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[head & mask_] = sample;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Producer gives the ring up; the consumer drains what is left, then drops it.
  void release() noexcept { released_.store(true, std::memory_order_release); }

  // Consumer side: appends everything available to `out`.
  std::size_t pop_all(std::vector<RegionSample>* out);
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }
  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  const std::uint64_t capacity_;
  const std::uint64_t mask_;
  std::unique_ptr<RegionSample[]> slots_;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::uint64_t cached_tail_ = 0;  // producer's view of tail_
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<bool> released_{false};
};

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_DETAIL_SAMPLE_RING_HPP_
