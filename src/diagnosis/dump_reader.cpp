// The one reader of a rank's dump (dump-<rank>.json; its writer is
// bindings/python/trainscope/_hang.py): trainscope/diagnosis/hang.hpp.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>
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
#include "trainscope/diagnosis/capture_request.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/run/dump_signal.hpp"
#include "trainscope/stats/format_numbers.hpp"

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

absl::StatusOr<RankDump> parse_region_dump(std::string_view text, std::string_view source) {
  const std::string_view header = kRegionDumpHeader;
  std::size_t at = std::string_view::npos;
  for (std::size_t from = 0;;) {  // the last block: a header at the start of a line
    const std::size_t found = text.find(header, from);
    if (found == std::string_view::npos) break;
    if (found == 0 || text[found - 1] == '\n') at = found;
    from = found + 1;
  }
  if (at == std::string_view::npos) {
    return absl::NotFoundError(fmt::format("{}: no region dump", source));
  }
  std::size_t line_number = static_cast<std::size_t>(
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  std::vector<std::string_view> lines;
  for (std::size_t pos = at; pos < text.size();) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) break;  // a line without its newline: cut
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  const auto bad = [&](std::size_t i, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source, line_number + i + 1, why));
  };
  if (lines.empty() || lines[0] != header) return bad(0, "the region dump is cut");
  RankDump d;
  unsigned long long rank = 0;
  long long pid = 0, time_ms = 0;
  int used = 0;
  const std::string first = lines.size() > 1 ? std::string(lines[1]) : std::string();
  if (lines.size() < 2 ||
      std::sscanf(first.c_str(), "rank %llu pid %lld time_ms %lld%n", &rank, &pid, &time_ms,
                  &used) != 3 ||
      static_cast<std::size_t>(used) != first.size() || rank > 0xffffffffULL) {
    return bad(1, "not \"rank R pid P time_ms T\"");
  }
  d.rank = static_cast<std::uint32_t>(rank);
  d.pid = pid;
  d.time_ms = time_ms;
  for (std::size_t i = 2;; ++i) {
    if (i >= lines.size()) return bad(i, "the region dump is cut (no \"end\" line)");
    const std::string_view line = lines[i];
    if (line == "end") break;
    const std::size_t colon = line.find(": ");
    if (line.rfind("timer ", 0) != 0 || colon == std::string_view::npos) {
      return bad(i, "not \"timer N: REGION MS ms; ...\"");
    }
    std::string_view rest = line.substr(colon + 2);
    while (!rest.empty()) {
      const std::size_t semi = rest.find("; ");
      const std::string_view part = rest.substr(0, semi);
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 2);
      const std::size_t space = part.rfind(' ', part.size() >= 4 ? part.size() - 4 : 0);
      long long ms = 0;
      const std::string number =
          space == std::string_view::npos ? std::string() : std::string(part.substr(space + 1));
      if (part.size() > 5 && part.substr(part.size() - 5) == " more") {
        d.regions.push_back(std::string(part));
        continue;
      }
      if (space == std::string_view::npos || space == 0 || part.size() < 3 ||
          part.substr(part.size() - 3) != " ms" ||
          std::sscanf(number.c_str(), "%lld ms%n", &ms, &used) != 1 ||
          static_cast<std::size_t>(used) != number.size()) {
        return bad(i, fmt::format("not \"REGION MS ms\": {}", part));
      }
      d.regions.push_back(fmt::format("{} (open {})", part.substr(0, space),
                                      stats::format_seconds(static_cast<double>(ms) / 1e3)));
    }
  }
  return d;
}

std::vector<RankDump> read_dumps(const std::string& run_dir, std::vector<std::string>* notes) {
  std::vector<RankDump> out;
  // Reads one file with `parse`; a file it finds no dump in (NotFound) is left alone.
  const auto read_one = [&](const std::filesystem::path& p, auto parse) {
    const std::string path = p.string();
    absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
    if (!text.ok()) {
      if (notes)
        notes->push_back(
            fmt::format("{}: not read: {}", path, std::string(text.status().message())));
      return;
    }
    absl::StatusOr<RankDump> dump = parse(*text, path);
    if (absl::IsNotFound(dump.status())) return;
    if (!dump.ok()) {
      if (notes) notes->push_back(std::string(dump.status().message()));
      return;
    }
    dump->file = p.filename().string();
    out.push_back(*std::move(dump));
  };
  std::vector<std::filesystem::path> texts;  // dump-<rank>.txt: a C++ rank's when no JSON
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("dump-", 0) == 0 && name.size() > 9 &&
        name.compare(name.size() - 4, 4, ".txt") == 0) {
      texts.push_back(entry.path());
    } else if (name.rfind("dump-", 0) == 0 && name.size() > 10 &&
               name.compare(name.size() - 5, 5, ".json") == 0) {
      read_one(entry.path(), parse_dump);
    }
  }
  for (const std::filesystem::path& p : texts) {
    std::filesystem::path json = p;
    json.replace_extension(".json");
    if (std::filesystem::exists(json, error)) continue;  // Python's stacks, parsed there
    read_one(p, parse_region_dump);
  }
  std::sort(out.begin(), out.end(),
            [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return out;
}

std::string dump_text(const RankDump& dump) {
  std::vector<std::string> parts;
  for (const DumpThread& t : dump.threads) parts.push_back(frames_text(t));
  if (!dump.regions.empty())
    parts.push_back(fmt::format("regions open: {}", fmt::join(dump.regions, " > ")));
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
          "; {} at {}: {}", d.file.empty() ? fmt::format("dump-{}.json", d.rank) : d.file,
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

namespace {

// capture-r<rank>-s<step>-<label>.json, <label> a label that asks for a
// capture in lower case (trainscope/diagnosis/capture_request.hpp).
std::optional<Capture> label_capture(const std::string& name) {
  unsigned rank = 0;
  long long step = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "capture-r%u-s%lld-%n", &rank, &step, &used) != 2 || used <= 0 ||
      step < 0 || name.size() <= static_cast<std::size_t>(used) + 5 ||
      name.compare(name.size() - 5, 5, ".json") != 0) {
    return std::nullopt;
  }
  std::string label = name.substr(static_cast<std::size_t>(used), name.size() - used - 5);
  for (char& c : label) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  absl::StatusOr<LabelName> parsed = parse_label_name(label);
  if (!parsed.ok() || !asks_capture(*parsed)) return std::nullopt;
  return Capture{rank, step, "captures/" + name, *parsed};
}

}  // namespace

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
      out.push_back(Capture{rank, step, "captures/" + name, std::nullopt});
    } else if (std::optional<Capture> asked = label_capture(name)) {
      out.push_back(*std::move(asked));
    }
  }
  std::sort(out.begin(), out.end(), [](const Capture& a, const Capture& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.step < b.step;
  });
  return out;
}

}  // namespace trainscope::diagnosis
