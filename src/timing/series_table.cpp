#include "trainscope/timing/detail/series_table.hpp"

namespace trainscope::timing::detail {

stats::detail::SampleSeries& SeriesTable::create(KeyId id) {
  if (id >= by_id_.size()) by_id_.resize(id + 1);
  by_id_[id] = std::make_unique<stats::detail::SampleSeries>(
      options_.warmup, options_.exact_sample_cap, options_.sketch_relative_error);
  order_.push_back(id);
  return *by_id_[id];
}

std::size_t SeriesTable::memory_bytes() const noexcept {
  std::size_t bytes =
      sizeof(*this) + by_id_.capacity() * sizeof(by_id_[0]) + order_.capacity() * sizeof(KeyId);
  for (const auto& series : by_id_) {
    if (series != nullptr) bytes += series->memory_bytes();
  }
  return bytes;
}

}  // namespace trainscope::timing::detail
