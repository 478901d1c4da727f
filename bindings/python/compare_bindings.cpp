// trainscope._core's comparison (include/trainscope/compare/compare.hpp):
// compare::compare with the GIL released, returning the one JSON writer's
// document (and writing the baseline file when asked); trainscope/compare.py
// turns it into a DataFrame.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/compare/compare.hpp"

namespace py = pybind11;

namespace trainscope::python {

void RegisterCompare(py::module_& core) {
  core.def(
      "_compare",
      [](std::vector<std::string> a, std::vector<std::string> b, std::string root,
         std::string filter_a, std::string filter_b, std::vector<std::string> keys,
         std::vector<std::string> metrics, std::optional<std::uint32_t> rank, double threshold,
         double confidence, std::size_t min_steps, std::size_t resamples, bool warmup,
         double run_noise, std::optional<std::string> save, bool force) {
        compare::CompareRequest request;
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
        if (save) ThrowIfError(compare::check_save_path(request, *save, force));
        absl::StatusOr<compare::Comparison> result;
        {
          py::gil_scoped_release release;
          result = compare::compare(request);
          if (result.ok() && save) {
            const absl::Status written = compare::write_comparison(*result, *save);
            if (!written.ok()) result = written;
          }
        }
        ThrowIfError(result.status());
        return compare::compare_json(*result, -1, /*with_data=*/false);
      },
      py::arg("a"), py::arg("b"), py::arg("root"), py::arg("filter_a"), py::arg("filter_b"),
      py::arg("keys"), py::arg("metrics"), py::arg("rank"), py::arg("threshold"),
      py::arg("confidence"), py::arg("min_steps"), py::arg("resamples"), py::arg("warmup"),
      py::arg("run_noise"), py::arg("save"), py::arg("force"));
  core.def(
      "_failing_rows",
      [](const std::string& document, std::vector<std::string> keys, double pct) {
        absl::StatusOr<compare::Comparison> c = compare::parse_comparison(document, "<comparison>");
        ThrowIfError(c.status());
        return compare::failing_rows(*c, keys, pct);
      },
      py::arg("document"), py::arg("keys"), py::arg("pct"));
}

}  // namespace trainscope::python
