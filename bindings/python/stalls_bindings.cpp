// trainscope._core's data-stall functions: one pass's metrics (names and
// values, from trainscope::stalls::pass_metrics) and the loop control of
// `trainscope stalls` (stalls::LoopControl::FromEnvironment) for the Python
// timed loader (trainscope/_stalls.py), the names it records under, and the
// differential analysis (stalls::run_differential) for trainscope/stalls.py:
// the C++ definitions, so that Python holds no second copy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/differential.hpp"
#include "trainscope/stalls/timed_loader.hpp"

namespace py = pybind11;

namespace trainscope::python {

void RegisterStalls(py::module_& core) {
  core.attr("_STALLS_MODE_ENV") = stalls::kModeEnv;
  core.attr("_STALLS_ITERATIONS_ENV") = stalls::kIterationsEnv;
  core.attr("_STALLS_WARMUP_ENV") = stalls::kWarmupEnv;
  core.attr("_STALLS_PASS_KEY") = stalls::kPassKey;
  core.attr("_STALLS_ITERATION_KEY") = stalls::kIterationKey;
  core.attr("_STALLS_BATCH_SIZE_PARAM") = stalls::kBatchSizeParam;
  core.attr("_STALLS_MODE_PARAM") = stalls::kModeParam;
  core.attr("_STALLS_HANDED_OUT_METRIC") = stalls::kHandedOutMetric;
  core.def(
      "_pass_metrics",
      [](const std::vector<double>& waits_s, double wall_s) {
        py::dict out;
        for (const auto& [name, value] :
             stalls::pass_metrics(stalls::pass_stalls(waits_s, wall_s))) {
          out[py::str(name)] = value;
        }
        return out;
      },
      py::arg("waits_s"), py::arg("wall_s"),
      "One pass's stalls/ metrics, name -> value (trainscope::stalls::pass_metrics).");
  core.def(
      "_stalls_loop_control",
      []() {
        absl::StatusOr<stalls::LoopControl> control = stalls::LoopControl::FromEnvironment();
        ThrowIfError(control.status());
        py::dict out;
        out["mode"] = control->mode;
        out["limit"] = control->limit ? py::object(py::int_(*control->limit)) : py::none();
        out["synthetic"] = control->synthetic();
        out["loader_only"] = control->loader_only();
        return out;
      },
      "What `trainscope stalls` asks of the loop, from TRAINSCOPE_STALLS_MODE, _ITERATIONS and "
      "_WARMUP (stalls::LoopControl::FromEnvironment); ValueError naming a bad variable.");
  core.def(
      "_run_differential",
      [](const std::vector<std::string>& command, const std::string& dataset, int iterations,
         int warmup, const std::string& vary_key, const std::vector<int>& vary_values,
         const std::string& dir, bool progress) {
        stalls::DifferentialOptions options;
        options.command = command;
        options.dataset = dataset;
        options.iterations = iterations;
        options.warmup = warmup;
        options.vary_key = vary_key;
        options.vary_values = vary_values;
        options.dir = dir;
        if (progress) {
          options.progress = [](const std::string& line) {
            std::fprintf(stderr, "trainscope stalls: %s\n", line.c_str());
          };
        }
        absl::StatusOr<stalls::DifferentialAnalysis> analysis;
        {
          py::gil_scoped_release release;  // the runs take minutes
          analysis = stalls::run_differential(options);
        }
        ThrowIfError(analysis.status());
        return std::make_tuple(analysis->dir, stalls::differential_json(*analysis),
                               stalls::format_differential(*analysis, command));
      },
      py::arg("command"), py::arg("dataset"), py::arg("iterations"), py::arg("warmup"),
      py::arg("vary_key"), py::arg("vary_values"), py::arg("dir"), py::arg("progress"),
      "stalls::run_differential: (the analysis directory, stalls.json's text, the text "
      "`trainscope stalls --dataset` prints); see trainscope.stalls.run_differential().");
}

}  // namespace trainscope::python
