// The one reader of a rank's dump (dump-<rank>.json; its writer is
// bindings/python/trainscope/_hang.py): trainscope/diagnosis/hang.hpp.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/files.hpp"
#include "common/json_field.hpp"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "trainscope/diagnosis/hang.hpp"

namespace trainscope::diagnosis {
namespace {

using trainscope::detail::Field;

constexpr std::size_t kFramesShown = 3;

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string frames_text(const DumpThread& t) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < t.frames.size() && i < kFramesShown; ++i) {
    const DumpFrame& f = t.frames[i];
    parts.push_back(fmt::format("{} ({}:{})", f.function, base_name(f.file), f.line));
  }
  if (parts.empty()) return fmt::format("{}: no Python frame", t.name);
  std::string out = fmt::format("{} in ", t.main ? "main thread" : t.name);
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : " <- ") + parts[i];
  return out;
}

}  // namespace

absl::StatusOr<RankDump> parse_dump(std::string_view text, std::string_view source) {
  return trainscope::detail::parse_document<RankDump>(text, source, "dump", [](const Field& f) {
    if (f["format"].string() != "trainscope.dump") f["format"].fail("not \"trainscope.dump\"");
    if (f["version"].int_at_least(1) != 1) f["version"].fail("version 1 is the one known");
    RankDump d;
    d.rank = static_cast<std::uint32_t>(f["rank"].integer(0));
    d.pid = f["pid"].integer(0);
    d.time_ms = f["time_ms"].integer(0);
    for (const Field& t : f["threads"].items()) {
      DumpThread thread;
      thread.name = t["name"].string();
      thread.main = t["main"].boolean();
      for (const Field& fr : t["frames"].items()) {
        thread.frames.push_back(
            DumpFrame{fr["file"].string(), fr["line"].integer(0), fr["function"].string()});
      }
      d.threads.push_back(std::move(thread));
    }
    if (std::optional<Field> regions = f.find("regions")) d.regions = regions->strings();
    if (std::optional<Field> ring = f.find("collectives")) {
      for (const Field& c : ring->items()) {
        DumpCollective one;
        one.op = c["op"].string();
        const Field group = c["group"];
        try {
          one.group = group.string();
        } catch (const trainscope::detail::DocumentError&) {
          one.group = std::to_string(group.integer(0));
        }
        one.seq = c["seq"].integer(0);
        if (std::optional<Field> left = c.find("left")) {
          const double when = left->number();
          one.left = when == when;  // null (NaN): not left
        }
        d.collectives.push_back(std::move(one));
      }
    }
    if (std::optional<Field> notes = f.find("notes")) d.notes = notes->strings();
    std::stable_sort(d.threads.begin(), d.threads.end(),
                     [](const DumpThread& a, const DumpThread& b) { return a.main > b.main; });
    return d;
  });
}

std::vector<RankDump> read_dumps(const std::string& run_dir, std::vector<std::string>* notes) {
  std::vector<RankDump> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("dump-", 0) != 0 || name.size() <= 10 ||
        name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    const std::string path = entry.path().string();
    absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
    if (!text.ok()) {
      if (notes)
        notes->push_back(
            fmt::format("{}: not read: {}", path, std::string(text.status().message())));
      continue;
    }
    absl::StatusOr<RankDump> dump = parse_dump(*text, path);
    if (!dump.ok()) {
      if (notes) notes->push_back(std::string(dump.status().message()));
      continue;
    }
    out.push_back(*std::move(dump));
  }
  std::sort(out.begin(), out.end(),
            [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return out;
}

std::string dump_text(const RankDump& dump) {
  std::vector<std::string> parts;
  for (const DumpThread& t : dump.threads) parts.push_back(frames_text(t));
  if (!dump.collectives.empty()) {
    const DumpCollective& last = dump.collectives.back();
    parts.push_back(fmt::format("{} {} #{} of group {}", last.left ? "last left" : "waits in",
                                last.op, last.seq, last.group));
  }
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : "; ") + parts[i];
  return out;
}

void add_dump_evidence(std::vector<Label>* hangs, const std::vector<RankDump>& dumps) {
  // The collective some hung rank waits in (the highest sequence number).
  const DumpCollective* waited = nullptr;
  std::vector<std::uint32_t> waiting;
  for (const RankDump& d : dumps) {
    if (d.collectives.empty() || d.collectives.back().left) continue;
    const DumpCollective& c = d.collectives.back();
    if (waited == nullptr || c.seq > waited->seq) {
      waited = &c;
      waiting.clear();
    }
    if (c.seq == waited->seq && c.op == waited->op) waiting.push_back(d.rank);
  }
  for (Label& l : *hangs) {
    if (l.name != LabelName::kHang || !l.rank) continue;
    for (const RankDump& d : dumps) {
      if (d.rank != *l.rank) continue;
      l.evidence += fmt::format(
          "; dump-{}.json at {}: {}", d.rank,
          absl::FormatTime("%H:%M:%S UTC", absl::FromUnixMillis(d.time_ms), absl::UTCTimeZone()),
          dump_text(d));
      const bool behind = waited != nullptr &&
                          std::find(waiting.begin(), waiting.end(), d.rank) == waiting.end() &&
                          (d.collectives.empty() || d.collectives.back().seq < waited->seq);
      if (behind) {
        l.evidence +=
            fmt::format("; rank {} has not entered {} #{} of group {}; rank{} {} wait in it",
                        d.rank, waited->op, waited->seq, waited->group,
                        waiting.size() == 1 ? "" : "s", fmt::join(waiting, ", "));
      }
    }
  }
}

std::vector<Capture> find_captures(const std::string& run_dir) {
  std::vector<Capture> out;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(run_dir) / "captures", error)) {
    const std::string name = entry.path().filename().string();
    unsigned rank = 0;
    long long step = 0;
    int used = 0;
    if (std::sscanf(name.c_str(), "capture-r%u-s%lld.json%n", &rank, &step, &used) == 2 &&
        static_cast<std::size_t>(used) == name.size() && step >= 0) {
      out.push_back(Capture{rank, step, "captures/" + name});
    }
  }
  std::sort(out.begin(), out.end(), [](const Capture& a, const Capture& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.step < b.step;
  });
  return out;
}

}  // namespace trainscope::diagnosis
