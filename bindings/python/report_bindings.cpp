// trainscope._core._render_report: `trainscope report` for Python
// and _write_report_page (include/trainscope/report/report.hpp); trainscope/_report.py
// wraps them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/report/report.hpp"

namespace py = pybind11;

namespace trainscope::python {

void RegisterReport(py::module_& core) {
  core.def(
      "_render_report",
      [](const std::vector<std::string>& inputs, const std::string& title,
         const std::string& scaling, std::size_t max_points, bool progress, bool compare) {
        report::ReportOptions options;
        options.inputs = inputs;
        options.title = title;
        options.scaling_parameter = scaling;
        options.max_points = max_points;
        options.compare = compare;
        if (progress) options.progress = report::progress_printer(stderr, /*terminal=*/false);
        absl::StatusOr<std::string> html;
        {
          py::gil_scoped_release release;  // reading a large run takes seconds
          html = report::render_report(options);
        }
        ThrowIfError(html.status());
        return py::bytes(*html);
      },
      py::arg("inputs"), py::arg("title") = "", py::arg("scaling") = "",
      py::arg("max_points") = report::ReportOptions{}.max_points, py::arg("progress") = false,
      py::arg("compare") = false, "The report page's HTML (UTF-8 bytes); see trainscope.report().");
  core.def(
      "_write_report_page",
      [](py::bytes html, py::handle path) {
        const std::string target = ToPath(path, "output");
        std::string text = html;
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = report::write_report_page(text, target);
        }
        ThrowIfError(status);
      },
      py::arg("html"), py::arg("path"),
      "Writes a rendered page (UTF-8 bytes) to `path`, replaced atomically and fsynced.");
  core.def("_chart_library", &report::chart_library);
}

}  // namespace trainscope::python
