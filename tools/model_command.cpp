// `trainscope model`: from runs or Extra-P measurement files to a scaling
// model per (region, metric), its costs, predictions with a band, derived
// scaling views, and an SVG plot.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/run_input.hpp"
#include "trainscope/scaling/svg_plot.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace trainscope::cli {
namespace {

namespace sc = trainscope::scaling;

constexpr char kModelDescription[] =
    "Fits a scaling model f(p, ...) = c0 + sum c_k * p^i * log2(p)^j (Extra-P's PMNF) to\n"
    "each region/metric of the input, prints it with its costs, and predicts.\n"
    "\n"
    "INPUT is an Extra-P measurement file (text .txt, JSON .json, JSON Lines .jsonl),\n"
    "or run directories made by trainscope (or directories holding runs): a point is\n"
    "one set of run params, runs with equal params are repetitions.\n";

constexpr char kModelFooter[] =
    "Examples:\n"
    "  trainscope model --params p --key EPOCH runs/\n"
    "  trainscope model --modeler extrap --option allow_negative_exponents=True m.txt\n"
    "  trainscope model --predict p=256 --svg epoch.svg --json m.jsonl\n"
    "\n"
    "Exit status: 0 modeled, 1 an input could not be read or modeled, 2 bad usage.\n";

struct ModelArgs {
  std::vector<std::string> inputs;
  sc::ModelOptions options;
  std::vector<std::string> callpaths, metrics;
  sc::RunSelection runs;
  bool runs_params_given = false;
  std::vector<std::map<std::string, double>> predict;
  sc::BandOptions band;
  std::optional<std::string> scaling_parameter;
  std::optional<std::string> svg;
  std::optional<std::string> plot_x;
  bool json = false;
};

// --- Command line ----------------------------------------------------------

bool parse_double(const std::string& text, double* out) {
  return absl::SimpleAtod(text, out) && std::isfinite(*out);
}

// The value of a name parser (parse_modeler, ...), or the usage error
// "FLAG: why".
template <typename T>
T named_value(const char* flag, absl::StatusOr<T> parsed) {
  if (!parsed.ok()) bad_value(fmt::format("{}: {}", flag, std::string(parsed.status().message())));
  return *std::move(parsed);
}

// "p=64,q=512" -> {p: 64, q: 512}.
std::map<std::string, double> parse_point(const std::string& value) {
  std::map<std::string, double> point;
  for (const std::string& pair : std::vector<std::string>(absl::StrSplit(value, ','))) {
    const std::size_t eq = pair.find('=');
    double number = 0;
    if (eq == std::string::npos || !parse_double(pair.substr(eq + 1), &number)) {
      bad_value(fmt::format("--predict '{}': expected NAME=NUMBER[,NAME=NUMBER...]", value));
    }
    point[pair.substr(0, eq)] = number;
  }
  return point;
}

void add_modeler_option(CommandLine* line, ModelArgs* out) {
  line->add_value("--option", "KEY=VALUE",
                  "Extra-P modeler option, e.g. allow_negative_exponents=True,\n"
                  "allow_log_terms=False, poly_exponents=1,2 (repeatable)",
                  [out](const std::string& value) {
                    const std::size_t eq = value.find('=');
                    if (eq == std::string::npos) {
                      bad_value(fmt::format("--option '{}': expected KEY=VALUE", value));
                    }
                    const absl::Status status =
                        out->options.extrap.set(value.substr(0, eq), value.substr(eq + 1));
                    if (!status.ok()) {
                      bad_value(fmt::format("--option: {}", std::string(status.message())));
                    }
                  });
}

void add_modeling_options(CommandLine* line, ModelArgs* out) {
  line->group("Modeling");
  line->add_value("--modeler", "NAME",
                  "trainscope (default): Extra-P's search plus negative exponents\n"
                  "(strong scaling), rejecting models that predict values <= 0\n"
                  "up to 8x the largest measured point (--physical-up-to);\n"
                  "extrap: Extra-P 4.2.5's default modeler, exactly",
                  [out](const std::string& value) {
                    out->options.modeler = named_value("--modeler", sc::parse_modeler(value));
                  });
  add_modeler_option(line, out);
  line->add_value(
      "--physical-up-to", "F",
      "trainscope modeler: vet models up to F x the largest point\n"
      "(default 8; 0 turns the veto off)",
      [out](const std::string& value) {
        double factor = 0;
        if (!parse_double(value, &factor) || factor < 0) {
          bad_value(fmt::format("--physical-up-to '{}': a factor >= 1, or 0 to turn the veto off",
                                value));
        }
        out->options.reject_nonphysical = factor > 0;
        out->options.extrapolation_factor = factor;
      });
  line->add_value(
      "--significance", "A",
      "trainscope modeler: keep a term only when an F-test against the\n"
      "constant (noise from the repetitions) rejects at level A\n"
      "(default 0.05; 0 turns the test off)",
      [out](const std::string& value) {
        double level = 0;
        if (!parse_double(value, &level) || level < 0 || level >= 1) {
          bad_value(fmt::format("--significance '{}': a level in [0, 1), e.g. 0.05", value));
        }
        out->options.significance = level;
      });
  line->add_value("--measure", "M", "mean (default) | median | minimum | maximum of repetitions",
                  [out](const std::string& value) {
                    const sc::Measure measure = named_value("--measure", sc::parse_measure(value));
                    out->options.extrap.measure = measure;
                    out->band.measure = measure;
                  });
  line->add_value("--callpath", "NAME", "only this region (repeatable)",
                  [out](const std::string& value) { out->callpaths.push_back(value); });
  line->add_value("--metric", "NAME", "only this metric (repeatable)",
                  [out](const std::string& value) { out->metrics.push_back(value); });
}

void add_run_directory_options(CommandLine* line, ModelArgs* out) {
  line->group("Run directories");
  line->add_value("--params", "P[,Q..]", "run params that are the model's parameters (required)",
                  [out](const std::string& value) {
                    out->runs.parameters = absl::StrSplit(value, ',');
                    out->runs_params_given = true;
                  });
  line->add_value("--key", "KEY",
                  "what is measured: a region key (BATCH, EPOCH, FORWARD, ...)\n"
                  "or metric:NAME for a logged metric; default BATCH",
                  &out->runs.what);
  line->add_value("--stat", "S",
                  "mean (default) | median | min | max | total | count | p95 |\n"
                  "p99 | last | rate (count per second)",
                  &out->runs.stat);
  line->add_value("--device", "D", "cpu (default) | gpu region times",
                  [out](const std::string& value) {
                    if (value != "cpu" && value != "gpu") {
                      bad_value(fmt::format("--device '{}': use cpu or gpu", value));
                    }
                    out->runs.device = value;
                  });
  line->add_value("--ranks", "A", "mean (default, as Extra-Deep) | max (slowest rank) | min | sum",
                  [out](const std::string& value) {
                    out->runs.ranks = named_value("--ranks", sc::parse_rank_aggregation(value));
                  });
  line->add_value("--scale", "X", "multiply every value by X (e.g. samples per batch)",
                  [out](const std::string& value) {
                    if (!parse_double(value, &out->runs.scale)) {
                      bad_value(fmt::format("--scale '{}' is not a number", value));
                    }
                  });
}

void add_band_options(CommandLine* line, ModelArgs* out) {
  line->add_value("--predict", "P=V[,Q=W]", "predict at this point, with a band (repeatable)",
                  [out](const std::string& value) { out->predict.push_back(parse_point(value)); });
  line->add_value("--confidence", "C", "band coverage, default 0.9",
                  [out](const std::string& value) {
                    double& confidence = out->band.confidence;
                    if (!parse_double(value, &confidence) || confidence <= 0 || confidence >= 1) {
                      bad_value(fmt::format("--confidence '{}': a number between 0 and 1", value));
                    }
                  });
  line->add_value(
      "--resamples", "N", "bootstrap resamples for the band, default 400",
      [out](const std::string& value) {
        if (!absl::SimpleAtoi(value, &out->band.resamples) || out->band.resamples < 10) {
          bad_value(fmt::format("--resamples '{}': an integer >= 10", value));
        }
      });
}

void add_output_options(CommandLine* line, ModelArgs* out) {
  line->group("Output");
  add_band_options(line, out);
  line->add_value("--scaling", "P", "speedup, parallel efficiency and cost against resource P",
                  &out->scaling_parameter);
  line->add_value("--svg", "FILE",
                  "plot measured points, model and extrapolation band; with\n"
                  "several series, FILE-<n>.svg per series",
                  &out->svg);
  line->add_value("--plot-x", "P", "the plot's x parameter (default: the first)", &out->plot_x);
  line->add_flag("--json", "one JSON document on stdout (for tools)", &out->json);
}

// nullopt with *exit_code set when there is nothing to model (help shown, or
// bad usage).
std::optional<ModelArgs> parse(CommandLine* line, const std::vector<std::string>& args,
                               int* exit_code) {
  ModelArgs out;
  add_modeling_options(line, &out);
  add_run_directory_options(line, &out);
  add_output_options(line, &out);
  line->add_positionals("INPUT", &out.inputs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line->parse(args)) {
    *exit_code = *done;
    return std::nullopt;
  }
  if (out.inputs.empty()) {
    *exit_code = line->usage_error("no input given");
    return std::nullopt;
  }
  return out;
}

// --- Output ----------------------------------------------------------------

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

const char* modeler_name(sc::Modeler m) {
  return m == sc::Modeler::kExtrap ? "extrap" : "trainscope";
}

nlohmann::ordered_json factor_json(const sc::Factor& f,
                                   const std::vector<std::string>& parameters) {
  nlohmann::ordered_json j;
  j["parameter"] = parameters[static_cast<std::size_t>(f.parameter)];
  j["poly"] = f.poly.text;
  j["poly_value"] = f.poly.value;
  j["log"] = f.log.text;
  j["log_value"] = f.log.value;
  return j;
}

// NaN/inf are not JSON: null.
nlohmann::ordered_json number(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

std::string point_text(const std::vector<std::string>& parameters,
                       const std::vector<double>& coordinate) {
  std::string out;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    out += fmt::format("{}{}={:g}", i == 0 ? "" : ",", parameters[i], coordinate[i]);
  }
  return out;
}

struct SeriesResult {
  const sc::Series* series = nullptr;
  sc::Model model;
  std::vector<sc::Prediction> predictions;
  std::vector<sc::ScalingView> measured_view, modeled_view;
};

void print_scaling_views(const SeriesResult& r, const std::string& parameter) {
  std::printf("  scaling vs %s:\n    %-9s %10s %14s %10s %10s %14s\n", parameter.c_str(), "from",
              parameter.c_str(), "time", "speedup", "efficiency", "cost");
  auto row = [](const char* from, const sc::ScalingView& v) {
    std::printf("    %-9s %10s %14.6g %10.4g %10.4g %14.6g\n", from,
                fmt::format("{:g}", v.resource).c_str(), v.time, v.speedup, v.efficiency, v.cost);
  };
  for (const auto& v : r.measured_view) row("measured", v);
  for (const auto& v : r.modeled_view) row("model", v);
}

void print_text(const SeriesResult& r, const sc::MeasurementSet& set, const ModelArgs& args) {
  std::size_t repetitions = 0;
  for (const sc::Point& p : r.series->points) repetitions += p.values.size();
  std::printf("%s / %s  (%zu points, %zu values, modeler %s)\n", r.series->callpath.c_str(),
              r.series->metric.c_str(), r.series->points.size(), repetitions,
              modeler_name(args.options.modeler));
  std::printf("  model:   %s\n", r.model.formula().c_str());
  const bool loo = set.parameters.size() == 1 && args.options.extrap.use_crossvalidation &&
                   !r.model.is_constant();
  std::printf("  costs:   RSS %.4g  SMAPE %.4g%%  adj. R^2 %.6g  RE %.4g%s\n", r.model.costs.rss,
              r.model.costs.smape, r.model.costs.ar2, r.model.costs.re,
              loo ? "  (leave-one-out)" : "");
  std::printf("  python:  %s\n", r.model.python().c_str());
  const std::vector<std::string> ids = r.model.identifiers();
  for (std::size_t i = 0; i < ids.size() && i < r.model.parameters.size(); ++i) {
    if (ids[i] != r.model.parameters[i]) {
      std::printf("  (parameter %s is %s in the expressions)\n", r.model.parameters[i].c_str(),
                  ids[i].c_str());
    }
  }
  std::printf("  c++:     %s\n", r.model.cpp().c_str());
  for (const sc::Prediction& p : r.predictions) {
    std::printf("  predict: %s -> %.6g  [%.6g, %.6g] (%g%% band)\n",
                point_text(set.parameters, p.coordinate).c_str(), p.value, p.lower, p.upper,
                args.band.confidence * 100);
  }
  if (!r.measured_view.empty() || !r.modeled_view.empty()) {
    print_scaling_views(r, *args.scaling_parameter);
  }
  for (const std::string& w : r.model.warnings) std::printf("  warning: %s\n", w.c_str());
  std::printf("\n");
}

nlohmann::ordered_json views_json(const std::vector<sc::ScalingView>& views) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& v : views) {
    out.push_back({{"resource", number(v.resource)},
                   {"time", number(v.time)},
                   {"speedup", number(v.speedup)},
                   {"efficiency", number(v.efficiency)},
                   {"cost", number(v.cost)}});
  }
  return out;
}

nlohmann::ordered_json predictions_json(const std::vector<sc::Prediction>& predictions,
                                        const std::vector<std::string>& parameters) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const sc::Prediction& p : predictions) {
    nlohmann::ordered_json point;
    for (std::size_t i = 0; i < parameters.size(); ++i) point[parameters[i]] = p.coordinate[i];
    out.push_back({{"point", point},
                   {"value", number(p.value)},
                   {"lower", number(p.lower)},
                   {"upper", number(p.upper)}});
  }
  return out;
}

nlohmann::ordered_json result_json(const SeriesResult& r, const sc::MeasurementSet& set) {
  nlohmann::ordered_json j;
  j["callpath"] = r.series->callpath;
  j["metric"] = r.series->metric;
  j["formula"] = r.model.formula();
  j["python"] = r.model.python();
  j["cpp"] = r.model.cpp();
  // How the parameters are named in "python" and "cpp" (valid identifiers).
  nlohmann::json identifiers = nlohmann::json::object();
  const std::vector<std::string> ids = r.model.identifiers();
  for (std::size_t i = 0; i < ids.size() && i < r.model.parameters.size(); ++i) {
    identifiers[r.model.parameters[i]] = ids[i];
  }
  j["identifiers"] = std::move(identifiers);
  j["constant"] = number(r.model.constant);
  j["terms"] = nlohmann::ordered_json::array();
  for (const sc::Term& t : r.model.terms) {
    nlohmann::ordered_json term;
    term["coefficient"] = number(t.coefficient);
    term["factors"] = nlohmann::ordered_json::array();
    for (const sc::Factor& f : t.factors) term["factors"].push_back(factor_json(f, set.parameters));
    j["terms"].push_back(std::move(term));
  }
  const sc::ModelCosts& c = r.model.costs;
  j["costs"] = {{"rss", number(c.rss)},     {"rrss", number(c.rrss)}, {"nrss", number(c.nrss)},
                {"smape", number(c.smape)}, {"ar2", number(c.ar2)},   {"re", number(c.re)}};
  j["warnings"] = r.model.warnings;
  j["predictions"] = predictions_json(r.predictions, set.parameters);
  if (!r.measured_view.empty() || !r.modeled_view.empty()) {
    j["scaling"] = {{"measured", views_json(r.measured_view)},
                    {"model", views_json(r.modeled_view)}};
  }
  return j;
}

void print_json(const std::vector<SeriesResult>& results, const sc::MeasurementSet& set,
                const ModelArgs& args) {
  nlohmann::ordered_json doc;
  doc["parameters"] = set.parameters;
  doc["modeler"] = modeler_name(args.options.modeler);
  doc["models"] = nlohmann::ordered_json::array();
  for (const SeriesResult& r : results) doc["models"].push_back(result_json(r, set));
  std::string text = doc.dump(1);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

// --- Modeling --------------------------------------------------------------

absl::StatusOr<sc::MeasurementSet> read_inputs(const ModelArgs& args,
                                               std::vector<std::string>* warnings) {
  std::vector<std::string> directories, files;
  for (const std::string& input : args.inputs) {
    (is_directory(input) ? directories : files).push_back(input);
  }
  if (!directories.empty() && !files.empty()) {
    return absl::InvalidArgumentError("give either run directories or one Extra-P file, not both");
  }
  if (!directories.empty()) {
    if (!args.runs_params_given) {
      return absl::InvalidArgumentError(
          "run directories need --params (the run params to model against)");
    }
    return sc::read_runs(directories, args.runs, warnings);
  }
  if (files.size() != 1) return absl::InvalidArgumentError("give one Extra-P measurement file");
  return sc::read_extrap_file(files.front());
}

// What the command line names, as positions in the input's parameters.
struct Selection {
  std::vector<std::vector<double>> points;  // --predict, in parameter order
  int scaling_index = -1;                   // --scaling
  int plot_index = 0;                       // --plot-x
};

// A usage error message when the command line names what the input lacks.
std::optional<std::string> resolve_selection(const ModelArgs& args,
                                             const std::vector<std::string>& parameters,
                                             Selection* out) {
  for (const auto& named : args.predict) {
    std::vector<double> coordinate(parameters.size(), std::nan(""));
    for (const auto& [name, value] : named) {
      const int index = index_of(parameters, name);
      if (index < 0) return fmt::format("--predict: '{}' is not a parameter of the input", name);
      coordinate[static_cast<std::size_t>(index)] = value;
    }
    for (std::size_t i = 0; i < coordinate.size(); ++i) {
      if (std::isnan(coordinate[i])) {
        return fmt::format("--predict: no value for parameter '{}'", parameters[i]);
      }
    }
    out->points.push_back(std::move(coordinate));
  }
  if (args.scaling_parameter) {
    out->scaling_index = index_of(parameters, *args.scaling_parameter);
    if (out->scaling_index < 0) {
      return fmt::format("--scaling: '{}' is not a parameter of the input",
                         *args.scaling_parameter);
    }
  }
  if (args.plot_x) {
    out->plot_index = index_of(parameters, *args.plot_x);
    if (out->plot_index < 0) {
      return fmt::format("--plot-x: '{}' is not a parameter of the input", *args.plot_x);
    }
  }
  return std::nullopt;
}

// Speedup, efficiency and cost against the scaling parameter, measured and
// modeled (at the measured resources and the predicted points).
void add_scaling_views(const ModelArgs& args, const Selection& selection, SeriesResult* r) {
  const int index = selection.scaling_index;
  // Other parameters at the first point's values.
  const std::vector<double>& fixed = r->series->points.front().coordinate;
  if (auto measured = sc::measured_scaling(*r->series, index, fixed, args.options.extrap.measure);
      measured.ok()) {
    r->measured_view = std::move(*measured);
  }
  std::vector<double> resources;
  for (const auto& v : r->measured_view) resources.push_back(v.resource);
  for (const auto& p : selection.points) resources.push_back(p[static_cast<std::size_t>(index)]);
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  if (resources.empty()) return;
  if (auto modeled = sc::modeled_scaling(r->model, index, fixed, resources); modeled.ok()) {
    r->modeled_view = std::move(*modeled);
  }
}

// The series' model, predictions and views; nullopt (after saying why) when
// it cannot be modeled.
std::optional<SeriesResult> model_series(const sc::Series& series, const sc::MeasurementSet& set,
                                         const ModelArgs& args, const Selection& selection) {
  absl::StatusOr<sc::Model> model = sc::fit_series(set, series, args.options);
  if (!model.ok()) {
    std::fprintf(stderr, "trainscope model: %s\n", std::string(model.status().message()).c_str());
    return std::nullopt;
  }
  SeriesResult r;
  r.series = &series;
  r.model = std::move(*model);
  if (!selection.points.empty()) {
    absl::StatusOr<std::vector<sc::Prediction>> predictions =
        sc::predict_with_band(r.model, series, selection.points, args.band);
    if (!predictions.ok()) {
      std::fprintf(stderr, "trainscope model: %s / %s: %s\n", series.callpath.c_str(),
                   series.metric.c_str(), std::string(predictions.status().message()).c_str());
      return std::nullopt;
    }
    r.predictions = std::move(*predictions);
  }
  if (selection.scaling_index >= 0) add_scaling_views(args, selection, &r);
  return r;
}

// Extra-P refuses an input where a series lacks some of the input's
// coordinates; --modeler extrap does too, naming every such series (the
// default modeler models the points it has: fit_series warns). Returns false
// after printing the refusal.
bool check_complete(const sc::MeasurementSet& set, const ModelArgs& args) {
  if (args.options.modeler != sc::Modeler::kExtrap) return true;
  std::vector<std::string> refusals;
  for (const sc::Series& series : set.series) {
    const absl::Status complete = sc::check_coordinates(set, series);
    if (!complete.ok()) refusals.emplace_back(complete.message());
  }
  if (refusals.empty()) return true;
  const std::string file = args.inputs.empty() ? std::string("input") : args.inputs.front();
  std::fprintf(stderr,
               "trainscope model: %s: Extra-P refuses this input (InvalidExperimentError: the "
               "number of measurements does not match the number of coordinates):\n",
               file.c_str());
  for (const std::string& r : refusals) std::fprintf(stderr, "  %s\n", r.c_str());
  std::fprintf(stderr,
               "trainscope model: the default modeler (without --modeler extrap) models the "
               "points measured\n");
  return false;
}

bool selected(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

// FILE, or FILE-<n>.svg per series when there are several; the number of
// plots that failed.
int write_plots(const std::vector<SeriesResult>& results, const ModelArgs& args, int plot_index) {
  int failures = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    sc::PlotOptions plot;
    plot.x_parameter = plot_index;
    plot.band = args.band;
    absl::StatusOr<std::string> svg = sc::render_svg(results[i].model, *results[i].series, plot);
    std::string path = *args.svg;
    if (results.size() > 1) {
      const std::size_t dot = path.rfind(".svg");
      const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
      path = fmt::format("{}-{}.svg", stem, i + 1);
    }
    if (!svg.ok()) {
      std::fprintf(stderr, "trainscope model: plot %s: %s\n", path.c_str(),
                   std::string(svg.status().message()).c_str());
      ++failures;
      continue;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *svg;
    if (!out.flush()) {
      std::fprintf(stderr, "trainscope model: cannot write %s\n", path.c_str());
      ++failures;
    }
  }
  return failures;
}

}  // namespace

int model_command(const std::vector<std::string>& raw_args) {
  CommandLine line(
      {"model", "trainscope model [options] INPUT...", kModelDescription, kModelFooter});
  int exit_code = kExitOk;
  const std::optional<ModelArgs> parsed = parse(&line, raw_args, &exit_code);
  if (!parsed) return exit_code;
  const ModelArgs& args = *parsed;

  std::vector<std::string> input_warnings;
  absl::StatusOr<sc::MeasurementSet> set = read_inputs(args, &input_warnings);
  if (!set.ok()) {
    std::fprintf(stderr, "trainscope model: %s\n", std::string(set.status().message()).c_str());
    return kExitFailed;
  }
  for (const std::string& w : input_warnings) {
    std::fprintf(stderr, "trainscope model: warning: %s\n", w.c_str());
  }
  Selection selection;
  if (std::optional<std::string> error = resolve_selection(args, set->parameters, &selection)) {
    return line.usage_error(*error);
  }

  if (!check_complete(*set, args)) return kExitFailed;

  std::vector<SeriesResult> results;
  int failures = 0;
  for (const sc::Series& series : set->series) {
    if (!selected(args.callpaths, series.callpath) || !selected(args.metrics, series.metric)) {
      continue;
    }
    std::optional<SeriesResult> r = model_series(series, *set, args, selection);
    if (r) {
      results.push_back(*std::move(r));
    } else {
      ++failures;
    }
  }
  if (results.empty() && failures == 0) {
    std::fprintf(stderr,
                 "trainscope model: no region/metric of the input matches --callpath/--metric\n");
    return kExitFailed;
  }
  if (args.svg) failures += write_plots(results, args, selection.plot_index);
  if (args.json) {
    print_json(results, *set, args);
  } else {
    for (const SeriesResult& r : results) print_text(r, *set, args);
  }
  return failures == 0 ? kExitOk : kExitFailed;
}

}  // namespace trainscope::cli
