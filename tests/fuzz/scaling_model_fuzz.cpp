// The whole modeling path on whatever the text parser accepts: both
// modelers, options as Extra-P parses them, predictions with a band, derived
// views and the plot. Measurements can be anything finite (zeros, negatives,
// 1e300, points below 1), so this looks for crashes, hangs and UB in the
// numerics, not for particular answers.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/svg_plot.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace sc = trainscope::scaling;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // First byte: modeler and options. The rest: with the high bit set, a
  // one-parameter series built straight from the bytes (reaches the numerics
  // at once); otherwise an Extra-P text file.
  const std::uint8_t flags = data[0];
  absl::StatusOr<sc::MeasurementSet> set;
  if ((flags & 128) != 0) {
    static constexpr double kCoordinates[] = {0, 0.5, 1, 2, 3, 4, 8, 16, 32, 64, 1e-3, 1e6};
    sc::MeasurementSet built;
    built.parameters = {"p"};
    built.series.push_back({"r", "m", {}});
    for (std::size_t i = 1; i + 3 <= size; i += 3) {
      const double x = kCoordinates[data[i] % (sizeof kCoordinates / sizeof kCoordinates[0])];
      // A value from two bytes, across magnitudes and signs.
      const int mantissa = static_cast<int>(data[i + 1]) - 64;
      const int exponent = static_cast<int>(data[i + 2] % 40) - 20;
      built.series.back().points.push_back({{x}, {mantissa * std::pow(10.0, exponent)}});
    }
    set = std::move(built);
  } else {
    set = sc::parse_extrap_text(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1),
                                "in");
  }
  if (!set.ok()) return 0;
  sc::ModelOptions options;
  options.modeler = (flags & 1) != 0 ? sc::Modeler::kExtrap : sc::Modeler::kTrainscope;
  (void)options.extrap.set("allow_negative_exponents", (flags & 2) != 0 ? "True" : "False");
  (void)options.extrap.set("use_crossvalidation", (flags & 4) != 0 ? "False" : "True");
  (void)options.extrap.set("allow_log_terms", (flags & 8) != 0 ? "False" : "True");
  if ((flags & 16) != 0) (void)options.extrap.set("poly_exponents", "-1,0.5,2");
  if ((flags & 32) != 0) options.extrap.measure = sc::Measure::kMedian;
  if ((flags & 64) != 0) options.significance = 0;
  for (const sc::Series& series : set->series) {
    (void)sc::missing_coordinates(*set, series);
    absl::StatusOr<sc::Model> model = sc::fit(set->parameters, series, options);
    if (!model.ok()) continue;
    (void)model->formula();
    (void)model->python();
    (void)model->cpp();
    std::vector<double> far = series.points.back().coordinate;
    for (double& x : far) x *= 4;
    sc::BandOptions band;
    band.resamples = 20;
    (void)sc::predict_with_band(*model, series, {series.points.front().coordinate, far}, band);
    (void)sc::measured_scaling(series, 0, series.points.front().coordinate);
    (void)sc::modeled_scaling(*model, 0, series.points.front().coordinate,
                              std::vector<double>{1, 2, 4});
    sc::PlotOptions plot;
    plot.band = band;
    plot.log_x = (flags & 64) != 0;
    (void)sc::render_svg(*model, series, plot);
  }
  return 0;
}
