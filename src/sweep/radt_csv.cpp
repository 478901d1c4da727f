// radT's experiment CSV (radt/schedule/schedule.py, itu-rad/radt): read into a
// Plan, and Status/Run written back the way radT does after each workload.
//
// radT reads the file with pandas (read_csv, skipinitialspace=True) and
// inserts a Name column after Workload when there is none. The tokenizer here
// is our own, not a library's, because the write-back must keep every byte of
// the file but two fields, so it needs each field's byte range: RFC 4180
// quoting, blank lines skipped, a UTF-8 BOM dropped, spaces around fields
// ignored (pandas drops the leading ones and keeps trailing ones; radT strips
// what it compares, so trimming both changes nothing it relies on).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/csv.hpp"
#include "common/files.hpp"
#include "sweep/inputs_util.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

struct Field {
  std::size_t begin = 0;  // raw bytes [begin, end): leading spaces excluded
  std::size_t end = 0;
  std::string value;  // unquoted, trimmed
};

struct Record {
  int line = 0;  // 1-based line the record starts on
  std::vector<Field> fields;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

absl::StatusOr<std::vector<Record>> tokenize(absl::string_view text, absl::string_view name) {
  std::vector<Record> records;
  std::size_t i = 0;
  int line = 1;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  const std::size_t n = text.size();
  while (i < n) {
    // Skip blank lines (pandas' skip_blank_lines), whitespace-only included.
    std::size_t j = i;
    while (j < n && (is_space(text[j]) || text[j] == '\r')) ++j;
    if (j == n) break;
    if (text[j] == '\n') {
      i = j + 1;
      ++line;
      continue;
    }
    Record record;
    record.line = line;
    bool end_of_record = false;
    while (!end_of_record) {
      Field field;
      while (i < n && is_space(text[i])) ++i;
      field.begin = i;
      std::string value;
      bool quoted = false;
      if (i < n && text[i] == '"') {
        quoted = true;
        const int quote_line = line;
        ++i;
        for (;;) {
          if (i >= n) {
            return absl::InvalidArgumentError(
                absl::StrCat(name, ":", quote_line, ": a quoted field is never closed"));
          }
          if (text[i] == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              value.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          value.push_back(text[i++]);
        }
      }
      // Unquoted text, or what follows a closing quote, up to the delimiter.
      while (i < n && text[i] != ',' && text[i] != '\n') value.push_back(text[i++]);
      field.end = i;
      if (i < n && text[i] == ',') {
        ++i;
      } else {
        end_of_record = true;
        if (i < n) {  // '\n'
          ++i;
          ++line;
        }
      }
      // A "\r\n" line end leaves '\r' in the last field's bytes; it stays
      // outside the range so that a write-back keeps it.
      while (field.end > field.begin && text[field.end - 1] == '\r') --field.end;
      if (!quoted) {
        field.value = std::string(absl::StripAsciiWhitespace(value));
      } else {
        // Keep the quoted content as is; trim only what stood after the quote.
        const std::size_t close = value.size();
        field.value = std::string(absl::StripTrailingAsciiWhitespace(value.substr(0, close)));
      }
      record.fields.push_back(std::move(field));
    }
    records.push_back(std::move(record));
  }
  return records;
}

enum Column {
  kExperiment,
  kWorkload,
  kName,
  kStatus,
  kRun,
  kDevices,
  kCollocation,
  kFile,
  kListeners,
  kParams,
  kColumnCount
};
constexpr const char* kColumnNames[kColumnCount] = {
    "Experiment", "Workload",    "Name", "Status",    "Run",
    "Devices",    "Collocation", "File", "Listeners", "Params"};

// Where each column is in the header, and in a row with one field more.
struct Layout {
  int header_fields = 0;
  int index[kColumnCount];  // in the header; -1 for a missing Name
};

absl::StatusOr<Layout> read_header(const Record& header, absl::string_view name) {
  Layout layout;
  std::fill(std::begin(layout.index), std::end(layout.index), -1);
  layout.header_fields = static_cast<int>(header.fields.size());
  for (int f = 0; f < layout.header_fields; ++f) {
    const std::string& column = header.fields[f].value;
    int found = -1;
    for (int c = 0; c < kColumnCount; ++c) {
      if (column == kColumnNames[c]) found = c;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", header.line, ": unknown column '", column,
                       "' (radT's columns: ", absl::StrJoin(kColumnNames, ", "), ")"));
    }
    if (layout.index[found] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", header.line, ": column '", column, "' appears twice"));
    }
    layout.index[found] = f;
  }
  for (int c = 0; c < kColumnCount; ++c) {
    if (c != kName && layout.index[c] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", header.line, ": the header has no '", kColumnNames[c], "' column"));
    }
  }
  return layout;
}

// Field index of each column in `row`. radT's README example puts a Name
// after Workload in rows under a header without one (10 fields under 9
// names); pandas would take the first field as the index and shift every
// column, which is not what the example means. radT's loader puts Name right
// after Workload, so we read that extra field as the Name.
absl::StatusOr<std::vector<int>> row_columns(const Layout& layout, const Record& row,
                                             absl::string_view name) {
  const int fields = static_cast<int>(row.fields.size());
  std::vector<int> at(kColumnCount, -1);
  if (fields == layout.header_fields) {
    for (int c = 0; c < kColumnCount; ++c) at[c] = layout.index[c];
    return at;
  }
  if (layout.index[kName] < 0 && fields == layout.header_fields + 1) {
    const int name_at = layout.index[kWorkload] + 1;
    for (int c = 0; c < kColumnCount; ++c) {
      if (c == kName) {
        at[c] = name_at;
      } else {
        at[c] = layout.index[c] + (layout.index[c] >= name_at ? 1 : 0);
      }
    }
    return at;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      name, ":", row.line, ": ", fields, " fields, but the header has ", layout.header_fields,
      layout.index[kName] < 0
          ? absl::StrCat(" (or ", layout.header_fields + 1, " with a Name after Workload)")
          : std::string()));
}

const std::set<std::string>& known_listeners() {
  // radT's RUN_LISTENERS and WORKLOAD_LISTENERS (radt/constants.py).
  static const std::set<std::string> names = {"ps",     "smi",  "dcgmi",   "top", "iostat", "free",
                                              "macmon", "nsys", "nsysraw", "ncu", "ncuraw"};
  return names;
}

bool looks_numeric(absl::string_view token) {
  double value;
  return absl::SimpleAtod(token, &value);
}

// radT hands Params to the program split on whitespace (sys.argv =
// params.split()) and logs "--key v1 v2" as key = "v1 v2". A Params of
// "--key value" pairs ("--key=value" too) becomes Job.params, so each reaches
// the program as `--key value` as before; radT's older README writes
// "batch-size=128", which we read as the param batch-size (radT would pass the
// literal word, which no argparse program accepts). Anything else (a flag
// without a value, several values, a positional word) is kept verbatim: the
// split words are appended to the command, as radT passes them.
void parse_params(absl::string_view params, Job* job) {
  const std::vector<std::string> tokens =
      absl::StrSplit(params, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  std::vector<std::pair<std::string, std::string>> out;
  auto is_key = [](const std::string& t) {
    return t.size() > 1 && t[0] == '-' && !looks_numeric(t);
  };
  bool clean = true;
  for (std::size_t i = 0; i < tokens.size() && clean;) {
    const std::string& t = tokens[i];
    if (is_key(t)) {
      const std::size_t dashes = std::min(t.find_first_not_of('-'), t.size());
      const std::string key = t.substr(dashes);
      const std::size_t eq = key.find('=');
      if (eq != std::string::npos && eq > 0) {
        out.emplace_back(key.substr(0, eq), key.substr(eq + 1));
        ++i;
      } else if (!key.empty() && i + 1 < tokens.size() && !is_key(tokens[i + 1])) {
        out.emplace_back(key, tokens[i + 1]);
        i += 2;
      } else {
        clean = false;
      }
    } else if (const std::size_t eq = t.find('='); eq != std::string::npos && eq > 0) {
      out.emplace_back(t.substr(0, eq), t.substr(eq + 1));
      ++i;
    } else {
      clean = false;
    }
  }
  if (clean) {
    job->params = std::move(out);
  } else {
    job->command.insert(job->command.end(), tokens.begin(), tokens.end());
  }
}

absl::Status fill_job(const Record& row, const std::vector<int>& at, absl::string_view name,
                      Job* job) {
  auto value = [&](int column) -> const std::string& {
    static const std::string kEmpty;
    return at[column] < 0 ? kEmpty : row.fields[at[column]].value;
  };
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", row.line, ": ", what));
  };
  if (value(kExperiment).empty()) return bad("Experiment is empty");
  if (value(kWorkload).empty()) return bad("Workload is empty");
  if (value(kFile).empty()) return bad("File is empty (radT runs `python File`)");

  const std::string& devices = value(kDevices);
  if (!devices.empty()) {
    for (absl::string_view part : absl::StrSplit(devices, '+')) {
      part = absl::StripAsciiWhitespace(part);
      int index = -1;
      if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit) ||
          !absl::SimpleAtoi(part, &index)) {
        return bad(absl::StrCat("Devices '", devices,
                                "' is not a GPU index or indices joined by '+' (0+1)"));
      }
      job->devices.push_back(index);
    }
  }

  // radT: "-", "" or "nan" is no collocation, "mps" any case, and MIG for
  // any value containing "g" (we ask for a profile's shape, e.g. 3g.20gb).
  const std::string collocation = value(kCollocation);
  const std::string lower = absl::AsciiStrToLower(collocation);
  if (lower.empty() || lower == "-" || lower == "nan") {
    job->collocation = "-";
  } else if (lower == "mps") {
    job->collocation = "mps";
  } else if (std::isdigit(static_cast<unsigned char>(lower[0])) &&
             lower.find("g.") != std::string::npos) {
    job->collocation = collocation;
  } else {
    return bad(absl::StrCat("Collocation '", collocation,
                            "' is not '-', 'mps' or a MIG profile such as 3g.20gb"));
  }

  for (absl::string_view part : absl::StrSplit(value(kListeners), '+')) {
    const std::string listener = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
    if (listener.empty()) continue;
    if (known_listeners().count(listener) == 0) {
      return bad(absl::StrCat("unknown listener '", listener,
                              "' (radT's: ", absl::StrJoin(known_listeners(), ", "), ")"));
    }
    job->listeners.push_back(listener);
  }
  job->command = {"python", value(kFile)};
  parse_params(value(kParams), job);
  job->source = absl::StrCat(name, ":", row.line);
  return absl::OkStatus();
}

// "1" and " 01" name the same Experiment for pandas (an int column).
std::string normalized_key(const std::string& text) {
  long long number;
  if (absl::SimpleAtoi(text, &number)) return std::to_string(number);
  return text;
}

}  // namespace

absl::StatusOr<Plan> parse_radt_csv(std::string_view text_in, std::string_view name_in,
                                    const RadtReadOptions& options) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view name(name_in.data(), name_in.size());
  absl::StatusOr<std::vector<Record>> records = tokenize(text, name);
  if (!records.ok()) return records.status();
  if (records->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty file, no radT header"));
  }
  absl::StatusOr<Layout> layout = read_header(records->front(), name);
  if (!layout.ok()) return layout.status();

  struct Row {
    Job job;
    std::string experiment, workload, job_name, status;
  };
  std::vector<Row> rows;
  std::map<std::string, int> group_of;  // "experiment+workload" -> group, first appearance
  for (std::size_t r = 1; r < records->size(); ++r) {
    const Record& record = (*records)[r];
    absl::StatusOr<std::vector<int>> at = row_columns(*layout, record, name);
    if (!at.ok()) return at.status();
    Row row;
    if (absl::Status status = fill_job(record, *at, name, &row.job); !status.ok()) return status;
    auto field = [&](int column) {
      return (*at)[column] < 0 ? std::string() : record.fields[(*at)[column]].value;
    };
    row.experiment = normalized_key(field(kExperiment));
    row.workload = normalized_key(field(kWorkload));
    row.job_name = field(kName);
    if (absl::AsciiStrToLower(row.job_name) == "nan") row.job_name.clear();
    row.status = field(kStatus);
    const std::string key = absl::StrCat(row.experiment, "+", row.workload);
    const auto [it, added] = group_of.emplace(key, static_cast<int>(group_of.size()));
    row.job.group = it->second;
    rows.push_back(std::move(row));
  }

  // radT skips a workload when every row is FINISHED, or FAILED without --rerun.
  std::vector<bool> done(group_of.size(), true);
  for (const Row& row : rows) {
    const bool finished = row.status.find("FINISHED") != std::string::npos;
    const bool failed = row.status.find("FAILED") != std::string::npos;
    if (!(finished || (failed && !options.rerun))) done[row.job.group] = false;
  }

  Plan plan;
  plan.name = detail::stem_of(name);
  detail::UniqueIds ids;
  std::vector<int> rows_in_group(group_of.size(), 0);
  for (Row& row : rows) {
    const int k = ++rows_in_group[row.job.group];
    const std::string tail = row.job_name.empty() ? absl::StrCat("r", k) : row.job_name;
    row.job.id =
        ids.take(detail::safe_id(absl::StrCat("e", row.experiment, "-w", row.workload, "-", tail)));
    if (done[row.job.group] && !options.include_done) continue;
    plan.jobs.push_back(std::move(row.job));
  }
  return plan;
}

absl::StatusOr<Plan> read_radt_csv(const std::string& path, const RadtReadOptions& options) {
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  return parse_radt_csv(*text, path, options);
}

absl::StatusOr<int> radt_line(const Job& job) {
  const std::size_t colon = job.source.find_last_of(':');
  int line = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(job.source.substr(colon + 1), &line) ||
      line < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job.id, "': source '", job.source, "' is not file:line"));
  }
  return line;
}

absl::Status write_radt_status(const std::string& path, int line, std::string_view status,
                               std::string_view run_id) {
  return write_radt_statuses(path, {RadtRowStatus{line, std::string(status), std::string(run_id)}});
}

absl::Status write_radt_statuses(const std::string& path, const std::vector<RadtRowStatus>& rows) {
  if (rows.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<Record>> records = tokenize(*text, path);
  if (!records.ok()) return records.status();
  if (records->empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  absl::StatusOr<Layout> layout = read_header(records->front(), path);
  if (!layout.ok()) return layout.status();
  std::map<int, const Record*> by_line;
  for (std::size_t r = 1; r < records->size(); ++r) by_line[(*records)[r].line] = &(*records)[r];
  absl::Status first;
  // radT writes both fields with pandas' to_csv, which quotes only when needed.
  std::vector<std::pair<const Field*, std::string>> edits;
  for (const RadtRowStatus& wanted : rows) {
    const auto found = by_line.find(wanted.line);
    if (found == by_line.end()) {
      if (first.ok()) {
        first = absl::NotFoundError(
            absl::StrCat(path, ":", wanted.line, ": no radT row starts on this line"));
      }
      continue;
    }
    const Record& row = *found->second;
    absl::StatusOr<std::vector<int>> at = row_columns(*layout, row, path);
    if (!at.ok()) {
      if (first.ok()) first = at.status();
      continue;
    }
    edits.emplace_back(&row.fields[(*at)[kStatus]], trainscope::detail::csv_field(wanted.status));
    edits.emplace_back(&row.fields[(*at)[kRun]], trainscope::detail::csv_field(wanted.run_id));
  }
  // From the end of the file back, so that each range is still where it was;
  // a row given twice: its last values win.
  std::stable_sort(edits.begin(), edits.end(),
                   [](const auto& a, const auto& b) { return a.first->begin > b.first->begin; });
  edits.erase(edits.begin(),
              std::unique(edits.rbegin(), edits.rend(), [](const auto& a, const auto& b) {
                return a.first == b.first;
              }).base());
  if (edits.empty()) return first;
  std::string out = *text;
  for (const auto& [field, value] : edits) {
    out.replace(field->begin, field->end - field->begin, value);
  }
  absl::Status written = trainscope::detail::write_file_atomically(path, out);
  return first.ok() ? written : first;
}

}  // namespace trainscope::sweep
