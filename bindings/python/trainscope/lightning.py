"""trainscope for PyTorch Lightning: ``trainer.fit()`` recorded with no loop of your own.

    from trainscope.lightning import TrainscopeCallback
    trainer = lightning.Trainer(..., callbacks=[TrainscopeCallback()])

Under ``trainscope run --auto`` nothing is needed: the bootstrap calls
``install()`` when Lightning is imported (every ``Trainer`` then gets exactly one
TrainscopeCallback), and an installed trainscope also registers the
``lightning.pytorch.callbacks_factory`` / ``pytorch_lightning.callbacks_factory``
entry points, whose factories add one callback to every Trainer while
auto-instrumentation is on (TRAINSCOPE_AUTO set) and none otherwise.

The callback records through the process's one recorder (trainscope._auto), so
it lands in the active run (under ``trainscope run``, the wrapper's run):

- BATCH: one optimizer step, from ``on_train_batch_start`` of its first batch to
  ``on_train_batch_end`` of the batch whose optimizer step completed
  (``trainer.global_step`` advanced). With ``accumulate_grad_batches=N`` that is N
  batches, each also timed as ``substep`` (SUBSTEP, the key trainscope.hf uses
  too) inside the BATCH (recorded only when N > 1). Manual optimization: a BATCH
  runs until a batch in which ``trainer.global_step`` advanced. While fitting,
  ``recorder().step_owner`` is "lightning", so the PyTorch patches of ``--auto``
  leave BATCH to this callback.
- EPOCH: ``on_train_epoch_start`` .. ``on_train_epoch_end`` (so an end-of-epoch
  validation is inside it).
- FORWARD (automatic optimization only): ``on_train_batch_start`` to the first of
  ``on_before_zero_grad`` / ``on_before_backward``: the ``training_step`` (the
  forward pass and the loss).
- BACKWARD: ``on_before_backward`` .. ``on_after_backward`` (exactly around the
  backward call).
- OPTIMIZER: from ``on_before_optimizer_step`` (after the closure's forward and
  backward, before gradient clipping and the update) to the optimizer's own step
  post-hook (``Optimizer.register_step_post_hook``, right after the update).
  Lightning has no hook right after the step, so the post-hook closes it; where
  the step was skipped (AMP found inf gradients) ``on_train_batch_end`` does.
  (LBFGS, which evaluates the closure several times, has its later evaluations
  inside OPTIMIZER.)
- IO (the data wait): exactly the training data fetch, ``next()`` on the train
  loader, which Lightning's loops bracket with ``_on_before_fetch`` /
  ``_on_after_fetch`` (what its profiler times as "train_dataloader_next"): the
  callback wraps those two methods of the Trainer's loops, on the instances
  (where a Lightning lacks them: the profiler's start/stop of those actions).
  The gap between two batch hooks would not be honest: it also holds
  validation, LR schedulers, logger and checkpoint work. The loops are
  Lightning's own, so any iterable and several loaders (CombinedLoader) are
  covered, and the fetch of epoch 0, whose DataLoader iterator Lightning builds
  before ``on_train_start``, too (which ``trainscope.torch.instrument(loader=)``
  called from a hook would miss). With an unsized (iterable) loader Lightning
  prefetches one batch, so each fetch is that of the next batch (the total wait
  is the same; the first prefetch of a fit is not seen).
- Validation and test (``trainer.validate``/``test`` too): ``eval/EPOCH`` per
  run (``on_validation_start`` .. ``on_validation_end``, the sanity check
  included), ``eval/BATCH`` per batch, ``eval/IO`` per fetch. They are no part of
  a training BATCH (unless validation runs in the middle of an accumulation
  group).
- The work of each step (docs/ledger.md): the training batches of the step
  (``on_train_batch_start``, each rank its own under DDP), their samples by
  Lightning's own ``extract_batch_size`` (what ``self.log`` infers) and tokens
  where the batch holds integer token ids (its first tensor; padding excluded
  by an ``attention_mask`` key); the model's calls inside ``training_step`` are
  not counted then (two modules called would count the batch twice).
- Params: ``pl_module.hparams`` (``save_hyperparameters``) and the datamodule's,
  nested keys joined by ".", plus ``lightning.accumulate_grad_batches``,
  ``lightning.max_epochs``, ``lightning.max_steps``, ``lightning.precision`` and
  ``lightning.world_size``.
- Metrics: the values of ``self.log(...)`` that go to Lightning's loggers
  (``trainer.logged_metrics``, names as Lightning's loggers see them:
  ``loss_step``/``loss_epoch`` when both are logged), each new value once, at
  ``trainer.global_step`` (the optimizer steps taken: a training step's loss is
  logged at the step count after it). Step values as often as Lightning's
  loggers get them (every ``Trainer(log_every_n_steps=...)`` optimizer steps,
  default 50, and when training stops), and whatever is new at each epoch's
  end and after each validation (not the sanity check). Values on a GPU are
  read one flush later, so that reading them does not wait for the GPU.

A key that the PyTorch patches of ``--auto`` record already
(``recorder().patched``) is left to them (BATCH, SUBSTEP and EPOCH stay with
the callback). A key started again while open ends and starts again (one region
per start; trainscope._framework, as trainscope.hf). A hook that fails warns once
and training goes on; a Trainer with two TrainscopeCallbacks records through the
first only.

Importing this module imports no Lightning; TrainscopeCallback is built on first
access as a subclass of the ``Callback`` of ``lightning.pytorch`` (or of
``pytorch_lightning`` when only that one is imported or installed).
"""

import functools
import sys

from trainscope import _auto, _framework
from trainscope._auto import BACKWARD, BATCH, EPOCH, EVAL_PREFIX, FORWARD, IO, OPTIMIZER
from trainscope._framework import SUBSTEP
from trainscope._work import work

__all__ = ["SUBSTEP", "TrainscopeCallback", "install", "lightning_callbacks_factory",
           "pytorch_lightning_callbacks_factory"]

_PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_MISSING = ("trainscope.lightning needs PyTorch Lightning: pip install lightning "
            "(or pytorch-lightning)")
# Tests: time fetches around the profiler's start/stop even where the loops have
# their own fetch bracket.
_FETCH_VIA_PROFILER = False
_PARAM_VALUE_MAX = 6000  # run-format: a param value has at most 6000 characters
WORK_SOURCE = "the Lightning batch"  # the samples' source (trainscope._work)


_guarded = _framework.guarded("lightning")


def _is_cpu(value):
    device = getattr(value, "device", None)
    return device is None or getattr(device, "type", "cpu") == "cpu"


def _same_value_object(a, b):
    """Whether two logged values are the same stored value (Lightning hands out
    new detached views of one tensor until the value is logged again)."""
    if a is b:
        return True
    try:
        return (a.data_ptr() == b.data_ptr() and a.device == b.device
                and a.dtype == b.dtype and a.shape == b.shape)
    except Exception:  # pylint: disable=broad-except
        return False


def _flatten(prefix, value, out):
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        for key, item in value.items():
            _flatten(f"{prefix}{key}.", item, out)
        return
    out[prefix[:-1]] = str(value)[:_PARAM_VALUE_MAX]


class _Hooks(_framework.Hooks):
    """The hooks of TrainscopeCallback (the Lightning base class is added when the
    class is built; see _callback_class)."""

    OWNER = "lightning"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # None: not decided yet; False: another TrainscopeCallback of the same
        # Trainer records; True: this one does.
        self._active = None
        self._reset()

    def _reset(self):
        self._reset_books()
        self._group_open = False
        self._group_step = 0
        self._fetch_patches = []  # (object, attribute name, our function): undone at detach
        self._post_hooks = {}  # id(optimizer) -> RemovableHandle
        self._seen = {}  # metric key -> the last value logged (kept alive: see _same_value_object)
        self._pending = []  # (key, value, step) read at the next flush (values on a GPU)
        self._logged_step = 0  # trainer.global_step at the last step-metrics flush
        self._micro = False  # accumulate_grad_batches > 1: SUBSTEP per training batch
        self._forward = True  # automatic optimization: FORWARD from the hooks
        self._batch_size = None  # Lightning's extract_batch_size (False: none)

    _RUNTIME = ("_active", "_rec", "_open", "_group_open", "_group_step", "_fetch_patches",
                "_post_hooks", "_owner_before", "_owning", "_seen", "_pending",
                "_logged_step", "_micro", "_forward", "_params_done", "_batch_size")

    def __getstate__(self):
        # Picklable (spawn launchers send the Trainer to their processes): a copy
        # starts as a fresh callback.
        return {k: v for k, v in self.__dict__.items() if k not in self._RUNTIME}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._active = None
        self._reset()

    # --- attach / detach ------------------------------------------------------

    def _decide_active(self, trainer):
        first = next((cb for cb in getattr(trainer, "callbacks", ()) if isinstance(cb, _Hooks)),
                     self)
        self._active = first is self

    def _attach(self, trainer, stage):
        if not self._fetch_patches:
            self._time_fetches(trainer)
        if stage == "fit":
            self._take_steps()

    def _detach(self):
        self._flush_pending()
        self._end_all()
        self._group_open = False
        self._undo_fetch_patches()
        for handle in self._post_hooks.values():
            try:
                handle.remove()
            except Exception:  # pylint: disable=broad-except
                pass
        self._post_hooks = {}
        self._give_steps_back()
        work().release(WORK_SOURCE)

    def _time_fetches(self, trainer):
        """IO (eval/IO) around each fetch of the train (validation, test) loader: the
        loops' own fetch bracket, ``_on_before_fetch``/``_on_after_fetch``, which
        their data fetcher calls right around ``next()`` (it is what Lightning's
        profiler times as '...train_dataloader_next'). Where a Lightning lacks it,
        around the profiler's start/stop of those actions (which costs a little
        on every profiled action)."""
        fit_loop = getattr(trainer, "fit_loop", None)
        epoch_loop = getattr(fit_loop, "epoch_loop", None)
        loops = [(epoch_loop, IO), (getattr(epoch_loop, "val_loop", None), EVAL_PREFIX + IO),
                 (getattr(trainer, "validate_loop", None), EVAL_PREFIX + IO),
                 (getattr(trainer, "test_loop", None), EVAL_PREFIX + IO)]
        loops = [(loop, key) for loop, key in loops if loop is not None]
        if not _FETCH_VIA_PROFILER and all(
                callable(getattr(loop, "_on_before_fetch", None))
                and callable(getattr(loop, "_on_after_fetch", None)) for loop, _ in loops):
            seen = set()
            for loop, key in loops:
                if id(loop) not in seen:
                    seen.add(id(loop))
                    self._wrap_fetch(loop, "_on_before_fetch", key, True)
                    self._wrap_fetch(loop, "_on_after_fetch", key, False)
            return
        profiler = getattr(trainer, "profiler", None)
        self._wrap_fetch(profiler, "start", None, True)
        self._wrap_fetch(profiler, "stop", None, False)

    def _wrap_fetch(self, owner, name, key, starting):
        """owner.name (a bound method) wrapped, on the instance, to start (after it)
        or end (before it) the region `key` (None: the key _fetch_key gives the
        profiler action passed)."""
        original = getattr(owner, name)
        callback = self

        if starting:
            def wrapper(*args, **kwargs):
                result = original(*args, **kwargs)
                region = key if key is not None else _fetch_key(args[0] if args else None)
                if region is not None and callback._fetch_patches:  # pylint: disable=protected-access
                    callback._fetch(region, True)  # pylint: disable=protected-access
                return result
        else:
            def wrapper(*args, **kwargs):
                region = key if key is not None else _fetch_key(args[0] if args else None)
                if region is not None and callback._fetch_patches:  # pylint: disable=protected-access
                    callback._fetch(region, False)  # pylint: disable=protected-access
                return original(*args, **kwargs)

        setattr(owner, name, wrapper)
        self._fetch_patches.append((owner, name, wrapper))

    def _undo_fetch_patches(self):
        patches, self._fetch_patches = self._fetch_patches, []
        for owner, name, ours in patches:
            try:
                if owner.__dict__.get(name) is ours:
                    del owner.__dict__[name]
            except Exception:  # pylint: disable=broad-except
                pass

    def _fetch(self, key, starting):
        try:
            if starting:
                self._start(key)
            else:
                self._end(key)
        except Exception as error:  # pylint: disable=broad-except
            _framework.warn(self.OWNER, "fetch", f"the data wait is not recorded ({error!r})")

    def _hook_optimizer(self, optimizer):
        raw = getattr(optimizer, "_optimizer", optimizer)  # a LightningOptimizer's torch optimizer
        if id(raw) in self._post_hooks or not hasattr(raw, "register_step_post_hook"):
            return
        callback = self

        def after_step(*_):
            try:
                callback._end(OPTIMIZER)  # pylint: disable=protected-access
            except Exception as error:  # pylint: disable=broad-except
                _framework.warn("lightning", "after_step", f"OPTIMIZER not recorded ({error!r})")

        self._post_hooks[id(raw)] = raw.register_step_post_hook(after_step)

    # --- params and metrics ---------------------------------------------------

    def _lightning_params(self, trainer, pl_module):
        params = {}
        for owner in (getattr(trainer, "datamodule", None), pl_module):
            hparams = getattr(owner, "hparams", None) if owner is not None else None
            if hparams:
                _flatten("", dict(hparams), params)
        for name in ("accumulate_grad_batches", "max_epochs", "max_steps", "precision",
                     "world_size"):
            try:
                value = getattr(trainer, name, None)
            except Exception:  # pylint: disable=broad-except
                value = None
            if value is not None:
                params["lightning." + name] = str(value)
        return params

    def _flush_pending(self):
        pending, self._pending = self._pending, []
        for key, value, step in pending:
            self._log_metric(key, value, step)

    def _flush_metrics(self, trainer, step=None):
        """Every value of self.log(...) not logged yet, at trainer.global_step."""
        if getattr(trainer, "sanity_checking", False):
            return
        self._flush_pending()
        metrics = trainer.logged_metrics
        step = int(trainer.global_step) if step is None else step
        for key, value in list(metrics.items()):
            last = self._seen.get(key)
            if last is not None and _same_value_object(last, value):
                continue
            self._seen[key] = value
            if _is_cpu(value):
                self._log_metric(key, value, step)
            else:
                self._pending.append((key, value, step))

    # --- Lightning hooks --------------------------------------------------------

    @_guarded
    def setup(self, trainer, pl_module, stage):
        self._decide_active(trainer)
        if self._active:
            self._attach(trainer, stage)

    @_guarded
    def teardown(self, trainer, pl_module, stage):
        self._detach()

    @_guarded
    def on_exception(self, trainer, pl_module, exception):
        self._detach()

    @_guarded
    def on_fit_start(self, trainer, pl_module):
        if self._active is None:
            self._decide_active(trainer)
            if not self._active:
                return
        self._attach(trainer, "fit")
        self._log_params(self._lightning_params(trainer, pl_module))

    @_guarded
    def on_train_start(self, trainer, pl_module):
        self._micro = (getattr(trainer, "accumulate_grad_batches", 1) or 1) > 1
        self._forward = bool(getattr(pl_module, "automatic_optimization", True))
        if not self._left_to_patches(OPTIMIZER):
            for optimizer in getattr(trainer, "optimizers", ()) or ():
                self._hook_optimizer(optimizer)

    @_guarded
    def on_train_end(self, trainer, pl_module):
        self._end(SUBSTEP)
        self._end(BATCH)
        self._group_open = False
        self._flush_metrics(trainer)
        self._flush_pending()

    @_guarded
    def on_train_epoch_start(self, trainer, pl_module):
        self._flush_metrics(trainer)
        self._start(EPOCH)

    @_guarded
    def on_train_epoch_end(self, trainer, pl_module):
        # An epoch cut short inside an accumulation group (or a batch whose start
        # hook returned -1) leaves its step open: it ends with the epoch.
        for key in (FORWARD, BACKWARD, OPTIMIZER, SUBSTEP, BATCH):
            self._end(key)
        self._group_open = False
        self._flush_metrics(trainer)
        self._end(EPOCH)

    @_guarded
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        if not self._group_open:
            self._start(BATCH)
            self._group_open = True
            self._group_step = int(trainer.global_step)
        if self._micro:
            self._start(SUBSTEP)
        if self._forward:
            self._start(FORWARD)
        self._count_batch(trainer, batch)

    def _count_batch(self, trainer, batch):
        """The batch's samples (Lightning's extract_batch_size) and tokens: the step's work."""
        if self._batch_size is None:
            self._batch_size = False
            try:
                package = next(cls.__module__.split(".trainer", 1)[0]
                               for cls in type(trainer).__mro__
                               if cls.__module__.startswith(_PACKAGES))
                data = sys.modules.get(package + ".utilities.data")
                if data is None:
                    import importlib  # pylint: disable=import-outside-toplevel
                    data = importlib.import_module(package + ".utilities.data")
                self._batch_size = data.extract_batch_size
            except Exception:  # pylint: disable=broad-except
                pass  # (the first tensor's leading dimension)
        samples = None
        if self._batch_size:
            try:
                samples = self._batch_size(batch)
            except Exception:  # pylint: disable=broad-except
                samples = None  # (Lightning could not tell: the first tensor's)
        work().framework_batch(WORK_SOURCE, batch, samples)

    @_guarded
    def on_before_zero_grad(self, trainer, pl_module, optimizer):
        if FORWARD in self._open:
            self._end(FORWARD)

    @_guarded
    def on_before_backward(self, trainer, pl_module, loss):
        if FORWARD in self._open:
            self._end(FORWARD)
        self._start(BACKWARD)

    @_guarded
    def on_after_backward(self, trainer, pl_module):
        self._end(BACKWARD)

    @_guarded
    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if FORWARD in self._open:
            self._end(FORWARD)
        if OPTIMIZER in self._open or self._left_to_patches(OPTIMIZER):
            return  # (LBFGS: each closure evaluation comes here)
        self._hook_optimizer(optimizer)
        self._start(OPTIMIZER)

    @_guarded
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        for key in (FORWARD, BACKWARD, OPTIMIZER, SUBSTEP):
            if key in self._open:
                self._end(key)
        step = int(trainer.global_step)
        if step != self._group_step:  # the optimizer stepped
            self._end(BATCH)
            self._group_open = False
            # The step's metrics as often as Lightning's loggers get them: every
            # log_every_n_steps optimizer steps, and when training stops.
            every = max(int(getattr(trainer, "log_every_n_steps", 1) or 1), 1)
            if step // every != self._logged_step // every or getattr(trainer, "should_stop",
                                                                        False):
                self._logged_step = step
                self._flush_metrics(trainer, step)

    @_guarded
    def on_validation_start(self, trainer, pl_module):
        self._log_params(self._lightning_params(trainer, pl_module))
        self._start(EVAL_PREFIX + EPOCH)

    @_guarded
    def on_validation_end(self, trainer, pl_module):
        self._end(EVAL_PREFIX + BATCH)
        self._end(EVAL_PREFIX + EPOCH)
        self._flush_metrics(trainer)

    @_guarded
    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._start(EVAL_PREFIX + BATCH)

    @_guarded
    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._end(EVAL_PREFIX + BATCH)

    @_guarded
    def on_test_start(self, trainer, pl_module):
        self._log_params(self._lightning_params(trainer, pl_module))
        self._start(EVAL_PREFIX + EPOCH)

    @_guarded
    def on_test_end(self, trainer, pl_module):
        self._end(EVAL_PREFIX + BATCH)
        self._end(EVAL_PREFIX + EPOCH)
        self._flush_metrics(trainer)

    @_guarded
    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._start(EVAL_PREFIX + BATCH)

    @_guarded
    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._end(EVAL_PREFIX + BATCH)


def _fetch_key(action_name):
    if not isinstance(action_name, str):
        return None
    if action_name.endswith("train_dataloader_next"):
        return IO
    if action_name.endswith(("].val_next", "].test_next")):
        return EVAL_PREFIX + IO
    return None


# --- the class, per Lightning package -------------------------------------------

def _import_package(package):
    """The Lightning package module (lightning.pytorch or pytorch_lightning), imported."""
    module = sys.modules.get(package)
    if module is not None:
        return module
    import importlib  # pylint: disable=import-outside-toplevel
    return importlib.import_module(package)


def _installed(package):
    import importlib.util  # pylint: disable=import-outside-toplevel
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # lightning.pytorch: its parent is missing
        return False


def _default_package():
    for package in _PACKAGES:
        if package in sys.modules:
            return package
    for package in _PACKAGES:
        try:
            _import_package(package)
            return package
        except ImportError:
            continue
    raise ImportError(_MISSING)


_CLASSES = _framework.CallbackClasses(
    _Hooks, __name__, "Records Lightning's training as trainscope regions, params and metrics "
    "(a {package}.Callback; see trainscope.lightning).")


def _callback_class(package=None):
    """TrainscopeCallback for `package` ("lightning.pytorch" or "pytorch_lightning";
    default: the one in use)."""
    package = package or _default_package()

    def base():
        try:
            return _import_package(package).callbacks.Callback
        except ImportError as error:
            raise ImportError(f"{_MISSING} ({error})") from error

    return _CLASSES.get(package, base)


def __getattr__(name):
    if name == "TrainscopeCallback":
        cls = _callback_class()
        globals()["TrainscopeCallback"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"TrainscopeCallback"})


# --- entry points and install() -------------------------------------------------

def _factory(package):
    try:
        if _auto.auto_mode() is None:
            return []
        return [_callback_class(package)()]
    except Exception as error:  # pylint: disable=broad-except
        _framework.warn("lightning", "factory", f"no TrainscopeCallback added ({error!r})")
        return []


def lightning_callbacks_factory():
    """The ``lightning.pytorch.callbacks_factory`` entry point: [TrainscopeCallback()]
    while trainscope auto-instrumentation is on (TRAINSCOPE_AUTO), else []."""
    return _factory("lightning.pytorch")


def pytorch_lightning_callbacks_factory():
    """The ``pytorch_lightning.callbacks_factory`` entry point (as above)."""
    return _factory("pytorch_lightning")


def _ensure_callback(trainer, package):
    """Adds a TrainscopeCallback to `trainer` unless it has one, before its
    checkpoint callbacks (which Lightning keeps last)."""
    callbacks = trainer.callbacks
    if any(isinstance(cb, _Hooks) for cb in callbacks):
        return
    callback = _callback_class(package)()
    checkpoint = getattr(_import_package(package).callbacks, "Checkpoint", None)
    index = next((i for i, cb in enumerate(callbacks)
                  if checkpoint is not None and isinstance(cb, checkpoint)), len(callbacks))
    callbacks.insert(index, callback)


class Installation(_framework.Installation):
    """What install() did: Trainer.__init__ patched in each Lightning package;
    remove() undoes it."""

    def __init__(self):
        super().__init__("lightning")

    @property
    def packages(self):
        """The packages whose Trainer is patched."""
        return tuple(self._patches)

    def _patch(self, package):
        if package not in self._patches:
            self._patch_init(package, _import_package(package).Trainer,
                             functools.partial(_ensure_callback, package=package))


_installation = None


def install():
    """Makes every Lightning Trainer built from now on get exactly one
    TrainscopeCallback (none is added where one is there already, e.g. from the
    entry point or the user), by patching ``Trainer.__init__`` of each Lightning
    package imported (``lightning.pytorch``, ``pytorch_lightning``; when neither
    is imported yet, each installed one, which it imports). Idempotent: a second
    call returns the same handle and patches a package imported since. Returns a handle whose
    ``remove()`` undoes it. ImportError when no Lightning is installed."""
    global _installation
    packages = [p for p in _PACKAGES if p in sys.modules]
    if not packages:
        packages = [p for p in _PACKAGES if _installed(p)]
        if not packages:
            raise ImportError(_MISSING)
    with Installation.lock:
        if _installation is None or _installation.removed:
            _installation = Installation()
        for package in packages:
            _installation._patch(package)  # pylint: disable=protected-access
        return _installation
