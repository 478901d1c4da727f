#include "trainscope/report/report.hpp"
#include "common/markup.hpp"

#include <chrono>
#include <fstream>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/files.hpp"
#include "common/progress_line.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "report/assets.hpp"
#include "report/compare_page.hpp"
#include "report/diagnosis_data.hpp"
#include "report/run_data.hpp"
#include "report/stalls_data.hpp"
#include "report/study.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/version.hpp"

namespace trainscope::report {
namespace {

using nlohmann::json;

constexpr std::size_t kMinPoints = 16;

std::string html_escape(std::string_view text) { return ::trainscope::detail::escape_markup(text); }

// JSON inside <script type="application/json">: no "</script" or "<!--" can
// occur once every '<' (only ever inside a string) is written as \u003c.
std::string script_json(const json& data) {
  const std::string text =
      data.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string page(const std::string& title, const json& data) {
  std::string out;
  const std::string body = script_json(data);
  out.reserve(body.size() + std::char_traits<char>::length(detail::kChartJs) + 65536);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<meta name=\"generator\" content=\"trainscope " TRAINSCOPE_VERSION_STRING "\">\n";
  out += "<title>" + html_escape(title) + "</title>\n<style>\n";
  out += detail::kPageCss;
  out += "\n</style>\n<script>\n";
  out += detail::kChartJs;
  out +=
      "\n</script>\n</head>\n<body>\n<div id=\"app\"><noscript>This page draws its charts "
      "and tables with JavaScript.</noscript></div>\n";
  out += "<script type=\"application/json\" id=\"trainscope-data\">";
  out += body;
  out += "</script>\n<script>\n";
  out += detail::kPageJs;
  out += "\n</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace

std::string chart_library() {
  const std::string version = detail::kChartJsVersion;
  if (std::string_view(detail::kChartJs).empty()) return {};
  return version.empty() ? std::string("Chart.js") : "Chart.js " + version;
}

absl::StatusOr<std::string> render_report(const ReportOptions& options) {
  if (std::string_view(detail::kChartJs).empty()) {
    return absl::FailedPreconditionError(
        "this trainscope was built without Chart.js, which the report page embeds: install "
        "Debian's libjs-chart.js (scripts/setup.sh does) and rebuild, or configure with "
        "-DTRAINSCOPE_CHARTJS=/path/to/chart.min.js");
  }
  const std::size_t max_points = std::max(options.max_points, kMinPoints);
  const auto started = std::chrono::steady_clock::now();

  json data;
  std::string title = options.title;
  data["generator"] = "trainscope " TRAINSCOPE_VERSION_STRING;
  data["chart_library"] = chart_library();
  data["max_points"] = max_points;
  data["inputs"] = options.inputs;
  if (options.compare) {
    absl::StatusOr<json> comparison =
        detail::comparison_page(options.inputs, max_points, options.progress);
    if (!comparison.ok()) return comparison.status();
    data["kind"] = "compare";
    data.update(*comparison);
    if (title.empty()) {
      // A side of one run by its name (a side given as a run directory is
      // labelled by the directory, whose name is the run id).
      const auto side_title = [](const json& side) {
        const json& runs = side["runs"];
        if (runs.is_array() && runs.size() == 1) {
          const std::string name = runs[0].value("name", "");
          if (!name.empty()) return name;
        }
        return side["label"].get<std::string>();
      };
      const json& c = data["comparison"];
      title = fmt::format("{} vs {}", side_title(c["b"]), side_title(c["a"]));
    }
    data["title"] = title;
    return page(title, data);
  }
  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs(options.inputs);
  if (!inputs.ok()) return inputs.status();
  if (inputs->single_run) {
    absl::StatusOr<detail::RunData> run =
        detail::read_run_data(inputs->runs.front().dir, detail::ReadOptions{}, options.progress);
    if (!run.ok()) return run.status();
    for (const std::string& warning : run->warnings) warn(warning);  // also on the page
    if (options.progress) {
      options.progress(
          fmt::format(
              "read {}: {} region rows, {} hardware readings, {} metric points in {:.1f} s",
              run->dir, run->region_rows, run->hardware_rows, run->metric_rows,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()),
          /*transient=*/false);
    }
    data["kind"] = "run";
    data.update(detail::run_page_json(*run, max_points));
    data["diagnosis"] = detail::run_diagnosis_json(run->dir);
    data["stalls"] = detail::run_stalls_json(*run, max_points);
    data["stalls_analysis"] = nullptr;
    if (const std::string analysis = detail::stalls_analysis_dir_of(run->dir, run->info.tags);
        !analysis.empty()) {
      json a = detail::stalls_analysis_json(analysis);
      const auto leg = run->info.tags.find(detail::kStallsLegTag);
      a["leg"] = leg != run->info.tags.end() ? leg->second : std::string();
      data["stalls_analysis"] = std::move(a);
    }
    if (title.empty()) title = run->info.name.empty() ? run->info.id : run->info.name;
  } else {
    absl::StatusOr<json> study =
        detail::study_json(*inputs, options.scaling_parameter, options.progress);
    if (!study.ok()) return study.status();
    data["kind"] = "study";
    data.update(*study);
    if (options.progress) {
      options.progress(
          fmt::format(
              "read {} runs in {:.1f} s", inputs->runs.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()),
          /*transient=*/false);
    }
    if (title.empty() && !inputs->sweep_name.empty()) title = "sweep " + inputs->sweep_name;
    if (title.empty() && !inputs->stalls_dirs.empty()) {
      title = "data stalls " + inputs->stalls_dirs.front();
    }
    if (title.empty()) title = "trainscope study";
  }
  data["title"] = title;
  return page(title, data);
}

namespace {

// A file name from `name`: [A-Za-z0-9._-] kept, the rest '_', never empty or hidden.
std::string page_file_name(std::string name) {
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  }
  if (name.empty() || name.front() == '.') name.insert(0, "report");
  return name + ".html";
}

// The last component of a path ("runs/abc/" -> "abc").
std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<std::string> default_page_path_of(const ReportOptions& options);

absl::StatusOr<std::string> default_page_path(const ReportOptions& options) {
  absl::StatusOr<std::string> path = default_page_path_of(options);
  if (!path.ok()) return path;
  // A page of ours is replaced (the report of the same run, again); any other
  // file of that name is not overwritten unasked.
  std::ifstream existing(*path, std::ios::binary);
  if (existing) {
    std::string head(4096, '\0');
    existing.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(existing.gcount()));
    if (head.find("<meta name=\"generator\" content=\"trainscope") == std::string::npos) {
      return absl::AlreadyExistsError(
          fmt::format("{} exists and is not a trainscope page: name the page with -o FILE", *path));
    }
  }
  return path;
}

absl::StatusOr<std::string> default_page_path_of(const ReportOptions& options) {
  if (options.inputs.empty()) return absl::InvalidArgumentError("no input to name the page after");
  if (options.compare && options.inputs.size() == 2) {
    return page_file_name(base_name(options.inputs[1]) + "-vs-" + base_name(options.inputs[0]));
  }
  absl::StatusOr<detail::Inputs> inputs = detail::classify_inputs(options.inputs);
  if (!inputs.ok()) return inputs.status();
  if (inputs->single_run) {
    absl::StatusOr<RunReader> run = RunReader::Open(inputs->runs.front().dir);
    if (!run.ok()) return run.status();
    return page_file_name(run->info().name.empty() ? run->info().id : run->info().name);
  }
  if (!inputs->sweep_name.empty()) return page_file_name(inputs->sweep_name);
  return page_file_name(base_name(options.inputs.front()));
}

absl::Status write_report(const ReportOptions& options, const std::string& path) {
  absl::StatusOr<std::string> html = render_report(options);
  if (!html.ok()) return html.status();
  return write_report_page(*html, path);
}

absl::Status write_report_page(const std::string& html, const std::string& path) {
  return trainscope::detail::write_file_atomically(path, html, ".report-");
}

std::function<void(const std::string&, bool)> progress_printer(std::FILE* out, bool terminal) {
  auto line = std::make_shared<trainscope::detail::ProgressLine>(out, terminal, "report");
  return [line](const std::string& text, bool transient) {
    if (transient) {
      line->show(text);
    } else {
      line->print(text);
    }
  };
}

}  // namespace trainscope::report
