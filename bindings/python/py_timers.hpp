// The C++ objects behind trainscope._core.Timer and CPUGPUTimer, and the
// conversions that both the pybind11 methods and the fast start/end share.
#ifndef TRAINSCOPE_BINDINGS_PYTHON_PY_TIMERS_HPP_
#define TRAINSCOPE_BINDINGS_PYTHON_PY_TIMERS_HPP_

#include <Python.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope::python {

struct PyTimer {
  explicit PyTimer(const TimerOptions& options) : timer(options) {}
  Timer timer;
};

struct PyCPUGPUTimer {
  explicit PyCPUGPUTimer(const CPUGPUTimerOptions& options) : timer(options) {}
  PyCPUGPUTimer(std::shared_ptr<GpuEventSource> source, const CPUGPUTimerOptions& options)
      : timer(std::move(source), options) {}
  CPUGPUTimer timer;
  // Set while a read waits for the GPU with the GIL released. A C++ timer
  // belongs to one thread at a time; this turns a second Python thread's
  // call during that wait into a RuntimeError instead of a data race.
  bool busy = false;
  // Called for the stream of each gpu=True start/end that names none
  // (trainscope.torch passes torch's current stream); None: options.stream.
  pybind11::object stream_provider;
};

// Keeps the TimeType members so that keys() can return them; called once by
// trainscope/__init__.py, which defines the enum.
void RegisterTimeType(pybind11::handle time_type);
// TimeType member for built-in keys, the name (str) for the others.
pybind11::object KeyToPython(Key key);

// A TimeType, an int id or a str name. Returns false with a Python exception
// set (TypeError, ValueError) otherwise. Names are cached in a dict so the hot
// path does not take the C++ registry's lock.
bool KeyFromPython(PyObject* object, Key* key);
// cudaStream_t from an int, an object with a `cuda_stream` int (torch.cuda.Stream)
// or None (returns false with *has_stream unset). False with an exception set on errors.
bool StreamFromPython(PyObject* object, StreamHandle* stream, bool* has_stream);

// os.fspath(path) as a str (a str or an os.PathLike[str]); TypeError naming
// `what` (e.g. "filename") otherwise. Every path argument of _core goes through it.
std::string ToPath(pybind11::handle path, const char* what = "path");

// Raises the Python exception that corresponds to a failed Status:
// kInvalidArgument -> ValueError, kAlreadyExists -> FileExistsError,
// kNotFound -> FileNotFoundError, kPermissionDenied -> PermissionError
// (the errno family from save_all_time_stats, as Deep500's open(mode='x')),
// anything else -> RuntimeError.
void SetPythonError(const absl::Status& status);
// The same for a C++ exception in flight (TimerError by its code).
void SetPythonErrorFromCurrentException();
// For pybind11-bound methods: throws the error_already_set of SetPythonError.
void ThrowIfError(const absl::Status& status);

// Turns C++ warn() into Python warnings (trainscope.TrainscopeWarning) when the
// calling thread holds the GIL; other threads keep the stderr line.
void InstallWarningHandler(pybind11::module_& module);

// trainscope._core._Run (run_bindings.cpp), used by trainscope/run.py.
void RegisterRun(pybind11::module_& module);
// trainscope._core._RegionRing (region_ring_bindings.cpp), used by trainscope/_torch_comm.py.
void RegisterRegionRing(pybind11::module_& module);
// trainscope.scaling (scaling_bindings.cpp).
void RegisterScaling(pybind11::module_& core);
// trainscope._core._render_report (report_bindings.cpp).
void RegisterReport(pybind11::module_& core);
// trainscope._core._pass_metrics, _stalls_loop_control, _run_differential and the
// stalls names (stalls_bindings.cpp).
void RegisterStalls(pybind11::module_& core);

// Replaces pybind11's start/end of the two classes with METH_FASTCALL
// methods (see fast_path.cpp for why).
void InstallFastPath(pybind11::handle timer_type, pybind11::handle cpu_gpu_timer_type);

// trainscope._core._LayerClock and _LayerHook (layer_clock.cpp): the layer regions of
// trainscope.torch's layers=N, started and ended from C.
void RegisterLayerClock(pybind11::module_& core, pybind11::handle cpu_gpu_timer_type);

}  // namespace trainscope::python

#endif  // TRAINSCOPE_BINDINGS_PYTHON_PY_TIMERS_HPP_
