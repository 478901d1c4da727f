#include "trainscope/export/holding_sink.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

#include "trainscope/timing/detail/sample_ring.hpp"

namespace trainscope {
namespace {

// The held chunks of every HoldingSink: a counter that outlives every ring
// (rings may outlive their sink inside a pipeline), so it is never destroyed.
std::atomic<std::size_t>& held_bytes() noexcept {
  static auto* bytes = new std::atomic<std::size_t>(0);
  return *bytes;
}

}  // namespace

HoldingSink::HoldingSink(std::size_t max_held_bytes, std::size_t chunk_capacity)
    : max_held_bytes_(max_held_bytes), chunk_capacity_(chunk_capacity) {}

std::shared_ptr<timing::detail::SampleRing> HoldingSink::open_ring() {
  timing::detail::SampleRing::Options options;
  options.chunk_capacity = chunk_capacity_;
  options.max_pending_bytes = max_held_bytes_;
  options.bytes_in_use = &held_bytes();
  auto ring = std::make_shared<timing::detail::SampleRing>(std::move(options));
  std::lock_guard<std::mutex> lock(mu_);
  held_.rings.push_back(ring);
  return ring;
}

void HoldingSink::submit_summary(Summary summary) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.summaries.push_back(std::move(summary));
}

HoldingSink::Held HoldingSink::take() {
  std::lock_guard<std::mutex> lock(mu_);
  Held out = std::move(held_);
  held_ = Held{};
  // A ring whose timer is gone (released) is no timer's that will join the
  // run: its regions are dropped with it, not put into a run they were no part of.
  out.rings.erase(std::remove_if(out.rings.begin(), out.rings.end(),
                                 [](const auto& ring) { return ring->released(); }),
                  out.rings.end());
  return out;
}

std::uint64_t HoldingSink::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t n = 0;
  for (const auto& ring : held_.rings) {
    if (!ring->released()) n += ring->dropped();
  }
  return n;
}

}  // namespace trainscope
