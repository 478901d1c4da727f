#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/optimization.h"
#include "py_timers.hpp"
#include "trainscope/common/errors.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

// Strong references that live as long as the process: freeing them at exit
// would need the GIL at a time when the interpreter may already be gone.
std::vector<PyObject*>& time_type_members() {
  static auto* members = new std::vector<PyObject*>();
  return *members;
}

PyObject* key_cache() {
  static PyObject* cache = PyDict_New();
  return cache;
}

PyObject* g_warning_category = nullptr;
WarningHandler g_previous_handler = nullptr;

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void python_warning_handler(const std::string& message) {
  // Only a thread that already holds the GIL may call into Python here:
  // taking it from the export thread could deadlock against a Python thread
  // that waits for that export, so other threads keep the stderr line.
  if (interpreter_usable() && PyGILState_Check()) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    // A failed warn (warnings turned into errors) cannot become an exception:
    // warn() runs inside calls that must succeed or change nothing. The
    // message then goes to stderr so it is not lost.
    const bool warned = PyErr_WarnEx(g_warning_category, message.c_str(), 1) == 0;
    if (!warned) PyErr_Clear();
    PyErr_Restore(type, value, traceback);
    if (warned) return;
  }
  g_previous_handler(message);
}

}  // namespace

std::string ToPath(py::handle path, const char* what) {
  py::object fspath = py::reinterpret_steal<py::object>(PyOS_FSPath(path.ptr()));
  if (!fspath) throw py::error_already_set();
  if (!py::isinstance<py::str>(fspath)) {
    throw py::type_error(std::string(what) + " must be a str or os.PathLike[str], not " +
                         Py_TYPE(fspath.ptr())->tp_name);
  }
  return fspath.cast<std::string>();
}

void RegisterTimeType(py::handle time_type) {
  auto& members = time_type_members();
  for (PyObject* member : members) Py_DECREF(member);
  members.assign(1, nullptr);  // ids start at 1
  for (KeyId id = 1; id <= static_cast<KeyId>(TimeType::ALL); ++id) {
    members.push_back(time_type(id).release().ptr());
  }
}

py::object KeyToPython(Key key) {
  const auto& members = time_type_members();
  if (key.is_builtin() && key.id() < members.size()) {
    return py::reinterpret_borrow<py::object>(members[key.id()]);
  }
  const std::string_view name = key.name();
  return py::str(name.data(), name.size());
}

bool KeyFromPython(PyObject* object, Key* key) {
  if (PyLong_Check(object)) {  // TimeType members are ints (IntEnum)
    int overflow = 0;
    const long id = PyLong_AsLongAndOverflow(object, &overflow);
    if (ABSL_PREDICT_FALSE(id == -1 && PyErr_Occurred())) return false;
    // Key::FromId needs an id the registry handed out; check it here so that
    // an arbitrary int is a ValueError rather than a nameless key.
    if (ABSL_PREDICT_FALSE(overflow != 0 || id < 1 ||
                           static_cast<unsigned long>(id) > key_count())) {
      PyErr_Format(PyExc_ValueError,
                   "Unknown timing region key %R: use a TimeType, a name (str) or an id of one",
                   object);
      return false;
    }
    *key = Key::FromId(static_cast<KeyId>(id));
    return true;
  }
  if (PyUnicode_Check(object)) {
    PyObject* cached = PyDict_GetItemWithError(key_cache(), object);  // borrowed
    if (ABSL_PREDICT_TRUE(cached != nullptr)) {
      *key = Key::FromId(static_cast<KeyId>(PyLong_AsUnsignedLong(cached)));
      return true;
    }
    if (PyErr_Occurred()) return false;
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(object, &size);
    if (utf8 == nullptr) return false;
    try {
      *key = Key(std::string_view(utf8, static_cast<std::size_t>(size)));
    } catch (...) {
      SetPythonErrorFromCurrentException();
      return false;
    }
    PyObject* id = PyLong_FromUnsignedLong(key->id());
    if (id == nullptr) return false;
    const int rc = PyDict_SetItem(key_cache(), object, id);
    Py_DECREF(id);
    return rc == 0;
  }
  PyErr_Format(PyExc_TypeError, "timing region key must be a TimeType or a str, not %.200s",
               Py_TYPE(object)->tp_name);
  return false;
}

bool StreamFromPython(PyObject* object, StreamHandle* stream, bool* has_stream) {
  *has_stream = false;
  if (object == nullptr || object == Py_None) return true;
  PyObject* handle = nullptr;
  if (PyLong_Check(object)) {
    Py_INCREF(object);
    handle = object;
  } else {
    handle = PyObject_GetAttrString(object, "cuda_stream");
    if (handle == nullptr || !PyLong_Check(handle)) {
      Py_XDECREF(handle);
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "stream must be None, an int (cudaStream_t) or have an int cuda_stream "
                   "attribute (torch.cuda.Stream), not %.200s",
                   Py_TYPE(object)->tp_name);
      return false;
    }
  }
  void* pointer = PyLong_AsVoidPtr(handle);
  Py_DECREF(handle);
  if (pointer == nullptr && PyErr_Occurred()) return false;
  *stream = pointer;
  *has_stream = true;
  return true;
}

void SetPythonError(const absl::Status& status) {
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kAlreadyExists:
      type = PyExc_FileExistsError;
      break;
    case absl::StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case absl::StatusCode::kPermissionDenied:
      type = PyExc_PermissionError;
      break;
    default:
      break;
  }
  const std::string message(status.message());
  PyErr_SetString(type, message.c_str());
}

void SetPythonErrorFromCurrentException() {
  try {
    throw;
  } catch (const TimerError& e) {
    SetPythonError(absl::Status(e.code(), e.what()));
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

void ThrowIfError(const absl::Status& status) {
  if (ABSL_PREDICT_TRUE(status.ok())) return;
  SetPythonError(status);
  throw py::error_already_set();
}

void InstallWarningHandler(py::module_& module) {
  g_warning_category = PyErr_NewExceptionWithDoc(
      "trainscope._core.TrainscopeWarning",
      "Warnings from trainscope (e.g. gpu=True regions timed on the CPU only).",
      PyExc_RuntimeWarning, nullptr);
  if (g_warning_category == nullptr) throw py::error_already_set();
  module.add_object("TrainscopeWarning", py::handle(g_warning_category));
  const WarningHandler previous = set_warning_handler(&python_warning_handler);
  if (previous != &python_warning_handler) g_previous_handler = previous;
}

}  // namespace trainscope::python
