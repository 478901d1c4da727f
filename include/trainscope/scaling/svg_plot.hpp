// An SVG plot of a model against one parameter: measured points with their
// repetition spread (min-max bar, mean marker), the fitted curve, and the
// prediction band extended past the largest measured point.
#ifndef TRAINSCOPE_SCALING_SVG_PLOT_HPP_
#define TRAINSCOPE_SCALING_SVG_PLOT_HPP_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace trainscope::scaling {

struct PlotOptions {
  int x_parameter = 0;        // which parameter is the x axis
  std::vector<double> fixed;  // other parameters' values (default: the most common line)
  double extrapolate_to = 0;  // largest x drawn; 0 = 4x the largest measured
  bool log_x = true;          // log2 x axis (scaling parameters are usually powers of two)
  bool log_y = false;
  std::string title;  // default: "callpath / metric"
  int width = 720;
  int height = 440;
  BandOptions band;
};

// A self-contained SVG document. Errors: x_parameter out of range, no points
// on the chosen line, fixed of the wrong size.
absl::StatusOr<std::string> render_svg(const Model& model, const Series& series,
                                       const PlotOptions& options = {});

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_SVG_PLOT_HPP_
