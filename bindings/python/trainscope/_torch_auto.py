"""PyTorch instrumented without code changes (docs/auto.md).

``trainscope.torch.instrument()`` (what ``trainscope run --auto`` calls when the
training imports torch) records, through the process's one recorder
(trainscope._auto):

- IO: each DataLoader fetch (the wait for the next batch; ``eval/IO`` when
  gradients are off);
- BATCH: the step, from the end of one training fetch to the end of the next
  (so the data wait of a step lies inside the step before it; a loader that
  runs out closes the last one); without a training DataLoader, from the first
  training forward or the end of one optimizer step to the end of the next;
  without an optimizer either, the same with backward; left to the Hugging
  Face or Lightning callback when one delimits steps (recorder().step_owner).
  What ends a step is said once (recorder().steps_from: the run's tags
  trainscope.auto.steps and trainscope.auto.found, and a line on stderr);
- FORWARD: the outermost ``Module.__call__`` (nested modules and a DDP wrapper
  count once; a model called twice in a step counts both; ``eval/FORWARD``
  under ``torch.no_grad()`` or inference mode, which also closes an open step);
  LOSS instead for a module that owns no parameter (a loss of
  ``torch.nn.modules.loss``, a metric): the diagnosis counts it in the forward
  phase. A key whose rows come from modules of two classes is tagged
  (trainscope.auto.callers.<key>), and the per-key views say so;
- BACKWARD: ``Tensor.backward`` and ``torch.autograd.backward`` (once when one
  calls the other);
- OPTIMIZER: ``Optimizer.step`` of every optimizer class;
- COMM: the ``torch.distributed`` collectives called from Python;
  ``COMM/<op>/<group>`` every collective entered to completed, DDP's bucket
  all-reduces included, and ``COMM_EXPOSED`` the part of DDP's all-reduce that
  backward waits for (trainscope._torch_comm);
- SYNC: the host's waits for the GPU between the phases (torch.cuda.synchronize,
  .item()/.cpu()/.tolist()/.numpy() of a CUDA tensor, Event/Stream.synchronize;
  trainscope._torch_sync);
- with ``layers=N``: ``layer/<module path>`` (forward) and
  ``layer/<module path>/backward`` for every module down to depth N, timed in
  the same ``Module.__call__`` wrapper (no module hooks) and, for backward, one
  hook on each layer's output, a C callable (_core._LayerClock starts and ends
  the layer regions; and an NVTX range per region, as every trainscope region). A ``torch.compile``d module is timed as one unit: nothing
  is hooked inside it (the compiler sees the model as it is), and its key has
  no ``_orig_mod``.

Every wrapper is one frame, ``trainscope_timed_call``, that passes the call on
(what a traceback through it shows). Inside a region torch.compile traces
(``torch.compiler.is_compiling()``) nothing is recorded. On CUDA each region
is also timed on the GPU on torch's current stream. A patch that fails
disables itself with one warning naming it; the training never fails because
of trainscope.
"""

import functools
import importlib.util
import os
import sys
import weakref

import torch

from trainscope import _core
from trainscope import _torch_comm as _comm
from trainscope import _torch_sync as _sync
from trainscope._auto import (BACKWARD, BATCH, COMM, EVAL_PREFIX, FORWARD, IO, LAYER_PREFIX, LOSS,
                              OPTIMIZER, recorder)
from trainscope._work import work

__all__ = ["Instrumentation", "instrument"]

_rec = recorder()  # the process's one recorder (the wrappers below are hot paths)

_inference = getattr(torch, "is_inference_mode_enabled", None)
_LOSS_BASE = getattr(getattr(getattr(torch.nn, "modules", None), "loss", None), "_Loss", ())


def _compiling_check():
    """torch.compiler.is_compiling (torch >= 2.3: constant True while Dynamo traces),
    torch._dynamo's before, else never."""
    found = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if found is not None:
        return found

    def compiling():
        dynamo = sys.modules.get("torch._dynamo")
        check = getattr(dynamo, "is_compiling", None)
        return bool(check is not None and check())
    return compiling


_compiling = _compiling_check()
if not hasattr(torch, "compiler") and not hasattr(torch, "_dynamo") and \
        importlib.util.find_spec("torch._dynamo") is None:
    _compiling = bool  # a torch without a compiler (1.13): bool() is False, a C call


_owns_nothing = {}  # id(module) -> (weakref to it, it owns no parameter)


def _owns_no_parameter(module):
    """A loss, a metric: a module call timed as LOSS, not as the model's FORWARD.
    Remembered per module (asking a model for its first parameter costs microseconds)."""
    if isinstance(module, _LOSS_BASE):
        return True
    entry = _owns_nothing.get(id(module))
    if entry is not None and entry[0]() is module:
        return entry[1]
    try:
        owns_nothing = next(module.parameters(), None) is None
        if len(_owns_nothing) >= 4096:  # modules built anew each step: forget the old ones
            _owns_nothing.clear()
        _owns_nothing[id(module)] = (weakref.ref(module), owns_nothing)
    except Exception:  # pylint: disable=broad-except
        return False
    return owns_nothing


def _training():
    # The Hugging Face callback marks its evaluation loop, whose fetches run with
    # gradients on (only the prediction step is under no_grad).
    if not torch.is_grad_enabled() or _rec.evaluating:
        return False
    return not (_inference is not None and _inference())


class _Steps:
    """Who opens and closes BATCH when no framework callback does: the training
    DataLoader's fetches; without one, the optimizer's steps (once an optimizer
    was built); without one either, backward. Without a loader the first
    training forward opens the first step, and evaluation drops a step that has
    not ended (no backward or optimizer step in it)."""

    def __init__(self):
        self.seen_loader = False
        self.optimizer_built = False

    @staticmethod
    def owned():
        return _rec.step_owner is not None

    def fetched(self, training):
        """A fetch returned a batch."""
        if self.owned():
            return
        rec = _rec
        if training:
            if not self.seen_loader:
                self.seen_loader = True
                rec.cancel(BATCH)  # one a forward opened before the first fetch
                rec.steps_from("loader")
            rec.end(BATCH)
            rec.start(BATCH)
        else:
            rec.end(BATCH)  # evaluation is no part of a step

    def exhausted(self, training):
        if not self.owned() and training:
            _rec.end(BATCH)

    def evaluating(self):
        if self.owned():
            return
        if self.seen_loader:
            _rec.end(BATCH)
        else:
            _rec.cancel(BATCH)  # no backward or optimizer step ended it: no step

    def forward_started(self):
        """A training forward, outermost: without a loader, it may open a step."""
        if self.seen_loader or self.owned():
            return
        rec = _rec
        if not rec.is_open(BATCH):
            rec.start(BATCH)

    def backward_done(self):
        if self.seen_loader or self.optimizer_built or self.owned():
            return
        rec = _rec
        rec.steps_from("backward")
        rec.end(BATCH)
        rec.start(BATCH)

    def optimizer_stepped(self):
        if self.seen_loader or self.owned():
            return
        self.optimizer_built = True
        rec = _rec
        rec.steps_from("optimizer")
        rec.end(BATCH)
        rec.start(BATCH)


_steps = _Steps()
_step_work = work()  # samples and tokens of each step (trainscope._work)
# Depth of module calls and backward calls in progress (the outermost records).
_depth = {"module": 0, "backward": 0, "optimizer": 0}


class Instrumentation:
    """What instrument() did; remove() undoes every patch and hook (also on exit
    of a ``with`` block)."""

    def __init__(self):
        self._undo = []
        self.keys = set()

    def _add_undo(self, fn):
        self._undo.append(fn)

    def remove(self):
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception as error:  # pylint: disable=broad-except
                recorder().warn(("remove", id(undo)), f"trainscope: could not undo a patch: {error}")
        rec = _rec
        rec.patched = getattr(rec, "patched", set()) - self.keys
        self.keys = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()
        return False

    # --- patches ------------------------------------------------------------

    def _patch(self, owner, name, make, what):
        """owner.name = make(original), undone by remove(); a failure warns once."""
        try:
            own = name in getattr(owner, "__dict__", {})
            original = owner.__dict__[name] if own else getattr(owner, name)
            setattr(owner, name, make(original))
        except Exception as error:  # pylint: disable=broad-except
            recorder().warn(("patch", what),
                            f"trainscope: {what} is not instrumented ({error}); the rest is")
            return False

        def undo():
            if own:
                setattr(owner, name, original)
            else:  # an instance's attribute over its class's: back to the class's
                delattr(owner, name)

        self._add_undo(undo)
        return True

    def loader(self, only=None):
        """IO and BATCH at each fetch (of the loaders in `only`, else of every loader)."""
        from torch.utils.data import dataloader  # pylint: disable=import-outside-toplevel
        base = dataloader._BaseDataLoaderIter  # pylint: disable=protected-access
        tagged = weakref.WeakSet()  # iterators of the loaders in `only`
        if only is not None:
            loaders = weakref.WeakSet(only)

            def make_iter(original):
                @functools.wraps(original)
                def __iter__(self):
                    it = original(self)
                    try:
                        if self in loaders:
                            tagged.add(it)
                    except TypeError:
                        pass
                    return it
                return __iter__

            self._patch(dataloader.DataLoader, "__iter__", make_iter, "DataLoader.__iter__")

        def make_next(original):
            @functools.wraps(original)
            def trainscope_timed_call(it):  # trainscope's one frame: a timed fetch
                if only is not None and it not in tagged:
                    return original(it)
                rec = _rec
                if not rec.enabled():
                    return original(it)
                training = _training()
                key = IO if training else EVAL_PREFIX + IO
                started = rec.start(key)
                # Modules the Dataset calls (transforms) are data loading, not FORWARD.
                _depth["module"] += 1
                try:
                    batch = original(it)
                except StopIteration:
                    if started:  # learning that the pass is over is no batch's wait
                        rec.cancel(key)
                    _steps.exhausted(training)
                    raise
                except BaseException:
                    if started:
                        rec.end(key)
                    raise
                finally:
                    _depth["module"] -= 1
                if started:
                    rec.end(key)
                _steps.fetched(training)
                return batch
            return trainscope_timed_call

        if self._patch(base, "__next__", make_next, "DataLoader fetch"):
            self.keys |= {IO, BATCH}

    def forward(self, model=None, layers=None):
        """FORWARD (LOSS for a module that owns no parameter) at the outermost module
        call (of `model`, else of every module); `layers` (a _Layers) times the
        layer modules' calls in the same wrapper."""
        def make(original, bound):
            @functools.wraps(original)
            def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed call
                depth = _depth
                if depth["module"]:
                    if layers is None or bound is not None or _compiling():
                        return original(*args, **kwargs)
                    # A layer: its region started and ended in C (_clock), its output hooked.
                    index = _clock.enter(layers.table, args[0])
                    if index is None:  # not a layer, or not recording
                        return original(*args, **kwargs)
                    if index is False:
                        _refused("layer")
                        return original(*args, **kwargs)
                    try:
                        output = original(*args, **kwargs)
                    except BaseException:
                        if not _clock.close(index, None):
                            _refused("layer-end")
                        raise
                    # (a training call's output gets the hook that starts the layer's backward)
                    if not _clock.close(index, output):
                        _refused("layer-end")
                    return output
                if _compiling():
                    return original(*args, **kwargs)
                rec = _rec
                if not rec.enabled():
                    return original(*args, **kwargs)
                module = bound if bound is not None else args[0]
                if layers is not None:
                    layers.hook_root(module)
                training = _training()
                if _owns_no_parameter(module):
                    key = LOSS
                else:
                    key = FORWARD
                    if training:
                        _steps.forward_started()
                        _step_work.batch(torch, module, args if bound is not None else args[1:],
                                         kwargs)
                if not training:
                    _steps.evaluating()
                    key = EVAL_PREFIX + key
                rec.called(key, module)
                depth["module"] += 1
                started = rec.start(key)
                try:
                    return original(*args, **kwargs)
                finally:
                    if started:
                        rec.end(key)
                    depth["module"] -= 1
            return trainscope_timed_call

        if model is None:
            ok = self._patch(torch.nn.Module, "__call__", lambda original: make(original, None),
                             "Module.__call__ (FORWARD)")
        else:
            # The model's own calls: its forward method, wrapped on the instance.
            ok = self._patch(model, "forward", lambda original: make(original, model),
                             "the model's forward (FORWARD)")
            if ok and layers is not None:
                # Its layers' calls: their forward, wrapped on each instance (no
                # process-wide patch when objects are given).
                layers.hook_root(model)
                for reference, index in list(layers.table.values()):
                    module = reference()
                    if module is not None:
                        self._patch(module, "forward",
                                    functools.partial(_make_layer_forward, index=index),
                                    f"{_clock.keys(index)[0]} (layers)")
        if ok:
            self.keys |= {FORWARD, LOSS}

    def backward(self):
        def make(original):
            @functools.wraps(original)
            def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed call
                depth = _depth
                if depth["backward"] or _compiling():
                    return original(*args, **kwargs)
                depth["backward"] += 1
                rec = _rec
                started = rec.start(BACKWARD)
                try:
                    result = original(*args, **kwargs)
                finally:
                    _clock.backward_done()  # the layers' backward regions still open
                    if started:
                        rec.end(BACKWARD)
                    depth["backward"] -= 1
                    # pylint: disable=protected-access
                    if _comm._hooks or _comm._pending or _comm._reduce_scatters.calls:
                        _comm.backward_done()  # DDP's and FSDP's COMM_EXPOSED, bucket rows
                _steps.backward_done()
                return result
            return trainscope_timed_call

        ok = self._patch(torch.Tensor, "backward", make, "Tensor.backward (BACKWARD)")
        ok = self._patch(torch.autograd, "backward", make, "torch.autograd.backward") and ok
        if ok:
            self.keys |= {BACKWARD}

    def optimizer(self, only=None):
        """OPTIMIZER around step() of `only` (an optimizer), else of every optimizer class.

        A closure passed to step() (Lightning passes the training step and its
        backward; LBFGS calls it several times) is no optimizer time: OPTIMIZER
        pauses while it runs, so a step may give several OPTIMIZER rows."""
        def make(original, bound):
            if getattr(original, "_trainscope_step", False):
                return original

            @functools.wraps(original)
            def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed step
                if _depth["optimizer"]:  # a subclass's step calling its base's
                    return original(*args, **kwargs)
                _depth["optimizer"] += 1
                rec = _rec
                position = 0 if bound else 1  # after self, for the class's function
                closure = kwargs.get("closure", args[position] if len(args) > position else None)
                state = {"open": False}
                if closure is not None:
                    def paused(*c_args, **c_kwargs):
                        if state["open"]:
                            rec.end(OPTIMIZER)
                            state["open"] = False
                        try:
                            return closure(*c_args, **c_kwargs)
                        finally:
                            state["open"] = rec.start(OPTIMIZER)
                    if "closure" in kwargs:
                        kwargs["closure"] = paused
                    else:
                        args = args[:position] + (paused,) + args[position + 1:]
                else:
                    state["open"] = rec.start(OPTIMIZER)
                try:
                    return original(*args, **kwargs)
                finally:
                    if state["open"]:
                        rec.end(OPTIMIZER)
                    _depth["optimizer"] -= 1
                    _steps.optimizer_stepped()
            trainscope_timed_call._trainscope_step = True  # pylint: disable=protected-access
            return trainscope_timed_call

        if only is not None:
            _steps.optimizer_built = True
            if self._patch(only, "step", lambda original: make(original, True),
                           "the optimizer's step (OPTIMIZER)"):
                self.keys |= {OPTIMIZER}
            return
        wrapped = set()

        def wrap_class(cls):
            if cls in wrapped or "step" not in cls.__dict__:
                return
            wrapped.add(cls)
            self._patch(cls, "step", lambda original: make(original, False),
                        f"{cls.__name__}.step (OPTIMIZER)")

        def all_subclasses(cls):
            for sub in cls.__subclasses__():
                yield sub
                yield from all_subclasses(sub)

        for cls in list(all_subclasses(torch.optim.Optimizer)):
            wrap_class(cls)

        # Classes defined later: wrapped when their first instance is built.
        def make_init(original):
            @functools.wraps(original)
            def __init__(opt, *args, **kwargs):
                original(opt, *args, **kwargs)
                _steps.optimizer_built = True  # steps end at its step, not at backward
                try:
                    for cls in type(opt).__mro__:
                        if cls is torch.optim.Optimizer:
                            break
                        wrap_class(cls)
                except Exception as error:  # pylint: disable=broad-except
                    recorder().warn("optimizer-init", f"trainscope: OPTIMIZER not timed: {error}")
            return __init__

        self._patch(torch.optim.Optimizer, "__init__", make_init, "Optimizer.__init__")
        self.keys |= {OPTIMIZER}

    def collectives(self):
        """COMM, COMM/<op>/<group> and DDP's COMM_EXPOSED (trainscope._torch_comm)."""
        if _comm.instrument_collectives(self) | _comm.instrument_ddp(self):
            self.keys |= {COMM}

    def syncs(self):
        """SYNC: the host's waits for the GPU (trainscope._torch_sync)."""
        if _sync.instrument_syncs(self, _compiling):
            self.keys |= {_sync.SYNC}


def _make_layer_forward(original, index):
    """A layer's forward, timed (instrument(model=..., layers=N))."""
    @functools.wraps(original)
    def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed call
        opened = None if _compiling() else _clock.open(index)
        if opened is None or opened is False:
            if opened is False:
                _refused("layer")
            return original(*args, **kwargs)
        try:
            output = original(*args, **kwargs)
        except BaseException:
            if not _clock.close(index, None):
                _refused("layer-end")
            raise
        if not _clock.close(index, output):
            _refused("layer-end")
        return output
    return trainscope_timed_call


_OPTIMIZED_MODULE = "OptimizedModule"  # torch._dynamo.eval_frame: what torch.compile returns
_WRAPPED = "_orig_mod"  # the module it compiles

# The layer regions of every _Layers, started and ended in C (bindings/python/layer_clock.cpp):
# the wrapper makes one call to start a layer's forward and one to end it; the backward hook
# on its output is a C callable that ends the layers whose backward is over and starts its
# own (no Python frame). Strict pairs on the recorder's timer itself (Recorder.live): no
# books of open keys to keep, the cheapest region there is (bench/auto_cost.py).
# The backward hook: a pre-hook on the node that made the output (torch >= 2; half a tensor
# hook's cost there), else a tensor hook (torch 1.13: its hook dict set directly, without the
# RemovableHandle of Tensor.register_hook, which cost as much again).
_NODE_PREHOOKS = hasattr(getattr(getattr(torch.autograd, "graph", None), "Node", None),
                         "register_prehook")
_clock = _core._LayerClock()  # pylint: disable=protected-access
_clock.configure(torch.is_grad_enabled, _inference, _rec, torch.Tensor, _NODE_PREHOOKS)

# Layer backward is timed on one step in K (the run's steps 0, K, 2K, ...: torch's own hook
# on each layer's output costs about 2 us a layer a step on torch 2; forward regions are
# every step): instrument(layer_backward_every=K), else this environment variable, else
# LAYER_BACKWARD_EVERY. The run gets the tag TAG_LAYER_BACKWARD_EVERY (docs/auto.md).
LAYER_BACKWARD_EVERY = 8
ENV_LAYER_BACKWARD_EVERY = "TRAINSCOPE_LAYER_BACKWARD_EVERY"
TAG_LAYER_BACKWARD_EVERY = "trainscope.auto.layer_backward_every"


def _layer_backward_every(every):
    """K for instrument(layer_backward_every=every): the argument, else the environment
    variable (a bad value: one warning and the default), else the default."""
    if every is None:
        text = os.environ.get(ENV_LAYER_BACKWARD_EVERY, "").strip()
        if not text:
            return LAYER_BACKWARD_EVERY
        try:
            every = int(text)
        except ValueError:
            every = 0
        if every < 1:
            _rec.warn(ENV_LAYER_BACKWARD_EVERY,
                      f"trainscope: {ENV_LAYER_BACKWARD_EVERY}={text!r} is not a whole number "
                      f">= 1; layer backward on one step in {LAYER_BACKWARD_EVERY}")
            return LAYER_BACKWARD_EVERY
    every = int(every)
    if every < 1:
        raise ValueError(f"layer_backward_every={every}: a whole number >= 1")
    return every


def _refused(what):
    """One warning per key for a layer region the timer refused (a layer inside itself)."""
    error = _clock.error()
    if error is not None:
        key, message = error
        _rec.warn((what, key), f"trainscope: region {key!r} not recorded: {message}")


class _Layers:
    """layer/<path> regions of the modules down to `depth` under each root module.

    Forward: the layer's call, timed in the one Module.__call__ wrapper (module
    hooks would cost the module call its fast path). Backward: one hook on the
    layer's first output that needs a gradient; its gradient starts the layer's
    backward, which ends when the gradient reaches another layer's output that
    is not its ancestor (or backward ends). A torch.compile'd module is one
    layer (nothing inside it is timed; no ``_orig_mod`` in the key)."""

    def __init__(self, depth):
        self.depth = depth
        self.table = {}  # id(module) -> (weakref to it, its index in _clock)
        self.roots = weakref.WeakSet()

    def hook_root(self, root):
        if root in self.roots:
            return
        try:
            self.roots.add(root)
            compiled = []  # paths of compiled modules: nothing under them is a layer
            for path, module in root.named_modules():
                if any(path.startswith(prefix) for prefix in compiled):
                    continue
                if type(module).__name__ == _OPTIMIZED_MODULE:
                    compiled.append(path + "." if path else "")
                    if not path:
                        continue  # a compiled root: its FORWARD is the one unit
                elif not path:
                    continue
                name = ".".join(part for part in path.split(".") if part != _WRAPPED)
                if not name or name.count(".") + 1 > self.depth or id(module) in self.table:
                    continue
                key = LAYER_PREFIX + name
                index = _clock.add(key, EVAL_PREFIX + key, key + "/backward", name)
                self.table[id(module)] = (weakref.ref(module), index)
        except Exception as error:  # pylint: disable=broad-except
            recorder().warn("layers", f"trainscope: layer regions off: {error}")

    def remove(self):
        self.table = {}


def instrument(model=None, optimizer=None, loader=None, *, layers=0, layer_backward_every=None):
    """Instruments PyTorch; returns an Instrumentation whose remove() undoes it.

    With no object, everything, process-wide (what `trainscope run --auto`
    does): every DataLoader fetch (IO, and BATCH from one fetch to the next),
    the outermost module call (FORWARD; LOSS for a module that owns no
    parameter), backward (BACKWARD), every optimizer's step (OPTIMIZER) and the
    torch.distributed collectives (COMM). With objects, those only: model ->
    FORWARD (and BACKWARD, which belongs to no object), optimizer -> OPTIMIZER,
    loader -> IO and BATCH (a loader or a list of loaders). layers=N adds
    layer/<module path> regions down to depth N (of `model`, else of each
    module called outermost; with `model` or with no object), their backward
    timed on one step in layer_backward_every (the run's steps 0, K, 2K, ...;
    None: $TRAINSCOPE_LAYER_BACKWARD_EVERY, else 8; 1: every step).
    """
    if layers:
        every = _layer_backward_every(layer_backward_every)
        _clock.sample(every)
        _clock.step(_rec.steps)
        _rec.on_step = _clock.step
        _rec.set_tag(TAG_LAYER_BACKWARD_EVERY, str(every))
    handle = Instrumentation()
    everything = model is None and optimizer is None and loader is None
    try:
        if everything or loader is not None:
            loaders = None
            if loader is not None:
                loaders = list(loader) if isinstance(loader, (list, tuple)) else [loader]
            handle.loader(only=loaders)
        if everything or model is not None:
            layer_set = _Layers(int(layers)) if layers else None
            if layer_set is not None:
                handle._add_undo(layer_set.remove)  # pylint: disable=protected-access
            handle.forward(model, layer_set)
            handle.backward()
        if everything or optimizer is not None:
            handle.optimizer(only=optimizer)
        if everything:
            handle.collectives()
            handle.syncs()
    except Exception as error:  # pylint: disable=broad-except
        recorder().warn("instrument", f"trainscope: instrumentation incomplete: {error}")
    rec = _rec
    rec.patched = getattr(rec, "patched", set()) | handle.keys
    return handle
