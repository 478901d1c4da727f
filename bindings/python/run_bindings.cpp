// trainscope._core._Run: the C++ Run for trainscope/run.py, which adds
// MLflow-style module functions (start_run, log_metric, ...) around it; and
// trainscope._core._RunReader: the C++ RunReader for trainscope/_reading.py
// (read_run, search_runs), which builds pandas DataFrames from what it reads;
// and _parse_run_filter, search_runs' filter parsed by the C++ run filter.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "py_timers.hpp"
#include "trainscope/export/perfetto_exporter.hpp"
#include "trainscope/export/wandb_exporter.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_filter.hpp"
#include "trainscope/run/run_reader.hpp"

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

// A damaged run directory is a ValueError (as any bad input), whatever absl
// code the reader gives it; a missing one FileNotFoundError, an unreadable
// one PermissionError or another OSError, as Python's own file errors.
void ThrowIfReadError(const absl::Status& status) {
  if (status.ok()) return;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      ThrowIfError(absl::InvalidArgumentError(status.message()));
      break;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
      ThrowIfError(status);
      break;
    default:
      PyErr_SetString(PyExc_OSError, std::string(status.message()).c_str());
      throw py::error_already_set();
  }
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfReadError(value.status());
  return *std::move(value);
}

std::string StatusName(RunStatus status) { return std::string(run_status_name(status)); }

// The fields every process file has, as the DataFrames' columns name them.
template <typename State>
py::dict ProcessDict(const State& s) {
  py::dict d;
  d["host"] = s.host;
  d["pid"] = s.pid;
  d["status"] = StatusName(s.status);
  d["crashed"] = s.crashed;
  d["start_time_ms"] = s.start_time_ms;
  d["end_time_ms"] = s.end_time_ms;
  d["heartbeat_ms"] = s.heartbeat_ms;
  d["flush_interval_ms"] = s.flush_interval_ms;
  return d;
}

py::list RankDicts(const RunReader& r) {
  py::list out;
  for (const RankState& s : r.ranks()) {
    py::dict d = ProcessDict(s);
    d["rank"] = s.rank.rank;
    d["local_rank"] = s.rank.local_rank;
    d["world_size"] = s.rank.world_size;
    d["launcher"] = s.launcher;
    out.append(d);
  }
  return out;
}

py::list LauncherDicts(const RunReader& r) {
  py::list out;
  for (const LauncherState& s : r.launchers()) {
    py::dict d = ProcessDict(s);
    d["command"] = s.command;
    d["exit_code"] = s.exit_code;
    d["term_signal"] = s.term_signal;
    out.append(d);
  }
  return out;
}

const char* KindName(RunFileKind kind) {
  switch (kind) {
    case RunFileKind::kRegions:
      return "regions";
    case RunFileKind::kMetrics:
      return "metrics";
    case RunFileKind::kSummary:
      return "summary";
    case RunFileKind::kHostMetrics:
      break;
  }
  return "host_metrics";
}

py::list FileDicts(const RunReader& r) {
  py::list out;
  for (const RunFile& f : r.files()) {
    py::dict d;
    d["kind"] = KindName(f.kind);
    d["rank"] = f.rank == kNoRank ? py::object(py::none()) : py::int_(f.rank);
    d["host"] = f.host;
    d["path"] = f.path;
    d["size_bytes"] = f.size_bytes;
    d["csv_header"] = py::bytes(f.csv_header.data(), f.csv_header.size());
    out.append(d);
  }
  return out;
}

// None when absent; the error (naming the file) otherwise.
template <typename T>
std::optional<T> UnlessNotFound(absl::StatusOr<T> value) {
  if (absl::IsNotFound(value.status())) return std::nullopt;
  return ValueOrThrow(std::move(value));
}

// [(column, op, "string" or "number", str or float)] of parse_run_filter;
// a bad filter is a ValueError with its message.
py::list ParseRunFilter(const std::string& text) {
  absl::StatusOr<RunFilter> filter = parse_run_filter(text);
  ThrowIfError(filter.status());
  py::list out;
  for (const RunFilterClause& clause : filter->clauses) {
    py::object literal =
        clause.numeric ? py::object(py::float_(clause.number)) : py::object(py::str(clause.text));
    out.append(py::make_tuple(clause.column, clause.op, clause.numeric ? "number" : "string",
                              std::move(literal)));
  }
  return out;
}

void RegisterRunReader(py::module_& m) {
  m.def("_is_run_directory", &is_run_directory, py::arg("dir"),
        "Whether dir holds a run (its run.json).");
  m.def("_parse_run_filter", &ParseRunFilter, py::arg("text"),
        "search_runs' filter as [(column, op, kind, literal)], kind \"string\" (literal str) or "
        "\"number\" (float): trainscope/run/run_filter.hpp. Raises ValueError for a bad one.");
  py::class_<RunReader>(m, "_RunReader")
      .def_static(
          "open",
          [](const std::string& dir) {
            absl::StatusOr<RunReader> reader;
            {
              py::gil_scoped_release release;  // reads every rank file
              reader = RunReader::Open(dir);
            }
            return ValueOrThrow(std::move(reader));
          },
          py::arg("dir"))
      .def_property_readonly("dir", &RunReader::dir)
      .def_property_readonly("version", &RunReader::version)
      .def_property_readonly("id", [](const RunReader& r) { return r.info().id; })
      .def_property_readonly("name", [](const RunReader& r) { return r.info().name; })
      .def_property_readonly("experiment", [](const RunReader& r) { return r.info().experiment; })
      .def_property_readonly("start_time_ms",
                             [](const RunReader& r) { return r.info().start_time_ms; })
      .def_property_readonly("end_time_ms", [](const RunReader& r) { return r.info().end_time_ms; })
      .def_property_readonly("status",
                             [](const RunReader& r) { return StatusName(r.info().status); })
      .def_property_readonly("params", [](const RunReader& r) { return r.info().params; })
      .def_property_readonly("tags", [](const RunReader& r) { return r.info().tags; })
      .def_property_readonly("crashed", &RunReader::crashed)
      .def_property_readonly("in_progress", &RunReader::in_progress)
      .def_property_readonly("world_size", &RunReader::world_size)
      .def_property_readonly("hosts", &RunReader::hosts)
      .def_property_readonly("ranks", &RankDicts)
      .def_property_readonly("launchers", &LauncherDicts)
      .def("files", &FileDicts)
      .def("artifacts", &RunReader::artifacts)
      .def(
          "check_summary",
          [](const RunReader& r, std::uint32_t rank) { ValueOrThrow(r.read_summary(rank)); },
          py::arg("rank"), "Raises ValueError naming summary-<rank>.json when it is damaged.")
      .def("environment", [](const RunReader& r) { return UnlessNotFound(r.environment()); })
      .def(
          "log_tail",
          [](const RunReader& r, const std::string& log, std::size_t max_bytes) {
            if (log != "stdout" && log != "stderr") {
              throw py::value_error("log must be 'stdout' or 'stderr', not '" + log + "'");
            }
            std::optional<std::string> tail = UnlessNotFound(
                r.log_tail(log == "stdout" ? RunLog::kStdout : RunLog::kStderr, max_bytes));
            return tail ? py::object(py::bytes(*tail)) : py::object(py::none());
          },
          py::arg("log"), py::arg("max_bytes"),
          "The last max_bytes of stdout.log or stderr.log from a whole line (bytes), or None.")
      // --- check_run (trainscope/run/run_check.hpp): the damage every reader names.
      .def(
          "check",
          [](const RunReader& r) {
            absl::StatusOr<std::vector<RunProblem>> problems;
            {
              py::gil_scoped_release release;  // may count the rows of regions files
              problems = check_run(r);
            }
            py::list out;
            for (const RunProblem& p : ValueOrThrow(std::move(problems))) {
              py::dict d;
              d["error"] = p.error;
              d["kind"] = [&p] {
                switch (p.kind) {
                  case RunProblemKind::kRegionsMissing:
                    return "regions_missing";
                  case RunProblemKind::kRegionsEmpty:
                    return "regions_empty";
                  case RunProblemKind::kRegionsShort:
                    return "regions_short";
                  case RunProblemKind::kRegionsMixed:
                    return "regions_mixed";
                  case RunProblemKind::kSummaryUnreadable:
                    break;
                }
                return "summary_unreadable";
              }();
              d["rank"] = p.rank;
              d["path"] = p.path;
              d["key"] = p.key;
              d["device"] = std::string(device_name(p.device));
              d["summary_rows"] = p.summary_rows;
              d["file_rows"] = p.file_rows;
              d["message"] = p.message;
              out.append(std::move(d));
            }
            return out;
          },
          "The run's damage as check_run finds it: [{error, kind, rank, path, key, device, "
          "summary_rows, file_rows, message}]; errors first within a rank. Raises ValueError for "
          "a regions file that cannot be read.")
      .def_static("holds_run_files", &holds_run_files, py::arg("dir"),
                  "Whether dir holds a run or what is left of one (run.json, or rank, launcher, "
                  "regions or summary files).");
}

}  // namespace

void RegisterRun(py::module_& m) {
  RegisterRunReader(m);
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
