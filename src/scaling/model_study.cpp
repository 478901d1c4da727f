#include "trainscope/scaling/model_study.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/svg_plot.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::scaling {
namespace {

// The payload that marks an error about an option (its field name).
constexpr char kOptionPayload[] = "trainscope.scaling/study-option";

absl::Status option_error(const char* option, const std::string& what) {
  absl::Status status = absl::InvalidArgumentError(fmt::format("{}: {}", option, what));
  status.SetPayload(kOptionPayload, absl::Cord(option));
  return status;
}

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

int index_of(const std::vector<std::string>& names, const std::string& name) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool selected(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

// What the options name, as positions in the input's parameters.
struct Selection {
  std::vector<std::vector<double>> points;  // predict, in parameter order
  int scaling_index = -1;
  int plot_index = 0;
};

absl::StatusOr<Selection> resolve_selection(const ModelStudyOptions& options,
                                            const std::vector<std::string>& parameters) {
  Selection out;
  for (const auto& named : options.predict) {
    std::vector<double> coordinate(parameters.size(), stats::kNaN);
    for (const auto& [name, value] : named) {
      const int index = index_of(parameters, name);
      if (index < 0) {
        return option_error("predict", fmt::format("'{}' is not a parameter of the input", name));
      }
      coordinate[static_cast<std::size_t>(index)] = value;
    }
    for (std::size_t i = 0; i < coordinate.size(); ++i) {
      if (std::isnan(coordinate[i])) {
        return option_error("predict", fmt::format("no value for parameter '{}'", parameters[i]));
      }
    }
    out.points.push_back(std::move(coordinate));
  }
  if (!options.scaling.empty()) {
    out.scaling_index = index_of(parameters, options.scaling);
    if (out.scaling_index < 0) {
      return option_error("scaling",
                          fmt::format("'{}' is not a parameter of the input", options.scaling));
    }
  }
  if (!options.plot_x.empty()) {
    out.plot_index = index_of(parameters, options.plot_x);
    if (out.plot_index < 0) {
      return option_error("plot_x",
                          fmt::format("'{}' is not a parameter of the input", options.plot_x));
    }
  }
  return out;
}

// Extra-P refuses an input where a series lacks some of the input's
// coordinates; kExtrap does too, naming every such series (the default
// modeler models the points it has: fit_series warns).
absl::Status check_complete(const MeasurementSet& set, const ModelStudyOptions& options) {
  if (options.model.modeler != Modeler::kExtrap) return absl::OkStatus();
  std::string refusals;
  for (const Series& series : set.series) {
    const absl::Status complete = check_coordinates(set, series);
    if (!complete.ok()) refusals += fmt::format("  {}\n", std::string(complete.message()));
  }
  if (refusals.empty()) return absl::OkStatus();
  const std::string file = options.inputs.empty() ? std::string("input") : options.inputs.front();
  return absl::InvalidArgumentError(fmt::format(
      "{}: Extra-P refuses this input (InvalidExperimentError: the number of measurements does "
      "not match the number of coordinates):\n{}the default modeler (without --modeler extrap) "
      "models the points measured",
      file, refusals));
}

// Speedup, efficiency and cost against the scaling parameter, measured and
// modeled (at the measured resources and the predicted points); the other
// parameters at the first point's values.
void add_scaling_views(const Series& series, const Selection& selection, Measure measure,
                       ModeledSeries* out) {
  const int index = selection.scaling_index;
  const std::vector<double>& fixed = series.points.front().coordinate;
  if (auto measured = measured_scaling(series, index, fixed, measure); measured.ok()) {
    out->measured_scaling = std::move(*measured);
  }
  std::vector<double> resources;
  for (const ScalingView& v : out->measured_scaling) resources.push_back(v.resource);
  for (const auto& p : selection.points) resources.push_back(p[static_cast<std::size_t>(index)]);
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  if (resources.empty()) return;
  if (auto modeled = modeled_scaling(out->model, index, fixed, resources); modeled.ok()) {
    out->modeled_scaling = std::move(*modeled);
  }
}

// " [lr=0.1, seed=2]" of a group ("" for none).
std::string group_text(const std::vector<std::pair<std::string, std::string>>& group) {
  std::string out;
  for (const auto& [name, value] : group) {
    out += fmt::format("{}{}={}", out.empty() ? " [" : ", ", name, value);
  }
  return out.empty() ? out : out + "]";
}

// "BATCH / mean" or "BATCH / mean [lr=0.1]".
std::string series_name(const Series& series) {
  return fmt::format("{} / {}{}", series.callpath, series.metric, group_text(series.group));
}

// The series' model, predictions and views; a failure's line otherwise.
absl::StatusOr<ModeledSeries> model_series(const Series& series, const MeasurementSet& set,
                                           const ModelStudyOptions& options,
                                           const Selection& selection) {
  absl::StatusOr<Model> model = fit_series(set, series, options.model);
  if (!model.ok() && !series.group.empty()) {  // which group's fit failed
    return absl::Status(model.status().code(),
                        fmt::format("{}{}: {}", series.callpath, group_text(series.group),
                                    std::string(model.status().message())));
  }
  if (!model.ok()) return model.status();
  ModeledSeries out;
  out.callpath = series.callpath;
  out.metric = series.metric;
  out.group = series.group;
  out.points = series.points.size();
  for (const Point& p : series.points) out.values += p.values.size();
  out.model = std::move(*model);
  if (!selection.points.empty()) {
    absl::StatusOr<std::vector<Prediction>> predictions =
        predict_with_band(out.model, series, selection.points, options.band);
    if (!predictions.ok()) {
      return absl::Status(
          predictions.status().code(),
          fmt::format("{}: {}", series_name(series), std::string(predictions.status().message())));
    }
    out.predictions = std::move(*predictions);
  }
  if (selection.scaling_index >= 0 && !series.points.empty()) {
    add_scaling_views(series, selection, options.model.extrap.measure, &out);
  }
  return out;
}

absl::StatusOr<MeasurementSet> read_inputs(const ModelStudyOptions& options,
                                           std::vector<std::string>* warnings) {
  std::vector<std::string> directories, files;
  for (const std::string& input : options.inputs) {
    (is_directory(input) ? directories : files).push_back(input);
  }
  if (!directories.empty() && !files.empty()) {
    return absl::InvalidArgumentError("give either run directories or one Extra-P file, not both");
  }
  if (!directories.empty()) {
    if (options.runs.parameters.empty()) {
      return absl::InvalidArgumentError(
          "run directories need --params (the run params to model against)");
    }
    return read_runs(directories, options.runs, warnings);
  }
  if (files.size() != 1) return absl::InvalidArgumentError("give one Extra-P measurement file");
  if (!options.runs.by.empty() || !options.runs.repetitions.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: --by and --repetition name run params: they apply to runs, not to an Extra-P file",
        files.front()));
  }
  return read_extrap_file(files.front());
}

// printf into *out: the text `trainscope model` printed with printf, unchanged.
void appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const std::size_t old = out->size();
    out->resize(old + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(out->data() + old, static_cast<std::size_t>(n) + 1, format, again);
    out->resize(old + static_cast<std::size_t>(n));
  }
  va_end(again);
}

std::string point_text(const std::vector<std::string>& parameters,
                       const std::vector<double>& coordinate) {
  std::string out;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    out += fmt::format("{}{}={:g}", i == 0 ? "" : ",", parameters[i], coordinate[i]);
  }
  return out;
}

void append_scaling_views(std::string* out, const ModeledSeries& r, const std::string& parameter) {
  appendf(out, "  scaling vs %s:\n    %-9s %10s %14s %10s %10s %14s\n", parameter.c_str(), "from",
          parameter.c_str(), "time", "speedup", "efficiency", "cost");
  auto row = [out](const char* from, const ScalingView& v) {
    appendf(out, "    %-9s %10s %14.6g %10.4g %10.4g %14.6g\n", from,
            fmt::format("{:g}", v.resource).c_str(), v.time, v.speedup, v.efficiency, v.cost);
  };
  for (const auto& v : r.measured_scaling) row("measured", v);
  for (const auto& v : r.modeled_scaling) row("model", v);
}

void append_text(std::string* out, const ModeledSeries& r, const StudiedSeries& input,
                 const ModelDocument& document, const ModelStudyOptions& options) {
  const Model& model = r.model;
  appendf(out, "%s / %s%s  (%zu points, %zu values, modeler %s)\n", r.callpath.c_str(),
          r.metric.c_str(), group_text(r.group).c_str(), input.points, input.values,
          modeler_name(document.modeler));
  appendf(out, "  model:   %s\n", model.formula().c_str());
  // Too few points: said first, in plain words (the model's first warning).
  const bool noted = model.too_few_points && !model.warnings.empty();
  if (noted) appendf(out, "  caution: %s\n", model.warnings.front().c_str());
  appendf(out, "  costs:   RSS %.4g  SMAPE %.4g%%  adj. R^2 %.6g%s  RE %.4g%s\n", model.costs.rss,
          model.costs.smape, model.costs.ar2,
          model.is_constant() && model.costs.ar2 == 0 ? " (a constant explains no variation)" : "",
          model.costs.re, input.leave_one_out ? "  (leave-one-out)" : "");
  appendf(out, "  python:  %s\n", model.python().c_str());
  const std::vector<std::string> ids = model.identifiers();
  for (std::size_t i = 0; i < ids.size() && i < model.parameters.size(); ++i) {
    if (ids[i] != model.parameters[i]) {
      appendf(out, "  (parameter %s is %s in the expressions)\n", model.parameters[i].c_str(),
              ids[i].c_str());
    }
  }
  appendf(out, "  c++:     %s\n", model.cpp().c_str());
  for (const Prediction& p : r.predictions) {
    if (std::isinf(p.lower) && std::isinf(p.upper)) {
      appendf(out, "  predict: %s -> %.6g  (band unbounded: no degree of freedom left)\n",
              point_text(document.parameters, p.coordinate).c_str(), p.value);
      continue;
    }
    appendf(out, "  predict: %s -> %.6g  [%.6g, %.6g] (%g%% band)\n",
            point_text(document.parameters, p.coordinate).c_str(), p.value, p.lower, p.upper,
            options.band.confidence * 100);
  }
  if (!r.measured_scaling.empty() || !r.modeled_scaling.empty()) {
    append_scaling_views(out, r, options.scaling);
  }
  for (std::size_t i = noted ? 1 : 0; i < model.warnings.size(); ++i) {
    appendf(out, "  warning: %s\n", model.warnings[i].c_str());
  }
  appendf(out, "\n");
}

}  // namespace

std::string plot_path(const std::string& path, std::size_t index, std::size_t count) {
  if (count <= 1) return path;
  const std::size_t dot = path.rfind(".svg");
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  return fmt::format("{}-{}.svg", stem, index + 1);
}

std::optional<std::string> study_option_error(const absl::Status& status) {
  const auto option = status.GetPayload(kOptionPayload);
  if (!option) return std::nullopt;
  return std::string(*option);
}

absl::StatusOr<ModelStudy> study_measurements(const MeasurementSet& set,
                                              const ModelStudyOptions& options) {
  absl::StatusOr<Selection> selection = resolve_selection(options, set.parameters);
  if (!selection.ok()) return selection.status();
  if (absl::Status complete = check_complete(set, options); !complete.ok()) return complete;

  ModelStudy out;
  out.document.parameters = set.parameters;
  out.document.modeler = options.model.modeler;
  std::vector<const Series*> modeled;
  for (const Series& series : set.series) {
    if (!selected(options.callpaths, series.callpath) ||
        !selected(options.metrics, series.metric)) {
      continue;
    }
    absl::StatusOr<ModeledSeries> result = model_series(series, set, options, *selection);
    if (!result.ok()) {
      out.failures.emplace_back(std::string(result.status().message()));
      continue;
    }
    StudiedSeries facts;
    facts.points = series.points.size();
    for (const Point& p : series.points) facts.values += p.values.size();
    facts.leave_one_out = set.parameters.size() == 1 && options.model.extrap.use_crossvalidation &&
                          !result->model.is_constant();
    out.series.push_back(facts);
    out.document.models.push_back(*std::move(result));
    modeled.push_back(&series);
  }
  if (out.document.models.empty() && out.failures.empty()) {
    return absl::NotFoundError("no region/metric of the input matches --callpath/--metric");
  }
  if (!options.plot.empty()) {
    for (std::size_t i = 0; i < modeled.size(); ++i) {
      PlotOptions plot;
      plot.x_parameter = selection->plot_index;
      plot.band = options.band;
      const std::string path = plot_path(options.plot, i, modeled.size());
      absl::StatusOr<std::string> svg = render_svg(out.document.models[i].model, *modeled[i], plot);
      if (!svg.ok()) {
        out.failures.push_back(
            fmt::format("plot {}: {}", path, std::string(svg.status().message())));
        continue;
      }
      out.plots.push_back(StudyPlot{path, *std::move(svg)});
    }
  }
  return out;
}

absl::StatusOr<ModelStudy> model_study(const ModelStudyOptions& options,
                                       std::vector<std::string>* warnings) {
  absl::StatusOr<MeasurementSet> set = read_inputs(options, warnings);
  if (!set.ok()) return set.status();
  absl::StatusOr<ModelStudy> study = study_measurements(*set, options);
  if (!study.ok()) return study.status();
  for (const StudyPlot& plot : study->plots) {
    if (absl::Status written = trainscope::detail::write_file_atomically(plot.path, plot.svg);
        !written.ok()) {
      study->failures.push_back(
          fmt::format("plot {}: {}", plot.path, std::string(written.message())));
    }
  }
  return study;
}

std::string format_model_study(const ModelStudy& study, const ModelStudyOptions& options) {
  std::string out;
  for (std::size_t i = 0; i < study.document.models.size() && i < study.series.size(); ++i) {
    append_text(&out, study.document.models[i], study.series[i], study.document, options);
  }
  return out;
}

}  // namespace trainscope::scaling
