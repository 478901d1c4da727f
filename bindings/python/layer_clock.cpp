// trainscope._core._LayerClock: the layer regions of trainscope.torch's layers=N
// (bindings/python/trainscope/_torch_auto.py) started and ended from C.
//
// Why: a layer costs a region for its forward and one for its backward every
// step, and in Python that was about 3 us of interpreter frames per layer (the
// wrapper's lookups, the open/close helpers, the backward hook's group, the
// books of open backward regions), on top of what torch's own hook costs
// (bench/auto_cost.py, docs/auto.md "Cost"). Here the Module.__call__ wrapper
// makes one call to find the layer and start its region (enter) and one to end
// it and hook its output (close); the hook torch calls when the output's
// gradient is ready is a C callable (no Python frame) that ends the layers whose
// backward is over and starts its own. On torch 1.13 the hook goes into the
// tensor's hook dict directly (Tensor.register_hook less its RemovableHandle,
// half its cost); on torch >= 2 it is a pre-hook on the output's node. The
// regions go through the recorder's live timer's own start/end (Timer, or
// CPUGPUTimer with gpu=True), so keys, errors and GPU timing are the timer's.
// Nothing here raises into the training: a region the timer refuses is dropped
// (forward: the reason is kept for the Python side's one warning per key).
#include <Python.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "py_timers.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

// A new reference held for the clock's lifetime.
struct Ref {
  PyObject* ptr = nullptr;
  Ref() = default;
  explicit Ref(PyObject* owned) : ptr(owned) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& other) noexcept : ptr(std::exchange(other.ptr, nullptr)) {}
  Ref& operator=(Ref&& other) noexcept {
    std::swap(ptr, other.ptr);
    return *this;
  }
  ~Ref() { Py_XDECREF(ptr); }
  void reset(PyObject* owned) {
    PyObject* old = std::exchange(ptr, owned);
    Py_XDECREF(old);
  }
};

struct Layer {
  Ref key;           // layer/<path>
  Ref eval_key;      // eval/layer/<path>
  Ref backward_key;  // layer/<path>/backward
  std::string path;
  PyObject* forward_open = nullptr;  // key or eval_key while its forward is open
  bool forward_training = false;     // ... and whether it is a training call
  bool backward_open = false;
};

struct ClockState {
  PyObject* self = nullptr;  // the _LayerClock (borrowed: it owns this state)
  std::vector<Layer> layers;
  std::vector<int> open_backward;  // layers whose backward is open, innermost last
  Ref timer;                       // the timer the regions go to
  Ref start;                       // its bound start and end
  Ref end;
  bool gpu = false;  // a CPUGPUTimer: regions are gpu=True
  // How training is told from evaluation (torch.is_grad_enabled,
  // torch.is_inference_mode_enabled or None, the recorder with `evaluating`).
  Ref grad_enabled;
  Ref inference;
  Ref recorder;
  Ref tensor_type;        // torch.Tensor
  bool prehooks = false;  // torch >= 2: a pre-hook on the output's node, else a tensor hook
  Ref error;              // (key, message) of the last forward region refused
  // The output hooked last (a weak reference) and its hook: a parent returning its
  // last child's output joins that hook.
  Ref last_output;
  Ref last_hook;
  // Layer backward is timed on a sample of steps: the steps n (0 the run's first, counted
  // by the recorder's BATCH ends) with n % backward_every == 0; the other steps' outputs
  // get no hook (torch's hook alone costs about 2 us a layer on torch 2).
  long backward_every = 1;
  bool backward_on = true;  // this step is sampled
};

struct ClockObject {
  PyObject_HEAD ClockState* state;
};

struct HookObject {
  PyObject_HEAD PyObject* clock;  // strong reference
  std::vector<int>* layers;       // outermost first
};

PyTypeObject* clock_type = nullptr;
PyObject* attr_requires_grad = nullptr;  // interned attribute and method names
PyObject* attr_grad_fn = nullptr;
PyObject* attr_backward_hooks = nullptr;
PyObject* attr_register_hook_dict = nullptr;
PyObject* attr_register_prehook = nullptr;
PyObject* attr_register_hook = nullptr;
PyObject* attr_live = nullptr;
PyObject* attr_evaluating = nullptr;
PyObject* ordered_dict = nullptr;  // collections.OrderedDict
PyTypeObject* hook_type = nullptr;
PyObject* cpu_gpu_timer_type = nullptr;  // borrowed from the module (lives as long)
PyObject* gpu_kwnames = nullptr;         // ("gpu",)

ClockState& State(PyObject* self) { return *reinterpret_cast<ClockObject*>(self)->state; }

// timer.start(key) / timer.end(key) (gpu=True on a CPUGPUTimer); false, with the
// exception cleared, when the timer refused the region. `error` receives it.
bool Call(const ClockState& s, PyObject* method, PyObject* key, Ref* error = nullptr) {
  PyObject* result;
  if (s.gpu) {
    PyObject* args[] = {key, Py_True};
    result = PyObject_Vectorcall(method, args, 1, gpu_kwnames);
  } else {
    PyObject* args[] = {key};
    result = PyObject_Vectorcall(method, args, 1, nullptr);
  }
  if (result != nullptr) {
    Py_DECREF(result);
    return true;
  }
  if (error == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* message = value != nullptr ? PyObject_Str(value) : nullptr;
  if (message == nullptr) {
    PyErr_Clear();
    message = PyUnicode_FromString("refused by the timer");
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  if (message != nullptr) error->reset(PyTuple_Pack(2, key, message));
  Py_XDECREF(message);
  PyErr_Clear();
  return false;
}

// The timer the regions go to: rebinds when the recorder's changed (a new run).
bool Bind(ClockState& s, PyObject* timer) {
  if (timer == s.timer.ptr) return true;
  Ref start(PyObject_GetAttrString(timer, "start"));
  Ref end(start.ptr != nullptr ? PyObject_GetAttrString(timer, "end") : nullptr);
  const int gpu = end.ptr != nullptr && cpu_gpu_timer_type != nullptr
                      ? PyObject_IsInstance(timer, cpu_gpu_timer_type)
                      : 0;
  if (end.ptr == nullptr || gpu < 0) {
    PyErr_Clear();
    return false;
  }
  Py_INCREF(timer);
  s.timer.reset(timer);
  s.start = std::move(start);
  s.end = std::move(end);
  s.gpu = gpu != 0;
  s.backward_on = true;  // a new run: its first step is sampled
  // Backward regions open on the old timer stay with it (its run is over).
  for (int index : s.open_backward) s.layers[index].backward_open = false;
  s.open_backward.clear();
  return true;
}

// 1 training, 0 evaluation, -1 unknown (exception cleared): gradients on, no
// inference mode, and the recorder not in a framework's evaluation loop.
int Training(const ClockState& s) {
  const auto truth = [](PyObject* callable) {
    PyObject* value = PyObject_CallNoArgs(callable);
    if (value == nullptr) return -1;
    const int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
  };
  int on = s.grad_enabled.ptr != nullptr ? truth(s.grad_enabled.ptr) : 1;
  if (on == 1 && s.recorder.ptr != nullptr) {
    PyObject* evaluating = PyObject_GetAttr(s.recorder.ptr, attr_evaluating);
    const int yes = evaluating != nullptr ? PyObject_IsTrue(evaluating) : -1;
    Py_XDECREF(evaluating);
    on = yes < 0 ? -1 : !yes;
  }
  if (on == 1 && s.inference.ptr != nullptr && s.inference.ptr != Py_None) {
    const int yes = truth(s.inference.ptr);
    on = yes < 0 ? -1 : !yes;
  }
  if (on < 0) PyErr_Clear();
  return on;
}

bool Related(const std::string& a, const std::string& b) {
  const auto under = [](const std::string& child, const std::string& parent) {
    return child.size() > parent.size() && child[parent.size()] == '.' &&
           child.compare(0, parent.size(), parent) == 0;
  };
  return under(a, b) || under(b, a);
}

void BackwardEnd(ClockState& s, int index) {
  Layer& layer = s.layers[index];
  if (!layer.backward_open) return;
  layer.backward_open = false;
  if (s.end.ptr != nullptr) Call(s, s.end.ptr, layer.backward_key.ptr);
}

// The gradient reached `index`'s output: every open layer that is not its
// ancestor (nor a child sharing its output) has done its backward; its own starts.
void BackwardStart(ClockState& s, int index) {
  Layer& layer = s.layers[index];
  std::vector<int>& open = s.open_backward;
  if (!open.empty()) {
    std::size_t kept = 0;
    // The innermost ends first; the related keep their order.
    for (std::size_t i = open.size(); i-- > 0;) {
      if (!Related(layer.path, s.layers[open[i]].path)) BackwardEnd(s, open[i]);
    }
    for (int other : open) {
      if (s.layers[other].backward_open) open[kept++] = other;
    }
    open.resize(kept);
  }
  if (layer.backward_open || s.start.ptr == nullptr) return;  // (its output reached twice)
  if (!Call(s, s.start.ptr, layer.backward_key.ptr)) return;
  layer.backward_open = true;
  open.push_back(index);
}

int LayerIndex(const ClockState& s, PyObject* object) {
  const long index = PyLong_AsLong(object);
  if (index == -1 && PyErr_Occurred()) return -1;
  if (index < 0 || static_cast<std::size_t>(index) >= s.layers.size()) {
    PyErr_Format(PyExc_IndexError, "no layer %ld", index);
    return -1;
  }
  return static_cast<int>(index);
}

// --- _LayerClock --------------------------------------------------------------

PyObject* ClockNew(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  reinterpret_cast<ClockObject*>(self)->state = new (std::nothrow) ClockState();
  if (reinterpret_cast<ClockObject*>(self)->state == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  reinterpret_cast<ClockObject*>(self)->state->self = self;
  return self;
}

void ClockDealloc(PyObject* self) {
  delete reinterpret_cast<ClockObject*>(self)->state;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// configure(grad_enabled, inference, recorder, tensor_type, prehooks)
PyObject* ClockConfigure(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyType_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "configure(grad_enabled, inference, recorder, tensor_type, prehooks)");
    return nullptr;
  }
  const int prehooks = PyObject_IsTrue(args[4]);
  if (prehooks < 0) return nullptr;
  ClockState& s = State(self);
  Ref* slots[] = {&s.grad_enabled, &s.inference, &s.recorder, &s.tensor_type};
  for (int i = 0; i < 4; ++i) {
    Py_INCREF(args[i]);
    slots[i]->reset(args[i]);
  }
  s.prehooks = prehooks != 0;
  Py_RETURN_NONE;
}

// add(key, eval_key, backward_key, path) -> index
PyObject* ClockAdd(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "add(key, eval_key, backward_key, path)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!PyUnicode_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "add(): keys and path are str");
      return nullptr;
    }
  }
  Py_ssize_t size = 0;
  const char* path = PyUnicode_AsUTF8AndSize(args[3], &size);
  if (path == nullptr) return nullptr;
  ClockState& s = State(self);
  Layer layer;
  for (int i = 0; i < 3; ++i) Py_INCREF(args[i]);
  layer.key.reset(args[0]);
  layer.eval_key.reset(args[1]);
  layer.backward_key.reset(args[2]);
  layer.path.assign(path, static_cast<std::size_t>(size));
  s.layers.push_back(std::move(layer));
  return PyLong_FromSize_t(s.layers.size() - 1);
}

// Starts layer `index`'s forward region on the recorder's live timer: 1 started, 0 not
// timed (recording off), -1 refused by the timer (error() says why).
int Open(ClockState& s, int index) {
  if (s.recorder.ptr == nullptr) return 0;
  PyObject* timer = PyObject_CallMethodNoArgs(s.recorder.ptr, attr_live);
  if (timer == nullptr) {
    PyErr_Clear();
    return 0;
  }
  const bool bound = timer != Py_None && Bind(s, timer);
  Py_DECREF(timer);  // (Bind keeps its own reference)
  if (!bound) return 0;
  const int training = Training(s);
  if (training < 0) return 0;
  Layer& layer = s.layers[index];
  PyObject* key = training ? layer.key.ptr : layer.eval_key.ptr;
  if (!Call(s, s.start.ptr, key, &s.error)) return -1;
  layer.forward_open = key;
  layer.forward_training = training != 0;
  return 1;
}

PyObject* Opened(int result, PyObject* index) {
  if (result > 0) {
    Py_INCREF(index);
    return index;
  }
  if (result < 0) Py_RETURN_FALSE;
  Py_RETURN_NONE;
}

// open(index) -> index when its forward region started, None when not timed
// (recording off), False when the timer refused it (error() says why).
PyObject* ClockOpen(PyObject* self, PyObject* arg) {
  ClockState& s = State(self);
  const int index = LayerIndex(s, arg);
  if (index < 0) return nullptr;
  return Opened(Open(s, index), arg);
}

// enter(table, module) -> as open() for the layer `module` is in `table` ({id(module):
// (weak reference to it, index)}); None when it is none (not a layer).
PyObject* ClockEnter(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyDict_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "enter(table, module)");
    return nullptr;
  }
  PyObject* id = PyLong_FromVoidPtr(args[1]);
  if (id == nullptr) return nullptr;
  PyObject* entry = PyDict_GetItemWithError(args[0], id);  // borrowed
  Py_DECREF(id);
  if (entry == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
      !PyWeakref_Check(PyTuple_GET_ITEM(entry, 0)) ||
      PyWeakref_GetObject(PyTuple_GET_ITEM(entry, 0)) != args[1]) {
    Py_RETURN_NONE;  // (an id reused by another object)
  }
  ClockState& s = State(self);
  PyObject* index_object = PyTuple_GET_ITEM(entry, 1);
  const int index = LayerIndex(s, index_object);
  if (index < 0) return nullptr;
  return Opened(Open(s, index), index_object);
}

void HookOutput(ClockState& s, int index, PyObject* output);

// close(index, output) -> True, or False when the timer refused the end (error() says
// why). The output of a training call gets the hook that starts the layer's backward.
PyObject* ClockClose(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "close(index, output)");
    return nullptr;
  }
  ClockState& s = State(self);
  const int index = LayerIndex(s, args[0]);
  if (index < 0) return nullptr;
  Layer& layer = s.layers[index];
  PyObject* key = std::exchange(layer.forward_open, nullptr);
  if (key == nullptr || s.end.ptr == nullptr) Py_RETURN_FALSE;
  const bool ended = Call(s, s.end.ptr, key, &s.error);
  if (layer.forward_training && s.backward_on && args[1] != Py_None) {
    HookOutput(s, index, args[1]);
  }
  return PyBool_FromLong(ended);
}

// error() -> (key, message) of the last region refused, or None; clears it.
PyObject* ClockError(PyObject* self, PyObject*) {
  ClockState& s = State(self);
  PyObject* error = std::exchange(s.error.ptr, nullptr);
  if (error == nullptr) Py_RETURN_NONE;
  return error;
}

// backward_done(): ends every open backward region (the backward call returned).
PyObject* ClockBackwardDone(PyObject* self, PyObject*) {
  ClockState& s = State(self);
  for (std::size_t i = s.open_backward.size(); i-- > 0;) BackwardEnd(s, s.open_backward[i]);
  s.open_backward.clear();
  Py_RETURN_NONE;
}

// sample(every): layer backward on one step in `every` (>= 1), from the next step on.
PyObject* ClockSample(PyObject* self, PyObject* arg) {
  const long every = PyLong_AsLong(arg);
  if (every == -1 && PyErr_Occurred()) return nullptr;
  if (every < 1) {
    PyErr_SetString(PyExc_ValueError, "sample(every): every >= 1");
    return nullptr;
  }
  State(self).backward_every = every;
  Py_RETURN_NONE;
}

// step(n): step n of the run (0 its first) begins: its layer backward is timed when
// n % every == 0. Returns whether it is.
PyObject* ClockStep(PyObject* self, PyObject* arg) {
  const long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  ClockState& s = State(self);
  s.backward_on = n % s.backward_every == 0;
  return PyBool_FromLong(s.backward_on);
}

PyObject* NewHook(PyObject* clock, int index) {
  auto* hook = PyObject_New(HookObject, hook_type);
  if (hook == nullptr) return nullptr;
  hook->layers = new (std::nothrow) std::vector<int>{index};
  if (hook->layers == nullptr) {
    hook->clock = nullptr;
    Py_DECREF(hook);
    return PyErr_NoMemory();
  }
  Py_INCREF(clock);
  hook->clock = clock;
  return reinterpret_cast<PyObject*>(hook);
}

PyObject* ClockKeys(PyObject* self, PyObject* arg) {
  ClockState& s = State(self);
  const int index = LayerIndex(s, arg);
  if (index < 0) return nullptr;
  const Layer& layer = s.layers[index];
  return PyTuple_Pack(3, layer.key.ptr, layer.eval_key.ptr, layer.backward_key.ptr);
}

// The first tensor of a module's output (a tensor, or in a tuple, list or dict), borrowed.
PyObject* FirstTensor(PyObject* value, PyTypeObject* tensor, int depth = 0) {
  if (PyObject_TypeCheck(value, tensor)) return value;
  if (depth > 8) return nullptr;
  if (PyTuple_Check(value) || PyList_Check(value)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* found = FirstTensor(PySequence_Fast_GET_ITEM(value, i), tensor, depth + 1);
      if (found != nullptr) return found;
    }
  } else if (PyDict_Check(value)) {
    Py_ssize_t position = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &position, &key, &item)) {
      PyObject* found = FirstTensor(item, tensor, depth + 1);
      if (found != nullptr) return found;
    }
  }
  return nullptr;
}

PyObject* CallMethod(PyObject* self, PyObject* name, PyObject* arg) {
  PyObject* args[] = {self, arg};
  return PyObject_VectorcallMethod(name, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

// torch 1.13's Tensor.register_hook less its RemovableHandle (half its cost): the same
// hook dict on the tensor and on its node, our hook in it under its own key. False
// (nothing changed) when the tensor is not as expected.
bool TensorHookDirect(PyObject* tensor, PyObject* hook) {
  PyObject* hooks = PyObject_GetAttr(tensor, attr_backward_hooks);
  if (hooks == nullptr) return false;
  if (hooks == Py_None) {
    Py_DECREF(hooks);
    PyObject* node = PyObject_GetAttr(tensor, attr_grad_fn);
    if (node == nullptr) return false;
    if (node == Py_None) {  // a leaf: the public way
      Py_DECREF(node);
      return false;
    }
    hooks = PyObject_CallNoArgs(ordered_dict);  // as torch's (a user's handle holds a weakref)
    bool ok = hooks != nullptr && PyObject_SetAttr(tensor, attr_backward_hooks, hooks) == 0;
    if (ok) {
      PyObject* done = CallMethod(node, attr_register_hook_dict, tensor);
      ok = done != nullptr;
      Py_XDECREF(done);
    }
    Py_DECREF(node);
    if (!ok) {
      Py_XDECREF(hooks);
      return false;
    }
  }
  // (an OrderedDict of the user's hooks keeps its order only through its own setitem)
  const int rc = PyDict_CheckExact(hooks) ? PyDict_SetItem(hooks, hook, hook)
                                          : PyObject_SetItem(hooks, hook, hook);
  Py_DECREF(hooks);
  return rc == 0;
}

// `hook` runs when `tensor`'s gradient is ready: a pre-hook on the node that made it
// (torch >= 2, cheaper there than a tensor hook), else a tensor hook.
void RegisterHook(const ClockState& s, PyObject* tensor, PyObject* hook) {
  if (s.prehooks) {
    PyObject* node = PyObject_GetAttr(tensor, attr_grad_fn);
    if (node != nullptr && node != Py_None) {
      PyObject* handle = CallMethod(node, attr_register_prehook, hook);
      Py_DECREF(node);
      if (handle != nullptr) {
        Py_DECREF(handle);
        return;
      }
    } else {
      Py_XDECREF(node);
    }
    PyErr_Clear();
  } else if (TensorHookDirect(tensor, hook)) {
    return;
  }
  PyErr_Clear();
  PyObject* handle = CallMethod(tensor, attr_register_hook, hook);
  Py_XDECREF(handle);
  PyErr_Clear();
}

void HookOutput(ClockState& s, int index, PyObject* output) {
  if (s.tensor_type.ptr == nullptr) return;
  PyObject* first = FirstTensor(output, reinterpret_cast<PyTypeObject*>(s.tensor_type.ptr));
  if (first == nullptr) return;
  PyObject* requires_grad = PyObject_GetAttr(first, attr_requires_grad);
  const int needs = requires_grad != nullptr ? PyObject_IsTrue(requires_grad) : -1;
  Py_XDECREF(requires_grad);
  if (needs <= 0) {
    PyErr_Clear();
    return;
  }
  if (s.last_output.ptr != nullptr && PyWeakref_GetObject(s.last_output.ptr) == first) {
    // A parent whose output is its last child's: one hook starts both, the parent
    // first, so that the child's backward lies inside.
    auto* hook = reinterpret_cast<HookObject*>(s.last_hook.ptr);
    hook->layers->insert(hook->layers->begin(), index);
    return;
  }
  PyObject* hook = NewHook(s.self, index);
  if (hook == nullptr) {
    PyErr_Clear();
    return;
  }
  RegisterHook(s, first, hook);
  s.last_output.reset(PyWeakref_NewRef(first, nullptr));
  if (s.last_output.ptr == nullptr) PyErr_Clear();
  s.last_hook.reset(hook);
}

// --- the hook -----------------------------------------------------------------

void HookDealloc(PyObject* self) {
  auto* hook = reinterpret_cast<HookObject*>(self);
  delete hook->layers;
  Py_XDECREF(hook->clock);
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);
}

// Called by torch with the gradient(s); returns None (the gradient unchanged).
PyObject* HookCall(PyObject* self, PyObject*, PyObject*) {
  auto* hook = reinterpret_cast<HookObject*>(self);
  ClockState& s = State(hook->clock);
  for (int index : *hook->layers) BackwardStart(s, index);
  Py_RETURN_NONE;
}

PyMethodDef kClockMethods[] = {
    {"configure", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ClockConfigure)),
     METH_FASTCALL,
     "configure(grad_enabled, inference, recorder, tensor_type, prehooks): how training is "
     "told and outputs are hooked."},
    {"add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ClockAdd)), METH_FASTCALL,
     "add(key, eval_key, backward_key, path) -> index of a new layer."},
    {"open", &ClockOpen, METH_O,
     "open(index) -> index (started), None (not timed), False (refused: see error())."},
    {"enter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ClockEnter)),
     METH_FASTCALL, "enter(table, module) -> as open() for the layer of module; None: none."},
    {"close", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ClockClose)),
     METH_FASTCALL, "close(index, output): ends the forward region open() started."},
    {"error", &ClockError, METH_NOARGS, "(key, message) of the last refused region, or None."},
    {"backward_done", &ClockBackwardDone, METH_NOARGS, "Ends the open backward regions."},
    {"keys", &ClockKeys, METH_O, "keys(index) -> (key, eval_key, backward_key)."},
    {"sample", &ClockSample, METH_O, "sample(every): layer backward on one step in every."},
    {"step", &ClockStep, METH_O, "step(n): step n begins; True when its backward is timed."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot kClockSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(&ClockNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(&ClockDealloc)},
    {Py_tp_methods, kClockMethods},
    {Py_tp_doc, const_cast<char*>("Layer regions of trainscope.torch (layers=N), timed from C.")},
    {0, nullptr}};

PyType_Slot kHookSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&HookDealloc)},
    {Py_tp_call, reinterpret_cast<void*>(&HookCall)},
    {Py_tp_doc,
     const_cast<char*>("A layer output's backward hook (starts layer backward regions).")},
    {0, nullptr}};

PyType_Spec kClockSpec = {"trainscope._core._LayerClock", sizeof(ClockObject), 0,
                          Py_TPFLAGS_DEFAULT, kClockSlots};
PyType_Spec kHookSpec = {"trainscope._core._LayerHook", sizeof(HookObject), 0, Py_TPFLAGS_DEFAULT,
                         kHookSlots};

}  // namespace

void RegisterLayerClock(py::module_& core, py::handle cpu_gpu_timer) {
  cpu_gpu_timer_type = cpu_gpu_timer.ptr();
  gpu_kwnames = Py_BuildValue("(s)", "gpu");
  if (gpu_kwnames == nullptr) throw py::error_already_set();
  const std::pair<PyObject**, const char*> names[] = {
      {&attr_requires_grad, "requires_grad"},
      {&attr_grad_fn, "grad_fn"},
      {&attr_backward_hooks, "_backward_hooks"},
      {&attr_register_hook_dict, "_register_hook_dict"},
      {&attr_register_prehook, "register_prehook"},
      {&attr_register_hook, "register_hook"},
      {&attr_live, "live"},
      {&attr_evaluating, "evaluating"}};
  for (const auto& [slot, name] : names) {
    *slot = PyUnicode_InternFromString(name);
    if (*slot == nullptr) throw py::error_already_set();
  }
  ordered_dict = py::object(py::module_::import("collections").attr("OrderedDict")).release().ptr();
  clock_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kClockSpec));
  if (clock_type == nullptr) throw py::error_already_set();
  hook_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kHookSpec));
  if (hook_type == nullptr) throw py::error_already_set();
  core.attr("_LayerClock") =
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(clock_type));
  core.attr("_LayerHook") =
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(hook_type));
}

}  // namespace trainscope::python
