// Where a timer's regions wait while no run is there to take them. A timer
// built before any run starts (Python's fluent API: the first log_metric
// starts the run) attaches here; the run that starts adopts the held queues
// (ExportPipeline::adopt_ring), so the regions timed before it are in the
// run's files like the later ones. Held samples take at most
// `max_held_bytes` for the whole process (64 MiB: 2.8M regions); past it new
// ones are dropped and counted.
#ifndef TRAINSCOPE_EXPORT_HOLDING_SINK_HPP_
#define TRAINSCOPE_EXPORT_HOLDING_SINK_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "trainscope/timing/region_sink.hpp"

namespace trainscope {

class HoldingSink final : public RegionSink {
 public:
  static constexpr std::size_t kDefaultMaxHeldBytes = std::size_t{64} << 20;

  explicit HoldingSink(std::size_t max_held_bytes = kDefaultMaxHeldBytes,
                       std::size_t chunk_capacity = std::size_t{1} << 15);
  HoldingSink(const HoldingSink&) = delete;
  HoldingSink& operator=(const HoldingSink&) = delete;

  std::shared_ptr<timing::detail::SampleRing> open_ring() override;
  // Kept and handed over with the rings.
  void submit_summary(Summary summary) override;

  struct Held {
    std::vector<std::shared_ptr<timing::detail::SampleRing>> rings;
    std::vector<Summary> summaries;
  };
  // What the live timers hold (and the summaries); the sink is empty after. A
  // ring whose timer goes on pushing keeps its samples for whoever took it;
  // the rings of timers gone (released) are dropped with their samples: they
  // belong to no run that starts later.
  Held take();
  // Samples pushed to live timers' held rings that did not fit (over the budget).
  std::uint64_t dropped() const;

 private:
  const std::size_t max_held_bytes_;
  const std::size_t chunk_capacity_;
  mutable std::mutex mu_;
  Held held_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_HOLDING_SINK_HPP_
