#include "trainscope/timing/detail/sample_ring.hpp"

#include <algorithm>
#include <new>
#include <utility>

namespace trainscope::timing::detail {
namespace {

// Indices are split into chunk and slot with the capacity, which must be a
// power of two; 2 is the smallest kept from the fixed-size ring this replaced.
std::uint64_t round_up_capacity(std::size_t requested) {
  // Far beyond any memory: keeps chunk_bytes from overflowing.
  constexpr std::uint64_t kLargest = std::uint64_t{1} << 40;
  if (requested >= kLargest) return kLargest;
  std::uint64_t capacity = 2;
  while (capacity < requested) capacity <<= 1;
  return capacity;
}

// Chunks a ring may hold whatever the budget says. With two (the one being
// written, and the drained one the consumer parks as spare) a ring that the
// consumer has drained always has room for a chunk more.
constexpr std::uint32_t kFloorChunks = 2;

// The chunk header takes one cache line, so the slots start aligned.
constexpr std::size_t kHeaderBytes = 64;
constexpr std::align_val_t kChunkAlignment{64};

SampleRing::Options with_capacity(std::size_t chunk_capacity) {
  SampleRing::Options options;
  options.chunk_capacity = chunk_capacity;
  return options;
}

}  // namespace

std::atomic<std::size_t>& process_ring_bytes() noexcept {
  static std::atomic<std::size_t> bytes{0};
  return bytes;
}

SampleRing::Slot* SampleRing::Chunk::slots() noexcept {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(this) + kHeaderBytes);
}

RegionSample SampleRing::unpack(const Slot& slot) noexcept {
  RegionSample s;
  s.key = slot.key;
  s.device = (slot.thread_device & kDeviceBit) != 0 ? Device::kGPU : Device::kCPU;
  if (s.device == Device::kGPU) {
    s.thread = slot.thread_device & kGpuThreadMask;
    s.stream = (slot.thread_device & ~kDeviceBit) >> kStreamShift;
  } else {
    s.thread = slot.thread_device & ~kDeviceBit;
  }
  s.start_unix_ns = slot.start_ns;
  s.duration_ns = slot.duration_ns;
  if (s.device == Device::kGPU) {
    s.gpu_start_ns = slot.gpu_start_ns;
  } else {
    s.cpu_wait_ns = slot.gpu_start_ns;
  }
  return s;
}

SampleRing::SampleRing(std::size_t chunk_capacity) : SampleRing(with_capacity(chunk_capacity)) {}

SampleRing::SampleRing(Options options)
    : capacity_(round_up_capacity(options.chunk_capacity)),
      check_step_(std::max<std::uint64_t>(capacity_ / 4, 1)),
      high_water_(capacity_ / 2),
      chunk_bytes_(kHeaderBytes + static_cast<std::size_t>(capacity_) * sizeof(Slot)),
      max_pending_bytes_(options.max_pending_bytes),
      bytes_in_use_(options.bytes_in_use != nullptr ? options.bytes_in_use : &process_ring_bytes()),
      waker_(std::move(options.waker)) {
  static_assert(sizeof(Chunk) <= kHeaderBytes);
  static_assert(kHeaderBytes % alignof(Slot) == 0);
  static_assert(sizeof(Slot) == 32);
  // The first chunk is charged but never refused.
  Chunk* first = allocate_chunk();
  if (first == nullptr) throw std::bad_alloc();
  bytes_in_use_->fetch_add(chunk_bytes_, std::memory_order_relaxed);
  write_chunk_ = first;
  write_slots_ = first->slots();
  read_chunk_ = first;
  next_check_ = check_step_;
  limit_ = next_check_;
}

SampleRing::~SampleRing() {
  // Both sides are gone: the chunks from the consumer's to the producer's.
  for (Chunk* chunk = read_chunk_; chunk != nullptr;) {
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    free_chunk(chunk);
    chunk = next;
  }
  if (Chunk* spare = spare_.load(std::memory_order_acquire)) free_chunk(spare);
}

SampleRing::Chunk* SampleRing::allocate_chunk() noexcept {
  void* memory = ::operator new(chunk_bytes_, kChunkAlignment, std::nothrow);
  if (memory == nullptr) return nullptr;
  chunks_.fetch_add(1, std::memory_order_relaxed);
  return ::new (memory) Chunk;
}

void SampleRing::free_chunk(Chunk* chunk) noexcept {
  chunk->~Chunk();
  ::operator delete(static_cast<void*>(chunk), kChunkAlignment);
  chunks_.fetch_sub(1, std::memory_order_relaxed);
  bytes_in_use_->fetch_sub(chunk_bytes_, std::memory_order_relaxed);
}

SampleRing::Chunk* SampleRing::take_chunk() noexcept {
  if (spare_.load(std::memory_order_relaxed) != nullptr) {
    // Acquire: the consumer's reads of the chunk happened before it was parked.
    if (Chunk* spare = spare_.exchange(nullptr, std::memory_order_acq_rel)) return spare;
  }
  if (chunks_.load(std::memory_order_relaxed) < kFloorChunks) {
    // Below the floor the budget is not asked: a ring of one full chunk could
    // otherwise never move on (its chunk is recycled only once the producer
    // has linked the next).
    bytes_in_use_->fetch_add(chunk_bytes_, std::memory_order_relaxed);
  } else {
    std::size_t used = bytes_in_use_->load(std::memory_order_relaxed);
    do {
      if (used > max_pending_bytes_ || max_pending_bytes_ - used < chunk_bytes_) return nullptr;
    } while (!bytes_in_use_->compare_exchange_weak(used, used + chunk_bytes_,
                                                   std::memory_order_relaxed));
  }
  Chunk* chunk = allocate_chunk();
  if (chunk == nullptr) bytes_in_use_->fetch_sub(chunk_bytes_, std::memory_order_relaxed);
  return chunk;
}

void SampleRing::recycle(Chunk* chunk) noexcept {
  chunk->next.store(nullptr, std::memory_order_relaxed);
  // Release: the producer that takes the spare writes after our reads.
  if (Chunk* old = spare_.exchange(chunk, std::memory_order_acq_rel)) free_chunk(old);
}

void SampleRing::maybe_wake(std::uint64_t head) noexcept {
  if (waker_ == nullptr) return;
  if (head - tail_.load(std::memory_order_acquire) < high_water_) return;
  // One wake per drain: the consumer re-arms after popping.
  if (!armed_.load(std::memory_order_relaxed)) return;
  if (armed_.exchange(false, std::memory_order_acq_rel)) waker_->wake();
}

bool SampleRing::push_slow(const RegionSample& sample) noexcept {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  if (head == next_check_) {
    maybe_wake(head);
    next_check_ = head + check_step_;
  }
  if (head - write_base_ == capacity_) {  // the chunk is full: link the next one
    Chunk* next = take_chunk();
    if (next == nullptr) {
      // limit_ stays at head: the next push tries again (the consumer may
      // have freed a chunk by then). Waking is retried too, in case the
      // consumer re-armed since the last check.
      limit_ = head;
      dropped_.fetch_add(1, std::memory_order_relaxed);
      maybe_wake(head);
      return false;
    }
    // Published by the release store of head_ below, which the consumer
    // acquires before it follows the link.
    write_chunk_->next.store(next, std::memory_order_release);
    write_chunk_ = next;
    write_slots_ = next->slots();
    write_base_ = head;
  }
  // Chunk ends are multiples of check_step_, so the next check comes first.
  limit_ = next_check_;
  write_slots_[head - write_base_] = pack(sample);
  head_.store(head + 1, std::memory_order_release);
  return true;
}

std::size_t SampleRing::pop_all(std::vector<RegionSample>* out) {
  // Only this (consumer) side writes tail_; acquiring head_ makes the
  // producer's slot writes and chunk links before it visible.
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  // Room for all of it at once, growing geometrically: the consumer appends
  // ring after ring to one batch.
  const std::size_t needed = out->size() + static_cast<std::size_t>(head - tail);
  if (needed > out->capacity()) out->reserve(std::max(needed, 2 * out->capacity()));
  for (std::uint64_t i = tail; i != head;) {
    if (i - read_base_ == capacity_) {
      // The producer wrote index i, so it linked the next chunk and is done
      // with this one.
      Chunk* next = read_chunk_->next.load(std::memory_order_acquire);
      recycle(read_chunk_);
      read_chunk_ = next;
      read_base_ = i;
    }
    const std::uint64_t end = std::min(head, read_base_ + capacity_);
    const Slot* slots = read_chunk_->slots();
    for (; i != end; ++i) out->push_back(unpack(slots[i - read_base_]));
  }
  tail_.store(head, std::memory_order_release);
  armed_.store(true, std::memory_order_release);
  return static_cast<std::size_t>(head - tail);
}

}  // namespace trainscope::timing::detail
