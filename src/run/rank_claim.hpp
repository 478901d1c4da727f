// A process's claim to a rank of a run (internal): one live process records a
// rank, however many are started with the same RANK. Run::Start claims before
// it opens the rank's files; the run store acts on the outcome.
//
// rank-<r>.lock is the claim: its owner holds an flock (LOCK_EX) on it for
// its lifetime (the kernel releases it however the process dies, kill -9
// included, so a restarted rank claims again) and writes its host and pid into
// it (for claimants on other hosts; this host's kernel names the holder in
// /proc/locks). A process that finds the lock held is either a descendant of the holder
// (a data-loader worker, a child script: it appends rows to the rank's CSV
// files, as always) or a second claimant (another process started with the
// same rank): it records nothing and is told so by name. Where the lock does
// not reach (a shared filesystem whose locks are per host), a rank file that
// another host keeps renewing refuses the claim too.
#ifndef TRAINSCOPE_SRC_RUN_RANK_CLAIM_HPP_
#define TRAINSCOPE_SRC_RUN_RANK_CLAIM_HPP_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainscope::run::detail {

enum class RankClaimKind {
  kUnclaimed,  // nobody claimed (a store made without Run::Start): the store locks itself
  kOwner,      // this process records the rank: rank file, summary, CSV repair
  kShared,     // a descendant of the owner: appends whole lines to the rank's CSV files
  kRefused,    // another live process records this rank: this one records nothing
};

// Who holds a rank, as its lock file or rank file says.
struct RankHolder {
  std::string host;
  std::int64_t pid = 0;
};

struct RankClaim {
  RankClaim() = default;
  RankClaim(RankClaim&& other) noexcept { *this = std::move(other); }
  RankClaim& operator=(RankClaim&& other) noexcept;
  ~RankClaim();  // closes lock_fd: the rank is free again

  // The lock for whoever holds the rank from now on (the run store, which
  // closes it), or -1.
  int release_lock() { return std::exchange(lock_fd, -1); }

  RankClaimKind kind = RankClaimKind::kUnclaimed;
  // kOwner: the descriptor holding the flock on rank-<r>.lock (-1 where the
  // filesystem has no locks).
  int lock_fd = -1;
  // kShared, kRefused: the rank's owner, as far as known (pid 0: unknown).
  RankHolder holder;
  // kRefused: the warning, naming the rank, the run, the holder and this process.
  std::string message;
};

struct RankClaimOptions {
  // The longest a claimant waits for the lock's holder to write who it is
  // (it does so just after it locked) before it names it "unknown", where
  // this host's /proc/locks does not name it (a holder on another host).
  absl::Duration holder_wait = absl::Seconds(2);
  // The longest a claimant watches a RUNNING rank file of another host for a
  // renewed heartbeat (a live rank there) before it takes the rank over.
  absl::Duration other_host_wait = absl::Seconds(3);
};

// Claims rank `rank` of the run in `dir` for this process. An error only when
// the lock file cannot be opened (an unwritable run directory); a refused
// claim is no error (kRefused with its message: the caller warns).
absl::StatusOr<RankClaim> claim_rank(const std::string& dir, std::uint32_t rank,
                                     const RankClaimOptions& options = {});

// "rank-3.lock".
std::string rank_lock_file_name(std::uint32_t rank);

// The holder written into a lock file, or nullopt for an empty or incomplete one.
std::optional<RankHolder> parse_rank_holder(std::string_view text);

// Whether `pid` is this process or one of its ancestors (by /proc/<pid>/stat).
bool is_self_or_ancestor(pid_t pid);

}  // namespace trainscope::run::detail

#endif  // TRAINSCOPE_SRC_RUN_RANK_CLAIM_HPP_
