#include "trainscope/run/run_check.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "run/rank_writers.hpp"
#include "run/run_format.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kScanBytes = std::uint64_t{16} << 20;

std::string shown(const std::string& path) { return absl::Utf8SafeCHexEscape(path); }

std::string file_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ended(const RankState& s) { return s.status != RunStatus::kRunning && !s.crashed; }

// Rows the summary entry stands for: warm-up regions are left out of its
// statistics but are rows of the file.
std::uint64_t expected_rows(const SummaryEntry& e) {
  return e.stats.count + e.stats.warmup_excluded;
}

std::uint64_t rows_of(const std::vector<RegionCount>& rows, const std::string& key, Device device) {
  for (const RegionCount& c : rows) {
    if (c.key == key && c.device == device) return c.rows;
  }
  return 0;
}

// Counts rows by key and device; consecutive rows mostly repeat a few keys.
class Tally {
 public:
  void add(std::string_view key, Device device) {
    if (last_ < counts_.size() && counts_[last_].device == device && counts_[last_].key == key) {
      ++counts_[last_].rows;
      return;
    }
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i].device == device && counts_[i].key == key) {
        last_ = i;
        ++counts_[i].rows;
        return;
      }
    }
    last_ = counts_.size();
    counts_.push_back(RegionCount{std::string(key), device, 1});
  }
  std::vector<RegionCount> take() { return std::move(counts_); }

 private:
  std::vector<RegionCount> counts_;
  std::size_t last_ = 0;
};

// Counts of files already read by this process, by file identity: a report
// reads a run once and checks it thrice (its page, the diagnosis, the stalls);
// a file of an ended rank no longer changes, and a changed file is a new key.
struct FileId {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileId& o) const {
    return path == o.path && device == o.device && inode == o.inode && size == o.size &&
           mtime_ns == o.mtime_ns;
  }
};
constexpr std::size_t kCachedFiles = 32;

std::optional<FileId> file_id(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileId{path, st.st_dev, st.st_ino, st.st_size,
                std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

class CountCache {
 public:
  // A file's counts and what RankWriterCheck found in it ("" for nothing, or
  // when the counts were the reader's own).
  using Counted = std::pair<std::vector<RegionCount>, std::string>;
  std::optional<Counted> find(const FileId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, counts] : entries_) {
      if (key == id) return counts;
    }
    return std::nullopt;
  }
  void put(FileId id, Counted counts) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kCachedFiles) entries_.erase(entries_.begin());
    entries_.emplace_back(std::move(id), std::move(counts));
  }

 private:
  std::mutex mu_;
  std::deque<std::pair<FileId, Counted>> entries_;
};

CountCache& count_cache() {
  static CountCache* cache = new CountCache();  // never destroyed: used at exit too
  return *cache;
}

}  // namespace

std::vector<RunProblem> check_rank_records(const std::vector<RankRecords>& ranks) {
  std::vector<RunProblem> out;
  for (const RankRecords& r : ranks) {
    const std::uint32_t rank = r.state.rank.rank;
    if (!r.summary.ok()) {
      RunProblem p;
      p.kind = RunProblemKind::kSummaryUnreadable;
      p.rank = rank;
      p.path = r.summary_path;
      p.message = fmt::format("{} (skipped: the run is read without this summary)",
                              std::string(r.summary.status().message()));
      out.push_back(std::move(p));
      continue;
    }
    if (!r.mixed_rows.empty()) {
      RunProblem p;
      p.kind = RunProblemKind::kRegionsMixed;
      p.rank = rank;
      p.path = r.regions_path;
      p.message = r.mixed_rows;
      out.push_back(std::move(p));
    }
    if (!ended(r.state) || !r.regions_read) continue;
    std::uint64_t counted = 0;
    const SummaryEntry* first = nullptr;
    for (const SummaryEntry& e : r.summary->entries) {
      counted += expected_rows(e);
      if (first == nullptr && expected_rows(e) > 0) first = &e;
    }
    if (first == nullptr) continue;  // nothing to hold the file to
    std::uint64_t on_disk = 0;
    for (const RegionCount& c : r.rows) on_disk += c.rows;
    const std::string status(run_status_name(r.state.status));
    if (!r.regions_found || on_disk == 0) {
      RunProblem p;
      p.kind = r.regions_found ? RunProblemKind::kRegionsEmpty : RunProblemKind::kRegionsMissing;
      // Rows the store could not write (a full disk) are lost, but known
      // lost: their statistics are in the summary.
      const bool dropped = r.state.dropped_region_rows >= counted;
      p.error = !dropped;
      p.rank = rank;
      p.path = r.regions_path;
      p.key = first->key;
      p.device = first->device;
      p.summary_rows = counted;
      p.message = fmt::format(
          "{}: {}, but rank {} ended {} and {} counts {} region{}: {}", shown(r.regions_path),
          r.regions_found ? "holds no region rows" : "no such file", rank, status,
          file_name(r.summary_path), counted, counted == 1 ? "" : "s",
          dropped ? fmt::format("the disk was full ({} rows not written); the summary keeps "
                                "their statistics",
                                r.state.dropped_region_rows)
                  : std::string("the run's timings are lost"));
      out.push_back(std::move(p));
      continue;
    }
    for (const SummaryEntry& e : r.summary->entries) {
      const std::uint64_t want = expected_rows(e);
      const std::uint64_t have = rows_of(r.rows, e.key, e.device);
      if (have >= want) continue;
      RunProblem p;
      p.kind = RunProblemKind::kRegionsShort;
      p.rank = rank;
      p.path = r.regions_path;
      p.key = e.key;
      p.device = e.device;
      p.summary_rows = want;
      p.file_rows = have;
      p.message = fmt::format(
          "{} holds {} rows of {} on {}, but {} counts {}: {}, so what is read of it covers "
          "part of the run",
          shown(r.regions_path), have, absl::CHexEscape(e.key), device_name(e.device),
          file_name(r.summary_path), want,
          r.state.dropped_region_rows > 0
              ? fmt::format("the disk was full ({} region rows of the rank not written)",
                            r.state.dropped_region_rows)
              : std::string("the file lost rows (cut short?)"));
      out.push_back(std::move(p));
    }
  }
  return out;
}

absl::StatusOr<std::vector<RunProblem>> check_run(const RunReader& reader,
                                                  const RegionCounts* counted) {
  std::vector<RankState> states = reader.ranks();
  // Summaries of ranks without a rank file are read too (and held to nothing).
  for (const RunFile& file : reader.files()) {
    if (file.kind != RunFileKind::kSummary) continue;
    if (std::none_of(states.begin(), states.end(),
                     [&file](const RankState& s) { return s.rank.rank == file.rank; })) {
      RankState orphan;
      orphan.rank.rank = file.rank;
      states.push_back(orphan);
    }
  }
  std::vector<RankRecords> records;
  for (const RankState& state : states) {
    const std::uint32_t rank = state.rank.rank;
    RankRecords& r = records.emplace_back();
    r.state = state;
    r.regions_path = run::detail::join_path(reader.dir(), run::detail::regions_file_name(rank));
    r.summary_path = run::detail::join_path(reader.dir(), run::detail::summary_file_name(rank));
    r.summary = reader.read_summary(rank);
    const bool needs_rows = r.summary.ok() && ended(state) &&
                            std::any_of(r.summary->entries.begin(), r.summary->entries.end(),
                                        [](const SummaryEntry& e) { return expected_rows(e) > 0; });
    if (!needs_rows) continue;
    const std::optional<FileId> id = file_id(r.regions_path);
    if (counted != nullptr) {
      if (auto it = counted->find(rank); it != counted->end()) {
        r.regions_found = true;
        r.rows = it->second;
        if (id) count_cache().put(*id, {r.rows, ""});
        continue;
      }
    }
    if (id) {
      if (std::optional<CountCache::Counted> cached = count_cache().find(*id)) {
        r.regions_found = true;
        r.rows = std::move(cached->first);
        r.mixed_rows = std::move(cached->second);
        continue;
      }
    }
    Tally tally;
    run::detail::RankWriterCheck writers;  // rows of two processes at once (older runs)
    std::uint64_t offset = 0;
    r.regions_found = true;
    for (;;) {
      absl::StatusOr<RunReader::Scan> scan =
          reader.scan_regions(rank, offset, kScanBytes, [&tally, &writers](const RegionView& row) {
            tally.add(row.key, row.device);
            writers.add(row);
          });
      if (absl::IsNotFound(scan.status())) {
        r.regions_found = false;
        break;
      }
      if (!scan.ok()) {
        r.regions_read = false;
        break;
      }
      if (scan->next_offset == offset) break;
      offset = scan->next_offset;
    }
    r.rows = tally.take();
    r.mixed_rows = writers.finding(r.regions_path).value_or("");
    // What was read, if the file is still what it was when counting began.
    if (id && r.regions_found && r.regions_read && file_id(r.regions_path) == id)
      count_cache().put(*id, {r.rows, r.mixed_rows});
  }
  return check_rank_records(records);
}

absl::Status run_problems_error(const std::vector<RunProblem>& problems) {
  for (const RunProblem& p : problems) {
    if (p.error) return absl::DataLossError(p.message);
  }
  return absl::OkStatus();
}

std::vector<std::string> run_problem_warnings(const std::vector<RunProblem>& problems) {
  std::vector<std::string> out;
  for (const RunProblem& p : problems) {
    if (!p.error) out.push_back(p.message);
  }
  return out;
}

std::vector<std::uint32_t> unreadable_summaries(const std::vector<RunProblem>& problems) {
  std::vector<std::uint32_t> out;
  for (const RunProblem& p : problems) {
    if (p.kind == RunProblemKind::kSummaryUnreadable) out.push_back(p.rank);
  }
  return out;
}

bool holds_run_files(const std::string& dir) {
  if (is_run_directory(dir)) return true;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return false;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const auto named = [&name](std::string_view prefix, std::string_view suffix) {
      return name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (named("rank-", ".json") || named("launcher-", ".json") || named("regions-", ".csv") ||
        named("summary-", ".json")) {
      return true;
    }
  }
  return false;
}

}  // namespace trainscope
