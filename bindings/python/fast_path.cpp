// start/end as plain CPython METH_FASTCALL methods.
//
// Why: a pybind11-bound method goes through its generic dispatcher (argument
// loaders, overload loop, keyword matching through a dict, exception
// translation) which costs more than the region timing itself. A training
// loop calls start/end several times per batch, and the target is a pair
// within 3x of two bare time.perf_counter() calls (Deep500's pure-Python
// timer is ~10x). The methods below take the vectorcall arguments directly,
// read the C++ object straight from the pybind11 instance, convert ints and
// TimeType members with PyLong_AsLong and names through a dict cache, and
// raise the same exception types and messages as the pybind11 methods
// (through the Status-returning try_start/try_end, so no C++ exception is
// thrown on misuse). They hold the GIL: they never wait.
#include <cstring>

#include "absl/base/optimization.h"
#include "py_timers.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

constexpr const char* kParameterNames[] = {"key", "gpu", "stream"};
constexpr int kMaxParameters = 3;

// Fills values[0..count) from positional and keyword arguments of a call to
// `function`(key, gpu=False, stream=None) cut to `count` parameters. Missing
// optional ones stay nullptr. Returns false with TypeError set on a bad call.
bool ParseArguments(const char* function, int count, PyObject* const* args, Py_ssize_t nargs,
                    PyObject* kwnames, PyObject** values) {
  if (ABSL_PREDICT_FALSE(nargs > count)) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d argument%s (%zd given)", function, count,
                 count == 1 ? "" : "s", nargs);
    return false;
  }
  for (int i = 0; i < kMaxParameters; ++i) values[i] = i < nargs ? args[i] : nullptr;
  if (kwnames != nullptr) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* name = PyTuple_GET_ITEM(kwnames, k);
      int index = -1;
      for (int i = 0; i < count && index < 0; ++i) {
        if (PyUnicode_CompareWithASCIIString(name, kParameterNames[i]) == 0) index = i;
      }
      if (ABSL_PREDICT_FALSE(index < 0)) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function,
                     name);
        return false;
      }
      if (ABSL_PREDICT_FALSE(values[index] != nullptr)) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", function,
                     kParameterNames[index]);
        return false;
      }
      values[index] = args[nargs + k];
    }
  }
  if (ABSL_PREDICT_FALSE(values[0] == nullptr)) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument 'key'", function);
    return false;
  }
  return true;
}

// The C++ object of a pybind11 instance. The method descriptor has already
// checked that `self` is an instance of the bound class (or a subclass).
template <typename Box>
Box* Unwrap(PyObject* self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  void* value = nullptr;
  if (ABSL_PREDICT_TRUE(instance->simple_layout)) {
    value = instance->simple_value_holder[0];
  } else {  // Python-side multiple inheritance of bound classes
    try {
      value = py::cast<Box*>(py::handle(self));
    } catch (const py::cast_error&) {
    }
  }
  if (ABSL_PREDICT_FALSE(value == nullptr)) {
    PyErr_Format(PyExc_TypeError, "%.200s.__init__() must be called before start()/end()",
                 Py_TYPE(self)->tp_name);
  }
  return static_cast<Box*>(value);
}

PyObject* Finish(const absl::Status& status) {
  if (ABSL_PREDICT_FALSE(!status.ok())) {
    SetPythonError(status);
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* TimerStart(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* values[kMaxParameters];
  Key key(TimeType::EPOCH);
  PyTimer* box;
  if (!ParseArguments("start", 1, args, nargs, kwnames, values) ||
      !KeyFromPython(values[0], &key) || (box = Unwrap<PyTimer>(self)) == nullptr) {
    return nullptr;
  }
  try {  // a key interned after the timer was built grows its slot table
    return Finish(box->timer.try_start(key));
  } catch (...) {
    SetPythonErrorFromCurrentException();
    return nullptr;
  }
}

PyObject* TimerEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* values[kMaxParameters];
  Key key(TimeType::EPOCH);
  PyTimer* box;
  if (!ParseArguments("end", 1, args, nargs, kwnames, values) || !KeyFromPython(values[0], &key) ||
      (box = Unwrap<PyTimer>(self)) == nullptr) {
    return nullptr;
  }
  try {  // the first sample past exact_sample_cap allocates the sketch
    return Finish(box->timer.try_end(key));
  } catch (...) {
    SetPythonErrorFromCurrentException();
    return nullptr;
  }
}

// Shared by CPUGPUTimer.start/end: key, gpu flag and stream of the call.
struct GpuCall {
  Key key{TimeType::EPOCH};
  bool gpu = false;
  bool has_stream = false;
  StreamHandle stream = nullptr;
  PyCPUGPUTimer* box = nullptr;
};

bool ParseGpuCall(const char* function, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames, GpuCall* call) {
  PyObject* values[kMaxParameters];
  if (!ParseArguments(function, 3, args, nargs, kwnames, values) ||
      !KeyFromPython(values[0], &call->key)) {
    return false;
  }
  if (values[1] != nullptr) {
    const int gpu = PyObject_IsTrue(values[1]);
    if (gpu < 0) return false;
    call->gpu = gpu != 0;
  }
  if (!StreamFromPython(values[2], &call->stream, &call->has_stream)) return false;
  call->box = Unwrap<PyCPUGPUTimer>(self);
  if (call->box == nullptr) return false;
  if (ABSL_PREDICT_FALSE(call->box->busy)) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): this timer is in use by another thread (waiting for the GPU); a timer "
                 "belongs to one thread at a time",
                 function);
    return false;
  }
  // The provider is asked only when events will really be recorded.
  if (call->gpu && !call->has_stream && call->box->stream_provider &&
      call->box->timer.gpu_available()) {
    PyObject* stream = PyObject_CallNoArgs(call->box->stream_provider.ptr());
    if (stream == nullptr) return false;
    const bool ok = StreamFromPython(stream, &call->stream, &call->has_stream);
    Py_DECREF(stream);
    if (!ok) return false;
  }
  return true;
}

PyObject* CPUGPUTimerStart(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  GpuCall call;
  if (!ParseGpuCall("start", self, args, nargs, kwnames, &call)) return nullptr;
  CPUGPUTimer& timer = call.box->timer;
  try {  // GPU starts may allocate (event pools)
    return Finish(call.has_stream ? timer.try_start(call.key, call.gpu, call.stream)
                                  : timer.try_start(call.key, call.gpu));
  } catch (...) {
    SetPythonErrorFromCurrentException();
    return nullptr;
  }
}

PyObject* CPUGPUTimerEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  GpuCall call;
  if (!ParseGpuCall("end", self, args, nargs, kwnames, &call)) return nullptr;
  CPUGPUTimer& timer = call.box->timer;
  try {
    return Finish(call.has_stream ? timer.try_end(call.key, call.gpu, call.stream)
                                  : timer.try_end(call.key, call.gpu));
  } catch (...) {
    SetPythonErrorFromCurrentException();
    return nullptr;
  }
}

// Static: method descriptors keep a pointer to their PyMethodDef.
PyMethodDef kTimerStart = {
    "start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&TimerStart)),
    METH_FASTCALL | METH_KEYWORDS,
    "start($self, key)\n--\n\n"
    "Opens a region of `key` (a TimeType or a name). Different keys may nest and\n"
    "overlap; the same key may not (RuntimeError). TimeType.ALL: ValueError."};
PyMethodDef kTimerEnd = {
    "end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&TimerEnd)),
    METH_FASTCALL | METH_KEYWORDS,
    "end($self, key)\n--\n\n"
    "Closes the open region of `key` and records its time (RuntimeError if none is open)."};
PyMethodDef kCPUGPUTimerStart = {
    "start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&CPUGPUTimerStart)),
    METH_FASTCALL | METH_KEYWORDS,
    "start($self, key, gpu=False, stream=None)\n--\n\n"
    "Opens a region of `key`; gpu=True also times it on the GPU with CUDA events\n"
    "recorded on `stream` (default: the timer's stream). Without a GPU, gpu=True\n"
    "regions are timed on the CPU only (one TrainscopeWarning per process)."};
PyMethodDef kCPUGPUTimerEnd = {
    "end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&CPUGPUTimerEnd)),
    METH_FASTCALL | METH_KEYWORDS,
    "end($self, key, gpu=False, stream=None)\n--\n\n"
    "Closes the open region of `key`; `gpu` must equal the flag given to start()\n"
    "(ValueError otherwise, and the region stays open). Never waits for the GPU."};

void Install(py::handle type, PyMethodDef* method) {
  PyObject* descriptor = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type.ptr()), method);
  if (descriptor == nullptr) throw py::error_already_set();
  const int rc = PyObject_SetAttrString(type.ptr(), method->ml_name, descriptor);
  Py_DECREF(descriptor);
  if (rc != 0) throw py::error_already_set();
}

}  // namespace

void InstallFastPath(py::handle timer_type, py::handle cpu_gpu_timer_type) {
  Install(timer_type, &kTimerStart);
  Install(timer_type, &kTimerEnd);
  Install(cpu_gpu_timer_type, &kCPUGPUTimerStart);
  Install(cpu_gpu_timer_type, &kCPUGPUTimerEnd);
}

}  // namespace trainscope::python
