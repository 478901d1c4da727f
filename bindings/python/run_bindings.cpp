// trainscope._core._Run: the C++ Run for trainscope/run.py, which adds
// MLflow-style module functions (start_run, log_metric, ...) around it; and
// trainscope._core._RunReader: the C++ RunReader for trainscope/_reading.py
// (read_run, search_runs), which builds pandas DataFrames from what it reads;
// and _RunFilter, search_runs' filter parsed and evaluated by the C++ run
// filter on the row of _RunReader.filter_row.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "py_ledger.hpp"
#include "py_timers.hpp"
#include "trainscope/export/perfetto_exporter.hpp"
#include "trainscope/export/wandb_exporter.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_filter.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/run/step_work.hpp"
#include "trainscope/steps/ledger.hpp"
#include "trainscope/steps/steps.hpp"
#include "trainscope/steps/warmup.hpp"

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

// Where Python's timers built before any run wait for the first one (run.py).
HoldingSink& HeldRegions() {
  static auto* sink = new HoldingSink();  // never destroyed: rings may outlive exit order
  return *sink;
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
    d["lost"] = s.lost;
    out.append(d);
  }
  return out;
}

// The launcher "<host>:<pid>" of the run; ValueError naming the known ones otherwise.
const LauncherState& LauncherNamed(const RunReader& r, const std::string& id) {
  std::string known;
  for (const LauncherState& s : r.launchers()) {
    if (s.id() == id) return s;
    known += (known.empty() ? "" : ", ") + s.id();
  }
  throw py::value_error("no launcher '" + id + "' in " + r.dir() +
                        " (launchers: " + (known.empty() ? "none" : known) + ")");
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

// --- read_run's columns ------------------------------------------------------
// A run CSV file's rows as numpy arrays, one per column, for the DataFrames of
// trainscope/_reading.py: read by RunReader (its checks and its messages:
// "regions-0.csv:101: duration_ns is ...", a ValueError), gathered in C++ with
// no Python object per row, a string column as category codes (int32) into its
// categories, sorted as pandas sorts them. None when the file is gone.

// A column handed to numpy through the buffer protocol (Python: np.asarray),
// zero-copy and writable, not through pybind11's numpy API: that API reads
// numpy's structures with the layout of the numpy its pybind11 knew, and
// pybind11 2.10 built arrays with a stride of 0 under numpy 2.
struct Column {
  std::shared_ptr<void> owner;
  void* data = nullptr;
  py::ssize_t size = 0;
  py::ssize_t itemsize = 0;
  std::string format;
};

template <typename T>
Column ToArray(std::vector<T>&& values, const char* format = nullptr) {
  static T empty{};  // a buffer's pointer is never null, even for no rows
  auto owned = std::make_shared<std::vector<T>>(std::move(values));
  Column column;
  column.data = owned->empty() ? static_cast<void*>(&empty) : static_cast<void*>(owned->data());
  column.size = static_cast<py::ssize_t>(owned->size());
  column.itemsize = static_cast<py::ssize_t>(sizeof(T));
  column.format = format != nullptr ? std::string(format) : py::format_descriptor<T>::format();
  column.owner = std::move(owned);
  return column;
}

// Strings to codes by first appearance; Finish() sorts them and renumbers.
class CategoryCodes {
 public:
  std::int32_t code(std::string_view text) {
    if (last_ >= 0 && names_[static_cast<std::size_t>(last_)] == text) return last_;
    auto it = codes_.find(text);
    if (it == codes_.end()) {
      names_.emplace_back(text);
      it = codes_.emplace(names_.back(), static_cast<std::int32_t>(names_.size() - 1)).first;
    }
    return last_ = it->second;
  }
  // The codes renumbered for the sorted categories; the categories as str
  // (bytes that are not UTF-8 shown as \xNN escapes, as the CLI shows them).
  py::list Finish(std::vector<std::int32_t>* codes) const {
    std::vector<std::int32_t> order(names_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
    std::sort(order.begin(), order.end(),
              [this](std::int32_t a, std::int32_t b) { return names_[a] < names_[b]; });
    std::vector<std::int32_t> renumber(names_.size());
    py::list categories;
    for (std::size_t i = 0; i < order.size(); ++i) {
      renumber[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);
      const std::string& name = names_[static_cast<std::size_t>(order[i])];
      PyObject* text = PyUnicode_DecodeUTF8(name.data(), static_cast<py::ssize_t>(name.size()),
                                            "backslashreplace");
      if (text == nullptr) throw py::error_already_set();
      categories.append(py::reinterpret_steal<py::str>(text));
    }
    for (std::int32_t& c : *codes) c = renumber[static_cast<std::size_t>(c)];
    return categories;
  }

 private:
  std::deque<std::string> names_;  // stable: the map's keys view them
  std::unordered_map<std::string_view, std::int32_t> codes_;
  std::int32_t last_ = -1;
};

// Rows per byte of a run CSV file, for reserving (about 50 bytes a row).
std::size_t ExpectedRows(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<std::size_t>(st.st_size) / 40 + 16;
}

// The file read in pieces of this size: the read buffer stays small.
constexpr std::uint64_t kColumnReadBytes = std::uint64_t{16} << 20;

// regions-<rank>.csv: {"key": (codes, categories), "device": (codes,
// categories), "rank", "thread", "start_unix_ns", "duration_ns", "step",
// "epoch": int64 arrays, "truncated": a last line cut short was left out}.
py::object RegionColumns(const RunReader& reader, std::uint32_t rank) {
  std::vector<std::int32_t> key, device;
  std::vector<std::int64_t> ranks, thread, start, duration, step, epoch, gpu_start, stream,
      cpu_wait;
  std::vector<std::uint8_t> gpu_start_missing, cpu_wait_missing;
  CategoryCodes keys;
  bool seen[2] = {false, false};
  absl::Status status;
  bool truncated = false;
  {
    py::gil_scoped_release release;
    const std::string path = reader.dir() + "/" + run_data_file_name(RunFileKind::kRegions, rank);
    struct stat st;
    const std::uint64_t size =
        ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    const std::size_t expected = ExpectedRows(path);
    for (auto* column :
         {&ranks, &thread, &start, &duration, &step, &epoch, &gpu_start, &stream, &cpu_wait}) {
      column->reserve(expected);
    }
    key.reserve(expected);
    device.reserve(expected);
    const auto visit = [&](const RegionView& row) {
      key.push_back(keys.code(row.key));
      const int d = row.device == Device::kGPU ? 1 : 0;
      seen[d] = true;
      device.push_back(d);
      ranks.push_back(row.rank);
      thread.push_back(row.thread);
      start.push_back(row.start_unix_ns);
      duration.push_back(row.duration_ns);
      step.push_back(row.step);
      epoch.push_back(row.epoch);
      const bool missing = row.gpu_start_ns == kNoGpuStart;
      gpu_start.push_back(missing ? 0 : row.gpu_start_ns);
      gpu_start_missing.push_back(missing ? 1 : 0);
      stream.push_back(row.stream);
      const bool no_wait = row.cpu_wait_ns == kNoCpuWait;
      cpu_wait.push_back(no_wait ? 0 : row.cpu_wait_ns);
      cpu_wait_missing.push_back(no_wait ? 1 : 0);
    };
    // What is there now: rows appended while it is read are for the next read.
    std::uint64_t offset = 0;
    do {
      absl::StatusOr<RunReader::Scan> scan =
          reader.scan_regions(rank, offset, kColumnReadBytes, visit);
      if (!scan.ok()) {
        status = scan.status();
        break;
      }
      truncated = scan->truncated;
      if (scan->next_offset == offset) break;
      offset = scan->next_offset;
    } while (offset < size);
  }
  if (absl::IsNotFound(status)) return py::none();
  ThrowIfReadError(status);
  // The devices seen, in order: CPU 0 and GPU 1, or the one seen as 0.
  py::list devices;
  if (seen[0]) devices.append("CPU");
  if (seen[1]) devices.append("GPU");
  if (seen[1] && !seen[0]) std::fill(device.begin(), device.end(), 0);
  py::list key_categories = keys.Finish(&key);
  py::dict out;
  out["key"] = py::make_tuple(ToArray(std::move(key)), key_categories);
  out["device"] = py::make_tuple(ToArray(std::move(device)), devices);
  out["rank"] = ToArray(std::move(ranks));
  out["thread"] = ToArray(std::move(thread));
  out["start_unix_ns"] = ToArray(std::move(start));
  out["duration_ns"] = ToArray(std::move(duration));
  out["step"] = ToArray(std::move(step));
  out["epoch"] = ToArray(std::move(epoch));
  out["gpu_start_ns"] = ToArray(std::move(gpu_start));  // Int64: missing where unknown
  out["gpu_start_ns_missing"] = ToArray(std::move(gpu_start_missing), "?");
  out["stream"] = ToArray(std::move(stream));
  out["cpu_wait_ns"] = ToArray(std::move(cpu_wait));  // Int64: a step's run-queue wait
  out["cpu_wait_ns_missing"] = ToArray(std::move(cpu_wait_missing), "?");
  out["truncated"] = truncated;
  return std::move(out);
}

// metrics-<rank>.csv (host empty) or host-<host>.csv: {"key": (codes,
// categories), "value": float64, "step", "timestamp_ms", "rank": int64 arrays,
// "rank_missing": bool array (a host-wide reading: no rank), "truncated"}.
py::object MetricColumns(const RunReader& reader, std::optional<std::uint32_t> rank,
                         const std::string& host) {
  std::vector<std::int32_t> key;
  std::vector<double> value;
  std::vector<std::int64_t> step, timestamp, ranks;
  std::vector<std::uint8_t> missing;
  CategoryCodes keys;
  absl::Status status;
  bool truncated = false;
  bool any_missing = false;
  {
    py::gil_scoped_release release;
    const std::string path = reader.dir() + "/" +
                             (rank ? run_data_file_name(RunFileKind::kMetrics, *rank)
                                   : run_data_file_name(RunFileKind::kHostMetrics, kNoRank, host));
    struct stat st;
    const std::uint64_t size =
        ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    std::uint64_t offset = 0;
    do {
      // A host file that is missing reads as empty: NotFound is asked of it.
      absl::StatusOr<Chunk<MetricPoint>> chunk =
          rank ? reader.read_metrics(*rank, offset)
               : (::access(path.c_str(), F_OK) != 0
                      ? absl::StatusOr<Chunk<MetricPoint>>(absl::NotFoundError(path))
                      : reader.read_host_metrics(host, offset, kColumnReadBytes));
      if (!chunk.ok()) {
        status = chunk.status();
        break;
      }
      for (const MetricPoint& point : chunk->rows) {
        key.push_back(keys.code(point.key));
        value.push_back(point.value);
        step.push_back(point.step);
        timestamp.push_back(point.timestamp_ms);
        const bool none = point.rank == kNoRank;
        any_missing |= none;
        missing.push_back(none);
        ranks.push_back(none ? 0 : point.rank);
      }
      truncated = chunk->truncated;
      if (chunk->next_offset == offset) break;
      offset = chunk->next_offset;
    } while (offset < size);
  }
  if (absl::IsNotFound(status)) return py::none();
  ThrowIfReadError(status);
  py::list key_categories = keys.Finish(&key);
  py::dict out;
  out["key"] = py::make_tuple(ToArray(std::move(key)), key_categories);
  out["value"] = ToArray(std::move(value));
  out["step"] = ToArray(std::move(step));
  out["timestamp_ms"] = ToArray(std::move(timestamp));
  out["rank"] = ToArray(std::move(ranks));
  if (any_missing) {
    out["rank_missing"] = ToArray(std::move(missing), "?");  // bytes of 0 or 1, read as bool
  } else {
    out["rank_missing"] = py::none();
  }
  out["truncated"] = truncated;
  return std::move(out);
}

void RegisterRunReader(py::module_& m) {
  py::class_<Column>(m, "_Column", py::buffer_protocol())
      .def_buffer([](Column& c) {
        return py::buffer_info(c.data, c.itemsize, c.format, 1, {c.size}, {c.itemsize});
      })
      .def("__len__", [](const Column& c) { return c.size; });
  m.def("_is_run_directory", &is_run_directory, py::arg("dir"),
        "Whether dir holds a run (its run.json).");
  m.def(
      "find_run_dirs",
      [](py::handle paths) {
        std::vector<std::string> given;
        if (py::isinstance<py::str>(paths) || py::hasattr(paths, "__fspath__")) {
          given.push_back(ToPath(paths));
        } else {
          for (py::handle path : py::iter(paths)) given.push_back(ToPath(path));
        }
        absl::StatusOr<std::vector<std::string>> found;
        {
          py::gil_scoped_release release;  // lists directories
          found = find_run_dirs(given);
        }
        return ValueOrThrow(std::move(found));
      },
      py::arg("paths"),
      R"doc(The run directories `paths` name (a path or a list of them), in order: a run is
itself; a directory of runs gives them (sorted by name); a sweep directory or a
stalls analysis gives the runs in its runs/. trainscope/run/run_dirs.hpp.
FileNotFoundError naming the path when it is missing or holds no run ("P: not a
run (no run.json), and neither P nor P/runs has a run directory"), ValueError
for a file or no path.)doc");
  py::class_<RunFilter>(m, "_RunFilter",
                        "search_runs' filter, parsed and evaluated by the C++ run filter "
                        "(trainscope/run/run_filter.hpp), as `trainscope compare --a/--b`.")
      .def(py::init([](const std::string& text) { return ValueOrThrow(parse_run_filter(text)); }),
           py::arg("text"), "Raises ValueError naming a bad filter.")
      .def(
          "matches",
          [](const RunFilter& f, const std::map<std::string, std::string>& row) {
            return run_filter_matches(f, row);
          },
          py::arg("row"), "Whether the row (of _RunReader.filter_row) satisfies every clause.")
      .def_property_readonly("regions",
                             [](const RunFilter& f) { return row_options_for(f).regions; })
      .def_property_readonly("metrics",
                             [](const RunFilter& f) { return row_options_for(f).metrics; });
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
          "filter_row",
          [](const RunReader& r, const std::string& device, bool regions, bool metrics) {
            RunFilterRowOptions options;
            options.device = device == "GPU" ? Device::kGPU : Device::kCPU;
            options.regions = regions;
            options.metrics = metrics;
            options.ledger_columns = steps::add_ledger_columns;  // ledger.*, docs/ledger.md
            absl::StatusOr<std::map<std::string, std::string>> row;
            {
              py::gil_scoped_release release;  // reads summaries and metrics
              row = run_filter_row(r, options);
            }
            return ValueOrThrow(std::move(row));
          },
          py::arg("device") = "CPU", py::arg("regions") = true, py::arg("metrics") = true,
          "The run's row of search_runs and its filter (run_filter_row in "
          "trainscope/run/run_filter.hpp, with the ledger's ledger.* columns), every value as "
          "text.")
      .def(
          "check_summary",
          [](const RunReader& r, std::uint32_t rank) { ValueOrThrow(r.read_summary(rank)); },
          py::arg("rank"), "Raises ValueError naming summary-<rank>.json when it is damaged.")
      .def(
          "environment",
          [](const RunReader& r, const std::optional<std::string>& launcher) {
            if (!launcher) return UnlessNotFound(r.environment());
            return UnlessNotFound(r.environment(LauncherNamed(r, *launcher)));
          },
          py::arg("launcher") = py::none(),
          "environment.json's text, or launcher \"<host>:<pid>\"'s own; None when absent.")
      .def(
          "log_tail",
          [](const RunReader& r, const std::string& log, std::size_t max_bytes,
             const std::optional<std::string>& launcher) {
            if (log != "stdout" && log != "stderr") {
              throw py::value_error("log must be 'stdout' or 'stderr', not '" + log + "'");
            }
            const RunLog which = log == "stdout" ? RunLog::kStdout : RunLog::kStderr;
            std::optional<std::string> tail =
                launcher ? UnlessNotFound(r.log_tail(which, max_bytes, LauncherNamed(r, *launcher)))
                         : UnlessNotFound(r.log_tail(which, max_bytes));
            return tail ? py::object(py::bytes(*tail)) : py::object(py::none());
          },
          py::arg("log"), py::arg("max_bytes"), py::arg("launcher") = py::none(),
          "The last max_bytes of stdout.log or stderr.log (or launcher \"<host>:<pid>\"'s own) "
          "from a whole line (bytes), or None.")
      // --- the steps room (trainscope/steps/steps.hpp): steps and host load as every view has
      // them.
      .def(
          "steps",
          [](const RunReader& r) {
            absl::StatusOr<steps::RunSteps> read;
            {
              py::gil_scoped_release release;  // reads every rank's regions
              read = steps::read_steps(r);
            }
            const steps::RunSteps s = ValueOrThrow(std::move(read));
            // Columns by name, filled a row at a time.
            const auto table = [](const std::vector<std::string>& names) {
              py::dict d;
              for (const std::string& n : names) d[py::str(n)] = py::list();
              return d;
            };
            const auto append = [](const py::dict& d, const std::vector<py::object>& row) {
              std::size_t i = 0;
              for (const auto& item : d) item.second.cast<py::list>().append(row[i++]);
            };
            std::vector<std::string> names = {"rank",          "step",     "warmup",
                                              "start_unix_ns", "period_s", "data_wait_s"};
            for (std::size_t p = 1; p < steps::kPhaseCount; ++p)
              names.push_back(std::string(steps::phase_name(static_cast<steps::Phase>(p))) + "_s");
            // The GPU busy time: the event spans summed, and the measured device union
            // (NaN where a step's GPU rows have no device start): docs/steps.md.
            names.push_back("gpu_busy_s");
            names.push_back("gpu_union_s");
            // The step thread's run-queue wait in the step (NaN where not recorded).
            names.push_back("cpu_wait_s");
            const py::dict columns = table(names);
            for (const steps::RankSteps& t : s.ranks) {
              const std::int64_t warmup = steps::warmup_steps(t);  // docs/steps.md, "Warm-up"
              for (const steps::Step& x : t.history) {
                std::vector<py::object> row = {py::int_(t.rank),
                                               py::int_(x.step),
                                               py::bool_(steps::is_warmup(x, warmup)),
                                               py::int_(x.start_ns),
                                               py::float_(x.period_s),
                                               py::float_(x.data_wait_s())};
                const steps::Step full = steps::with_rest(x);
                for (std::size_t p = 1; p < steps::kPhaseCount; ++p)
                  row.push_back(py::float_(full.cpu_s[p]));
                row.push_back(py::float_(x.gpu_busy_s));
                row.push_back(py::float_(x.gpu_union_known()
                                             ? x.gpu_union_s
                                             : std::numeric_limits<double>::quiet_NaN()));
                row.push_back(py::float_(
                    t.cpu_wait_measured ? x.cpu_wait_s : std::numeric_limits<double>::quiet_NaN()));
                append(columns, row);
              }
            }
            const py::dict load =
                table({"host", "time_ms", "cores", "cpu_util_pct", "job_cpu_pct", "other_cpu_pct"});
            for (const steps::HostLoad& h : s.hosts) {
              for (const steps::HostSample& x : h.samples) {
                append(load, {py::str(h.host), py::int_(x.time_ms), py::int_(h.cores),
                              py::float_(x.cpu_util_pct), py::float_(x.job_cpu_pct),
                              py::float_(x.other_cpu_pct())});
              }
            }
            return py::make_tuple(columns, load);
          },
          "(steps, host load) as columns: the steps room's read_steps (docs/steps.md).")
      .def("region_columns", &RegionColumns, py::arg("rank"),
           "regions-<rank>.csv as numpy columns (see run_bindings.cpp), or None.")
      .def("metric_columns", &MetricColumns, py::arg("rank") = py::none(), py::arg("host") = "",
           "metrics-<rank>.csv, or host-<host>.csv without a rank, as numpy columns, or None.")
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
          "summary_rows, file_rows, message}]; errors first within a rank. A regions file that "
          "cannot be read is left to its readers.")
      .def_static("holds_run_files", &holds_run_files, py::arg("dir"),
                  "Whether dir holds a run or what is left of one (run.json, or rank, launcher, "
                  "regions or summary files).");
}

}  // namespace

void RegisterRun(py::module_& m) {
  RegisterRunReader(m);
  // The names of a step's work (trainscope/run/step_work.hpp), for trainscope._work.
  m.attr("_STEP_SAMPLES_METRIC") = std::string(kStepSamplesMetric);
  m.attr("_STEP_TOKENS_METRIC") = std::string(kStepTokensMetric);
  m.attr("_STEP_FLOPS_PARAM") = std::string(kStepFlopsParam);
  m.attr("_FLOPS_FROM_COUNTER") = std::string(kFlopsFromCounter);
  m.attr("_STEP_FLOPS_STEP_PARAM") = std::string(kStepFlopsStepParam);
  m.attr("_STEP_DEVICE_PARAM") = std::string(kStepDeviceParam);
  m.attr("_STEP_DTYPE_PARAM") = std::string(kStepDtypeParam);
  m.attr("_PEAK_FLOPS_PARAM") = std::string(kPeakFlopsParam);
  m.attr("_PEAK_SOURCE_PARAM") = std::string(kPeakSourceParam);
  m.attr("_FLOPS_NOTE_TAG") = std::string(kFlopsNoteTag);
  m.attr("_WORK_SOURCE_TAG") = std::string(kWorkSourceTag);
  m.def(
      "_read_ledger",
      [](const std::string& dir, std::optional<double> peak_flops,
         std::optional<double> price_per_kwh, std::optional<double> price_per_hour,
         std::optional<double> grams_co2_per_kwh) {
        absl::StatusOr<RunReader> reader = RunReader::Open(dir);
        ThrowIfError(reader.status());
        steps::LedgerOptions options;
        options.peak_flops = peak_flops;
        options.price_per_kwh = price_per_kwh;
        options.price_per_hour = price_per_hour;
        options.grams_co2_per_kwh = grams_co2_per_kwh;
        absl::StatusOr<steps::Ledger> ledger = steps::read_ledger(*reader, options);
        ThrowIfError(ledger.status());
        return ledger_dict(*ledger);
      },
      py::arg("dir"), py::arg("peak_flops") = py::none(), py::arg("price_per_kwh") = py::none(),
      py::arg("price_per_hour") = py::none(), py::arg("grams_co2_per_kwh") = py::none(),
      "The run's efficiency ledger (steps::read_ledger) as a dict.");
  m.def(
      "_hold", [](py::handle timer) { WithTimer(timer, [](auto& t) { t.attach(HeldRegions()); }); },
      "Keeps a timer's regions until a run adopts them (Run.adopt_held).");
  m.def(
      "_forget_held", [] { (void)HeldRegions().take(); },
      "Drops what timers built before any run hold (a test's leftovers, not the next run's).");
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
          "log_step_work",
          [](Run& r, std::optional<double> samples, std::optional<double> tokens,
             std::optional<std::int64_t> step) {
            ThrowIfError(log_step_work(r, StepWork{samples, tokens}, step));
          },
          py::arg("samples") = py::none(), py::arg("tokens") = py::none(),
          py::arg("step") = py::none())
      .def(
          "log_step_flops",
          [](Run& r, double flops, const std::string& source) {
            ThrowIfError(log_step_flops(r, flops, source));
          },
          py::arg("flops"), py::arg("source") = std::string(kFlopsFromUser))
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
      .def(
          "adopt_held", [](Run& r) { return r.adopt_held(HeldRegions()); },
          "Takes the regions of timers built before any run (held by _hold); returns how many "
          "did not fit.")
      .def(
          "back_up_signal_handlers",
          [](Run& r, const std::vector<int>& signals) {
            // run.py installed its handlers over the default action: a forked child dies of
            // the signal, even one that comes before Python's after-fork work.
            return r.back_up_signal_handlers(signals, absl::Seconds(3),
                                             Run::ForkedChild::kDefaultAction);
          },
          py::arg("signals"),
          "Backs up run.py's handlers of these signals: if the run has not ended 3 s after one "
          "(the main thread blocked in native code), it ends KILLED and the process dies of it; "
          "a forked child dies of one at once.")
      .def("add_summary_of",
           [](Run& r, py::handle timer) {
             WithTimer(timer, [&](auto& t) { r.add_summary(t.summary()); });
           })
      .def(
          "end",
          [](Run& r, const std::string& status) {
            const RunStatus s = ToStatus(status);
            if (s == RunStatus::kRunning) {
              throw py::value_error("end(\"RUNNING\"): a run ends FINISHED, FAILED or KILLED");
            }
            absl::Status result;
            {
              py::gil_scoped_release release;  // flushing may wait on the disk
              result = r.end(s);
            }
            // Ending never raises for what the disk did: the failure (it
            // names the file) is returned for run.py to warn about and keep.
            return result.ok() ? py::object(py::none())
                               : py::object(py::str(std::string(result.message())));
          },
          py::arg("status") = "FINISHED",
          "Flushes, records the status; None, or what could not be written (a message naming "
          "the file).");
}

}  // namespace trainscope::python
