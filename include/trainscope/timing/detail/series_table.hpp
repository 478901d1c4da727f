// The completed-sample series of every key on one device, indexed by key id,
// remembering the order in which keys first completed (Deep500's print order).
#ifndef TRAINSCOPE_TIMING_DETAIL_SERIES_TABLE_HPP_
#define TRAINSCOPE_TIMING_DETAIL_SERIES_TABLE_HPP_

#include <cstdint>
#include <memory>
#include <vector>

#include "trainscope/stats/detail/sample_series.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope::timing::detail {

class SeriesTable {
 public:
  explicit SeriesTable(const TimerOptions& options) : options_(options) {}

  void add(KeyId id, std::int64_t ns) {
    if (id < by_id_.size() && by_id_[id] != nullptr) {
      by_id_[id]->add(ns);
    } else {
      create(id).add(ns);
    }
  }

  // nullptr when the key never completed a region.
  const stats::detail::SampleSeries* find(KeyId id) const noexcept {
    return id < by_id_.size() ? by_id_[id].get() : nullptr;
  }
  stats::detail::SampleSeries& get_or_create(KeyId id) {
    return (id < by_id_.size() && by_id_[id] != nullptr) ? *by_id_[id] : create(id);
  }
  // Keys in first-completed order.
  const std::vector<KeyId>& order() const noexcept { return order_; }
  void clear() noexcept {
    by_id_.clear();
    order_.clear();
  }
  std::size_t memory_bytes() const noexcept;

 private:
  stats::detail::SampleSeries& create(KeyId id);

  TimerOptions options_;
  std::vector<std::unique_ptr<stats::detail::SampleSeries>> by_id_;
  std::vector<KeyId> order_;
};

}  // namespace trainscope::timing::detail

#endif  // TRAINSCOPE_TIMING_DETAIL_SERIES_TABLE_HPP_
