// `trainscope model` as one call: read runs or an Extra-P file, fit a model
// per selected region/metric, predict with bands, derive the scaling views
// and plot; the result is a ModelDocument (what --json prints) plus what the
// text output and the plots need.
//
//   study_measurements(set, options)   the pure step: measurements in, models,
//                                      predictions, views and rendered SVGs out
//   model_study(options, &warnings)    reads options.inputs, studies them and
//                                      writes the plots
#ifndef TRAINSCOPE_SCALING_MODEL_STUDY_HPP_
#define TRAINSCOPE_SCALING_MODEL_STUDY_HPP_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/scaling/measurement_set.hpp"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/run_input.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace trainscope::scaling {

struct ModelStudyOptions {
  // Run directories (or directories holding runs), or one Extra-P measurement
  // file (.txt, .json, .jsonl); not both.
  std::vector<std::string> inputs;
  RunSelection runs;  // for run directories; runs.parameters is required there
  ModelOptions model;
  std::vector<std::string> callpaths;  // only these regions (empty: all)
  std::vector<std::string> metrics;    // only these metrics (empty: all)
  // Predict at these points (a value for every parameter, by name), each
  // with a band of `band`.
  std::vector<std::map<std::string, double>> predict;
  BandOptions band;
  // Speedup, efficiency and cost against this parameter ("" none): measured
  // (the points whose other parameters equal the first point's) and modeled
  // (at the measured resources and the predicted points).
  std::string scaling;
  // An SVG plot per series ("" none): this path, or PATH-<n>.svg for the n-th
  // series when there are several (plot_path).
  std::string plot;
  std::string plot_x;  // the plot's x parameter ("" the first)
};

// What the text output says of a modeled series' input.
struct StudiedSeries {
  std::size_t points = 0;  // measured points
  std::size_t values = 0;  // repetitions over all points
  // The costs are the leave-one-out values (one parameter, cross-validation,
  // a model with terms), as Extra-P reports them.
  bool leave_one_out = false;
};

struct StudyPlot {
  std::string path;
  std::string svg;
};

struct ModelStudy {
  ModelDocument document;             // the series modeled, in input order
  std::vector<StudiedSeries> series;  // one per document.models entry
  std::vector<StudyPlot> plots;       // with options.plot: one per series rendered
  // A series that could not be modeled, predicted or plotted: one line each
  // ("callpath / metric: why", "plot PATH: why"); the others are still there.
  std::vector<std::string> failures;
};

// The pure step (no file is read or written). Errors:
// - an option naming what the input lacks (a parameter in predict, scaling or
//   plot_x): InvalidArgument "predict: 'q' is not a parameter of the input",
//   with the option's field name as study_option_error() returns it;
// - modeler kExtrap and a series not measured once at every coordinate of
//   the input: Extra-P refuses the whole input, the error names
//   options.inputs' first entry and every such series, one per line;
// - no series matches callpaths/metrics.
absl::StatusOr<ModelStudy> study_measurements(const MeasurementSet& set,
                                              const ModelStudyOptions& options);

// Reads options.inputs (read_runs or read_extrap_file; skipped runs appended
// to `warnings` when not null), studies them and writes the plots
// (atomically; one that cannot be written is a failure). Errors: the input's,
// then study_measurements'.
absl::StatusOr<ModelStudy> model_study(const ModelStudyOptions& options,
                                       std::vector<std::string>* warnings = nullptr);

// The ModelStudyOptions field ("predict", "scaling", "plot_x") that an error
// of study_measurements is about; nullopt for any other error.
std::optional<std::string> study_option_error(const absl::Status& status);

// The study as `trainscope model` prints it: per series the model, its costs,
// the python and C++ expressions, the predictions with their band, the scaling
// views and the warnings (the text output; model_document_json is the JSON).
std::string format_model_study(const ModelStudy& study, const ModelStudyOptions& options);

// Where the plot of series `index` (0-based) of `count` goes: `path` itself
// for one series, else "<path without .svg>-<index + 1>.svg".
std::string plot_path(const std::string& path, std::size_t index, std::size_t count);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MODEL_STUDY_HPP_
