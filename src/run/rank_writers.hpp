// Rows of one rank written by more than one process at once (internal): the
// damage of runs recorded before a rank had one live owner (rank_claim.hpp),
// when processes started with the same RANK all appended to one regions file.
// Their rows cannot be told apart by any column, but each process counts
// `step` from 0 per thread: a thread's CPU BATCH rows then hold two series of
// steps that advance at the same time (0 1 2 | 0 1 | 3 4 | 2 ...). A rank
// restarted after a crash also starts again at step 0, but its earlier series
// never goes on, so it is not taken for this. Neither is a second series that
// had reached exactly the first one's step when the first went on (0 1 2 | 0 1
// 2 | 3 4 ...): such a file is a restart's too, row for row.
//
//   RankWriterCheck check;
//   reader.scan_regions(rank, 0, max, [&](const RegionView& row) { check.add(row); });
//   if (auto message = check.finding(path)) warn(*message);
#ifndef TRAINSCOPE_SRC_RUN_RANK_WRITERS_HPP_
#define TRAINSCOPE_SRC_RUN_RANK_WRITERS_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainscope/export/run_record.hpp"

namespace trainscope::run::detail {

class RankWriterCheck {
 public:
  // The rank's rows in file order (every row: the count gives the line).
  void add(const RegionView& row);

  // Whether two series of steps advanced at once, and where it was first seen.
  bool interleaved() const { return found_row_ > 0; }
  // "<path>:<line>: ..." naming the thread, both steps and what it means; nullopt when clean.
  std::optional<std::string> finding(const std::string& path) const;

 private:
  // One process's series of steps in a thread: the step its next BATCH row has.
  struct Series {
    std::int64_t next = 0;
  };
  struct Thread {
    std::vector<Series> series;  // in the order they started; the last is the newest
  };

  std::vector<Thread> threads_;
  std::uint64_t rows_ = 0;
  // The first row (1-based) that went on with an older series after a newer one began.
  std::uint64_t found_row_ = 0;
  std::uint32_t found_thread_ = 0;
  std::int64_t found_step_ = 0;        // the step of that row
  std::int64_t found_newer_next_ = 0;  // where the newer series was by then
};

}  // namespace trainscope::run::detail

#endif  // TRAINSCOPE_SRC_RUN_RANK_WRITERS_HPP_
