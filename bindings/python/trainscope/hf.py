"""trainscope for the Hugging Face Trainer: ``trainscope.hf.TrainscopeCallback``.

    from trainscope.hf import TrainscopeCallback
    Trainer(model, args, train_dataset=..., callbacks=[TrainscopeCallback()]).train()

or, with no code change, ``trainscope run --auto -- python train.py`` (the
bootstrap calls ``trainscope.hf.install()``, which gives every ``Trainer``
exactly one TrainscopeCallback).

Recorded through the process's one recorder (``trainscope._auto.recorder()``),
so the regions land in the active run (under `trainscope run`, its run):

- ``BATCH``: one per optimizer step, ``on_step_begin`` .. ``on_step_end``.
  The Trainer fetches the whole gradient-accumulation group *before*
  ``on_step_begin``, so the data wait (``IO``) is timed at the training data
  loader (``trainscope.torch.instrument(loader=...)``), just before its step.
- ``substep`` (``SUBSTEP``): each gradient-accumulation micro-batch inside its
  BATCH (forward + backward; the last one also the gradient clipping).
- ``OPTIMIZER``: ``on_pre_optimizer_step`` .. ``on_optimizer_step``
  (recent transformers; where the Trainer lacks these hooks the last substep
  holds the step).
- ``FORWARD`` and ``BACKWARD`` of the model (``eval/FORWARD`` in evaluation),
  by ``trainscope.torch.instrument(model=...)`` while it trains
  (``TrainscopeCallback(phases=False)``: not).
- ``EPOCH``: ``on_epoch_begin`` .. ``on_epoch_end``.
- ``eval/EPOCH``: one evaluation (``Trainer.evaluation_loop``: evaluate and
  predict), ``eval/BATCH``: each of its prediction steps (fetch included).
- metrics: every number the Trainer logs (``loss``, ``learning_rate``,
  ``grad_norm``, ``epoch``, ``eval_loss``, ``train_runtime``, ...) at its
  ``global_step``, and ``step_loss``: the training loss of every optimizer
  step (the sum of its micro-batches' ``training_step`` losses, as the
  Trainer's ``loss`` sums them), also between the Trainer's logging steps;
  read from the device in batches (at most one host sync per 64 steps).
- params: the TrainingArguments that matter (learning rate, per-device and
  total batch size, accumulation, epochs, max steps, precision, seed, world
  size, optimizer, scheduler, weight decay, gradient clipping).

While the Trainer trains, ``recorder().step_owner`` is ``"hf"``: the PyTorch
patches of ``--auto`` then record the phases (IO, FORWARD, BACKWARD, OPTIMIZER,
COMM) and leave the steps to this callback; a key they record
(``recorder().patched``) is not recorded here too. Every hook is guarded: one
that fails warns once (TrainscopeWarning) and training goes on.

``import trainscope.hf`` imports ``transformers`` (ImportError naming it when
it is absent) but neither ``transformers.trainer`` nor torch: install() patches
``Trainer`` when ``transformers.trainer`` is imported, and TrainscopeCallback
(a ``transformers.TrainerCallback``) is built on first access.
"""

import functools
import importlib.abc
import sys
import threading

try:
    import transformers as _transformers  # noqa: F401  (fail here, naming the package)
except ImportError as _error:
    raise ImportError(
        "trainscope.hf needs the Hugging Face transformers package: pip install transformers "
        f"({_error})", name="transformers") from _error

from trainscope import _auto

__all__ = ["TrainscopeCallback", "install", "SUBSTEP", "EVAL_BATCH", "EVAL_EPOCH"]

OWNER = "hf"
SUBSTEP = "substep"
EVAL_BATCH = _auto.EVAL_PREFIX + _auto.BATCH  # "eval/BATCH"
EVAL_EPOCH = _auto.EVAL_PREFIX + _auto.EPOCH  # "eval/EPOCH"
STEP_LOSS = "step_loss"  # the metric: the training loss of each optimizer step
_LOSS_BATCH = 64  # step losses read from the device at once
_TRAINER_MODULE = "transformers.trainer"


def _recorder():
    return _auto.recorder()


def _warn(what, message):
    try:
        _recorder().warn(("hf", what), message)
    except Exception:  # pylint: disable=broad-except
        pass


def _guarded(method):
    """A hook that never raises and never changes the Trainer's control: a failure
    warns once per hook and process."""
    name = method.__name__

    @functools.wraps(method)
    def hook(self, *args, **kwargs):
        try:
            method(self, *args, **kwargs)
        except Exception as error:  # pylint: disable=broad-except
            _warn(name, f"trainscope.hf: {name} failed and is not recorded: {error!r}")

    return hook


def _number(value):
    """A logged value as a float, or None when it is no number."""
    if isinstance(value, bool):
        return None
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # a 0-d tensor / numpy scalar
        try:
            value = value.item()
        except Exception:  # pylint: disable=broad-except
            return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _precision(args):
    if getattr(args, "bf16", False):
        return "bf16"
    if getattr(args, "fp16", False):
        return "fp16"
    return "fp32"


def _params(args, state):
    """The TrainingArguments that matter, with what the Trainer resolved (max_steps,
    epochs) from its state."""
    world = int(getattr(args, "world_size", 1) or 1)
    per_device = getattr(args, "per_device_train_batch_size", None)
    accumulation = getattr(args, "gradient_accumulation_steps", 1)
    max_steps = getattr(state, "max_steps", 0) or getattr(args, "max_steps", -1)
    epochs = getattr(state, "num_train_epochs", 0) or getattr(args, "num_train_epochs", None)
    params = {
        "learning_rate": getattr(args, "learning_rate", None),
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": accumulation,
        "total_train_batch_size": (per_device * accumulation * world
                                   if isinstance(per_device, int) else None),
        "num_train_epochs": epochs,
        "max_steps": max_steps,
        "precision": _precision(args),
        "seed": getattr(args, "seed", None),
        "world_size": world,
        "optim": getattr(getattr(args, "optim", None), "value", getattr(args, "optim", None)),
        "lr_scheduler_type": getattr(getattr(args, "lr_scheduler_type", None), "value",
                                     getattr(args, "lr_scheduler_type", None)),
        "weight_decay": getattr(args, "weight_decay", None),
        "max_grad_norm": getattr(args, "max_grad_norm", None),
    }
    return {key: value for key, value in params.items() if value is not None}


class _Hooks:
    """The TrainscopeCallback's hooks (the callback class adds transformers'
    TrainerCallback as its second base)."""

    def __init__(self, phases=True):
        """phases: also time the model's FORWARD and BACKWARD while it trains
        (trainscope.torch.instrument(model=...)) where `--auto` does not."""
        super().__init__()
        self._phases = bool(phases)
        self._open = []  # keys this callback started and did not end, in order
        self._owner_before = None
        self._owning = False
        self._torch_handle = None
        self._params_logged = False
        self._eval_batches = None  # batches of the evaluation running (None: unknown)
        self._eval_done = 0
        self._eval_depth = 0
        self._evaluating_before = False
        self._micro_losses = []  # this step's training_step losses (tensors)
        self._step_losses = []  # (global_step, loss tensor) not logged yet

    # --- regions -------------------------------------------------------------

    @staticmethod
    def _patched(key):
        return key in (getattr(_recorder(), "patched", None) or ())

    def _start(self, key):
        if key in self._open:  # a hook ran twice (or the last end was missed)
            self._end(key)
        if _recorder().start(key):
            self._open.append(key)

    def _end(self, key):
        if key in self._open:
            self._open.remove(key)
            _recorder().end(key)

    def _end_all(self, keys=None):
        for key in reversed(list(self._open)):
            if keys is None or key in keys:
                self._end(key)

    # --- training --------------------------------------------------------------

    @_guarded
    def on_init_end(self, args, state, control, **kwargs):
        _patch_trainer(sys.modules.get(_TRAINER_MODULE))

    @_guarded
    def on_train_begin(self, args, state, control, **kwargs):
        _patch_trainer(sys.modules.get(_TRAINER_MODULE))  # added after __init__
        self._end_all()  # a train() that raised and is run again
        self._release_torch()
        rec = _recorder()
        if not self._owning:
            self._owner_before = rec.step_owner
            self._owning = True
        rec.step_owner = OWNER
        if not self._params_logged:
            self._params_logged = True
            rec.log_params(_params(args, state))
        self._instrument_torch(kwargs.get("model"), kwargs.get("train_dataloader"))

    def _instrument_torch(self, model, loader):
        """The data wait at the training loader (IO) and, with phases, the model's
        FORWARD and BACKWARD, by trainscope.torch.instrument, for what the PyTorch
        patches (--auto) do not record already; removed at the end of training."""
        options = {}
        if loader is not None and not self._patched(_auto.IO):
            # accelerate's DataLoaderShard iterates the DataLoader it wraps
            # (base_dataloader): the fetch is that loader's.
            loaders = [loader]
            base = getattr(loader, "base_dataloader", None)
            if base is not None and base is not loader:
                loaders.append(base)
            options["loader"] = loaders
        if self._phases and model is not None and not self._patched(_auto.FORWARD):
            options["model"] = model
        if not options:
            return
        try:
            import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel
        except Exception:  # pylint: disable=broad-except
            return
        instrument = getattr(ts_torch, "instrument", None)
        if instrument is None:  # trainscope without zero-code PyTorch: steps only
            return
        try:
            self._torch_handle = instrument(**options)
        except Exception as error:  # pylint: disable=broad-except
            _warn("instrument", f"trainscope.hf: the data wait and phases are not timed: "
                                f"{error!r}")

    def _release_torch(self):
        handle, self._torch_handle = self._torch_handle, None
        if handle is not None:
            try:
                handle.remove()
            except Exception as error:  # pylint: disable=broad-except
                _warn("instrument.remove", f"trainscope.hf: PyTorch stays instrumented: "
                                           f"{error!r}")

    @_guarded
    def on_train_end(self, args, state, control, **kwargs):
        self._end_all((SUBSTEP, _auto.OPTIMIZER, _auto.BATCH, _auto.EPOCH))
        self._micro_losses = []
        self._flush_losses()
        self._release_torch()
        if self._owning:
            self._owning = False
            rec = _recorder()
            if rec.step_owner == OWNER:
                rec.step_owner = self._owner_before

    @_guarded
    def on_epoch_begin(self, args, state, control, **kwargs):
        self._start(_auto.EPOCH)

    @_guarded
    def on_epoch_end(self, args, state, control, **kwargs):
        self._end_all((SUBSTEP, _auto.OPTIMIZER, _auto.BATCH))
        self._end(_auto.EPOCH)

    @_guarded
    def on_step_begin(self, args, state, control, **kwargs):
        # One optimizer step: its first micro-batch begins.
        self._end_all((SUBSTEP, _auto.OPTIMIZER, _auto.BATCH))
        self._start(_auto.BATCH)
        self._start(SUBSTEP)

    @_guarded
    def on_substep_end(self, args, state, control, **kwargs):
        # A micro-batch that does not step the optimizer ended; the next begins.
        self._end(SUBSTEP)
        self._start(SUBSTEP)

    @_guarded
    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._end(SUBSTEP)
        if not self._patched(_auto.OPTIMIZER):
            self._start(_auto.OPTIMIZER)

    @_guarded
    def on_optimizer_step(self, args, state, control, **kwargs):
        self._end(_auto.OPTIMIZER)

    @_guarded
    def on_step_end(self, args, state, control, **kwargs):
        self._end(SUBSTEP)  # (transformers without on_pre_optimizer_step)
        self._end(_auto.OPTIMIZER)
        self._end(_auto.BATCH)
        micro, self._micro_losses = self._micro_losses, []
        if micro:
            total = micro[0]
            for loss in micro[1:]:
                total = total + loss  # on the device: no sync
            self._step_losses.append((int(getattr(state, "global_step", 0) or 0), total))
            if len(self._step_losses) >= _LOSS_BATCH:
                self._flush_losses()

    def _training_loss(self, loss):
        """A training_step's loss (Trainer.training_step, patched by _patch_trainer)."""
        detach = getattr(loss, "detach", None)
        if detach is not None:
            self._micro_losses.append(detach())

    def _flush_losses(self):
        pending, self._step_losses = self._step_losses, []
        if not pending:
            return
        try:
            import torch  # pylint: disable=import-outside-toplevel
            values = torch.stack([loss.float().reshape(()) for _, loss in pending]).tolist()
        except Exception:  # pylint: disable=broad-except
            values = [_number(loss) for _, loss in pending]
        rec = _recorder()
        for (step, _), value in zip(pending, values):
            if value is not None:
                rec.log_metric(STEP_LOSS, value, step=step)

    @_guarded
    def on_log(self, args, state, control, logs=None, **kwargs):
        self._flush_losses()
        if not logs:
            return
        rec = _recorder()
        step = int(getattr(state, "global_step", 0) or 0)
        for key, value in logs.items():
            number = _number(value)
            if number is not None:
                rec.log_metric(str(key), number, step=step)

    # --- evaluation (Trainer.evaluation_loop, patched by _patch_evaluation) -----

    @_guarded
    def _eval_begin(self, dataloader):
        self._eval_depth += 1
        if self._eval_depth > 1:
            return
        self._eval_done = 0
        # The Trainer fetches evaluation batches with gradients on (only
        # prediction_step is under no_grad): this tells the PyTorch patches that
        # those fetches are evaluation (eval/IO), not a training step's data wait.
        rec = _recorder()
        self._evaluating_before = getattr(rec, "evaluating", False)
        rec.evaluating = True
        try:
            self._eval_batches = len(dataloader)
        except Exception:  # pylint: disable=broad-except
            self._eval_batches = None  # an iterable loader: one more eval/BATCH at the end
        if not self._patched(EVAL_EPOCH):
            self._start(EVAL_EPOCH)
        if self._eval_batches != 0 and not self._patched(EVAL_BATCH):
            self._start(EVAL_BATCH)

    @_guarded
    def on_prediction_step(self, args, state, control, **kwargs):
        if self._eval_depth != 1 or EVAL_BATCH not in self._open:
            return
        self._end(EVAL_BATCH)
        self._eval_done += 1
        if self._eval_batches is None or self._eval_done < self._eval_batches:
            self._start(EVAL_BATCH)

    @_guarded
    def _eval_end(self):
        self._eval_depth = max(0, self._eval_depth - 1)
        if self._eval_depth == 0:
            self._end(EVAL_BATCH)
            self._end(EVAL_EPOCH)
            _recorder().evaluating = self._evaluating_before


def _hooks_of(trainer):
    handler = getattr(trainer, "callback_handler", None)
    for callback in getattr(handler, "callbacks", ()):
        if isinstance(callback, _Hooks):
            return callback
    return None


# --- the callback class (built on first access: it needs transformers.TrainerCallback,
# which imports torch) ----------------------------------------------------------------

_callback_class = None
_class_lock = threading.Lock()


def _build_callback_class():
    global _callback_class
    with _class_lock:
        if _callback_class is None:
            from transformers import TrainerCallback  # pylint: disable=import-outside-toplevel
            _callback_class = type("TrainscopeCallback", (_Hooks, TrainerCallback), {
                "__module__": __name__,
                "__qualname__": "TrainscopeCallback",
                "__doc__": "A transformers TrainerCallback recording the Trainer's steps "
                           "(BATCH, substep, OPTIMIZER), epochs, evaluation (eval/), logs "
                           "(metrics) and TrainingArguments (params) in the active "
                           "trainscope run. See trainscope.hf.",
            })
    return _callback_class


def __getattr__(name):
    if name == "TrainscopeCallback":
        return _build_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- patches of the Trainer class --------------------------------------------------

_patch_lock = threading.RLock()
_evaluation_patched_by = None  # the Trainer class whose evaluation_loop is ours


def _patch_trainer(module):
    """Trainer.evaluation_loop opens eval/EPOCH and the first eval/BATCH, and
    Trainer.training_step hands its loss to the callback (step_loss), for a trainer
    that has a TrainscopeCallback (a no-op for one that has none). Once per process."""
    global _evaluation_patched_by
    trainer_class = getattr(module, "Trainer", None)
    if trainer_class is None:
        return
    with _patch_lock:
        if _evaluation_patched_by is trainer_class:
            return
        original = trainer_class.evaluation_loop

        @functools.wraps(original)
        def evaluation_loop(self, *args, **kwargs):
            try:
                hooks = _hooks_of(self)
            except Exception:  # pylint: disable=broad-except
                hooks = None
            if hooks is None:
                return original(self, *args, **kwargs)
            dataloader = args[0] if args else kwargs.get("dataloader")
            hooks._eval_begin(dataloader)  # pylint: disable=protected-access
            try:
                return original(self, *args, **kwargs)
            finally:
                hooks._eval_end()  # pylint: disable=protected-access

        evaluation_loop.__trainscope_original__ = original
        trainer_class.evaluation_loop = evaluation_loop
        original_step = trainer_class.training_step

        @functools.wraps(original_step)
        def training_step(self, *args, **kwargs):
            loss = original_step(self, *args, **kwargs)
            try:
                hooks = _hooks_of(self)
                if hooks is not None:
                    hooks._training_loss(loss)  # pylint: disable=protected-access
            except Exception:  # pylint: disable=broad-except
                pass
            return loss

        training_step.__trainscope_original__ = original_step
        trainer_class.training_step = training_step
        _evaluation_patched_by = trainer_class


def _unpatch_trainer():
    global _evaluation_patched_by
    with _patch_lock:
        trainer_class, _evaluation_patched_by = _evaluation_patched_by, None
        if trainer_class is None:
            return
        for name in ("evaluation_loop", "training_step"):
            current = trainer_class.__dict__.get(name)
            original = getattr(current, "__trainscope_original__", None)
            if original is not None:
                setattr(trainer_class, name, original)


def _ensure_callback(trainer):
    """The trainer gets one TrainscopeCallback unless it has one."""
    try:
        if _hooks_of(trainer) is None:
            trainer.callback_handler.add_callback(_build_callback_class()())
    except Exception as error:  # pylint: disable=broad-except
        _warn("install", f"trainscope.hf: this Trainer is not instrumented: {error!r}")


class _ImportHook(importlib.abc.MetaPathFinder):
    """Calls `on_import(module)` right after the module `name` is executed, without
    importing it (nor letting `import transformers` import the Trainer's torch stack)."""

    def __init__(self, name, on_import):
        self.name = name
        self.on_import = on_import
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        except Exception:  # pylint: disable=broad-except
            return None  # let the import system look as it would without us
        finally:
            self._busy.on = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _AfterExec(spec.loader, self.on_import)
        return spec


class _AfterExec(importlib.abc.Loader):
    """A loader that runs the original loader, puts it back on the module, then
    calls `after(module)` (guarded)."""

    def __init__(self, loader, after):
        self._loader = loader
        self._after = after

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        try:
            self._after(module)
        except Exception as error:  # pylint: disable=broad-except
            _warn("install", f"trainscope.hf: Trainer is not instrumented: {error!r}")

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Installation:
    """What install() did; remove() undoes it (Trainers built meanwhile keep their
    callback)."""

    def __init__(self):
        self._trainer_class = None
        self._wrapper = None
        self._hook = None
        self.removed = False

    def _patch(self, module):
        trainer_class = getattr(module, "Trainer", None)
        if trainer_class is None:
            raise RuntimeError(f"{module.__name__} has no Trainer")
        with _patch_lock:
            if self.removed or self._trainer_class is not None:
                return
            original = trainer_class.__init__

            @functools.wraps(original)
            def __init__(trainer, *args, **kwargs):
                original(trainer, *args, **kwargs)
                if not self.removed:
                    _ensure_callback(trainer)

            __init__.__trainscope_original__ = original
            trainer_class.__init__ = __init__
            self._trainer_class, self._wrapper = trainer_class, __init__
            _patch_trainer(module)
        self._drop_hook()

    def _drop_hook(self):
        hook, self._hook = self._hook, None
        if hook is not None:
            try:
                sys.meta_path.remove(hook)
            except ValueError:
                pass

    def remove(self):
        """Undoes install(): Trainers built from now on get no TrainscopeCallback."""
        global _installation
        with _patch_lock:
            if self.removed:
                return
            self.removed = True  # (a wrapper of ours that another patch wraps adds nothing now)
            self._drop_hook()
            trainer_class, wrapper = self._trainer_class, self._wrapper
            self._trainer_class = self._wrapper = None
            if trainer_class is not None:
                if trainer_class.__dict__.get("__init__") is wrapper:
                    trainer_class.__init__ = wrapper.__trainscope_original__
                _unpatch_trainer()
            if _installation is self:
                _installation = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


_installation = None


def install():
    """Every transformers Trainer built from now on gets exactly one TrainscopeCallback
    (none is added where the user gave one). Patches ``Trainer.__init__`` now if
    ``transformers.trainer`` is imported, else as soon as it is. Idempotent: a second
    call returns the same handle. Returns a handle whose ``remove()`` undoes it."""
    global _installation
    with _patch_lock:
        if _installation is not None and not _installation.removed:
            return _installation
        installation = _Installation()
        _installation = installation
        module = sys.modules.get(_TRAINER_MODULE)
        if module is not None and getattr(module, "Trainer", None) is not None:
            try:
                installation._patch(module)  # pylint: disable=protected-access
            except Exception as error:  # pylint: disable=broad-except
                _warn("install", f"trainscope.hf: Trainer is not instrumented: {error!r}")
        else:
            # pylint: disable=protected-access
            hook = _ImportHook(_TRAINER_MODULE, installation._patch)
            installation._hook = hook
            sys.meta_path.insert(0, hook)
        return installation
