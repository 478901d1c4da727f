// trainscope._core._Run: the C++ Run for trainscope/run.py, which adds
// MLflow-style module functions (start_run, log_metric, ...) around it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "py_timers.hpp"
#include "trainscope/export/perfetto_exporter.hpp"
#include "trainscope/export/wandb_exporter.hpp"
#include "trainscope/run/run.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

std::unique_ptr<Run> StartRun(std::optional<std::string> root, std::optional<std::string> name,
                              std::optional<std::string> experiment,
                              std::map<std::string, std::string> params,
                              std::map<std::string, std::string> tags, double flush_interval_s) {
  RunOptions options;
  if (root) options.root = *root;
  if (name) options.name = *name;
  if (experiment) options.experiment = *experiment;
  options.params = std::move(params);
  options.tags = std::move(tags);
  options.flush_interval = absl::Seconds(flush_interval_s);
  // Python owns SIGINT (KeyboardInterrupt); trainscope/run.py maps it and
  // SIGTERM to a KILLED status itself.
  options.handle_signals = false;
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(std::move(options));
  ThrowIfError(run.status());
  return std::move(*run);
}

RunStatus ToStatus(const std::string& name) {
  absl::StatusOr<RunStatus> status = parse_run_status(name);
  ThrowIfError(status.status());
  return *status;
}

// Timer or CPUGPUTimer (or a Python subclass of either).
template <typename F>
void WithTimer(py::handle object, F&& f) {
  if (py::isinstance<PyTimer>(object)) {
    f(py::cast<PyTimer&>(object).timer);
  } else if (py::isinstance<PyCPUGPUTimer>(object)) {
    f(py::cast<PyCPUGPUTimer&>(object).timer);
  } else {
    throw py::type_error("expected a trainscope Timer or CPUGPUTimer");
  }
}

}  // namespace

void RegisterRun(py::module_& m) {
  py::class_<Run>(m, "_Run")
      .def_static("start", &StartRun, py::kw_only(), py::arg("root") = py::none(),
                  py::arg("name") = py::none(), py::arg("experiment") = py::none(),
                  py::arg("params") = std::map<std::string, std::string>{},
                  py::arg("tags") = std::map<std::string, std::string>{},
                  py::arg("flush_interval") = 1.0)
      .def_property_readonly("dir", &Run::dir)
      .def_property_readonly("id", [](const Run& r) { return r.info().id; })
      .def_property_readonly("name", [](const Run& r) { return r.info().name; })
      .def_property_readonly("experiment", [](const Run& r) { return r.info().experiment; })
      .def_property_readonly("rank", [](const Run& r) { return r.rank().rank; })
      .def_property_readonly("world_size", [](const Run& r) { return r.rank().world_size; })
      .def("log_param", [](Run& r, const std::string& key,
                           const std::string& value) { ThrowIfError(r.log_param(key, value)); })
      .def("set_tag", [](Run& r, const std::string& key,
                         const std::string& value) { ThrowIfError(r.set_tag(key, value)); })
      .def(
          "log_metric",
          [](Run& r, const std::string& key, double value, std::optional<std::int64_t> step) {
            ThrowIfError(r.log_metric(key, value, step));
          },
          py::arg("key"), py::arg("value"), py::arg("step") = py::none())
      .def("log_artifact",
           [](Run& r, const std::string& path) { ThrowIfError(r.log_artifact(path)); })
      .def(
          "add_wandb_exporter",
          [](Run& r, std::optional<std::string> wandb_dir, std::optional<std::string> project) {
            WandbOptions options;
            if (wandb_dir) options.wandb_dir = *wandb_dir;
            if (project) options.project = *project;
            options.rank = r.rank().rank;
            absl::StatusOr<std::shared_ptr<WandbExporter>> exporter =
                WandbExporter::Create(options);
            ThrowIfError(exporter.status());
            r.add_exporter(*exporter);
          },
          py::arg("wandb_dir") = py::none(), py::arg("project") = py::none())
      .def("add_perfetto_exporter",
           [](Run& r, const std::string& path) {
             absl::StatusOr<std::shared_ptr<PerfettoExporter>> exporter =
                 PerfettoExporter::Create(path, r.rank().rank);
             ThrowIfError(exporter.status());
             r.add_exporter(*exporter);
           })
      .def("attach",
           [](Run& r, py::handle timer) { WithTimer(timer, [&](auto& t) { r.attach(t); }); })
      .def("add_summary_of",
           [](Run& r, py::handle timer) {
             WithTimer(timer, [&](auto& t) { r.add_summary(t.summary()); });
           })
      .def(
          "end",
          [](Run& r, const std::string& status) {
            const RunStatus s = ToStatus(status);
            absl::Status result;
            {
              py::gil_scoped_release release;  // flushing may wait on the disk
              result = r.end(s);
            }
            ThrowIfError(result);
          },
          py::arg("status") = "FINISHED");
}

}  // namespace trainscope::python
