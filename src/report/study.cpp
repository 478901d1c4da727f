#include "report/study.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "report/stalls_data.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/run_input.hpp"
#include "trainscope/scaling/uncertainty.hpp"
#include "trainscope/sweep/sweep_state.hpp"

namespace trainscope::report::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kTrendPoints = 120;
constexpr int kCurvePoints = 48;
constexpr double kExtrapolation = 4.0;  // the model is drawn up to 4x the largest x
constexpr int kMinScalingPoints = 3;

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

std::string shown_path(const std::string& path) { return absl::Utf8SafeCHexEscape(path); }

absl::Status add_sweep(const fs::path& dir, Inputs* inputs) {
  absl::StatusOr<sweep::StoredSweep> state = sweep::read_sweep_state(dir.string());
  if (!state.ok()) return state.status();
  if (inputs->sweep_name.empty()) inputs->sweep_name = state->name;
  inputs->sweep_dirs.push_back(dir.string());
  for (const sweep::StoredJob& job : state->jobs) {
    StudyRun run;
    run.job = job.id;
    run.status = std::string(sweep::job_status_name(job.status));
    run.params = job.params;
    run.dir = job.run_dir;  // the recorded run, else the one under this sweep directory
    inputs->runs.push_back(std::move(run));
  }
  return absl::OkStatus();
}

std::optional<double> number_of(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// An analysis's runs in the order they ran: synthetic, cold, warm, then the
// varied warm runs (warm-<key>-<value>) by value.
void order_legs(std::vector<std::string>* dirs) {
  const auto rank = [](const std::string& dir) {
    const std::string leg = fs::path(dir).filename().string();
    if (leg == "synthetic") return std::make_pair(0, 0.0);
    if (leg == "cold") return std::make_pair(1, 0.0);
    if (leg == "warm") return std::make_pair(2, 0.0);
    const std::size_t dash = leg.rfind('-');
    if (leg.rfind("warm-", 0) == 0 && dash != std::string::npos) {
      if (std::optional<double> v = number_of(leg.substr(dash + 1))) return std::make_pair(3, *v);
    }
    return std::make_pair(4, 0.0);
  };
  std::stable_sort(dirs->begin(), dirs->end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
}

// The param to model against: the requested one, or the one param with
// numeric values that varies across the finished runs (3 values at least).
std::string choose_parameter(const json& rows, const std::string& requested,
                             std::string* why_none) {
  if (requested == "none") {
    *why_none = "turned off (--scaling none)";
    return {};
  }
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, bool> numeric;
  int finished = 0;
  for (const json& row : rows) {
    if (row.value("status", "") != "FINISHED") continue;
    ++finished;
    for (const auto& [key, value] : row.at("params").items()) {
      const std::string text = value.get<std::string>();
      values[key].insert(text);
      const bool is_number = number_of(text).has_value() && *number_of(text) > 0;
      numeric.try_emplace(key, true);
      numeric[key] = numeric[key] && is_number;
    }
  }
  if (!requested.empty()) {
    if (values.find(requested) == values.end()) {
      *why_none = fmt::format("no finished run has the param \"{}\"", requested);
      return {};
    }
    return requested;
  }
  std::vector<std::string> varying;
  for (const auto& [key, set] : values) {
    if (set.size() > 1) varying.push_back(key);
  }
  if (varying.size() != 1) {
    *why_none = varying.empty()
                    ? std::string("no param varies across the finished runs")
                    : fmt::format("several params vary ({}): choose one with --scaling PARAM",
                                  fmt::join(varying, ", "));
    return {};
  }
  const std::string& p = varying.front();
  if (!numeric[p] || values[p].size() < static_cast<std::size_t>(kMinScalingPoints)) {
    *why_none =
        fmt::format("the varying param \"{}\" needs at least {} positive numeric values (has {})",
                    p, kMinScalingPoints, values[p].size());
    return {};
  }
  return p;
}

json views_json(const absl::StatusOr<std::vector<scaling::ScalingView>>& views) {
  if (!views.ok()) return json{{"error", std::string(views.status().message())}};
  json r = json::array(), t = json::array(), s = json::array(), e = json::array(),
       c = json::array();
  for (const scaling::ScalingView& v : *views) {
    r.push_back(v.resource);
    t.push_back(v.time);
    s.push_back(v.speedup);
    e.push_back(v.efficiency);
    c.push_back(v.cost);
  }
  return json{{"resource", r}, {"time", t}, {"speedup", s}, {"efficiency", e}, {"cost", c}};
}

// The model of one series, its points, band and (views) speedup and efficiency.
json series_model_json(const scaling::MeasurementSet& set, const scaling::Series& series, json out,
                       bool views) {
  json points = json::array();
  double max_x = 0;
  double min_x = std::numeric_limits<double>::infinity();
  for (const scaling::Point& p : series.points) {
    points.push_back(json{{"x", p.coordinate.at(0)}, {"values", p.values}});
    max_x = std::max(max_x, p.coordinate.at(0));
    min_x = std::min(min_x, p.coordinate.at(0));
  }
  out["points"] = std::move(points);
  out["max_measured"] = max_x;
  // What the fit used: points (distinct values of the parameter) and runs.
  std::size_t runs_used = 0;
  for (const scaling::Point& p : series.points) runs_used += p.values.size();
  out["points_used"] = series.points.size();
  out["runs_used"] = runs_used;
  absl::StatusOr<scaling::Model> model = scaling::fit(set.parameters, series);
  if (!model.ok()) {
    out["error"] = std::string(model.status().message());
    return out;
  }
  // The model as `trainscope model --json` writes it (one writer: the scaling
  // room's Model JSON document), the series named by its key and statistic.
  scaling::ModelDocument document;
  document.parameters = set.parameters;
  scaling::ModeledSeries modeled;
  modeled.callpath = series.callpath;
  modeled.metric = series.metric;
  modeled.model = *model;
  modeled.points = series.points.size();
  modeled.values = runs_used;
  document.models.push_back(std::move(modeled));
  out["model"] = json::parse(scaling::model_document_json(document));
  std::vector<std::vector<double>> grid;
  std::vector<double> resources;
  const double hi = max_x * kExtrapolation;
  for (int i = 0; i < kCurvePoints; ++i) {
    const double t = static_cast<double>(i) / (kCurvePoints - 1);
    const double x = min_x > 0 ? std::exp(std::log(min_x) + t * (std::log(hi) - std::log(min_x)))
                               : min_x + t * (hi - min_x);
    grid.push_back({x});
    resources.push_back(x);
  }
  absl::StatusOr<std::vector<scaling::Prediction>> band =
      scaling::predict_with_band(*model, series, grid);
  if (band.ok()) {
    json x = json::array(), y = json::array(), lo = json::array(), up = json::array();
    for (const scaling::Prediction& p : *band) {
      x.push_back(p.coordinate.at(0));
      y.push_back(p.value);
      lo.push_back(p.lower);
      up.push_back(p.upper);
    }
    out["curve"] = json{{"x", x}, {"y", y}, {"lower", lo}, {"upper", up}};
  } else {
    out["band_error"] = std::string(band.status().message());
  }
  if (!views) return out;  // speedup and efficiency: only for a param the user named
  const std::vector<double> fixed{0.0};
  out["measured_scaling"] = views_json(scaling::measured_scaling(series, 0, fixed));
  out["modeled_scaling"] = views_json(scaling::modeled_scaling(*model, 0, fixed, resources));
  return out;
}

// One entry per series: the key's model, or per value of the params that
// differ between runs at one point (`others`: a sweep of batch_size and lr
// studied against batch_size gives one model per lr, as `model --by lr`).
json scaling_model_json(const std::vector<std::string>& dirs, const std::string& parameter,
                        const std::vector<std::string>& others, const std::string& key,
                        const std::string& device, bool views) {
  scaling::RunSelection selection;
  selection.parameters = {parameter};
  selection.what = key;
  selection.stat = "mean";
  selection.device = absl::AsciiStrToLower(device);
  std::vector<std::string> warnings;
  absl::StatusOr<scaling::MeasurementSet> set = scaling::read_runs(dirs, selection, &warnings);
  if (!set.ok() && absl::IsInvalidArgument(set.status()) && !others.empty()) {
    selection.by = others;
    warnings.clear();
    absl::StatusOr<scaling::MeasurementSet> grouped =
        scaling::read_runs(dirs, selection, &warnings);
    if (grouped.ok()) set = std::move(grouped);
  }
  json out{{"key", key}, {"device", device}};
  out["warnings"] = warnings;
  if (!set.ok()) {
    out["error"] = std::string(set.status().message());
    return json::array({out});
  }
  if (set->series.empty()) {
    out["error"] = "no measurements";
    return json::array({out});
  }
  json entries = json::array();
  for (const scaling::Series& series : set->series) {
    json entry = out;
    if (!series.group.empty()) {
      std::vector<std::string> values;
      for (const auto& [name, value] : series.group) values.push_back(name + "=" + value);
      entry["group"] = fmt::format("{}", fmt::join(values, ", "));
    }
    entries.push_back(series_model_json(*set, series, std::move(entry), views));
  }
  return entries;
}

}  // namespace

absl::StatusOr<Inputs> classify_inputs(const std::vector<std::string>& inputs) {
  Inputs out;
  if (inputs.empty()) return absl::InvalidArgumentError("no input: give run or sweep directories");
  std::set<std::string> seen;
  for (std::string input : inputs) {
    while (input.size() > 1 && input.back() == '/') input.pop_back();
    const fs::path dir(input);
    std::error_code error;
    if (!fs::exists(dir, error)) {
      return absl::NotFoundError(fmt::format("{}: no such file or directory", shown_path(input)));
    }
    if (!fs::is_directory(dir, error)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: a file, not a run directory, a sweep directory or a directory of runs",
                      shown_path(input)));
    }
    const std::size_t before = out.runs.size();
    // A run, also one that cannot be read (run.json a FIFO, a directory, a
    // symlink loop, or lost beside its rank files): alone, it is the run page,
    // whose reading then fails naming what is wrong (exit 1, as diagnose).
    struct stat run_json;
    if (is_run_directory(dir.string()) || ::lstat((dir / "run.json").c_str(), &run_json) == 0 ||
        holds_run_files(dir.string())) {
      out.runs.push_back(StudyRun{input, "", "", {}});
      out.single_run = inputs.size() == 1;
    } else if (sweep::is_sweep_dir(dir.string())) {
      if (absl::Status status = add_sweep(dir, &out); !status.ok()) return status;
    } else {
      // A directory of runs holds them one level down; a stalls analysis (and a
      // sweep copied without its sweep.json) in its runs/.
      // The one resolver of a set of runs (a directory of runs, a runs/ folder).
      const bool analysis = is_file(dir / kStallsFileName);
      absl::StatusOr<std::vector<std::string>> found = find_run_dirs({input});
      if (!found.ok() && absl::IsNotFound(found.status())) {
        if (!analysis) {
          return absl::InvalidArgumentError(fmt::format(
              "{}: not a trainscope run (no run.json), sweep (no sweep.json), stalls analysis "
              "(no stalls.json) or directory of runs (no subdirectory has a run.json)",
              shown_path(input)));
        }
        found = std::vector<std::string>{};  // an analysis whose runs are gone: its page still
      }
      if (!found.ok()) return found.status();
      const bool in_runs =
          !found->empty() && fs::path(found->front()).parent_path().lexically_normal() ==
                                 (dir / "runs").lexically_normal();
      if (analysis) out.stalls_dirs.push_back(input);
      if (in_runs) order_legs(&*found);  // an analysis's runs as they ran
      for (std::string& run : *found) out.runs.push_back(StudyRun{std::move(run), "", "", {}});
    }
    // The same run given twice (directly and through its sweep) is one row.
    out.runs.erase(
        std::remove_if(out.runs.begin() + static_cast<std::ptrdiff_t>(before), out.runs.end(),
                       [&](const StudyRun& run) {
                         if (run.dir.empty()) return false;
                         std::error_code e;
                         const fs::path canonical = fs::weakly_canonical(run.dir, e);
                         return !seen.insert(e ? run.dir : canonical.string()).second;
                       }),
        out.runs.end());
  }
  return out;
}

absl::StatusOr<json> study_json(const Inputs& inputs, const std::string& scaling_parameter,
                                const ProgressFn& progress) {
  json rows = json::array();
  std::vector<std::string> param_names;
  std::set<std::string> param_seen;
  std::vector<std::pair<std::string, std::string>> keys;
  std::set<std::pair<std::string, std::string>> key_seen;
  const std::size_t n = inputs.runs.size();
  for (std::size_t i = 0; i < n; ++i) {
    const StudyRun& item = inputs.runs[i];
    json row;
    if (item.dir.empty()) {
      json params = json::object();
      for (const auto& [key, value] : item.params) params[key] = value;
      row = json{{"name", item.job},
                 {"status", item.status},
                 {"params", params},
                 {"stats", json::array()},
                 {"duration_s", nullptr}};
    } else {
      if (progress) {
        progress(fmt::format("reading run {}/{}: {}", i + 1, n, item.dir), /*transient=*/true);
      }
      absl::StatusOr<RunData> run = read_run_data(item.dir, ReadOptions{false, false}, progress);
      if (!run.ok()) {
        // One damaged run does not hide the others: it is skipped and named, its row
        // says what is wrong (one policy for a damaged run among many: run_check.hpp).
        warn(fmt::format("{}: skipped: {}", shown_path(item.dir),
                         std::string(run.status().message())));
        row = json{{"name", item.job.empty() ? item.dir : item.job},
                   {"dir", item.dir},
                   {"status", "UNREADABLE"},
                   {"error", run.status().ToString()},
                   {"params", json::object()},
                   {"stats", json::array()},
                   {"duration_s", nullptr}};
      } else {
        for (const std::string& warning : run->warnings) warn(warning);
        row = run_row_json(*run, kTrendPoints);
        row["warnings"] = run->warnings;
      }
    }
    row["job"] = item.job;
    for (const auto& [key, value] : row.at("params").items()) {
      if (param_seen.insert(key).second) param_names.push_back(key);
    }
    for (const json& s : row.at("stats")) {
      std::pair<std::string, std::string> k{s.at("key").get<std::string>(),
                                            s.at("device").get<std::string>()};
      if (key_seen.insert(k).second) keys.push_back(k);
    }
    rows.push_back(std::move(row));
  }
  json key_list = json::array();
  for (const auto& [key, device] : keys) key_list.push_back(json{{"key", key}, {"device", device}});

  json scaling{{"parameter", nullptr}, {"models", json::array()}};
  std::string why_none;
  const std::string parameter = choose_parameter(rows, scaling_parameter, &why_none);
  if (!parameter.empty()) {
    std::vector<std::string> dirs;
    for (const json& row : rows) {
      if (row.value("status", "") == "FINISHED" && row.contains("dir")) {
        dirs.push_back(row.at("dir").get<std::string>());
      }
    }
    scaling["parameter"] = parameter;
    // The other params that vary: runs at one point that differ in them get a
    // model per value (the scaling room refuses to average them as repetitions).
    std::vector<std::string> others;
    {
      std::map<std::string, std::set<std::string>> values;
      for (const json& row : rows) {
        if (row.value("status", "") != "FINISHED" || !row.contains("params")) continue;
        for (const auto& [name, value] : row.at("params").items()) {
          if (name != parameter) values[name].insert(value.dump());
        }
      }
      for (const auto& [name, seen] : values) {
        if (seen.size() > 1) others.push_back(name);
      }
    }
    // Speedup and efficiency mean something only against a param that splits a
    // fixed amount of work (ranks, GPUs, nodes): drawn when the user names it
    // (--scaling PARAM), not for the param the study found varying (a batch size).
    const bool views = !scaling_parameter.empty();
    scaling["views"] = views;
    std::size_t done = 0;
    for (const auto& [key, device] : keys) {
      if (progress) {
        progress(fmt::format("scaling study: {} {} ({}/{})", key, device, ++done, keys.size()),
                 /*transient=*/true);
      }
      for (json& entry : scaling_model_json(dirs, parameter, others, key, device, views)) {
        scaling["models"].push_back(std::move(entry));
      }
    }
  } else {
    scaling["why_none"] = why_none;
  }
  // The stalls analyses given, then those the runs belong to (each once).
  json analyses = json::array();
  std::set<std::string> analysis_seen;
  const auto add_analysis = [&](const std::string& dir) {
    std::error_code e;
    const fs::path canonical = fs::weakly_canonical(dir, e);
    if (!analysis_seen.insert(e ? dir : canonical.string()).second) return;
    analyses.push_back(stalls_analysis_json(dir));
  };
  for (const std::string& dir : inputs.stalls_dirs) add_analysis(dir);
  for (const json& row : rows) {
    if (!row.contains("tags") || !row.at("tags").is_object() || !row.contains("dir")) continue;
    const std::string dir = stalls_analysis_dir_of(
        row.at("dir").get<std::string>(), row.at("tags").get<std::map<std::string, std::string>>());
    if (!dir.empty()) add_analysis(dir);
  }
  return json{{"runs", std::move(rows)},       {"params", param_names},
              {"keys", std::move(key_list)},   {"sweeps", inputs.sweep_dirs},
              {"scaling", std::move(scaling)}, {"stalls_analyses", std::move(analyses)}};
}

}  // namespace trainscope::report::detail
