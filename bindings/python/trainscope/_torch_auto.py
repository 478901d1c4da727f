"""PyTorch instrumented without code changes (docs/auto.md).

``trainscope.torch.instrument()`` (what ``trainscope run --auto`` calls when the
training imports torch) records, through the process's one recorder
(trainscope._auto):

- IO: each DataLoader fetch (the wait for the next batch; ``eval/IO`` when
  gradients are off);
- BATCH: the step, from the end of one training fetch to the end of the next
  (so the data wait of a step lies inside the step before it; a loader that
  runs out closes the last one); without a DataLoader, from the end of one
  optimizer step to the end of the next; left to the Hugging Face or
  Lightning callback when one delimits steps (recorder().step_owner);
- FORWARD: the outermost ``Module.__call__`` (nested modules and a DDP wrapper
  count once; a model called twice in a step counts both; ``eval/FORWARD``
  under ``torch.no_grad()`` or inference mode, which also closes an open step);
- BACKWARD: ``Tensor.backward`` and ``torch.autograd.backward`` (once when one
  calls the other);
- OPTIMIZER: ``Optimizer.step`` of every optimizer class;
- COMM: the ``torch.distributed`` collectives called from Python (DDP's own
  gradient all-reduce runs inside BACKWARD);
- with ``layers=N``: ``layer/<module path>`` (forward) and
  ``layer/<module path>/backward`` for every module down to depth N, by module
  hooks (and an NVTX range per region, as every trainscope region).

On CUDA each region is also timed on the GPU on torch's current stream. A
patch that fails disables itself with one warning naming it; the training
never fails because of trainscope.
"""

import functools
import weakref

import torch

from trainscope._auto import (BACKWARD, BATCH, COMM, EVAL_PREFIX, FORWARD, IO, LAYER_PREFIX,
                              OPTIMIZER, recorder)

__all__ = ["Instrumentation", "instrument"]

_rec = recorder()  # the process's one recorder (the wrappers below are hot paths)

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object",
                "all_to_all", "all_to_all_single", "barrier", "broadcast",
                "broadcast_object_list", "gather", "gather_object", "reduce", "reduce_scatter",
                "reduce_scatter_tensor", "scatter", "scatter_object_list", "send", "recv",
                "isend", "irecv")


_inference = getattr(torch, "is_inference_mode_enabled", None)


def _training():
    # The Hugging Face callback marks its evaluation loop, whose fetches run with
    # gradients on (only the prediction step is under no_grad).
    if not torch.is_grad_enabled() or _rec.evaluating:
        return False
    return not (_inference is not None and _inference())


class _Steps:
    """Who opens and closes BATCH when no framework callback does."""

    def __init__(self):
        self.seen_loader = False

    @staticmethod
    def owned():
        return _rec.step_owner is not None

    def fetched(self, training):
        """A fetch returned a batch."""
        if self.owned():
            return
        rec = _rec
        if training:
            self.seen_loader = True
            rec.end(BATCH)
            rec.start(BATCH)
        else:
            rec.end(BATCH)  # evaluation is no part of a step

    def exhausted(self, training):
        if not self.owned() and training:
            recorder().end(BATCH)

    def evaluating(self):
        if not self.owned():
            recorder().end(BATCH)

    def optimizer_stepped(self):
        if self.owned() or self.seen_loader:
            return
        rec = _rec
        rec.end(BATCH)
        rec.start(BATCH)


_steps = _Steps()
# Depth of module calls and backward calls in progress (the outermost records).
_depth = {"module": 0, "backward": 0, "optimizer": 0}


def _region(key, fn, *args, **kwargs):
    rec = _rec
    started = rec.start(key)
    try:
        return fn(*args, **kwargs)
    finally:
        if started:
            rec.end(key)


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
            def __next__(it):
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
            return __next__

        if self._patch(base, "__next__", make_next, "DataLoader fetch"):
            self.keys |= {IO, BATCH}

    def forward(self, model=None):
        """FORWARD at the outermost module call (of `model`, else of every module)."""
        def around(call, *args, **kwargs):
            if _depth["module"]:
                return call(*args, **kwargs)
            rec = _rec
            if not rec.enabled():
                return call(*args, **kwargs)
            training = _training()
            if not training:
                _steps.evaluating()
            _depth["module"] += 1
            try:
                return _region(FORWARD if training else EVAL_PREFIX + FORWARD, call, *args,
                               **kwargs)
            finally:
                _depth["module"] -= 1

        if model is None:
            def make(original):
                @functools.wraps(original)
                def __call__(self, *args, **kwargs):
                    return around(original, self, *args, **kwargs)
                return __call__

            ok = self._patch(torch.nn.Module, "__call__", make, "Module.__call__ (FORWARD)")
        else:
            # The model's own calls: its forward method, wrapped on the instance.
            ok = self._patch(model, "forward",
                             lambda original: functools.wraps(original)(
                                 lambda *a, **k: around(original, *a, **k)),
                             "the model's forward (FORWARD)")
        if ok:
            self.keys |= {FORWARD}

    def backward(self):
        def make(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                if _depth["backward"]:
                    return original(*args, **kwargs)
                _depth["backward"] += 1
                try:
                    return _region(BACKWARD, original, *args, **kwargs)
                finally:
                    _depth["backward"] -= 1
                    _end_layer_backwards()
            return wrapper

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
            def step(*args, **kwargs):
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
            step._trainscope_step = True  # pylint: disable=protected-access
            return step

        if only is not None:
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
        try:
            import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        except Exception:  # pylint: disable=broad-except
            return
        if not dist.is_available():
            return

        def make(original):
            @functools.wraps(original)
            def collective(*args, **kwargs):
                return _region(COMM, original, *args, **kwargs)
            return collective

        any_patched = False
        for name in _COLLECTIVES:
            if hasattr(dist, name):
                any_patched = self._patch(dist, name, make, f"torch.distributed.{name} (COMM)") \
                    or any_patched
        if any_patched:
            self.keys |= {COMM}

    def layers(self, depth, model=None):
        """layer/<path> forward (and backward) regions for modules down to `depth`."""
        roots = weakref.WeakSet()
        handles = []

        def hook_root(root):
            if root in roots:
                return
            roots.add(root)
            for path, module in root.named_modules():
                if not path or path.count(".") + 1 > depth:
                    continue
                key = LAYER_PREFIX + path
                try:
                    handles.append(module.register_forward_pre_hook(
                        functools.partial(_layer_forward_pre, key)))
                    handles.append(module.register_forward_hook(
                        functools.partial(_layer_forward_post, key)))
                except Exception as error:  # pylint: disable=broad-except
                    recorder().warn("layers", f"trainscope: layer regions off: {error}")
                    return

        def undo():
            for handle in handles:
                handle.remove()
            handles.clear()

        self._add_undo(undo)
        if model is not None:
            hook_root(model)
            return
        # Without a model: the root of each outermost module call.
        def make(original):
            @functools.wraps(original)
            def __call__(module, *args, **kwargs):
                if not _depth["module"]:
                    try:
                        hook_root(module)
                    except Exception as error:  # pylint: disable=broad-except
                        recorder().warn("layers", f"trainscope: layer regions off: {error}")
                return original(module, *args, **kwargs)
            return __call__

        self._patch(torch.nn.Module, "__call__", make, "Module.__call__ (layers)")


def _layer_forward_pre(key, module, args):
    del module
    training = _training()
    recorder().start(key if training else EVAL_PREFIX + key)
    if not training:
        return
    # The end of the layer's backward: its input's gradient (when the input needs one).
    first = _first_tensor(args)
    if first is not None and first.requires_grad:
        try:
            first.register_hook(functools.partial(_layer_backward_end, key + "/backward"))
        except Exception:  # pylint: disable=broad-except
            pass


def _layer_forward_post(key, module, args, output):
    del module, args
    training = _training()
    recorder().end(key if training else EVAL_PREFIX + key)
    if not training:
        return
    # The start of the layer's backward: its output's gradient (tensor hooks,
    # which leave the graph as it is, unlike module backward hooks).
    first = _first_tensor(output)
    if first is None or not first.requires_grad:
        return
    backward_key = key + "/backward"
    try:
        first.register_hook(functools.partial(_layer_backward_start, backward_key))
        _backward_keys.add(backward_key)
    except Exception:  # pylint: disable=broad-except
        pass


# Layer backward keys: those whose input needs no gradient (the first layer)
# end with the backward call.
_backward_keys = set()


def _layer_backward_start(key, grad):
    rec = _rec
    if not rec.is_open(key):
        rec.start(key)
    return grad


def _layer_backward_end(key, grad):
    recorder().end(key)
    return grad


def _end_layer_backwards():
    if not _backward_keys:
        return
    rec = _rec
    for key in _backward_keys:
        if rec.is_open(key):
            rec.end(key)


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        for item in value.values():
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def instrument(model=None, optimizer=None, loader=None, *, layers=0):
    """Instruments PyTorch; returns an Instrumentation whose remove() undoes it.

    With no object, everything, process-wide (what `trainscope run --auto`
    does): every DataLoader fetch (IO, and BATCH from one fetch to the next),
    the outermost module call (FORWARD), backward (BACKWARD), every optimizer's
    step (OPTIMIZER) and the torch.distributed collectives (COMM). With
    objects, those only: model -> FORWARD (and BACKWARD, which belongs to no
    object), optimizer -> OPTIMIZER, loader -> IO and BATCH (a loader or a list
    of loaders). layers=N adds layer/<module path> regions down to depth N (of
    `model`, else of each module called outermost).
    """
    handle = Instrumentation()
    everything = model is None and optimizer is None and loader is None
    try:
        if everything or loader is not None:
            loaders = None
            if loader is not None:
                loaders = list(loader) if isinstance(loader, (list, tuple)) else [loader]
            handle.loader(only=loaders)
        if everything or model is not None:
            handle.forward(model)
            handle.backward()
        if everything or optimizer is not None:
            handle.optimizer(only=optimizer)
        if everything:
            handle.collectives()
        if layers:
            handle.layers(int(layers), model)
    except Exception as error:  # pylint: disable=broad-except
        recorder().warn("instrument", f"trainscope: instrumentation incomplete: {error}")
    rec = _rec
    rec.patched = getattr(rec, "patched", set()) | handle.keys
    return handle
