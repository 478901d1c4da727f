#include "report/stalls_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "report/downsample.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/differential.hpp"

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
  json out{{"dir", dir}, {"file", (fs::path(dir) / kStallsFileName).string()}};
  absl::StatusOr<stalls::DifferentialAnalysis> analysis = stalls::read_differential(dir);
  if (analysis.ok()) {
    out["analysis"] = json::parse(stalls::differential_json(*analysis));
  } else {
    out["error"] = std::string(analysis.status().message());
  }
  return out;
}

json parse_stalls_analysis(std::string_view text, const std::string& file) {
  absl::StatusOr<stalls::DifferentialAnalysis> analysis = stalls::parse_differential(text, file);
  if (!analysis.ok()) return json{{"error", std::string(analysis.status().message())}};
  return json{{"analysis", json::parse(stalls::differential_json(*analysis))}};
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
