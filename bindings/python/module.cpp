// trainscope._core: the C++ timers for Python. The package trainscope
// (bindings/python/trainscope) wraps these classes with the parts that are
// easier in Python (TimeType, scope(), MLflow and W&B logging).
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/timing/gpu_event_source.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"
#include "trainscope/version.hpp"

namespace py = pybind11;

namespace trainscope::python {

// trainscope._core's diagnosis (diagnosis_bindings.cpp), for trainscope/diagnosis.py.
void RegisterDiagnosis(py::module_& core);
// trainscope._core's comparison (compare_bindings.cpp), for trainscope/compare.py.
void RegisterCompare(py::module_& core);

namespace {

Key ToKey(py::handle object) {
  Key key(TimeType::EPOCH);
  if (!KeyFromPython(object.ptr(), &key)) throw py::error_already_set();
  return key;
}

py::list KeysToPython(const std::vector<Key>& keys) {
  py::list out;
  for (Key key : keys) out.append(KeyToPython(key));
  return out;
}

StatsFormat ToFormat(const std::string& name) {
  absl::StatusOr<StatsFormat> format = parse_stats_format(name);
  ThrowIfError(format.status());
  return *format;
}

// print(..., file=file) in Deep500: the text goes to file.write, sys.stdout by
// default (looked up at call time so redirect_stdout and capsys see it).
void WriteText(const std::string& text, py::object file) {
  if (file.is_none()) file = py::module_::import("sys").attr("stdout");
  file.attr("write")(text);
}

TimerOptions MakeOptions(std::size_t warmup, std::size_t exact_sample_cap,
                         double sketch_relative_error, bool nvtx) {
  TimerOptions options;
  options.warmup = warmup;
  options.exact_sample_cap = exact_sample_cap;
  options.sketch_relative_error = sketch_relative_error;
  options.nvtx = nvtx;
  // Checked by the C++ constructors too (TimerError); here it is Python's ValueError.
  if (absl::Status status = validate_options(options); !status.ok()) {
    throw py::value_error(std::string(status.message()));
  }
  return options;
}

// The timer of a box that no other thread's read is waiting on (see
// PyCPUGPUTimer::busy); RuntimeError otherwise.
void CheckIdle(const PyCPUGPUTimer& box) {
  if (box.busy) {
    throw std::runtime_error(
        "this timer is in use by another thread (waiting for the GPU); a timer belongs to one "
        "thread at a time");
  }
}
CPUGPUTimer& Idle(PyCPUGPUTimer& box) {
  CheckIdle(box);
  return box.timer;
}
const CPUGPUTimer& Idle(const PyCPUGPUTimer& box) {
  CheckIdle(box);
  return box.timer;
}

// Runs `f` with the GIL released when it may wait for the GPU (outstanding
// regions), marking the timers busy meanwhile.
template <typename F>
auto MayWait(std::initializer_list<PyCPUGPUTimer*> boxes, F&& f) {
  bool waits = false;
  for (PyCPUGPUTimer* box : boxes) waits = waits || Idle(*box).outstanding() != 0;
  if (!waits) return f();
  struct BusyScope {  // destroyed after the GIL is taken back
    std::initializer_list<PyCPUGPUTimer*> boxes;
    explicit BusyScope(std::initializer_list<PyCPUGPUTimer*> b) : boxes(b) {
      for (PyCPUGPUTimer* box : boxes) box->busy = true;
    }
    ~BusyScope() {
      for (PyCPUGPUTimer* box : boxes) box->busy = false;
    }
  } busy(boxes);
  py::gil_scoped_release release;
  return f();
}

py::tuple Deep500Fields(const TimeStats& s) {
  return py::make_tuple(s.min, s.mean, s.median, s.max, s.stdev);
}

void BindTimeStats(py::module_& m) {
  py::class_<TimeStats> stats(m, "TimeStats", R"doc(
Summary statistics of one key's region times, in seconds.

Behaves like Deep500's TimeStats NamedTuple over (min, mean, median, max,
stdev): iterable, indexable, len() == 5, str() is Deep500's text. The other
fields are attributes; _asdict() returns all of them. Fields are NaN when
count is 0. approximate is True once the key passed exact_sample_cap (the
quantiles then come from a sketch).)doc");
  for (const TimeStatsField& f : kTimeStatsFields) {
    switch (f.kind) {
      case TimeStatsFieldKind::kInteger:
        stats.def_readonly(f.name, f.integer);
        break;
      case TimeStatsFieldKind::kDouble:
        stats.def_readonly(f.name, f.number);
        break;
      case TimeStatsFieldKind::kBoolean:
        stats.def_readonly(f.name, f.boolean);
        break;
    }
  }
  stats.def("__str__", &TimeStats::to_string)
      .def("__len__", [](const TimeStats&) { return 5; })
      .def("__getitem__",
           [](const TimeStats& s, py::handle index) { return py::object(Deep500Fields(s)[index]); })
      .def("__iter__", [](const TimeStats& s) { return py::iter(Deep500Fields(s)); })
      .def("_asdict", [](const TimeStats& s) {
        py::dict d;
        for (const TimeStatsField& f : kTimeStatsFields) {
          switch (f.kind) {
            case TimeStatsFieldKind::kInteger:
              d[f.name] = s.*f.integer;
              break;
            case TimeStatsFieldKind::kDouble:
              d[f.name] = s.*f.number;
              break;
            case TimeStatsFieldKind::kBoolean:
              d[f.name] = s.*f.boolean;
              break;
          }
        }
        return d;
      });
  stats.def("__repr__", [](py::object self) {
    std::string out = "TimeStats(";
    bool first = true;
    for (auto item : self.attr("_asdict")().cast<py::dict>()) {
      if (!first) out += ", ";
      first = false;
      out += item.first.cast<std::string>() + "=" + py::repr(item.second).cast<std::string>();
    }
    return out + ")";
  });
  stats.attr("_fields") = py::make_tuple("min", "mean", "median", "max", "stdev");
  // (name, kind, seconds) of every field in output order (kTimeStatsFields):
  // kind "integer", "double" or "boolean"; seconds True for durations.
  py::list fields;
  for (const TimeStatsField& f : kTimeStatsFields) {
    const char* kind = f.kind == TimeStatsFieldKind::kInteger  ? "integer"
                       : f.kind == TimeStatsFieldKind::kDouble ? "double"
                                                               : "boolean";
    fields.append(py::make_tuple(f.name, kind, f.seconds));
  }
  m.attr("_TIME_STATS_FIELDS") = py::tuple(fields);
}

// Testing only: CUDA-free GPU timing with a virtual clock, so that the GPU
// paths of the bindings (streams, outstanding regions, reads that release
// the GIL) run on machines without a GPU.
void BindSimulatedGpu(py::module_& m) {
  using Simulated = testing::SimulatedEventSource;
  py::class_<Simulated, std::shared_ptr<Simulated>>(
      m, "_SimulatedGpu", "Testing only: a GPU event source on a virtual clock (ns).")
      .def(py::init<>())
      .def("advance", &Simulated::advance, py::arg("ns"))
      .def(
          "enqueue_work",
          [](Simulated& gpu, py::handle stream, std::int64_t ns) {
            StreamHandle handle = nullptr;
            bool has_stream = false;
            if (!StreamFromPython(stream.ptr(), &handle, &has_stream)) {
              throw py::error_already_set();
            }
            gpu.enqueue_work(handle, ns);
          },
          py::arg("stream"), py::arg("ns"))
      .def("set_completion_delay", &Simulated::set_completion_delay, py::arg("ns"))
      .def("records", &Simulated::records);
}

py::class_<PyTimer> BindTimer(py::module_& m) {
  const TimerOptions defaults;
  py::class_<PyTimer> timer(m, "Timer", R"doc(
CPU region timer with Deep500's API (C++ trainscope::Timer).

Keys are TimeType members or names (str); a name is interned once per
process, so "EPOCH" is TimeType.EPOCH. A timer belongs to one thread at a
time; combine per-thread timers with merge().)doc");
  timer
      .def(py::init([](std::size_t warmup, std::size_t exact_sample_cap,
                       double sketch_relative_error, bool nvtx) {
             return new PyTimer(MakeOptions(warmup, exact_sample_cap, sketch_relative_error, nvtx));
           }),
           py::kw_only(), py::arg("warmup") = defaults.warmup,
           py::arg("exact_sample_cap") = defaults.exact_sample_cap,
           py::arg("sketch_relative_error") = defaults.sketch_relative_error,
           py::arg("nvtx") = defaults.nvtx)
      .def(
          "get_time",
          [](const PyTimer& t, py::handle key) {
            std::vector<double> out;
            ThrowIfError(t.timer.try_get_time(ToKey(key), &out));
            return out;
          },
          py::arg("key"),
          "A new list of the completed times of `key` in seconds, in completion order.\n"
          "RuntimeError past exact_sample_cap (only a sketch is kept).")
      .def(
          "get_time_stats",
          [](const PyTimer& t, py::handle key) { return t.timer.get_time_stats(ToKey(key)); },
          py::arg("key"),
          "TimeStats of `key`; count 0 and NaN fields if it has no completed region.")
      .def(
          "complete_all", [](PyTimer&) {},
          "Nothing to complete on the CPU; kept for Deep500 parity.")
      .def(
          "cancel",
          [](PyTimer& t, py::handle key) { ThrowIfError(t.timer.try_cancel(ToKey(key))); },
          py::arg("key"),
          "Closes an open region of `key` without recording it; raises as end() would.")
      .def(
          "reset", [](PyTimer& t) { t.timer.reset(); }, "Drops every sample and every open region.")
      .def(
          "keys", [](const PyTimer& t) { return KeysToPython(t.timer.keys()); },
          "Keys with a completed region, in first-completed order (TimeType or str).")
      .def(
          "format_all_time_stats",
          [](const PyTimer& t, const std::string& format) {
            return t.timer.format_all_time_stats(ToFormat(format));
          },
          py::arg("format") = "deep500",
          "All statistics as text: 'deep500' (Deep500's layout), 'table', 'json' or 'csv'.")
      .def(
          "print_all_time_stats",
          [](const PyTimer& t, py::object file, const std::string& format) {
            WriteText(t.timer.format_all_time_stats(ToFormat(format)), std::move(file));
          },
          py::arg("file") = py::none(), py::arg("format") = "deep500",
          "Writes format_all_time_stats(format) with file.write (default sys.stdout).")
      .def(
          "save_all_time_stats",
          [](const PyTimer& t, py::handle filename) {
            ThrowIfError(t.timer.try_save_all_time_stats(ToPath(filename, "filename")));
          },
          py::arg("filename"),
          "Writes the statistics to a new file, format by extension (.txt Deep500 text,\n"
          ".json, .csv). FileExistsError if it exists, ValueError for another extension.")
      .def(
          "merge",
          [](PyTimer& t, const PyTimer& other) {
            if (&t == &other) throw py::value_error("cannot merge a timer into itself");
            t.timer.merge(other.timer);
          },
          py::arg("other"), "Adds the completed regions of `other` (its open ones are ignored).")
      .def(
          "memory_bytes", [](const PyTimer& t) { return t.timer.memory_bytes(); },
          "Bytes of memory the timer holds.");
  return timer;
}

py::class_<PyCPUGPUTimer> BindCPUGPUTimer(py::module_& m) {
  const CPUGPUTimerOptions defaults;
  py::class_<PyCPUGPUTimer> timer(m, "CPUGPUTimer", R"doc(
CPU + GPU region timer with Deep500's API (C++ trainscope::CPUGPUTimer).

gpu=True regions are also timed with CUDA events; end() never waits for the
GPU, reads (get_time, get_time_stats, printing, complete_all) do, with the
GIL released. Without a GPU, gpu=True regions are timed on the CPU only
(one TrainscopeWarning per process) unless require_gpu=True, which makes
the constructor raise RuntimeError.)doc");
  timer
      .def(py::init([](std::size_t warmup, std::size_t exact_sample_cap,
                       double sketch_relative_error, bool nvtx, bool require_gpu, py::handle stream,
                       std::size_t harvest_per_end) {
             CPUGPUTimerOptions options;
             static_cast<TimerOptions&>(options) =
                 MakeOptions(warmup, exact_sample_cap, sketch_relative_error, nvtx);
             options.require_gpu = require_gpu;
             options.harvest_per_end = harvest_per_end;
             bool has_stream = false;
             if (!StreamFromPython(stream.ptr(), &options.stream, &has_stream)) {
               throw py::error_already_set();
             }
             return new PyCPUGPUTimer(options);
           }),
           py::kw_only(), py::arg("warmup") = defaults.warmup,
           py::arg("exact_sample_cap") = defaults.exact_sample_cap,
           py::arg("sketch_relative_error") = defaults.sketch_relative_error,
           py::arg("nvtx") = defaults.nvtx, py::arg("require_gpu") = defaults.require_gpu,
           py::arg("stream") = py::none(), py::arg("harvest_per_end") = defaults.harvest_per_end)
      .def(py::init(
               [](std::shared_ptr<testing::SimulatedEventSource> gpu, std::size_t harvest_per_end) {
                 CPUGPUTimerOptions options;
                 options.harvest_per_end = harvest_per_end;
                 return new PyCPUGPUTimer(std::move(gpu), options);
               }),
           py::arg("simulated_gpu"), py::kw_only(),
           py::arg("harvest_per_end") = defaults.harvest_per_end,
           "Testing only: a timer whose GPU is a _SimulatedGpu.")
      .def(
          "get_time",
          [](PyCPUGPUTimer& t, py::handle key, bool gpu) {
            const Key k = ToKey(key);
            std::vector<double> out;
            ThrowIfError(MayWait({&t}, [&] { return t.timer.try_get_time(k, gpu, &out); }));
            return out;
          },
          py::arg("key"), py::arg("gpu") = false,
          "A new list of the completed CPU (or, gpu=True, GPU) times of `key` in seconds.")
      .def(
          "get_time_stats",
          [](PyCPUGPUTimer& t, py::handle key, bool gpu) {
            const Key k = ToKey(key);
            return MayWait({&t}, [&] { return t.timer.get_time_stats(k, gpu); });
          },
          py::arg("key"), py::arg("gpu") = false,
          "TimeStats of `key` on the CPU or, gpu=True, the GPU.")
      .def(
          "complete_all",
          [](PyCPUGPUTimer& t) {
            ThrowIfError(MayWait({&t}, [&] { return t.timer.try_complete_all(); }));
          },
          "Waits for every outstanding GPU region and records it.")
      .def(
          "harvest",
          [](PyCPUGPUTimer& t, std::optional<std::size_t> limit) {
            return Idle(t).harvest(limit.value_or(SIZE_MAX));
          },
          py::arg("limit") = py::none(),
          "Records finished GPU regions without waiting, oldest first; returns how many.")
      .def(
          "cancel",
          [](PyCPUGPUTimer& t, py::handle key) { ThrowIfError(t.timer.try_cancel(ToKey(key))); },
          py::arg("key"),
          "Closes an open region of `key` (CPU or GPU) without recording it; raises as end() "
          "would.")
      .def(
          "reset", [](PyCPUGPUTimer& t) { MayWait({&t}, [&] { t.timer.reset(); }); },
          "Drops every sample and every open region.")
      .def(
          "keys",
          [](PyCPUGPUTimer& t, bool gpu) {
            // A read, so GPU keys wait for outstanding regions as get_time_stats
            // does (a lost region was reported through warn(), not raised).
            if (gpu) MayWait({&t}, [&] { (void)t.timer.try_complete_all(); });
            return KeysToPython(Idle(t).keys(gpu));
          },
          py::arg("gpu") = false,
          "Keys with a completed CPU (or, gpu=True, GPU) region, first-completed order.\n"
          "GPU keys wait for outstanding regions first, as the other reads do.")
      .def(
          "format_all_time_stats",
          [](PyCPUGPUTimer& t, const std::string& format) {
            const StatsFormat f = ToFormat(format);
            return MayWait({&t}, [&] { return t.timer.format_all_time_stats(f); });
          },
          py::arg("format") = "deep500",
          "All statistics as text: 'deep500' (CPU then GPU section), 'table', 'json' or 'csv'.")
      .def(
          "print_all_time_stats",
          [](PyCPUGPUTimer& t, py::object file, const std::string& format) {
            const StatsFormat f = ToFormat(format);
            WriteText(MayWait({&t}, [&] { return t.timer.format_all_time_stats(f); }),
                      std::move(file));
          },
          py::arg("file") = py::none(), py::arg("format") = "deep500",
          "Writes format_all_time_stats(format) with file.write (default sys.stdout).")
      .def(
          "save_all_time_stats",
          [](PyCPUGPUTimer& t, py::handle filename) {
            const std::string path = ToPath(filename, "filename");
            ThrowIfError(MayWait({&t}, [&] { return t.timer.try_save_all_time_stats(path); }));
          },
          py::arg("filename"),
          "Writes the statistics to a new file, format by extension (.txt, .json, .csv).\n"
          "FileExistsError if it exists, ValueError for another extension.")
      .def(
          "merge",
          [](PyCPUGPUTimer& t, PyCPUGPUTimer& other) {
            if (&t == &other) throw py::value_error("cannot merge a timer into itself");
            MayWait({&t, &other}, [&] { t.timer.merge(other.timer); });
          },
          py::arg("other"), "Completes both timers, then adds the regions of `other`.")
      .def(
          "gpu_available", [](const PyCPUGPUTimer& t) { return t.timer.gpu_available(); },
          "True when gpu=True regions are timed with CUDA events.")
      .def(
          "gpu_description", [](const PyCPUGPUTimer& t) { return t.timer.gpu_description(); },
          "The GPU in use, or why none is.")
      .def(
          "outstanding", [](const PyCPUGPUTimer& t) { return Idle(t).outstanding(); },
          "GPU regions ended but not yet harvested.")
      .def(
          "blocking_waits", [](const PyCPUGPUTimer& t) { return Idle(t).blocking_waits(); },
          "How often this timer waited for the GPU (only complete_all and reads wait).")
      .def(
          "events_created", [](const PyCPUGPUTimer& t) { return Idle(t).events_created(); },
          "CUDA events created so far (they are pooled and reused).")
      .def(
          "gpu_errors", [](const PyCPUGPUTimer& t) { return Idle(t).gpu_errors(); },
          "GPU regions lost to GPU errors.")
      .def(
          "memory_bytes", [](const PyCPUGPUTimer& t) { return Idle(t).memory_bytes(); },
          "Bytes of host memory the timer holds.")
      .def(
          "set_stream",
          [](PyCPUGPUTimer& t, py::handle stream) {
            StreamHandle handle = nullptr;
            bool has_stream = false;
            if (!StreamFromPython(stream.ptr(), &handle, &has_stream))
              throw py::error_already_set();
            Idle(t).set_stream(handle);
          },
          py::arg("stream"),
          "Stream for gpu=True regions that name none (int cudaStream_t, torch.cuda.Stream, "
          "None = default stream).")
      .def(
          "_set_stream_provider",
          [](PyCPUGPUTimer& t, py::object provider) {
            t.stream_provider = provider.is_none() ? py::object() : std::move(provider);
          },
          py::arg("provider"),
          "Callable returning the stream of each gpu=True start/end that names none.");
  return timer;
}

}  // namespace
}  // namespace trainscope::python

PYBIND11_MODULE(_core, m) {
  using namespace trainscope;          // NOLINT(build/namespaces)
  using namespace trainscope::python;  // NOLINT(build/namespaces)
  m.doc() = "trainscope's C++ timers; use the trainscope package.";
  m.attr("__version__") = TRAINSCOPE_VERSION_STRING;
  InstallWarningHandler(m);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TimerError& e) {
      SetPythonError(absl::Status(e.code(), e.what()));
    }
  });
  m.def("built_with_cuda", &built_with_cuda, "True when the C++ library was built with CUDA.");
  m.def("_register_time_type", &RegisterTimeType, py::arg("time_type"));
  BindTimeStats(m);
  BindSimulatedGpu(m);
  py::class_<PyTimer> timer = BindTimer(m);
  py::class_<PyCPUGPUTimer> cpu_gpu_timer = BindCPUGPUTimer(m);
  InstallFastPath(timer, cpu_gpu_timer);
  RegisterLayerClock(m, cpu_gpu_timer);
  RegisterRun(m);
  RegisterRegionRing(m);
  RegisterScaling(m);
  RegisterReport(m);
  RegisterStalls(m);
  RegisterDiagnosis(m);
  RegisterCompare(m);
}
