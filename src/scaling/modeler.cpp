#include "trainscope/scaling/modeler.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "scaling/extrap_internal.hpp"

namespace trainscope::scaling {

namespace {

// Where a model must stay physical: per parameter, from the smallest measured
// value to `factor` times the largest, log-spaced (scaling parameters grow
// geometrically), plus every measured value.
std::vector<std::vector<double>> check_grid(const std::vector<detail::PointStats>& points,
                                            std::size_t dims, double factor) {
  constexpr int kSteps = 24;
  std::vector<std::vector<double>> axes(dims);
  for (std::size_t p = 0; p < dims; ++p) {
    double lo = points.front().coordinate[p], hi = lo;
    for (const auto& point : points) {
      lo = std::min(lo, point.coordinate[p]);
      hi = std::max(hi, point.coordinate[p]);
      axes[p].push_back(point.coordinate[p]);
    }
    const double top = hi * std::max(1.0, factor);
    for (int i = 0; i <= kSteps; ++i) {
      const double t = static_cast<double>(i) / kSteps;
      axes[p].push_back(lo > 0 ? lo * std::pow(top / lo, t) : lo + (top - lo) * t);
    }
    std::sort(axes[p].begin(), axes[p].end());
    axes[p].erase(std::unique(axes[p].begin(), axes[p].end()), axes[p].end());
  }
  return axes;
}

bool positive_everywhere(const Model& model, const std::vector<std::vector<double>>& axes) {
  std::vector<double> coordinate(axes.size());
  std::vector<std::size_t> index(axes.size(), 0);
  while (true) {
    for (std::size_t p = 0; p < axes.size(); ++p) coordinate[p] = axes[p][index[p]];
    const double value = model.evaluate(coordinate);
    if (!(value > 0) || !std::isfinite(value)) return false;
    std::size_t p = 0;
    while (p < axes.size() && ++index[p] == axes[p].size()) index[p++] = 0;
    if (p == axes.size()) return true;
  }
}

// Extra-P's own warnings about fewer than 5 measurements, which the plain
// words of too_few_points_note replace.
bool is_extrap_count_warning(const std::string& warning) {
  return warning.rfind("Number of measurements for", 0) == 0;
}

std::string values_text(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += fmt::format("{}{:g}", out.empty() ? "" : ", ", v);
  return out;
}

// What a fit on too few points is, in plain words.
std::string too_few_points_note(const std::vector<std::string>& parameters, const Model& model,
                                const std::vector<std::pair<int, std::vector<double>>>& few) {
  std::string which;
  std::size_t missing = 0;
  for (std::size_t i = 0; i < few.size(); ++i) {
    const auto& [parameter, values] = few[i];
    const char* separator = i == 0 ? "" : (i + 1 == few.size() ? " and " : ", ");
    which += fmt::format("{}{} ({} distinct values: {})", separator,
                         parameters[static_cast<std::size_t>(parameter)], values.size(),
                         values_text(values));
    missing = std::max(missing, kMinDistinctValues - values.size());
  }
  std::string names;
  for (std::size_t i = 0; i < few.size(); ++i) {
    names += (i == 0 ? "" : ", ") + parameters[static_cast<std::size_t>(few[i].first)];
  }
  return fmt::format(
      "too few points to tell how the value scales with {}: a fit of an exponent needs at least "
      "{} distinct values of its parameter (Extra-P's rule). {}; its band is the points' spread "
      "around it. Measure {} more value{} of {}",
      which, kMinDistinctValues,
      model.is_constant()
          ? "The model is the points' mean, a constant that explains none of their variation"
          : "Many curves fit so few points about equally well: this one is no evidence of the "
            "scaling",
      missing, missing == 1 ? "" : "s", names);
}

// Marks a model fitted on too few points and says so first; a constant
// model's adjusted R^2 is 0 (it explains none of the variation between the
// points) unless they do not vary.
void note_fit(const std::vector<std::string>& parameters, const Series& series, Model* model) {
  const auto few = too_few_values(series, parameters.size());
  if (few.empty()) return;
  model->too_few_points = true;
  model->warnings.erase(
      std::remove_if(model->warnings.begin(), model->warnings.end(), is_extrap_count_warning),
      model->warnings.end());
  model->warnings.insert(model->warnings.begin(), too_few_points_note(parameters, *model, few));
}

}  // namespace

std::vector<std::pair<int, std::vector<double>>> too_few_values(const Series& series,
                                                                std::size_t parameters) {
  std::vector<std::pair<int, std::vector<double>>> out;
  for (std::size_t p = 0; p < parameters; ++p) {
    std::vector<double> values;
    for (const Point& point : series.points) {
      if (p < point.coordinate.size()) values.push_back(point.coordinate[p]);
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    if (values.size() < kMinDistinctValues) out.emplace_back(static_cast<int>(p), values);
  }
  return out;
}

absl::StatusOr<Modeler> parse_modeler(std::string_view name) {
  const std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "trainscope" || n == "default") return Modeler::kTrainscope;
  if (n == "extrap") return Modeler::kExtrap;
  return absl::InvalidArgumentError(
      fmt::format("unknown modeler '{}': use trainscope or extrap", name));
}

namespace {

absl::StatusOr<Model> fit_trainscope(const std::vector<std::string>& parameters,
                                     const Series& series, const ModelOptions& options) {
  absl::StatusOr<std::vector<detail::PointStats>> points =
      detail::prepare_points(parameters, series);
  if (!points.ok()) return points.status();
  ExtrapOptions base = options.extrap;
  base.allow_negative_exponents = base.allow_negative_exponents || options.negative_exponents;

  bool all_positive = true;
  for (const auto& point : *points) all_positive = all_positive && point.value(base.measure) > 0;
  const bool check = options.reject_nonphysical && all_positive;
  const std::vector<std::vector<double>> axes =
      check_grid(*points, parameters.size(), options.extrapolation_factor);

  std::vector<std::string> warnings;
  auto single = [&](const std::vector<detail::PointStats>& line, int parameter) {
    detail::HypothesisFilter filter;
    if (check) {
      filter = [&, parameter](double c0, double c1, const Factor& f) {
        // A term with a negative exponent is a share that shrinks as the
        // parameter grows (work divided among p ranks): its coefficient is
        // positive. c - d/p (a rise towards a ceiling) is what fits noise.
        if ((f.poly.value < 0 || f.log.value < 0) && c1 < 0) return false;
        for (double x : axes[static_cast<std::size_t>(parameter)]) {
          const double value = c0 + c1 * f.evaluate(x);
          if (!(value > 0) || !std::isfinite(value)) return false;
        }
        return true;
      };
    }
    return detail::model_single(line, parameter, base, warnings, filter, detail::LogRule::kExact,
                                detail::Numerics::kAccurate, options.significance);
  };
  Model model;
  if (parameters.size() == 1) {
    model = detail::single_result_to_model(parameters, single(*points, 0));
  } else {
    detail::ModelFilter accept;
    if (check)
      accept = [&](const Model& candidate) { return positive_everywhere(candidate, axes); };
    model = detail::model_multi(parameters, *points, base, single, warnings, accept,
                                detail::Numerics::kAccurate);
  }
  if (check && !positive_everywhere(model, axes)) {
    warnings.push_back(
        fmt::format("the model predicts a value <= 0 between the measured points and {}x the "
                    "largest; no physical "
                    "hypothesis fitted better",
                    options.extrapolation_factor));
  }
  model.warnings = std::move(warnings);
  return model;
}

}  // namespace

absl::StatusOr<Model> fit(const std::vector<std::string>& parameters, const Series& series,
                          const ModelOptions& options) {
  absl::StatusOr<Model> model = options.modeler == Modeler::kExtrap
                                    ? fit_extrap(parameters, series, options.extrap)
                                    : fit_trainscope(parameters, series, options);
  if (model.ok()) note_fit(parameters, series, &*model);
  return model;
}

absl::StatusOr<Model> fit_series(const MeasurementSet& set, const Series& series,
                                 const ModelOptions& options) {
  const absl::Status complete = check_coordinates(set, series);
  if (!complete.ok() && options.modeler == Modeler::kExtrap) {
    return absl::InvalidArgumentError(fmt::format(
        "{}; Extra-P refuses such an input (InvalidExperimentError: the number of measurements "
        "does not match the number of coordinates)",
        std::string(complete.message())));
  }
  absl::StatusOr<Model> model = fit(set.parameters, series, options);
  if (model.ok() && !complete.ok()) {
    model->warnings.insert(
        model->warnings.begin(),
        fmt::format("{}; modeled on what was measured (Extra-P refuses such an input)",
                    std::string(complete.message())));
  }
  return model;
}

}  // namespace trainscope::scaling
