// trainscope._core's comparison (include/trainscope/compare/compare.hpp), bound
// as typed classes like the diagnosis: CompareRequest (the sides and options,
// keyword arguments), Comparison, ComparePair and CompareRow. _compare runs
// compare::compare with the GIL released (and writes the baseline file when
// asked); trainscope/_compare.py turns the result into a DataFrame. Kinds,
// verdicts and units reach Python as the documents' names ("region", "slower").
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/compare/run_pair.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

using compare::CompareRequest;
using compare::Comparison;
using compare::Pair;
using compare::Row;

// The row's statistics as attributes of the row (stats::Comparison's fields).
template <typename T>
void StatsField(py::class_<Row>& c, const char* name, T stats::Comparison::*field) {
  c.def_property_readonly(name, [field](const Row& r) { return r.stats.*field; });
}

void BindRow(py::module_& core) {
  py::class_<Row> row(core, "CompareRow", R"doc(
One compared quantity: name (region key, "throughput", "data-wait" or a metric),
kind ("region"/"metric"), device ("CPU"/"GPU", "" for metrics), verdict
(slower/faster/same/inconclusive; metrics higher/lower/same/inconclusive), unit
("steps" or "runs"), median_a, median_b, ratio (B/A), low, high (its interval),
p_value, n_a, n_b, warmup_a, warmup_b, block_a, block_b, df, more_a, more_b, reason,
the tails p99_a, p99_b, max_a, max_b, and note (a stall, named).)doc");
  row.def_readonly("name", &Row::name)
      .def_property_readonly(
          "kind", [](const Row& r) { return std::string(compare::series_kind_name(r.kind)); })
      .def_readonly("device", &Row::device)
      .def_property_readonly("verdict",
                             [](const Row& r) { return std::string(compare::verdict_name(r)); })
      .def_property_readonly(
          "unit", [](const Row& r) { return std::string(stats::unit_name(r.stats.unit)); });
  StatsField(row, "median_a", &stats::Comparison::median_a);
  StatsField(row, "median_b", &stats::Comparison::median_b);
  StatsField(row, "ratio", &stats::Comparison::ratio);
  StatsField(row, "low", &stats::Comparison::low);
  StatsField(row, "high", &stats::Comparison::high);
  StatsField(row, "p_value", &stats::Comparison::p_value);
  StatsField(row, "n_a", &stats::Comparison::n_a);
  StatsField(row, "n_b", &stats::Comparison::n_b);
  StatsField(row, "warmup_a", &stats::Comparison::warmup_a);
  StatsField(row, "warmup_b", &stats::Comparison::warmup_b);
  StatsField(row, "block_a", &stats::Comparison::block_a);
  StatsField(row, "block_b", &stats::Comparison::block_b);
  StatsField(row, "df", &stats::Comparison::df);
  StatsField(row, "more_a", &stats::Comparison::more_a);
  StatsField(row, "more_b", &stats::Comparison::more_b);
  StatsField(row, "reason", &stats::Comparison::reason);
  row.def_readonly("p99_a", &Row::p99_a)
      .def_readonly("p99_b", &Row::p99_b)
      .def_readonly("max_a", &Row::max_a)
      .def_readonly("max_b", &Row::max_b)
      .def_readonly("note", &Row::note)
      .def("__repr__", [](const Row& r) {
        return "CompareRow(" + std::string(py::repr(py::str(r.name))) + ", " +
               std::string(compare::verdict_name(r)) + ", ratio=" + std::to_string(r.stats.ratio) +
               ")";
      });
}

void BindComparison(py::module_& core) {
  py::class_<Pair>(core, "ComparePair", R"doc(
A and B (or one configuration of two sweeps) compared: config ("" or the params the
configurations share), runs_a, runs_b, rows (CompareRow list, largest effect first),
overall (a CompareRow: the step time, else the geometric mean of the CPU keys),
overall_basis, contention_a, contention_b (each side's contention share: the share of
the time its threads wanted a CPU that they waited for one; NaN without readings),
step_wait_a, step_wait_b (each side's step thread's wait for a CPU over its steps; NaN where
not recorded), warnings.)doc")
      .def_readonly("config", &Pair::config)
      .def_readonly("runs_a", &Pair::runs_a)
      .def_readonly("runs_b", &Pair::runs_b)
      .def_readonly("rows", &Pair::rows)
      .def_readonly("overall", &Pair::overall)
      .def_readonly("overall_basis", &Pair::overall_basis)
      .def_readonly("contention_a", &Pair::contention_a)
      .def_readonly("contention_b", &Pair::contention_b)
      .def_readonly("step_wait_a", &Pair::step_wait_a)
      .def_readonly("step_wait_b", &Pair::step_wait_b)
      .def_readonly("warnings", &Pair::warnings);
  py::class_<Comparison>(core, "Comparison", R"doc(
What compare() compared: label_a, label_b, threshold, confidence, pairs (ComparePair
list), warnings (of the whole comparison); to_json() the document (the one writer,
without the sides' data).)doc")
      .def_readonly("label_a", &Comparison::label_a)
      .def_readonly("label_b", &Comparison::label_b)
      .def_readonly("threshold", &Comparison::threshold)
      .def_readonly("confidence", &Comparison::confidence)
      .def_readonly("pairs", &Comparison::pairs)
      .def_readonly("warnings", &Comparison::warnings)
      .def(
          "to_json",
          [](const Comparison& c, int indent) {
            return compare::compare_json(c, indent, /*with_data=*/false);
          },
          py::arg("indent") = -1);
}

void BindRequest(py::module_& core) {
  py::class_<CompareRequest>(core, "CompareRequest", R"doc(
What compare() asks, as compare::CompareRequest: the sides as specs (a, b) or as
filters over a root (root, filter_a, filter_b), keys, metrics, rank and the statistics'
options (threshold, confidence, min_steps, resamples, warmup, run_noise).)doc")
      .def(py::init([](std::vector<std::string> a, std::vector<std::string> b, std::string root,
                       std::string filter_a, std::string filter_b, std::vector<std::string> keys,
                       std::vector<std::string> metrics, std::optional<std::uint32_t> rank,
                       double threshold, double confidence, std::size_t min_steps,
                       std::size_t resamples, bool warmup, double run_noise) {
             CompareRequest request;
             request.a = std::move(a);
             request.b = std::move(b);
             request.root = std::move(root);
             request.filter_a = std::move(filter_a);
             request.filter_b = std::move(filter_b);
             request.options.keys = std::move(keys);
             request.gather.metrics = std::move(metrics);
             request.gather.rank = rank;
             request.options.stats.threshold = threshold;
             request.options.stats.confidence = confidence;
             request.options.stats.min_steps = min_steps;
             request.options.stats.resamples = resamples;
             request.options.stats.detect_warmup = warmup;
             request.options.stats.run_noise = run_noise;
             return request;
           }),
           py::kw_only(), py::arg("a") = std::vector<std::string>{},
           py::arg("b") = std::vector<std::string>{}, py::arg("root") = "",
           py::arg("filter_a") = "", py::arg("filter_b") = "",
           py::arg("keys") = std::vector<std::string>{},
           py::arg("metrics") = std::vector<std::string>{}, py::arg("rank") = py::none(),
           py::arg("threshold") = 0.02, py::arg("confidence") = 0.95, py::arg("min_steps") = 50,
           py::arg("resamples") = 2000, py::arg("warmup") = true,
           py::arg("run_noise") = compare::kDefaultRunNoise)
      .def_readonly("a", &CompareRequest::a)
      .def_readonly("b", &CompareRequest::b)
      .def_readonly("root", &CompareRequest::root)
      .def_readonly("filter_a", &CompareRequest::filter_a)
      .def_readonly("filter_b", &CompareRequest::filter_b);
}

}  // namespace

void RegisterCompare(py::module_& core) {
  BindRow(core);
  BindComparison(core);
  BindRequest(core);
  core.def(
      "_compare",
      [](const CompareRequest& request, std::optional<std::string> save, bool force) {
        if (save) ThrowIfError(compare::check_save_path(request, *save, force));
        absl::StatusOr<Comparison> result;
        {
          py::gil_scoped_release release;
          result = compare::compare(request);
          if (result.ok() && save) {
            const absl::Status written = compare::write_comparison(*result, *save);
            if (!written.ok()) result = written;
          }
        }
        ThrowIfError(result.status());
        return std::move(*result);
      },
      py::arg("request"), py::arg("save") = py::none(), py::arg("force") = false);
  core.def(
      "_run_and_compare",
      [](const CompareRequest& request, std::string command_a, std::string command_b,
         std::string dir, std::size_t repeat, std::size_t warmup_runs, double max_time_s) {
        compare::RunPairRequest pair;
        pair.command_a = std::move(command_a);
        pair.command_b = std::move(command_b);
        pair.dir = std::move(dir);
        pair.repeat = repeat;
        pair.warmup_runs = warmup_runs;
        pair.max_time_s = max_time_s;
        pair.options = request.options;
        absl::StatusOr<compare::RunPairResult> result;
        {
          py::gil_scoped_release release;
          result = compare::run_and_compare(pair);
        }
        ThrowIfError(result.status());
        return py::make_tuple(std::move(result->comparison), result->order, result->looks,
                              result->look_confidence, result->final_confidence, result->stop);
      },
      py::arg("request"), py::arg("command_a"), py::arg("command_b"), py::arg("dir"),
      py::arg("repeat"), py::arg("warmup_runs"), py::arg("max_time_s"));
  core.def(
      "_failing_rows",
      [](const Comparison& comparison, std::vector<std::string> keys, double pct) {
        return compare::failing_rows(comparison, keys, pct);
      },
      py::arg("comparison"), py::arg("keys"), py::arg("pct"));
  core.def(
      "_parse_comparison",
      [](const std::string& document) {
        absl::StatusOr<Comparison> c = compare::parse_comparison(document, "<comparison>");
        ThrowIfError(c.status());
        return std::move(*c);
      },
      py::arg("document"));
}

}  // namespace trainscope::python
