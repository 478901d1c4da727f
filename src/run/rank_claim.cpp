#include "run/rank_claim.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "run/run_format.hpp"
#include "trainscope/common/clock.hpp"

namespace trainscope::run::detail {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kClaimFormat = "trainscope.rank_claim";
constexpr auto kPollInterval = absl::Milliseconds(20);
// The reader's crash rule (run_reader.cpp): a RUNNING rank silent longer than
// this is dead, and no claimant waits for it.
constexpr std::int64_t kHeartbeatIntervals = 3;
constexpr std::int64_t kMinHeartbeatSilenceMs = 10'000;

bool alive(std::int64_t pid) {
  return pid > 0 && pid <= INT_MAX && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
}

// The parent of `pid` by /proc/<pid>/stat ("pid (comm) state ppid ..."; comm
// may hold spaces and parentheses, so the fields start after the last ')').
pid_t parent_of(pid_t pid) {
  absl::StatusOr<std::string> stat =
      trainscope::detail::read_whole_file(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return -1;
  const std::size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 4 >= stat->size()) return -1;
  const char* begin = stat->data() + close + 4;  // ") S " then the ppid
  const char* end = stat->data() + stat->size();
  int parent = -1;
  if (std::from_chars(begin, end, parent).ec != std::errc()) return -1;
  return parent;
}

std::string format_holder(const RankHolder& holder) {
  Json json;
  json["format"] = kClaimFormat;
  json["host"] = holder.host;
  json["pid"] = holder.pid;
  return json.dump() + "\n";
}

std::optional<RankHolder> read_holder(int fd) {
  char buffer[4096];
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer), 0);
  if (n <= 0) return std::nullopt;
  return parse_rank_holder(std::string_view(buffer, static_cast<std::size_t>(n)));
}

// The process of this host holding an flock on fd's file, by /proc/locks
// ("1: FLOCK  ADVISORY  WRITE 1234 fe:00:10986638 0 EOF": pid, then the
// device's major:minor in hex and the inode), or 0 when none of this host does.
std::int64_t local_flock_holder(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  const std::string file =
      fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
  absl::StatusOr<std::string> locks = trainscope::detail::read_whole_file("/proc/locks");
  if (!locks.ok()) return 0;
  for (absl::string_view line : absl::StrSplit(*locks, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // "->" marks a waiter; a holder's line has 8 fields.
    if (fields.size() != 8 || fields[1] != "FLOCK" || fields[3] != "WRITE" || fields[5] != file) {
      continue;
    }
    std::int64_t pid = 0;
    if (absl::SimpleAtoi(fields[4], &pid) && pid > 0) return pid;
  }
  return 0;
}

// The holder of a lock held by another process: this host's kernel knows it
// (/proc/locks); else (a holder on another host, through a shared filesystem)
// once it has said who it is in the lock file. A holder there that names a
// dead process of this host is a stale record of an earlier owner that the
// new one has not replaced yet.
std::optional<RankHolder> wait_for_holder(int fd, const std::string& host, absl::Duration wait) {
  if (const std::int64_t pid = local_flock_holder(fd); pid > 0) return RankHolder{host, pid};
  const absl::Time deadline = absl::Now() + wait;
  for (;;) {
    std::optional<RankHolder> holder = read_holder(fd);
    if (holder.has_value() && (holder->host != host || alive(holder->pid))) return holder;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(kPollInterval);
  }
}

std::optional<RankState> read_rank_state(const std::string& dir, std::uint32_t rank) {
  const std::string path = join_path(dir, rank_file_name(rank));
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return std::nullopt;
  absl::StatusOr<RankState> state = parse_rank_file(*text, path);
  if (!state.ok()) return std::nullopt;
  return *std::move(state);
}

// A RUNNING rank file of another host that is renewed while we watch: its
// owner lives there, where this host's lock does not reach. A rank file whose
// heartbeat is past the reader's crash rule is a dead owner's, not waited for.
std::optional<RankHolder> live_owner_elsewhere(const std::string& dir, std::uint32_t rank,
                                               const std::string& host, absl::Duration wait) {
  const std::optional<RankState> first = read_rank_state(dir, rank);
  if (!first.has_value() || first->status != RunStatus::kRunning || first->host == host) {
    return std::nullopt;
  }
  const std::int64_t silence_ms =
      first->flush_interval_ms > INT64_MAX / kHeartbeatIntervals
          ? INT64_MAX
          : std::max(kHeartbeatIntervals * first->flush_interval_ms, kMinHeartbeatSilenceMs);
  if (trainscope::detail::unix_now_ms() - first->heartbeat_ms > silence_ms) return std::nullopt;
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    absl::SleepFor(kPollInterval);
    const std::optional<RankState> now = read_rank_state(dir, rank);
    if (!now.has_value() || now->status != RunStatus::kRunning) return std::nullopt;
    if (now->heartbeat_ms != first->heartbeat_ms || now->pid != first->pid ||
        now->host != first->host) {
      return RankHolder{now->host, now->pid};
    }
  }
  return std::nullopt;
}

std::string describe(const std::optional<RankHolder>& holder) {
  if (!holder.has_value() || holder->pid <= 0) {
    return "another process (its lock file does not say which)";
  }
  return fmt::format("pid {} on host {}", holder->pid, holder->host.empty() ? "?" : holder->host);
}

RankClaim refused(const std::string& dir, std::uint32_t rank, const std::string& host,
                  const std::optional<RankHolder>& holder) {
  RankClaim claim;
  claim.kind = RankClaimKind::kRefused;
  if (holder.has_value()) claim.holder = *holder;
  claim.message = fmt::format(
      "rank {} of run {} is already recorded by {}: this process (pid {} on host {}) records "
      "nothing into the run; give each process its own rank (RANK and LOCAL_RANK, SLURM_PROCID "
      "or OMPI_COMM_WORLD_RANK)",
      rank, dir, describe(holder), ::getpid(), host.empty() ? "?" : host);
  return claim;
}

// Lock held by another process: its descendants share the rank, others are refused.
RankClaim claim_held(const std::string& dir, std::uint32_t rank, const std::string& host,
                     const std::optional<RankHolder>& holder) {
  if (holder.has_value() && holder->host == host && holder->pid > 0 && holder->pid <= INT_MAX &&
      is_self_or_ancestor(static_cast<pid_t>(holder->pid))) {
    RankClaim claim;
    claim.kind = RankClaimKind::kShared;
    claim.holder = *holder;
    return claim;
  }
  return refused(dir, rank, host, holder);
}

}  // namespace

RankClaim& RankClaim::operator=(RankClaim&& other) noexcept {
  if (this == &other) return *this;
  if (lock_fd >= 0) ::close(lock_fd);
  kind = other.kind;
  lock_fd = other.release_lock();
  holder = std::move(other.holder);
  message = std::move(other.message);
  return *this;
}

RankClaim::~RankClaim() {
  if (lock_fd >= 0) ::close(lock_fd);
}

std::string rank_lock_file_name(std::uint32_t rank) { return fmt::format("rank-{}.lock", rank); }

std::optional<RankHolder> parse_rank_holder(std::string_view text) {
  // A holder writes its line in one write() after it truncated the file: a
  // reader may see nothing or (on some filesystems) part of it, never a mix.
  if (text.empty() || text.back() != '\n') return std::nullopt;
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || json.value("format", "") != kClaimFormat) return std::nullopt;
  const auto host = json.find("host");
  const auto pid = json.find("pid");
  if (host == json.end() || !host->is_string() || pid == json.end() || !pid->is_number_integer()) {
    return std::nullopt;
  }
  return RankHolder{host->get<std::string>(), pid->get<std::int64_t>()};
}

bool is_self_or_ancestor(pid_t pid) {
  if (pid <= 0) return false;
  pid_t p = ::getpid();
  for (int depth = 0; depth < 4096 && p > 0; ++depth) {
    if (p == pid) return true;
    if (p == 1) return false;
    p = depth == 0 ? ::getppid() : parent_of(p);
  }
  return false;
}

absl::StatusOr<RankClaim> claim_rank(const std::string& dir, std::uint32_t rank,
                                     const RankClaimOptions& options) {
  const std::string host = trainscope::detail::this_host();
  const std::string path = join_path(dir, rank_lock_file_name(rank));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return trainscope::detail::file_error(errno, "open", path);
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  const int lock_error = errno;
  if (!locked && (lock_error == EWOULDBLOCK || lock_error == EINTR)) {
    std::optional<RankHolder> holder = wait_for_holder(fd, host, options.holder_wait);
    ::close(fd);
    return claim_held(dir, rank, host, holder);
  }
  if (!locked) {
    // A filesystem without locks (ENOLCK, EOPNOTSUPP): the rank file says
    // whether a live process of this host records the rank.
    ::close(fd);
    const std::optional<RankState> state = read_rank_state(dir, rank);
    if (state.has_value() && state->status == RunStatus::kRunning && state->host == host &&
        state->pid != ::getpid() && alive(state->pid)) {
      return claim_held(dir, rank, host, RankHolder{state->host, state->pid});
    }
  }
  // Locked here (or no locks at all): one more owner may live on another host.
  if (std::optional<RankHolder> elsewhere =
          live_owner_elsewhere(dir, rank, host, options.other_host_wait)) {
    if (locked) ::close(fd);
    return refused(dir, rank, host, elsewhere);
  }
  RankClaim claim;
  claim.kind = RankClaimKind::kOwner;
  claim.holder = RankHolder{host, ::getpid()};
  if (locked) {
    claim.lock_fd = fd;
    // Who holds it, for later claimants' messages: one write() after the
    // truncation, so a reader sees nothing or the whole line.
    const std::string text = format_holder(claim.holder);
    if (::ftruncate(fd, 0) == 0) {
      (void)!::pwrite(fd, text.data(), text.size(), 0);
    }
  }
  return claim;
}

}  // namespace trainscope::run::detail
