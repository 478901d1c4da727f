#include "run/rank_writers.hpp"

#include "absl/strings/escaping.h"
#include "fmt/format.h"

namespace trainscope::run::detail {
namespace {

// Thread indexes are small per process; a larger one is not followed.
constexpr std::uint32_t kMaxThreads = 4096;
// A thread's series beyond this many (restarts upon restarts) forget the oldest.
constexpr std::size_t kMaxSeries = 64;

}  // namespace

void RankWriterCheck::add(const RegionView& row) {
  ++rows_;
  if (found_row_ > 0 || row.device != Device::kCPU || row.key != "BATCH") return;
  if (row.thread >= kMaxThreads) return;
  if (row.thread >= threads_.size()) threads_.resize(row.thread + 1);
  std::vector<Series>& series = threads_[row.thread].series;
  // The newest series whose next BATCH row this is (one process's are 0, 1, 2, ...).
  for (std::size_t i = series.size(); i-- > 0;) {
    if (series[i].next != row.step) continue;
    if (i + 1 != series.size()) {
      found_row_ = rows_;
      found_thread_ = row.thread;
      found_step_ = row.step;
      found_newer_next_ = series.back().next;
    }
    ++series[i].next;
    return;
  }
  // A series begins: another process (or a restart) at step 0, or rows were lost before it.
  if (series.size() == kMaxSeries) series.erase(series.begin());
  series.push_back(Series{row.step + 1});
}

std::optional<std::string> RankWriterCheck::finding(const std::string& path) const {
  if (found_row_ == 0) return std::nullopt;
  return fmt::format(
      "{}:{}: rows of more than one process: thread {}'s BATCH rows on CPU go on at step {} "
      "while another series of steps, begun later, has reached step {} (each process counts "
      "steps "
      "from 0): processes recorded this rank at the same time (started with the same RANK, "
      "before trainscope refused a second claimant) or a child process timed BATCH; their rows "
      "cannot be told apart, so per-step views and statistics of this rank mix them",
      absl::Utf8SafeCHexEscape(path), found_row_ + 1, found_thread_, found_step_,
      found_newer_next_ - 1);
}

}  // namespace trainscope::run::detail
