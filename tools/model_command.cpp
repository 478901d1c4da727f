// `trainscope model`: from runs or Extra-P measurement files to a scaling
// model per (region, metric), its costs, predictions with a band, derived
// scaling views, and an SVG plot. Flags and printing; the study is
// trainscope::scaling::model_study (trainscope/scaling/model_study.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "trainscope/scaling/model_document.hpp"
#include "trainscope/scaling/model_study.hpp"

namespace trainscope::cli {
// The command's own names: a named namespace, so that the tools compile as one
// unit (TRAINSCOPE_UNITY_BUILD) without two commands' names meeting.
namespace model_cmd {

namespace sc = trainscope::scaling;

constexpr char kModelDescription[] =
    "Fits a scaling model f(p, ...) = c0 + sum c_k * p^i * log2(p)^j (Extra-P's PMNF) to\n"
    "each region/metric of the input, prints it with its costs, and predicts.\n"
    "\n"
    "INPUT is an Extra-P measurement file (text .txt, JSON .json, JSON Lines .jsonl),\n"
    "or runs made by trainscope (a run, a directory of runs, a sweep directory): a\n"
    "point is one value of --params; runs there are its repetitions when no other\n"
    "param differs (else: --by, --repetition).\n";

constexpr char kModelFooter[] =
    "Examples:\n"
    "  trainscope model --params p --key EPOCH runs/\n"
    "  trainscope model --params batch_size --by lr --repetition seed SWEEP_DIR\n"
    "  trainscope model --modeler extrap --option allow_negative_exponents=True m.txt\n"
    "  trainscope model --predict p=256 --svg epoch.svg --json m.jsonl\n"
    "\n"
    "Exit status: 0 modeled, 1 an input could not be read or modeled, 2 bad usage.\n";

struct ModelArgs {
  sc::ModelStudyOptions study;
  bool json = false;
};

// --- Command line ----------------------------------------------------------

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
    if (eq == std::string::npos) {
      bad_value(fmt::format("--predict '{}': expected NAME=NUMBER[,NAME=NUMBER...]", value));
    }
    point[pair.substr(0, eq)] = number("--predict " + pair.substr(0, eq), pair.substr(eq + 1));
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
                        out->study.model.extrap.set(value.substr(0, eq), value.substr(eq + 1));
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
                    out->study.model.modeler = named_value("--modeler", sc::parse_modeler(value));
                  });
  add_modeler_option(line, out);
  line->add_value("--physical-up-to", "F",
                  "trainscope modeler: vet models up to F x the largest point\n"
                  "(default 8; 0 turns the veto off)",
                  [out](const std::string& value) {
                    const double factor = number("--physical-up-to", value, {/*min=*/0});
                    out->study.model.reject_nonphysical = factor > 0;
                    out->study.model.extrapolation_factor = factor;
                  });
  line->add_value("--significance", "A",
                  "trainscope modeler: keep a term only when an F-test against the\n"
                  "constant (noise from the repetitions) rejects at level A\n"
                  "(default 0.05; 0 turns the test off)",
                  [out](const std::string& value) {
                    out->study.model.significance = number(
                        "--significance", value, {/*min=*/0, /*max=*/1, false, /*max_open=*/true});
                  });
  line->add_value("--measure", "M", "mean (default) | median | minimum | maximum of repetitions",
                  [out](const std::string& value) {
                    const sc::Measure measure = named_value("--measure", sc::parse_measure(value));
                    out->study.model.extrap.measure = measure;
                    out->study.band.measure = measure;
                  });
  line->add_value("--callpath", "NAME", "only this region (repeatable)",
                  [out](const std::string& value) { out->study.callpaths.push_back(value); });
  line->add_value("--metric", "NAME", "only this metric (repeatable)",
                  [out](const std::string& value) { out->study.metrics.push_back(value); });
}

void add_run_directory_options(CommandLine* line, ModelArgs* out) {
  line->group("Run directories");
  line->add_value(
      "--params", "P[,Q..]", "run params that are the model's parameters (required)",
      [out](const std::string& value) { out->study.runs.parameters = absl::StrSplit(value, ','); });
  line->add_value(
      "--by", "P[,Q..]",
      "one model per value of these run params (e.g. lr), which\n"
      "otherwise vary between runs at one point: an error",
      [out](const std::string& value) { out->study.runs.by = absl::StrSplit(value, ','); });
  line->add_value("--repetition", "P[,Q..]",
                  "run params whose values are repetitions (e.g. seed): runs\n"
                  "that differ only in them are repetitions of one point",
                  [out](const std::string& value) {
                    out->study.runs.repetitions = absl::StrSplit(value, ',');
                  });
  line->add_value("--key", "KEY",
                  "what is measured: a region key (BATCH, EPOCH, FORWARD, ...)\n"
                  "or metric:NAME for a logged metric; default BATCH",
                  &out->study.runs.what);
  line->add_value("--stat", "S",
                  "mean (default) | median | min | max | total | count | p95 |\n"
                  "p99 | last | rate (count per second)",
                  &out->study.runs.stat);
  line->add_value("--device", "D", "cpu (default) | gpu region times",
                  [out](const std::string& value) {
                    if (value != "cpu" && value != "gpu") {
                      bad_value(fmt::format("--device '{}': use cpu or gpu", value));
                    }
                    out->study.runs.device = value;
                  });
  line->add_value("--ranks", "A", "mean (default, as Extra-Deep) | max (slowest rank) | min | sum",
                  [out](const std::string& value) {
                    out->study.runs.ranks =
                        named_value("--ranks", sc::parse_rank_aggregation(value));
                  });
  line->add_value(
      "--scale", "X", "multiply every value by X (e.g. samples per batch)",
      [out](const std::string& value) { out->study.runs.scale = number("--scale", value); });
}

void add_band_options(CommandLine* line, ModelArgs* out) {
  line->add_value(
      "--predict", "P=V[,Q=W]", "predict at this point, with a band (repeatable)",
      [out](const std::string& value) { out->study.predict.push_back(parse_point(value)); });
  line->add_value("--confidence", "C", "band coverage, default 0.9",
                  [out](const std::string& value) {
                    out->study.band.confidence =
                        number("--confidence", value, {0, 1, /*min_open=*/true, /*max_open=*/true});
                  });
  line->add_value("--resamples", "N", "bootstrap resamples for the band, default 400",
                  [out](const std::string& value) {
                    out->study.band.resamples = count("--resamples", value, 10);
                  });
}

void add_output_options(CommandLine* line, ModelArgs* out) {
  line->group("Output");
  add_band_options(line, out);
  line->add_value("--scaling", "P", "speedup, parallel efficiency and cost against resource P",
                  &out->study.scaling);
  line->add_value("--svg", "FILE",
                  "plot measured points, model and extrapolation band; with\n"
                  "several series, FILE-<n>.svg per series",
                  &out->study.plot);
  line->add_value("--plot-x", "P", "the plot's x parameter (default: the first)",
                  &out->study.plot_x);
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
  line->add_positionals("INPUT", &out.study.inputs, /*options_end_at_first=*/false);
  if (std::optional<int> done = line->parse(args)) {
    *exit_code = *done;
    return std::nullopt;
  }
  if (out.study.inputs.empty()) {
    *exit_code = line->usage_error("no input given");
    return std::nullopt;
  }
  return out;
}

// --- Output ----------------------------------------------------------------

// "trainscope model: " before each line of a message (continuation lines,
// indented, as they are).
void print_error(const std::string& message) {
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    const std::string line = message.substr(start, end - start);
    const bool continued = !line.empty() && line.front() == ' ';
    std::fprintf(stderr, "%s%s\n", continued ? "" : "trainscope model: ", line.c_str());
    start = end + 1;
  }
}

}  // namespace model_cmd

int model_command(const std::vector<std::string>& raw_args) {
  using namespace model_cmd;  // NOLINT(build/namespaces): this file's own names
  CommandLine line(
      {"model", "trainscope model [options] INPUT...", kModelDescription, kModelFooter});
  int exit_code = kExitOk;
  const std::optional<ModelArgs> parsed = parse(&line, raw_args, &exit_code);
  if (!parsed) return exit_code;
  const ModelArgs& args = *parsed;

  std::vector<std::string> warnings;
  absl::StatusOr<sc::ModelStudy> study = sc::model_study(args.study, &warnings);
  for (const std::string& w : warnings) {
    std::fprintf(stderr, "trainscope model: warning: %s\n", w.c_str());
  }
  if (!study.ok()) {
    if (std::optional<std::string> option = sc::study_option_error(study.status())) {
      // "plot_x: why" -> "--plot-x: why", as the command line spells it.
      std::string flag = "--" + *option;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return line.usage_error(flag + std::string(study.status().message()).substr(option->size()));
    }
    print_error(std::string(study.status().message()));
    return kExitFailed;
  }
  for (const std::string& failure : study->failures) print_error(failure);
  if (args.json) {
    const std::string text = sc::model_document_json(study->document);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    const std::string text = sc::format_model_study(*study, args.study);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return study->failures.empty() ? kExitOk : kExitFailed;
}

}  // namespace trainscope::cli
