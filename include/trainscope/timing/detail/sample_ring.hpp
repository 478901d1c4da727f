// Single-producer single-consumer queue of RegionSamples: the timer's thread
// pushes, the pipeline thread pops. No lock on either side.
//
// It is a chunked queue. Samples go into fixed-size chunks; the producer that
// fills one links the next (the consumer's recycled spare, or a new chunk),
// and the consumer frees the chunks it drained (keeping one spare). Every
// chunk of every ring counts against a process-wide byte budget: a burst grows
// the queue a chunk at a time (one allocation per `chunk_capacity` samples,
// amortized like stats::detail::SampleSeries' chunks) until the budget is spent, and only then
// are samples dropped (counted). A ring's first two chunks are always allowed.
//
// The producer wakes the consumer when the backlog passes a high-water mark
// (half a chunk), so the consumer drains at the rate samples arrive rather
// than once per flush interval. The check costs nothing on most pushes: the
// fast path compares the index with one producer-local limit, and only every
// quarter chunk does the slow path read the consumer's index; a wake is one
// RingWaker::wake() call per drain (an atomic flag the consumer re-arms).
#ifndef TRAINSCOPE_TIMING_DETAIL_SAMPLE_RING_HPP_
#define TRAINSCOPE_TIMING_DETAIL_SAMPLE_RING_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/optimization.h"
#include "trainscope/timing/region_sink.hpp"

namespace trainscope::timing::detail {

// Told (from the producer's thread) that a ring's backlog passed its
// high-water mark. Must not block for long: the producer is a training loop.
class RingWaker {
 public:
  virtual void wake() noexcept = 0;

 protected:
  ~RingWaker() = default;
};

// Bytes held by the chunks of all rings in this process (the default budget
// counter of SampleRing::Options).
std::atomic<std::size_t>& process_ring_bytes() noexcept;

class SampleRing {
 public:
  struct Options {
    // Samples per chunk, rounded up to a power of two (at least 2). A ring
    // starts with one chunk and grows by chunks of this size.
    std::size_t chunk_capacity = std::size_t{1} << 15;
    // A ring grows only while the chunks counted in `bytes_in_use` (all rings
    // of the process by default) stay within this; past it, pushes drop until
    // the consumer frees chunks. A ring may always hold two chunks, whatever
    // the budget, so it never stalls: after a drain there is room for a chunk.
    std::size_t max_pending_bytes = std::size_t{64} << 20;
    // The budget's counter; nullptr means process_ring_bytes(). Must outlive
    // the ring.
    std::atomic<std::size_t>* bytes_in_use = nullptr;
    // Woken when the backlog passes half a chunk; null: never woken.
    std::shared_ptr<RingWaker> waker;
  };

  // One chunk of `chunk_capacity` samples, the default budget, no waker.
  explicit SampleRing(std::size_t chunk_capacity);
  explicit SampleRing(Options options);
  ~SampleRing();
  SampleRing(const SampleRing&) = delete;
  SampleRing& operator=(const SampleRing&) = delete;

  // Producer side. False (and counted) when the budget allows no new chunk.
  bool push(const RegionSample& sample) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    // limit_ is the end of the current chunk or the next high-water check,
    // whichever comes first (and the head itself while dropping).
    if (ABSL_PREDICT_FALSE(head == limit_)) return push_slow(sample);
    write_slots_[head - write_base_] = pack(sample);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Producer gives the ring up; the consumer drains what is left, then drops it.
  void release() noexcept { released_.store(true, std::memory_order_release); }

  // Consumer side: appends everything available to `out`, frees drained
  // chunks and re-arms the wake.
  std::size_t pop_all(std::vector<RegionSample>* out);
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }
  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  std::size_t chunk_capacity() const noexcept { return static_cast<std::size_t>(capacity_); }
  // Bytes of one chunk as charged to the budget (32 bytes a sample, and 64).
  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }

 private:
  // A sample as a chunk stores it: 32 bytes rather than RegionSample's 56 (the
  // last field a GPU sample's device start, a CPU sample's run-queue wait; the
  // device rides in the top bit of the thread index and, for a GPU sample,
  // the stream index in the 8 bits below it), so the producer writes a third
  // less and the budget holds half as many more.
  struct Slot {
    KeyId key;
    std::uint32_t thread_device;
    std::int64_t start_ns;
    std::int64_t duration_ns;
    std::int64_t gpu_start_ns;
  };
  static constexpr std::uint32_t kDeviceBit = std::uint32_t{1} << 31;
  // GPU samples: the thread index in bits 0-22 (a process's 8,388,608th and
  // later threads share indices), the stream in 23-30.
  static constexpr int kStreamShift = 23;
  static constexpr std::uint32_t kGpuThreadMask = (std::uint32_t{1} << kStreamShift) - 1;
  static constexpr std::uint32_t kMaxStream = 255;  // a later stream shares index 255
  static Slot pack(const RegionSample& s) noexcept {
    if (s.device == Device::kCPU)
      return {s.key, s.thread & ~kDeviceBit, s.start_unix_ns, s.duration_ns, s.cpu_wait_ns};
    const std::uint32_t stream = s.stream < kMaxStream ? s.stream : kMaxStream;
    return {s.key, kDeviceBit | (stream << kStreamShift) | (s.thread & kGpuThreadMask),
            s.start_unix_ns, s.duration_ns, s.gpu_start_ns};
  }
  static RegionSample unpack(const Slot& slot) noexcept;

  struct Chunk {
    std::atomic<Chunk*> next{nullptr};
    Slot* slots() noexcept;
  };

  bool push_slow(const RegionSample& sample) noexcept;
  void maybe_wake(std::uint64_t head) noexcept;
  Chunk* take_chunk() noexcept;         // producer: spare, or new within the budget
  Chunk* allocate_chunk() noexcept;     // nullptr when out of memory
  void recycle(Chunk* chunk) noexcept;  // consumer: keep as spare or free
  void free_chunk(Chunk* chunk) noexcept;

  const std::uint64_t capacity_;    // samples per chunk (power of two)
  const std::uint64_t check_step_;  // pushes between high-water checks
  const std::uint64_t high_water_;  // backlog that wakes the consumer
  const std::size_t chunk_bytes_;
  const std::size_t max_pending_bytes_;
  std::atomic<std::size_t>* const bytes_in_use_;
  const std::shared_ptr<RingWaker> waker_;

  // Producer-only state, then the index it publishes.
  alignas(64) Chunk* write_chunk_;
  Slot* write_slots_;
  std::uint64_t write_base_ = 0;  // index of write_slots_[0]
  std::uint64_t limit_;           // push() takes the slow path at this index
  std::uint64_t next_check_;      // next high-water check
  std::atomic<std::uint64_t> head_{0};
  // Consumer-only state, then the index it publishes.
  alignas(64) Chunk* read_chunk_;
  std::uint64_t read_base_ = 0;
  std::atomic<std::uint64_t> tail_{0};
  std::atomic<bool> armed_{true};  // the consumer may be woken (reset by the wake)
  // Shared, rarely written.
  alignas(64) std::atomic<Chunk*> spare_{nullptr};  // drained chunk for reuse
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint32_t> chunks_{0};  // allocated, spare included
  std::atomic<bool> released_{false};
};

}  // namespace trainscope::timing::detail

#endif  // TRAINSCOPE_TIMING_DETAIL_SAMPLE_RING_HPP_
