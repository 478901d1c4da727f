// The Model JSON document: fitted scaling models with their predictions and
// scaling views, as `trainscope model --json` prints it and report pages
// embed it. One writer (model_document_json) and one reader
// (parse_model_document / read_model_document) for every producer and
// consumer of the document:
//
//   {"parameters": ["p"], "modeler": "trainscope",
//    "models": [{"callpath": "main", "metric": "time",
//                "group": {"lr": "0.1"},           // the `by` values; {} without
//                "points": 5, "values": 15,        // what the fit used
//                "too_few_points": false,          // Model::too_few_points
//                "formula": "...", "python": "...", "cpp": "...",  // derived
//                "identifiers": {"p": "p"},                        // derived
//                "constant": 1.5,
//                "terms": [{"coefficient": 98.7, "factors": [{"parameter": "p",
//                           "poly": "-1", "poly_value": -1.0, "log": "0", "log_value": 0.0}]}],
//                "costs": {"rss": .., "rrss": .., "nrss": .., "smape": .., "ar2": .., "re": ..},
//                "warnings": [],
//                "predictions": [{"point": {"p": 256}, "value": .., "lower": .., "upper": ..}],
//                "scaling": {"measured": [VIEW...], "model": [VIEW...]}}]}  // only with views
//
// VIEW is {"resource", "time", "speedup", "efficiency", "cost"}. A number that
// is not finite is written as null (and read back as NaN; a band's unbounded
// end, +-inf, is null too). "group", "points", "values" and "too_few_points"
// came later: a document without them reads as {}, 0, 0 and false. formula, python,
// cpp and identifiers are derived from the terms (Model::formula(), ...): the
// reader does not read them.
#ifndef TRAINSCOPE_SCALING_MODEL_DOCUMENT_HPP_
#define TRAINSCOPE_SCALING_MODEL_DOCUMENT_HPP_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/scaling/derived.hpp"
#include "trainscope/scaling/model.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/uncertainty.hpp"

namespace trainscope::scaling {

// One region/metric's model and what was computed from it.
struct ModeledSeries {
  std::string callpath;
  std::string metric;
  // The group this series is of (Series::group: `--by lr`), empty otherwise.
  std::vector<std::pair<std::string, std::string>> group;
  Model model;  // model.parameters are the document's parameters
  std::vector<Prediction> predictions;
  // Against a scaling parameter (derived.hpp); both empty without one.
  std::vector<ScalingView> measured_scaling;
  std::vector<ScalingView> modeled_scaling;
  // What the fit used: measured points (coordinates) and values (repetitions
  // over all points); 0 when a document read back does not say.
  std::size_t points = 0;
  std::size_t values = 0;
};

struct ModelDocument {
  std::vector<std::string> parameters;
  Modeler modeler = Modeler::kTrainscope;
  std::vector<ModeledSeries> models;
};

// "trainscope" or "extrap", as parse_modeler reads it back.
const char* modeler_name(Modeler modeler) noexcept;

// The document as JSON text (indented by one space per level, no trailing
// newline).
std::string model_document_json(const ModelDocument& document);

// The document from JSON text; `name` (a file name) starts every error, with
// the key that is wrong: "m.json: models[0].terms[1].factors[0].parameter:
// \"q\" is not one of the parameters (\"p\")". Strict: every field the writer
// writes (but the derived ones) must be there with its type; an exponent's
// text must be what trainscope writes for its value ("-1", "1/2", "0.75");
// a factor names a parameter of the document, once per term; a prediction's
// point gives every parameter. Unknown keys are ignored.
absl::StatusOr<ModelDocument> parse_model_document(std::string_view text, std::string_view name);

// The document in the file at `path` (errors name the path).
absl::StatusOr<ModelDocument> read_model_document(const std::string& path);

}  // namespace trainscope::scaling

#endif  // TRAINSCOPE_SCALING_MODEL_DOCUMENT_HPP_
