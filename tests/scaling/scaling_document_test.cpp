// The Model JSON document (one writer, one reader) and the study behind
// `trainscope model` (model_study / study_measurements): round trips, the
// errors a bad document gets, and what a study concludes from measurements.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "support/temp_dir.hpp"
#include "trainscope/scaling/extrap_input.hpp"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/scaling/model_study.hpp"

namespace trainscope::scaling {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

template <typename T>
std::string error_of(const absl::StatusOr<T>& result) {
  if (result.ok()) return "<no error>";
  return std::string(result.status().message());
}

// NaN equals NaN here: the document writes it as null and reads it back.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void ExpectSameViews(const std::vector<ScalingView>& a, const std::vector<ScalingView>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same(a[i].resource, b[i].resource));
    EXPECT_TRUE(same(a[i].time, b[i].time));
    EXPECT_TRUE(same(a[i].speedup, b[i].speedup));
    EXPECT_TRUE(same(a[i].efficiency, b[i].efficiency));
    EXPECT_TRUE(same(a[i].cost, b[i].cost));
  }
}

void ExpectSameDocument(const ModelDocument& a, const ModelDocument& b) {
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.modeler, b.modeler);
  ASSERT_EQ(a.models.size(), b.models.size());
  for (std::size_t m = 0; m < a.models.size(); ++m) {
    const ModeledSeries& x = a.models[m];
    const ModeledSeries& y = b.models[m];
    EXPECT_EQ(x.callpath, y.callpath);
    EXPECT_EQ(x.metric, y.metric);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.model.too_few_points, y.model.too_few_points);
    EXPECT_EQ(x.model.parameters, y.model.parameters);
    EXPECT_TRUE(same(x.model.constant, y.model.constant));
    ASSERT_EQ(x.model.terms.size(), y.model.terms.size());
    for (std::size_t t = 0; t < x.model.terms.size(); ++t) {
      const Term& s = x.model.terms[t];
      const Term& u = y.model.terms[t];
      EXPECT_TRUE(same(s.coefficient, u.coefficient));
      ASSERT_EQ(s.factors.size(), u.factors.size());
      for (std::size_t f = 0; f < s.factors.size(); ++f) {
        EXPECT_EQ(s.factors[f].parameter, u.factors[f].parameter);
        EXPECT_EQ(s.factors[f].poly.text, u.factors[f].poly.text);
        EXPECT_EQ(s.factors[f].poly.value, u.factors[f].poly.value);
        EXPECT_EQ(s.factors[f].log.text, u.factors[f].log.text);
        EXPECT_EQ(s.factors[f].log.value, u.factors[f].log.value);
      }
    }
    const ModelCosts& c = x.model.costs;
    const ModelCosts& d = y.model.costs;
    EXPECT_TRUE(same(c.rss, d.rss) && same(c.rrss, d.rrss) && same(c.nrss, d.nrss) &&
                same(c.smape, d.smape) && same(c.ar2, d.ar2) && same(c.re, d.re));
    EXPECT_EQ(x.model.warnings, y.model.warnings);
    ASSERT_EQ(x.predictions.size(), y.predictions.size());
    for (std::size_t p = 0; p < x.predictions.size(); ++p) {
      EXPECT_EQ(x.predictions[p].coordinate, y.predictions[p].coordinate);
      EXPECT_TRUE(same(x.predictions[p].value, y.predictions[p].value));
      EXPECT_TRUE(same(x.predictions[p].lower, y.predictions[p].lower));
      EXPECT_TRUE(same(x.predictions[p].upper, y.predictions[p].upper));
    }
    ExpectSameViews(x.measured_scaling, y.measured_scaling);
    ExpectSameViews(x.modeled_scaling, y.modeled_scaling);
  }
}

Factor MakeFactor(int parameter, Exponent poly, Exponent log) {
  Factor f;
  f.parameter = parameter;
  f.poly = poly;
  f.log = log;
  return f;
}

// Two parameters (one not an identifier), fraction and decimal exponents, a
// cost that is not a number, predictions and views.
ModelDocument HandMadeDocument() {
  ModelDocument doc;
  doc.parameters = {"p", "batch-size"};
  doc.modeler = Modeler::kExtrap;
  ModeledSeries s;
  s.callpath = "train/step";
  s.metric = "time \"s\"";
  s.model.parameters = doc.parameters;
  s.model.constant = -3.5;
  Term a;
  a.coefficient = 2.0;
  a.factors = {MakeFactor(0, Exponent::Fraction(1, 2), Exponent::Fraction(1, 1)),
               MakeFactor(1, Exponent::Number(-0.75), Exponent::Fraction(0, 1))};
  Term b;
  b.coefficient = 1e-5;
  b.factors = {MakeFactor(1, Exponent::Fraction(0, 1), Exponent::Fraction(2, 1))};
  s.model.terms = {a, b};
  s.model.costs = {0.25, 0.01, 1e-3, 1.5, std::numeric_limits<double>::quiet_NaN(), 0.02};
  s.model.warnings = {"fewer than 5 points"};
  s.model.too_few_points = true;
  s.group = {{"lr", "0.1"}, {"optimizer", "adam"}};
  s.predictions = {Prediction{{256, 32}, 1.5, 1.25, 1.75},
                   Prediction{{512, 64}, 2.0, std::numeric_limits<double>::quiet_NaN(), 3}};
  s.measured_scaling = {ScalingView{4, 10, 1, 1, 40}, ScalingView{8, 6, 10.0 / 6, 10.0 / 12, 48}};
  s.modeled_scaling = {ScalingView{4, 9.5, 1, 1, 38}};
  doc.models.push_back(s);
  ModeledSeries constant;
  constant.callpath = "eval";
  constant.metric = "time";
  constant.model.parameters = doc.parameters;
  constant.model.constant = 5.0;
  doc.models.push_back(constant);
  return doc;
}

TEST(ModelDocument, RoundTripsThroughItsOneWriterAndReader) {
  const ModelDocument doc = HandMadeDocument();
  const std::string text = model_document_json(doc);
  absl::StatusOr<ModelDocument> back = parse_model_document(text, "m.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameDocument(doc, *back);
  EXPECT_EQ(model_document_json(*back), text);

  // The derived fields are the model's own renderings; null for what is not finite.
  const nlohmann::json j = nlohmann::json::parse(text);
  const nlohmann::json& m = j["models"][0];
  EXPECT_EQ(j["modeler"], "extrap");
  EXPECT_EQ(m["formula"], doc.models[0].model.formula());
  EXPECT_EQ(m["python"], doc.models[0].model.python());
  EXPECT_EQ(m["cpp"], doc.models[0].model.cpp());
  EXPECT_EQ(m["identifiers"], (nlohmann::json{{"batch-size", "batch_size"}, {"p", "p"}}));
  EXPECT_TRUE(m["costs"]["ar2"].is_null());
  EXPECT_EQ(m["costs"]["nrss"], 1e-3);
  EXPECT_TRUE(m["predictions"][1]["lower"].is_null());
  EXPECT_EQ(m["predictions"][0]["point"], (nlohmann::json{{"p", 256}, {"batch-size", 32}}));
  EXPECT_EQ(m["terms"][0]["factors"][1]["poly"], "-0.75");
  EXPECT_FALSE(j["models"][1].contains("scaling"));  // no views, no "scaling"

  // Infinity is no JSON number either: null, read back as NaN.
  ModelDocument infinite = doc;
  infinite.models[0].model.constant = std::numeric_limits<double>::infinity();
  back = parse_model_document(model_document_json(infinite), "m.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(back->models[0].model.constant));
}

TEST(ModelDocument, ReadsAFile) {
  testing::TempDir tmp;
  const std::string path = tmp.write("m.json", model_document_json(HandMadeDocument()));
  absl::StatusOr<ModelDocument> doc = read_model_document(path);
  ASSERT_TRUE(doc.ok()) << doc.status();
  ExpectSameDocument(HandMadeDocument(), *doc);
  EXPECT_THAT(error_of(read_model_document(tmp.file("missing.json"))), HasSubstr("missing.json"));
}

// `text` with the JSON pointer `pointer` replaced by `value` (or removed).
std::string Edited(const std::string& pointer, const nlohmann::json* value) {
  nlohmann::json j = nlohmann::json::parse(model_document_json(HandMadeDocument()));
  const nlohmann::json::json_pointer at(pointer);
  if (value == nullptr) {
    j[at.parent_pointer()].erase(at.back());
  } else {
    j[at] = *value;
  }
  return j.dump();
}

TEST(ModelDocument, AnErrorNamesTheFileAndTheKey) {
  struct Case {
    std::string pointer;
    nlohmann::json value;  // null: the key is removed
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/models/0/terms/1/factors/0/parameter", "q",
       "m.json: models[0].terms[1].factors[0].parameter: \"q\" is not one of the parameters "
       "(\"p\", \"batch-size\")"},
      {"/models/0/terms/0/factors/1/parameter", "p",
       "m.json: models[0].terms[0].factors[1].parameter: \"p\" has a factor of this term already"},
      {"/models/0/terms/0/factors/0/poly", "2/4",
       "m.json: models[0].terms[0].factors[0].poly: \"2/4\" is not the exponent 0.5"},
      {"/models/0/terms/0/factors/0/poly_value", 0.25,
       "m.json: models[0].terms[0].factors[0].poly: \"1/2\" is not the exponent 0.25"},
      {"/models/0/terms/0/factors/0/log", "x**2", "factors[0].log: \"x**2\" is not the exponent"},
      {"/models/0/costs/nrss", nullptr,
       "m.json: models[0].costs.nrss: missing (expected a number or null)"},
      {"/models/0/constant", "1",
       "m.json: models[0].constant: expected a number or null, got a "
       "string"},
      {"/models/1/warnings", nlohmann::json::array({1}),
       "m.json: models[1].warnings[0]: expected a string, got a number"},
      {"/models/0/predictions/0/point/q", 1,
       "models[0].predictions[0].point: \"q\" is not a "
       "parameter"},
      {"/models/0/predictions/1/point/p", nullptr,
       "models[0].predictions[1].point.p: missing (expected a number or null)"},
      {"/models/0/scaling/model", 3, "models[0].scaling.model: expected an array, got a number"},
      {"/models/0/terms/1/factors", nlohmann::json::array(),
       "models[0].terms[1].factors: a term needs at least one factor"},
      {"/modeler", "default",
       "m.json: modeler: \"default\": expected \"trainscope\" or \"extrap\""},
      {"/parameters", nlohmann::json::array({"p", "p"}),
       "m.json: parameters[1]: \"p\" is given "
       "twice"},
      {"/models", nullptr, "m.json: models: missing (expected an array)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    const std::string text =
        c.value.is_null() ? Edited(c.pointer, nullptr) : Edited(c.pointer, &c.value);
    EXPECT_THAT(error_of(parse_model_document(text, "m.json")), HasSubstr(c.expected));
  }
  EXPECT_THAT(error_of(parse_model_document("{\"parameters\": [", "m.json")),
              StartsWith("m.json: not a JSON document: "));
  EXPECT_EQ(error_of(parse_model_document("[]", "m.json")),
            "m.json: expected an object, got an array");
}

// "group" and "too_few_points" (issue 26) came after the first documents:
// one without them reads as no group and enough points; their order is kept.
TEST(ModelDocument, GroupAndTooFewPointsRoundTripAndOldDocumentsStillRead) {
  const ModelDocument doc = HandMadeDocument();
  const nlohmann::json j = nlohmann::json::parse(model_document_json(doc));
  EXPECT_EQ(j["models"][0]["group"].dump(), R"({"lr":"0.1","optimizer":"adam"})");
  EXPECT_EQ(j["models"][0]["too_few_points"], true);
  EXPECT_EQ(j["models"][1]["group"], nlohmann::json::object());
  EXPECT_EQ(j["models"][1]["too_few_points"], false);

  nlohmann::json old = j;
  for (nlohmann::json& m : old["models"]) {
    m.erase("group");
    m.erase("too_few_points");
  }
  absl::StatusOr<ModelDocument> back = parse_model_document(old.dump(), "old.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->models[0].group.empty());
  EXPECT_FALSE(back->models[0].model.too_few_points);

  const nlohmann::json number = 3;
  EXPECT_EQ(error_of(parse_model_document(Edited("/models/0/group/lr", &number), "m.json")),
            "m.json: models[0].group.lr: expected a string, got a number");
  EXPECT_EQ(error_of(parse_model_document(Edited("/models/0/group", &number), "m.json")),
            "m.json: models[0].group: expected an object, got a number");
  const nlohmann::json text = "yes";
  EXPECT_EQ(error_of(parse_model_document(Edited("/models/0/too_few_points", &text), "m.json")),
            "m.json: models[0].too_few_points: expected a boolean, got a string");
}

// Strong scaling, t = 2 + 100 / p with a little noise, at p = 2 .. 64.
constexpr char kStrong[] =
    "PARAMETER p\nPOINTS 2 4 8 16 32 64\nREGION epoch\nMETRIC time\n"
    "DATA 52.1 51.9 52.0\nDATA 27.05 26.95 27.0\nDATA 14.6 14.4 14.5\nDATA 8.26 8.24 8.25\n"
    "DATA 5.13 5.12 5.125\nDATA 3.57 3.56 3.5625\n"
    "REGION eval\nMETRIC time\n"
    "DATA 1 1.01 0.99\nDATA 1 1.01 0.99\nDATA 1 1.01 0.99\nDATA 1 1.01 0.99\nDATA 1 1.01 0.99\n"
    "DATA 1 1.01 0.99\n";

MeasurementSet Strong() {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(kStrong, "strong.txt");
  EXPECT_TRUE(set.ok()) << set.status();
  return *set;
}

TEST(ModelStudy, ModelsPredictsAndDerivesTheScalingViews) {
  ModelStudyOptions options;
  options.inputs = {"strong.txt"};
  options.predict = {{{"p", 256}}};
  options.scaling = "p";
  absl::StatusOr<ModelStudy> study = study_measurements(Strong(), options);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE(study->failures.empty());
  EXPECT_TRUE(study->plots.empty());
  ASSERT_EQ(study->document.models.size(), 2u);
  ASSERT_EQ(study->series.size(), 2u);
  EXPECT_EQ(study->document.parameters, std::vector<std::string>{"p"});

  const ModeledSeries& epoch = study->document.models[0];
  EXPECT_EQ(epoch.callpath, "epoch");
  EXPECT_THAT(epoch.model.formula(), HasSubstr("p^(-1)"));
  EXPECT_EQ(study->series[0].points, 6u);
  EXPECT_EQ(study->series[0].values, 18u);
  EXPECT_TRUE(study->series[0].leave_one_out);
  ASSERT_EQ(epoch.predictions.size(), 1u);
  EXPECT_NEAR(epoch.predictions[0].value, 2 + 100.0 / 256, 0.05);
  EXPECT_LE(epoch.predictions[0].lower, epoch.predictions[0].value);
  EXPECT_GE(epoch.predictions[0].upper, epoch.predictions[0].value);
  // Measured at the 6 points; modeled there and at the predicted p = 256.
  ASSERT_EQ(epoch.measured_scaling.size(), 6u);
  EXPECT_NEAR(epoch.measured_scaling.back().speedup, 52.0 / 3.5625, 0.01);
  ASSERT_EQ(epoch.modeled_scaling.size(), 7u);
  EXPECT_EQ(epoch.modeled_scaling.back().resource, 256);

  const ModeledSeries& eval = study->document.models[1];
  EXPECT_TRUE(eval.model.is_constant()) << eval.model.formula();  // noise, not a trend
  EXPECT_FALSE(study->series[1].leave_one_out);

  // What --json prints reads back as it was.
  absl::StatusOr<ModelDocument> back =
      parse_model_document(model_document_json(study->document), "study");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameDocument(study->document, *back);

  // What the text prints: each series' header, model, prediction with its band
  // and scaling views, in document order.
  const std::string text = format_model_study(*study, options);
  const std::size_t epoch_at = text.find("epoch / ");
  ASSERT_NE(epoch_at, std::string::npos) << text;
  EXPECT_LT(epoch_at, text.find(eval.callpath + " / ")) << text;
  EXPECT_THAT(text, HasSubstr("(6 points, 18 values, modeler trainscope)"));
  EXPECT_THAT(text, HasSubstr("  model:   " + epoch.model.formula() + "\n"));
  EXPECT_THAT(text, HasSubstr("  c++:     " + epoch.model.cpp() + "\n"));
  EXPECT_THAT(text, HasSubstr("  predict: p=256 -> "));
  EXPECT_THAT(text, HasSubstr("(90% band)"));
  EXPECT_THAT(text, HasSubstr("  scaling vs p:"));
}

TEST(ModelStudy, SelectsSeriesByCallpathAndMetric) {
  ModelStudyOptions options;
  options.callpaths = {"eval"};
  absl::StatusOr<ModelStudy> study = study_measurements(Strong(), options);
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ(study->document.models.size(), 1u);
  EXPECT_EQ(study->document.models[0].callpath, "eval");

  options.metrics = {"bytes"};
  study = study_measurements(Strong(), options);
  EXPECT_EQ(study.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(error_of(study), HasSubstr("no region/metric of the input matches"));
  EXPECT_EQ(study_option_error(study.status()), std::nullopt);
}

TEST(ModelStudy, AnOptionNamingWhatTheInputLacksIsAnOptionError) {
  ModelStudyOptions options;
  options.predict = {{{"q", 4}}};
  absl::StatusOr<ModelStudy> study = study_measurements(Strong(), options);
  EXPECT_EQ(error_of(study), "predict: 'q' is not a parameter of the input");
  EXPECT_EQ(study_option_error(study.status()), "predict");

  options.predict = {{}};
  study = study_measurements(Strong(), options);
  EXPECT_EQ(error_of(study), "predict: no value for parameter 'p'");

  options.predict.clear();
  options.scaling = "gpus";
  study = study_measurements(Strong(), options);
  EXPECT_EQ(study_option_error(study.status()), "scaling");

  options.scaling.clear();
  options.plot_x = "x";
  study = study_measurements(Strong(), options);
  EXPECT_EQ(error_of(study), "plot_x: 'x' is not a parameter of the input");
  EXPECT_EQ(study_option_error(study.status()), "plot_x");
}

TEST(ModelStudy, ExtrapRefusesAnIncompleteInputNamingEverySeries) {
  absl::StatusOr<MeasurementSet> set = parse_extrap_text(
      "PARAMETER p\nPOINTS 2 4 8 16 32\nREGION full\nMETRIC time\n"
      "DATA 4\nDATA 5\nDATA 7\nDATA 11\nDATA 19\n"
      "REGION short\nMETRIC time\nDATA 4\nDATA 5\nDATA 7\nDATA 11\n",
      "in.txt");
  ASSERT_TRUE(set.ok()) << set.status();
  ModelStudyOptions options;
  options.inputs = {"in.txt"};
  options.model.modeler = Modeler::kExtrap;
  const std::string error = error_of(study_measurements(*set, options));
  EXPECT_THAT(error, StartsWith("in.txt: Extra-P refuses this input (InvalidExperimentError"));
  EXPECT_THAT(error, HasSubstr("\n  callpath 'short', metric 'time' has no measurement at (p=32)"));
  EXPECT_THAT(error, Not(HasSubstr("'full'")));

  // The default modeler models the points measured, and says so.
  options.model.modeler = Modeler::kTrainscope;
  absl::StatusOr<ModelStudy> study = study_measurements(*set, options);
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ(study->document.models.size(), 2u);
  ASSERT_FALSE(study->document.models[1].model.warnings.empty());
  EXPECT_THAT(study->document.models[1].model.warnings[0], HasSubstr("(p=32)"));
}

TEST(ModelStudy, PlotsGoToOnePathPerSeries) {
  EXPECT_EQ(plot_path("epoch.svg", 0, 1), "epoch.svg");
  EXPECT_EQ(plot_path("epoch.svg", 0, 2), "epoch-1.svg");
  EXPECT_EQ(plot_path("out/plot", 1, 2), "out/plot-2.svg");

  testing::TempDir tmp;
  ModelStudyOptions options;
  options.inputs = {tmp.write("strong.txt", kStrong)};
  options.plot = tmp.file("plot.svg");
  std::vector<std::string> warnings;
  absl::StatusOr<ModelStudy> study = model_study(options, &warnings);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(study->failures.empty()) << study->failures.front();
  ASSERT_EQ(study->plots.size(), 2u);
  for (const StudyPlot& plot : study->plots) {
    EXPECT_THAT(plot.svg, StartsWith("<svg"));
    std::ifstream in(plot.path, std::ios::binary);
    const std::string written((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(written, plot.svg) << plot.path;
  }
  EXPECT_EQ(study->plots[1].path, tmp.file("plot-2.svg"));

  // A plot that cannot be written is a failure; the models are still there.
  options.plot = tmp.file("no/such/dir/plot.svg");
  study = model_study(options, &warnings);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->document.models.size(), 2u);
  ASSERT_EQ(study->failures.size(), 2u);
  EXPECT_THAT(study->failures[0], StartsWith("plot " + tmp.file("no/such/dir/plot-1.svg") + ": "));
}

// Issue 26: one model per group (read_runs with `by`), each named by its
// group; a fit on 3 points says so first and shows no perfect adj. R^2.
TEST(ModelStudy, GroupsAreModeledAndNamedAndTooFewPointsAreSaid) {
  MeasurementSet set;
  set.parameters = {"batch_size"};
  for (const char* lr : {"0.01", "0.1"}) {
    Series s;
    s.callpath = "BATCH";
    s.metric = "mean";
    s.group = {{"lr", lr}};
    s.points = {{{32}, {0.01, 0.02}}, {{64}, {0.012, 0.025}}, {{128}, {0.04, 0.01}}};
    set.series.push_back(s);
  }
  ModelStudyOptions options;
  options.predict = {{{"batch_size", 256}}};
  absl::StatusOr<ModelStudy> study = study_measurements(set, options);
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ(study->document.models.size(), 2u);
  EXPECT_EQ(study->document.models[1].group,
            (std::vector<std::pair<std::string, std::string>>{{"lr", "0.1"}}));
  const ModeledSeries& first = study->document.models[0];
  EXPECT_TRUE(first.model.too_few_points);
  ASSERT_TRUE(first.model.is_constant()) << first.model.formula();
  EXPECT_EQ(first.model.costs.ar2, 0);
  // The band holds the points' means (0.015, 0.0185, 0.025) that the constant misses.
  ASSERT_EQ(first.predictions.size(), 1u);
  EXPECT_LT(first.predictions[0].lower, 0.015);
  EXPECT_GT(first.predictions[0].upper, 0.025);

  const std::string text = format_model_study(*study, options);
  EXPECT_THAT(text, HasSubstr("BATCH / mean [lr=0.01]  (3 points, 6 values, modeler trainscope)\n"
                              "  model:   "));
  EXPECT_THAT(text, HasSubstr("BATCH / mean [lr=0.1]  (3 points"));
  EXPECT_THAT(text, HasSubstr("  caution: too few points to tell how the value scales with "
                              "batch_size (3 distinct values: 32, 64, 128)"));
  EXPECT_THAT(text, HasSubstr("adj. R^2 0 (a constant explains no variation)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("adj. R^2 1 ")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("warning: too few points")));  // said once
}

TEST(ModelStudy, InputsAreRunDirectoriesOrOneExtrapFile) {
  testing::TempDir tmp;
  ModelStudyOptions options;
  options.inputs = {tmp.str()};
  EXPECT_THAT(error_of(model_study(options)), HasSubstr("run directories need --params"));
  options.inputs = {tmp.str(), tmp.write("a.txt", kStrong)};
  EXPECT_THAT(error_of(model_study(options)), HasSubstr("not both"));
  options.inputs = {tmp.write("b.txt", kStrong), tmp.file("a.txt")};
  EXPECT_THAT(error_of(model_study(options)), HasSubstr("give one Extra-P measurement file"));
  options.inputs = {tmp.file("missing.txt")};
  EXPECT_THAT(error_of(model_study(options)), HasSubstr("missing.txt"));
  options.inputs = {tmp.file("b.txt")};
  options.runs.by = {"lr"};
  EXPECT_THAT(error_of(model_study(options)),
              HasSubstr("b.txt: --by and --repetition name run params"));
}

}  // namespace
}  // namespace trainscope::scaling
