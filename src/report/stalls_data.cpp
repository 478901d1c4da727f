#include "report/stalls_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "report/downsample.hpp"
#include "trainscope/stalls/analysis.hpp"

namespace trainscope::report::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool has_io_rows(const RunData& run) {
  return std::any_of(run.regions.begin(), run.regions.end(), [](const RegionColumns& c) {
    return c.device == Device::kCPU && c.key == stalls::kWaitKey && !c.seconds.empty();
  });
}

// The starts of the passes analyze_run found, in seconds since the run's
// start: its loader_epoch rows of `rank`, else its EPOCH rows.
std::vector<double> pass_starts(const RunData& run, std::uint32_t rank, double t0_ns) {
  for (const char* key : {stalls::kPassKey, "EPOCH"}) {
    std::vector<double> starts;
    for (const RegionColumns& c : run.regions) {
      if (c.device != Device::kCPU || c.key != key) continue;
      for (std::size_t i = 0; i < c.start_ns.size(); ++i) {
        if (c.rank[i] == rank)
          starts.push_back((static_cast<double>(c.start_ns[i]) - t0_ns) * 1e-9);
      }
    }
    if (!starts.empty()) {
      std::sort(starts.begin(), starts.end());
      return starts;
    }
  }
  return {};
}

// ---- stalls.json: what the page reads of it, checked before it is drawn ---------------------

enum class Kind { kNumber, kString, kBool, kObject, kArray };

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNumber:
      return "a number";
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "true or false";
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
  }
  return "?";
}

std::string_view type_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

bool is_kind(const json& value, Kind kind) {
  switch (kind) {
    case Kind::kNumber:  // null: a value JSON cannot hold (an infinity), shown as "–"
      return value.is_number() || value.is_null();
    case Kind::kString:
      return value.is_string();
    case Kind::kBool:
      return value.is_boolean();
    case Kind::kObject:
      return value.is_object();
    case Kind::kArray:
      return value.is_array();
  }
  return false;
}

// Checks that `path` (dot-separated object keys, from `root`) is of `kind`;
// an empty string when it is, else what is wrong, naming the field.
std::string check(const json& root, const std::string& path, Kind kind, bool optional = false) {
  const json* value = &root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!value->is_object()) return fmt::format("{}: the field's parent is not an object", path);
    auto it = value->find(std::string(part));
    if (it == value->end()) return optional ? std::string() : fmt::format("{}: missing", path);
    value = &*it;
  }
  if (!is_kind(*value, kind)) {
    return fmt::format("{}: {}, not {}", path, type_of(*value), kind_name(kind));
  }
  return {};
}

// What is wrong with an analysis (the first problem), or an empty string.
std::string validate(const json& a) {
  if (!a.is_object()) return fmt::format("{}, not an object", type_of(a));
  std::vector<std::string> problems;
  const auto need = [&](const std::string& path, Kind kind, bool optional = false) {
    std::string problem = check(a, path, kind, optional);
    if (!problem.empty()) problems.push_back(std::move(problem));
  };
  for (const char* field : {"iterations", "warmup", "batch_size"}) need(field, Kind::kNumber);
  need("dataset", Kind::kObject);
  need("dataset.path", Kind::kString);
  need("runs", Kind::kObject);
  for (const char* leg : {"synthetic", "cold", "warm"})
    need(fmt::format("runs.{}", leg), Kind::kObject);
  if (!problems.empty()) return problems.front();
  for (const auto& [leg, run] : a.at("runs").items()) {
    const std::string base = "runs." + leg;
    if (!run.is_object()) {
      need(base, Kind::kObject);
      continue;
    }
    for (const char* field : {"time_s", "time_ci_s", "live_wait_share"}) {
      need(base + "." + field, Kind::kNumber);
    }
    for (const char* field : {"disk_read_mb_s", "read_mb", "cpu_pct"}) {
      need(base + "." + field, Kind::kNumber, /*optional=*/true);
    }
    need(base + ".run_dir", Kind::kString, /*optional=*/true);
    need(base + ".residency.resident_share", Kind::kNumber, /*optional=*/true);
    need(base + ".analysis", Kind::kObject, /*optional=*/true);
    need(base + ".analysis.run.input_bound", Kind::kString, /*optional=*/true);
  }
  need("differential", Kind::kObject);
  for (const char* field :
       {"ingestion_rate", "prep_rate", "fetch_rate", "prep_stall_s", "fetch_stall_s", "prep_share",
        "prep_share_ci", "fetch_share", "fetch_share_ci", "live_wait_share_cold"}) {
    need(fmt::format("differential.{}", field), Kind::kNumber);
  }
  need("differential.methods_agree", Kind::kBool);
  need("differential.reconcile", Kind::kString);
  need("what_if", Kind::kObject);
  need("what_if.gpus_until_data_bound", Kind::kNumber);
  need("what_if.cache", Kind::kObject);
  need("what_if.cache.points", Kind::kArray);
  for (const char* field : {"disk_read_mb_s", "memory_mb_s", "bytes_per_sample"}) {
    need(fmt::format("what_if.cache.{}", field), Kind::kNumber, /*optional=*/true);
  }
  need("what_if.cache.basis", Kind::kString, /*optional=*/true);
  // The loader run's GPU what-if (analyses since the loader run was added).
  need("what_if.gpus", Kind::kObject, /*optional=*/true);
  need("what_if.gpus.basis", Kind::kString, /*optional=*/true);
  for (const char* field : {"loader_samples_per_s", "loader_samples_per_s_cold", "until_data_bound",
                            "until_data_bound_cold"}) {
    need(fmt::format("what_if.gpus.{}", field), Kind::kNumber, /*optional=*/true);
  }
  need("what_if.workers", Kind::kObject, /*optional=*/true);
  need("what_if.workers.key", Kind::kString, /*optional=*/true);
  need("what_if.workers.note", Kind::kString, /*optional=*/true);
  need("what_if.workers.predicted", Kind::kArray, /*optional=*/true);
  for (const char* field : {"per_worker_rate", "cores", "fitted_runs", "workers_to_keep_up"}) {
    need(fmt::format("what_if.workers.{}", field), Kind::kNumber, /*optional=*/true);
  }
  need("findings", Kind::kArray);
  need("notes", Kind::kArray);
  if (!problems.empty()) return problems.front();
  const auto each = [&](const std::string& path, const std::vector<std::string>& fields) {
    const json* list = &a;
    for (absl::string_view part : absl::StrSplit(path, '.')) list = &list->at(std::string(part));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string item = fmt::format("{}[{}]", path, i);
      if (fields.empty()) {
        if (!(*list)[i].is_string()) {
          problems.push_back(fmt::format("{}: {}, not a string", item, type_of((*list)[i])));
        }
        continue;
      }
      if (!(*list)[i].is_object()) {
        problems.push_back(fmt::format("{}: {}, not an object", item, type_of((*list)[i])));
        continue;
      }
      for (const std::string& field : fields) {
        std::string problem = check((*list)[i], field, Kind::kNumber);
        if (!problem.empty()) problems.push_back(item + "." + problem);
      }
    }
  };
  each("what_if.cache.points", {"cached_share", "samples_per_s"});
  if (a.at("what_if").contains("workers") && a.at("what_if").at("workers").contains("predicted")) {
    each("what_if.workers.predicted", {"workers", "samples_per_s"});
  }
  each("findings", {});
  each("notes", {});
  return problems.empty() ? std::string() : problems.front();
}

std::string without_exception_prefix(std::string message) {
  // "[json.exception.parse_error.101] parse error at line 1, ...": the part after the tag.
  if (!message.empty() && message.front() == '[') {
    const std::size_t end = message.find("] ");
    if (end != std::string::npos) message.erase(0, end + 2);
  }
  return message;
}

}  // namespace

json run_stalls_json(const RunData& run, std::size_t max_points) {
  if (!has_io_rows(run)) return nullptr;
  absl::StatusOr<stalls::RunStalls> analyzed = stalls::analyze_run(run.dir);
  if (absl::IsNotFound(analyzed.status())) return nullptr;
  if (!analyzed.ok()) {
    return json{{"error", fmt::format("the data-stall analysis of this run failed: {}",
                                      std::string(analyzed.status().message()))}};
  }
  const stalls::RunStalls& s = *analyzed;
  // The fields of `trainscope stalls RUN --json`, from the same function.
  json out = json::parse(stalls::run_stalls_json(s));
  // analyze_run reads the lowest rank (RunReader's first).
  const std::uint32_t rank = run.ranks.empty() ? 0 : run.ranks.front().rank.rank;
  out["rank"] = rank;
  const double t0_ns = static_cast<double>(run.info.start_time_ms) * 1e6;
  std::vector<double> x(s.wait_s.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = (static_cast<double>(s.wait_start_ns[i]) - t0_ns) * 1e-9;
  }
  out["waits"] = envelope_json(envelope(x, s.wait_s, max_points), /*x_is_time=*/true);
  std::vector<double> starts = pass_starts(run, rank, t0_ns);
  if (starts.size() != s.passes.size()) starts.clear();  // not the windows analyze_run used
  json start_json = json::array();
  for (double v : starts) start_json.push_back(std::round(v * 1000.0) / 1000.0);
  out["pass_starts_s"] = std::move(start_json);
  out["iterations"] = s.iteration_s.size();
  return out;
}

bool has_stalls_analysis(const std::string& dir) {
  std::error_code error;
  return fs::is_regular_file(fs::path(dir) / kStallsFileName, error);
}

json stalls_analysis_json(const std::string& dir) {
  const std::string file = (fs::path(dir) / kStallsFileName).string();
  json out{{"dir", dir}, {"file", file}};
  absl::StatusOr<std::string> text = trainscope::detail::read_whole_file(file);
  if (absl::IsNotFound(text.status())) {
    out["error"] = fmt::format(
        "{}: no such file (the analysis did not finish, or the file was not copied with its "
        "runs)",
        file);
    return out;
  }
  if (!text.ok()) {
    out["error"] = std::string(text.status().message());
    return out;
  }
  json parsed = parse_stalls_analysis(*text, file);
  for (auto& [key, value] : parsed.items()) out[key] = std::move(value);
  return out;
}

json parse_stalls_analysis(std::string_view text, const std::string& file) {
  json parsed;
  try {
    parsed = json::parse(text);
  } catch (const json::exception& e) {
    return json{
        {"error", fmt::format("{}: not valid JSON: {}", file, without_exception_prefix(e.what()))}};
  }
  if (const std::string problem = validate(parsed); !problem.empty()) {
    return json{{"error", fmt::format("{}: not a trainscope stalls analysis: {}", file, problem)}};
  }
  return json{{"analysis", std::move(parsed)}};
}

std::string stalls_analysis_dir_of(const std::string& run_dir,
                                   const std::map<std::string, std::string>& tags) {
  const auto tag = tags.find(kStallsAnalysisTag);
  if (tag == tags.end() || tag->second.empty()) return {};
  if (has_stalls_analysis(tag->second)) return tag->second;
  fs::path run = fs::path(run_dir);
  while (run.has_relative_path() && run.filename().empty()) run = run.parent_path();
  const fs::path runs = run.parent_path();
  if (runs.filename() == "runs" && has_stalls_analysis(runs.parent_path().string())) {
    return runs.parent_path().string();
  }
  return tag->second;
}

}  // namespace trainscope::report::detail
