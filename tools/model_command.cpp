// `trainscope model`: from runs or Extra-P measurement files to a scaling
// model per (region, metric), its costs, predictions with a band, derived
// scaling views, and an SVG plot.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
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

constexpr char kModelUsage[] =
    "usage: trainscope model [options] INPUT...\n"
    "\n"
    "Fits a scaling model f(p, ...) = c0 + sum c_k * p^i * log2(p)^j (Extra-P's PMNF) to\n"
    "each region/metric of the input, prints it with its costs, and predicts.\n"
    "\n"
    "INPUT is an Extra-P measurement file (text .txt, JSON .json, JSON Lines .jsonl),\n"
    "or run directories made by trainscope (or directories holding runs): a point is\n"
    "one set of run params, runs with equal params are repetitions.\n"
    "\n"
    "Modeling:\n"
    "  --modeler NAME       trainscope (default): Extra-P's search plus negative exponents\n"
    "                       (strong scaling), rejecting models that predict values <= 0\n"
    "                       up to 8x the largest measured point (--physical-up-to);\n"
    "                       extrap: Extra-P 4.2.5's default modeler, exactly\n"
    "  --option KEY=VALUE   Extra-P modeler option, e.g. allow_negative_exponents=True,\n"
    "                       allow_log_terms=False, poly_exponents=1,2 (repeatable)\n"
    "  --physical-up-to F   trainscope modeler: vet models up to F x the largest point\n"
    "                       (default 8; 0 turns the veto off)\n"
    "  --measure M          mean (default) | median | minimum | maximum of repetitions\n"
    "  --callpath NAME      only this region (repeatable)\n"
    "  --metric NAME        only this metric (repeatable)\n"
    "\n"
    "Run directories:\n"
    "  --params P[,Q..]     run params that are the model's parameters (required)\n"
    "  --key KEY            what is measured: a region key (BATCH, EPOCH, FORWARD, ...)\n"
    "                       or metric:NAME for a logged metric; default BATCH\n"
    "  --stat S             mean (default) | median | min | max | total | count | p95 |\n"
    "                       p99 | last | rate (count per second)\n"
    "  --device D           cpu (default) | gpu region times\n"
    "  --ranks A            mean (default, as Extra-Deep) | max (slowest rank) | min | sum\n"
    "  --scale X            multiply every value by X (e.g. samples per batch)\n"
    "\n"
    "Output:\n"
    "  --predict P=V[,Q=W]  predict at this point, with a band (repeatable)\n"
    "  --confidence C       band coverage, default 0.9\n"
    "  --resamples N        bootstrap resamples for the band, default 400\n"
    "  --scaling P          speedup, parallel efficiency and cost against resource P\n"
    "  --svg FILE           plot measured points, model and extrapolation band; with\n"
    "                       several series, FILE-<n>.svg per series\n"
    "  --plot-x P           the plot's x parameter (default: the first)\n"
    "  --json               one JSON document on stdout (for tools)\n"
    "\n"
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
  bool help = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "trainscope model: %s\n\n%s", message.c_str(), kModelUsage);
  return kExitUsage;
}

bool parse_double(const std::string& text, double* out) {
  return absl::SimpleAtod(text, out) && std::isfinite(*out);
}

std::optional<ModelArgs> parse(const std::vector<std::string>& args, std::string* error) {
  ModelArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (arg == "--json") {
      out.json = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      out.inputs.push_back(arg);
      continue;
    }
    const std::string flag = arg.substr(0, arg.find('='));
    std::string value;
    if (flag.size() < arg.size()) {
      value = arg.substr(flag.size() + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      *error = fmt::format("{} needs a value", flag);
      return std::nullopt;
    }
    if (flag == "--modeler") {
      absl::StatusOr<sc::Modeler> modeler = sc::parse_modeler(value);
      if (!modeler.ok()) {
        *error = fmt::format("--modeler: {}", std::string(modeler.status().message()));
        return std::nullopt;
      }
      out.options.modeler = *modeler;
    } else if (flag == "--option") {
      const std::size_t eq = value.find('=');
      if (eq == std::string::npos) {
        *error = fmt::format("--option '{}': expected KEY=VALUE", value);
        return std::nullopt;
      }
      absl::Status status = out.options.extrap.set(value.substr(0, eq), value.substr(eq + 1));
      if (!status.ok()) {
        *error = fmt::format("--option: {}", std::string(status.message()));
        return std::nullopt;
      }
    } else if (flag == "--physical-up-to") {
      double factor = 0;
      if (!parse_double(value, &factor) || factor < 0) {
        *error = fmt::format("--physical-up-to '{}': a factor >= 1, or 0 to turn the veto off", value);
        return std::nullopt;
      }
      out.options.reject_nonphysical = factor > 0;
      out.options.extrapolation_factor = factor;
    } else if (flag == "--measure") {
      absl::StatusOr<sc::Measure> measure = sc::parse_measure(value);
      if (!measure.ok()) {
        *error = fmt::format("--measure: {}", std::string(measure.status().message()));
        return std::nullopt;
      }
      out.options.extrap.measure = *measure;
      out.band.measure = *measure;
    } else if (flag == "--callpath") {
      out.callpaths.push_back(value);
    } else if (flag == "--metric") {
      out.metrics.push_back(value);
    } else if (flag == "--params") {
      out.runs.parameters = absl::StrSplit(value, ',');
      out.runs_params_given = true;
    } else if (flag == "--key") {
      out.runs.what = value;
    } else if (flag == "--stat") {
      out.runs.stat = value;
    } else if (flag == "--device") {
      if (value != "cpu" && value != "gpu") {
        *error = fmt::format("--device '{}': use cpu or gpu", value);
        return std::nullopt;
      }
      out.runs.device = value;
    } else if (flag == "--ranks") {
      absl::StatusOr<sc::RankAggregation> ranks = sc::parse_rank_aggregation(value);
      if (!ranks.ok()) {
        *error = fmt::format("--ranks: {}", std::string(ranks.status().message()));
        return std::nullopt;
      }
      out.runs.ranks = *ranks;
    } else if (flag == "--scale") {
      if (!parse_double(value, &out.runs.scale)) {
        *error = fmt::format("--scale '{}' is not a number", value);
        return std::nullopt;
      }
    } else if (flag == "--predict") {
      std::map<std::string, double> point;
      for (const std::string& pair : std::vector<std::string>(absl::StrSplit(value, ','))) {
        const std::size_t eq = pair.find('=');
        double number = 0;
        if (eq == std::string::npos || !parse_double(pair.substr(eq + 1), &number)) {
          *error = fmt::format("--predict '{}': expected NAME=NUMBER[,NAME=NUMBER...]", value);
          return std::nullopt;
        }
        point[pair.substr(0, eq)] = number;
      }
      out.predict.push_back(std::move(point));
    } else if (flag == "--confidence") {
      if (!parse_double(value, &out.band.confidence) || out.band.confidence <= 0 || out.band.confidence >= 1) {
        *error = fmt::format("--confidence '{}': a number between 0 and 1", value);
        return std::nullopt;
      }
    } else if (flag == "--resamples") {
      if (!absl::SimpleAtoi(value, &out.band.resamples) || out.band.resamples < 10) {
        *error = fmt::format("--resamples '{}': an integer >= 10", value);
        return std::nullopt;
      }
    } else if (flag == "--scaling") {
      out.scaling_parameter = value;
    } else if (flag == "--svg") {
      out.svg = value;
    } else if (flag == "--plot-x") {
      out.plot_x = value;
    } else {
      *error = fmt::format("unknown option {}", flag);
      return std::nullopt;
    }
  }
  return out;
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

const char* modeler_name(sc::Modeler m) { return m == sc::Modeler::kExtrap ? "extrap" : "trainscope"; }

std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out;
}

nlohmann::ordered_json factor_json(const sc::Factor& f, const std::vector<std::string>& parameters) {
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

std::string point_text(const std::vector<std::string>& parameters, const std::vector<double>& coordinate) {
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

void print_text(const SeriesResult& r, const sc::MeasurementSet& set, const ModelArgs& args) {
  std::size_t repetitions = 0;
  for (const sc::Point& p : r.series->points) repetitions += p.values.size();
  std::printf("%s / %s  (%zu points, %zu values, modeler %s)\n", r.series->callpath.c_str(),
              r.series->metric.c_str(), r.series->points.size(), repetitions, modeler_name(args.options.modeler));
  std::printf("  model:   %s\n", r.model.formula().c_str());
  const bool loo = set.parameters.size() == 1 && args.options.extrap.use_crossvalidation && !r.model.is_constant();
  std::printf("  costs:   RSS %.4g  SMAPE %.4g%%  adj. R^2 %.6g  RE %.4g%s\n", r.model.costs.rss,
              r.model.costs.smape, r.model.costs.ar2, r.model.costs.re, loo ? "  (leave-one-out)" : "");
  std::printf("  python:  %s\n", r.model.python().c_str());
  std::printf("  c++:     %s\n", r.model.cpp().c_str());
  for (const sc::Prediction& p : r.predictions) {
    std::printf("  predict: %s -> %.6g  [%.6g, %.6g] (%g%% band)\n", point_text(set.parameters, p.coordinate).c_str(),
                p.value, p.lower, p.upper, args.band.confidence * 100);
  }
  if (!r.measured_view.empty() || !r.modeled_view.empty()) {
    std::printf("  scaling vs %s:\n    %-9s %10s %14s %10s %10s %14s\n", args.scaling_parameter->c_str(), "from",
                args.scaling_parameter->c_str(), "time", "speedup", "efficiency", "cost");
    auto row = [](const char* from, const sc::ScalingView& v) {
      std::printf("    %-9s %10s %14.6g %10.4g %10.4g %14.6g\n", from, fmt::format("{:g}", v.resource).c_str(), v.time,
                  v.speedup, v.efficiency, v.cost);
    };
    for (const auto& v : r.measured_view) row("measured", v);
    for (const auto& v : r.modeled_view) row("model", v);
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

nlohmann::ordered_json result_json(const SeriesResult& r, const sc::MeasurementSet& set) {
  nlohmann::ordered_json j;
  j["callpath"] = r.series->callpath;
  j["metric"] = r.series->metric;
  j["formula"] = r.model.formula();
  j["python"] = r.model.python();
  j["cpp"] = r.model.cpp();
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
  j["predictions"] = nlohmann::ordered_json::array();
  for (const sc::Prediction& p : r.predictions) {
    nlohmann::ordered_json point;
    for (std::size_t i = 0; i < set.parameters.size(); ++i) point[set.parameters[i]] = p.coordinate[i];
    j["predictions"].push_back(
        {{"point", point}, {"value", number(p.value)}, {"lower", number(p.lower)}, {"upper", number(p.upper)}});
  }
  if (!r.measured_view.empty() || !r.modeled_view.empty()) {
    j["scaling"] = {{"measured", views_json(r.measured_view)}, {"model", views_json(r.modeled_view)}};
  }
  return j;
}

absl::StatusOr<sc::MeasurementSet> read_inputs(const ModelArgs& args, std::vector<std::string>* warnings) {
  std::vector<std::string> directories, files;
  for (const std::string& input : args.inputs) (is_directory(input) ? directories : files).push_back(input);
  if (!directories.empty() && !files.empty()) {
    return absl::InvalidArgumentError("give either run directories or one Extra-P file, not both");
  }
  if (!directories.empty()) {
    if (!args.runs_params_given) {
      return absl::InvalidArgumentError("run directories need --params (the run params to model against)");
    }
    return sc::read_runs(directories, args.runs, warnings);
  }
  if (files.size() != 1) return absl::InvalidArgumentError("give one Extra-P measurement file");
  return sc::read_extrap_file(files.front());
}

}  // namespace

int model_command(const std::vector<std::string>& raw_args) {
  std::string error;
  std::optional<ModelArgs> parsed = parse(raw_args, &error);
  if (!parsed) return usage_error(error);
  ModelArgs& args = *parsed;
  if (args.help) {
    std::fputs(kModelUsage, stdout);
    return kExitOk;
  }
  if (args.inputs.empty()) return usage_error("no input given");

  std::vector<std::string> input_warnings;
  absl::StatusOr<sc::MeasurementSet> set = read_inputs(args, &input_warnings);
  if (!set.ok()) {
    std::fprintf(stderr, "trainscope model: %s\n", std::string(set.status().message()).c_str());
    return kExitFailed;
  }
  for (const std::string& w : input_warnings) std::fprintf(stderr, "trainscope model: warning: %s\n", w.c_str());

  // Prediction points, in parameter order.
  std::vector<std::vector<double>> points;
  for (const auto& named : args.predict) {
    std::vector<double> coordinate(set->parameters.size(), std::nan(""));
    for (const auto& [name, value] : named) {
      const int index = index_of(set->parameters, name);
      if (index < 0) return usage_error(fmt::format("--predict: '{}' is not a parameter of the input", name));
      coordinate[static_cast<std::size_t>(index)] = value;
    }
    for (std::size_t i = 0; i < coordinate.size(); ++i) {
      if (std::isnan(coordinate[i])) {
        return usage_error(fmt::format("--predict: no value for parameter '{}'", set->parameters[i]));
      }
    }
    points.push_back(std::move(coordinate));
  }
  int scaling_index = -1;
  if (args.scaling_parameter) {
    scaling_index = index_of(set->parameters, *args.scaling_parameter);
    if (scaling_index < 0) {
      return usage_error(fmt::format("--scaling: '{}' is not a parameter of the input", *args.scaling_parameter));
    }
  }
  int plot_index = 0;
  if (args.plot_x) {
    plot_index = index_of(set->parameters, *args.plot_x);
    if (plot_index < 0) return usage_error(fmt::format("--plot-x: '{}' is not a parameter of the input", *args.plot_x));
  }

  std::vector<SeriesResult> results;
  int failures = 0;
  for (const sc::Series& series : set->series) {
    auto selected = [](const std::vector<std::string>& filter, const std::string& name) {
      return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
    };
    if (!selected(args.callpaths, series.callpath) || !selected(args.metrics, series.metric)) continue;
    absl::StatusOr<sc::Model> model = sc::fit(set->parameters, series, args.options);
    if (!model.ok()) {
      std::fprintf(stderr, "trainscope model: %s\n", std::string(model.status().message()).c_str());
      ++failures;
      continue;
    }
    SeriesResult r;
    r.series = &series;
    r.model = std::move(*model);
    if (!points.empty()) {
      absl::StatusOr<std::vector<sc::Prediction>> predictions =
          sc::predict_with_band(r.model, series, points, args.band);
      if (!predictions.ok()) {
        std::fprintf(stderr, "trainscope model: %s / %s: %s\n", series.callpath.c_str(), series.metric.c_str(),
                     std::string(predictions.status().message()).c_str());
        ++failures;
        continue;
      }
      r.predictions = std::move(*predictions);
    }
    if (scaling_index >= 0) {
      // Other parameters at the first point's values.
      const std::vector<double>& fixed = series.points.front().coordinate;
      if (auto measured = sc::measured_scaling(series, scaling_index, fixed, args.options.extrap.measure);
          measured.ok()) {
        r.measured_view = std::move(*measured);
      }
      std::vector<double> resources;
      for (const auto& v : r.measured_view) resources.push_back(v.resource);
      for (const auto& p : points) resources.push_back(p[static_cast<std::size_t>(scaling_index)]);
      std::sort(resources.begin(), resources.end());
      resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
      if (!resources.empty()) {
        if (auto modeled = sc::modeled_scaling(r.model, scaling_index, fixed, resources); modeled.ok()) {
          r.modeled_view = std::move(*modeled);
        }
      }
    }
    results.push_back(std::move(r));
  }
  if (results.empty() && failures == 0) {
    std::fprintf(stderr, "trainscope model: no region/metric of the input matches --callpath/--metric\n");
    return kExitFailed;
  }

  if (args.svg) {
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
        std::fprintf(stderr, "trainscope model: plot %s: %s\n", path.c_str(), std::string(svg.status().message()).c_str());
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
  }

  if (args.json) {
    nlohmann::ordered_json doc;
    doc["parameters"] = set->parameters;
    doc["modeler"] = modeler_name(args.options.modeler);
    doc["models"] = nlohmann::ordered_json::array();
    for (const SeriesResult& r : results) doc["models"].push_back(result_json(r, *set));
    std::string text = doc.dump(1);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    for (const SeriesResult& r : results) print_text(r, *set, args);
  }
  return failures == 0 ? kExitOk : kExitFailed;
}

}  // namespace trainscope::cli
