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
- the work of each step (docs/ledger.md): samples and tokens from the batches
  ``training_step`` gets (``input_ids``, padding excluded by ``attention_mask``),
  summed over the step's micro-batches; where the Trainer counts its tokens
  (``include_num_input_tokens_seen``), the step's tokens are the growth of
  ``state.num_input_tokens_seen`` over the step (its count: every rank's,
  gathered, so each rank records its 1/world_size share); the run's tag
  ``trainscope.work.source`` says which.
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
import sys

try:
    import transformers as _transformers  # noqa: F401  (fail here, naming the package)
except ImportError as _error:
    raise ImportError(
        "trainscope.hf needs the Hugging Face transformers package: pip install transformers "
        f"({_error})", name="transformers") from _error

from trainscope import _auto, _framework
from trainscope._framework import SUBSTEP
from trainscope._work import work

__all__ = ["TrainscopeCallback", "install", "SUBSTEP", "EVAL_BATCH", "EVAL_EPOCH"]

OWNER = "hf"
EVAL_BATCH = _auto.EVAL_PREFIX + _auto.BATCH  # "eval/BATCH"
EVAL_EPOCH = _auto.EVAL_PREFIX + _auto.EPOCH  # "eval/EPOCH"
STEP_LOSS = "step_loss"  # the metric: the training loss of each optimizer step
_LOSS_BATCH = 64  # step losses read from the device at once
_TRAINER_MODULE = "transformers.trainer"
WORK_SOURCE = "the Trainer's batch"  # the samples' source (trainscope._work)


def _warn(what, message):
    _framework.warn(OWNER, what, message)


_guarded = _framework.guarded(OWNER)


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
    return {
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


class _Hooks(_framework.Hooks):
    """The TrainscopeCallback's hooks (the callback class adds transformers'
    TrainerCallback as its second base)."""

    OWNER = OWNER

    def __init__(self, phases=True):
        """phases: also time the model's FORWARD and BACKWARD while it trains
        (trainscope.torch.instrument(model=...)) where `--auto` does not."""
        super().__init__()
        self._phases = bool(phases)
        self._reset_books()
        self._torch_handle = None
        self._eval_batches = None  # batches of the evaluation running (None: unknown)
        self._eval_done = 0
        self._eval_depth = 0
        self._evaluating_before = False
        self._micro_losses = []  # this step's training_step losses (tensors)
        self._step_losses = []  # (global_step, loss tensor) not logged yet
        self._tokens_seen = None  # state.num_input_tokens_seen at the last step's end

    # --- training --------------------------------------------------------------

    @_guarded
    def on_init_end(self, args, state, control, **kwargs):
        _patch_trainer(sys.modules.get(_TRAINER_MODULE))

    @_guarded
    def on_train_begin(self, args, state, control, **kwargs):
        _patch_trainer(sys.modules.get(_TRAINER_MODULE))  # added after __init__
        self._end_all()  # a train() that raised and is run again
        self._release_torch()
        self._take_steps()
        self._log_params(_params(args, state))
        self._instrument_torch(kwargs.get("model"), kwargs.get("train_dataloader"))
        counting = getattr(args, "include_num_input_tokens_seen", "no")
        self._tokens_seen = None
        if counting not in (None, False, "no"):
            self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)

    def _instrument_torch(self, model, loader):
        """The data wait at the training loader (IO) and, with phases, the model's
        FORWARD and BACKWARD, by trainscope.torch.instrument, for what the PyTorch
        patches (--auto) do not record already; removed at the end of training."""
        options = {}
        if loader is not None and not self._left_to_patches(_auto.IO):
            # accelerate's DataLoaderShard iterates the DataLoader it wraps
            # (base_dataloader): the fetch is that loader's.
            loaders = [loader]
            base = getattr(loader, "base_dataloader", None)
            if base is not None and base is not loader:
                loaders.append(base)
            options["loader"] = loaders
        if self._phases and model is not None and not self._left_to_patches(_auto.FORWARD):
            options["model"] = model
        if not options:
            return
        try:
            from trainscope import _torch_auto  # pylint: disable=import-outside-toplevel
            self._torch_handle = _torch_auto.instrument(**options)
        except Exception as error:  # pylint: disable=broad-except
            _warn("instrument", f"the data wait and phases are not timed: {error!r}")

    def _release_torch(self):
        handle, self._torch_handle = self._torch_handle, None
        if handle is not None:
            try:
                handle.remove()
            except Exception as error:  # pylint: disable=broad-except
                _warn("instrument.remove", f"PyTorch stays instrumented: {error!r}")

    @_guarded
    def on_train_end(self, args, state, control, **kwargs):
        self._end_all((SUBSTEP, _auto.OPTIMIZER, _auto.BATCH, _auto.EPOCH))
        self._micro_losses = []
        self._flush_losses()
        self._release_torch()
        self._give_steps_back()
        work().release(WORK_SOURCE)

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
        self._start(_auto.OPTIMIZER)

    @_guarded
    def on_optimizer_step(self, args, state, control, **kwargs):
        self._end(_auto.OPTIMIZER)

    @_guarded
    def on_step_end(self, args, state, control, **kwargs):
        self._end(SUBSTEP)  # (transformers without on_pre_optimizer_step)
        self._end(_auto.OPTIMIZER)
        if self._tokens_seen is not None:
            self._trainers_tokens(args, state)
        self._end(_auto.BATCH)
        micro, self._micro_losses = self._micro_losses, []
        if micro:
            total = micro[0]
            for loss in micro[1:]:
                total = total + loss  # on the device: no sync
            self._step_losses.append((int(getattr(state, "global_step", 0) or 0), total))
            if len(self._step_losses) >= _LOSS_BATCH:
                self._flush_losses()

    def _trainers_tokens(self, args, state):
        """The step's tokens as the Trainer counted them (a Python int: the Trainer
        read it back itself), before BATCH ends and logs the step's work."""
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        grown, self._tokens_seen = seen - self._tokens_seen, seen
        world = max(int(getattr(args, "world_size", 1) or 1), 1)
        counting = getattr(args, "include_num_input_tokens_seen", "all")
        counting = "all" if counting is True else str(counting)
        share = f", all ranks' / {world}" if world > 1 else ""
        work().framework_step_tokens(grown / world,
                                     f"Trainer.num_input_tokens_seen ({counting}{share})")

    def _training_batch(self, inputs):
        """A micro-batch training_step got (Trainer.training_step, patched)."""
        if self._active is not False:
            work().framework_batch(WORK_SOURCE, inputs)

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
            values = [loss for _, loss in pending]
        for (step, _), value in zip(pending, values):
            self._log_metric(STEP_LOSS, value, step)

    @_guarded
    def on_log(self, args, state, control, logs=None, **kwargs):
        self._flush_losses()
        if not logs:
            return
        step = int(getattr(state, "global_step", 0) or 0)
        for key, value in logs.items():
            self._log_metric(key, value, step)

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
        rec = self._rec
        self._evaluating_before = getattr(rec, "evaluating", False)
        rec.evaluating = True
        try:
            self._eval_batches = len(dataloader)
        except Exception:  # pylint: disable=broad-except
            self._eval_batches = None  # an iterable loader: one more eval/BATCH at the end
        self._start(EVAL_EPOCH)
        if self._eval_batches != 0:
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
            self._rec.evaluating = self._evaluating_before


def _hooks_of(trainer):
    handler = getattr(trainer, "callback_handler", None)
    for callback in getattr(handler, "callbacks", ()):
        if isinstance(callback, _Hooks):
            return callback
    return None


# --- the callback class (built on first access: it needs transformers.TrainerCallback,
# which imports torch) ----------------------------------------------------------------

_CLASSES = _framework.CallbackClasses(
    _Hooks, __name__, "A transformers TrainerCallback recording the Trainer's steps (BATCH, "
    "substep, OPTIMIZER), epochs, evaluation (eval/), logs (metrics) and TrainingArguments "
    "(params) in the active trainscope run. See trainscope.hf.")


def _build_callback_class():
    return _CLASSES.get("transformers", lambda: _transformers.TrainerCallback)


def __getattr__(name):
    if name == "TrainscopeCallback":
        return _build_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- patches of the Trainer class --------------------------------------------------

_patch_lock = _framework.Installation.lock
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

        setattr(evaluation_loop, _framework.ORIGINAL, original)
        trainer_class.evaluation_loop = evaluation_loop
        original_step = trainer_class.training_step

        @functools.wraps(original_step)
        def training_step(self, *args, **kwargs):
            try:
                hooks = _hooks_of(self)
                if hooks is not None:  # (model, inputs, ...): the step's work
                    inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
                    hooks._training_batch(inputs)  # pylint: disable=protected-access
            except Exception:  # pylint: disable=broad-except
                hooks = None
            loss = original_step(self, *args, **kwargs)
            try:
                if hooks is not None:
                    hooks._training_loss(loss)  # pylint: disable=protected-access
            except Exception:  # pylint: disable=broad-except
                pass
            return loss

        setattr(training_step, _framework.ORIGINAL, original_step)
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
            original = getattr(current, _framework.ORIGINAL, None)
            if original is not None:
                setattr(trainer_class, name, original)


def _ensure_callback(trainer):
    """The trainer gets one TrainscopeCallback unless it has one."""
    if _hooks_of(trainer) is None:
        trainer.callback_handler.add_callback(_build_callback_class()())


class _Installation(_framework.Installation):
    """What install() did; remove() undoes it."""

    def __init__(self):
        super().__init__(OWNER)
        self._hook = None

    def _patch(self, name, module):
        try:
            trainer_class = getattr(module, "Trainer", None)
            if trainer_class is None:
                raise RuntimeError(f"{name} has no Trainer")
            with self.lock:
                if self._patch_init(name, trainer_class, _ensure_callback):
                    _patch_trainer(module)
        except Exception as error:  # pylint: disable=broad-except
            _warn("install", f"Trainer is not instrumented: {error!r}")
        self._undo_hook()

    def _undo_hook(self):
        hook, self._hook = self._hook, None
        if hook is not None:
            hook.remove()

    def _undo(self):
        self._undo_hook()
        _unpatch_trainer()


_installation = None


def install():
    """Every transformers Trainer built from now on gets exactly one TrainscopeCallback
    (none is added where the user gave one). Patches ``Trainer.__init__`` now if
    ``transformers.trainer`` is imported, else as soon as it is. Idempotent: a second
    call returns the same handle. Returns a handle whose ``remove()`` undoes it."""
    global _installation
    with _framework.Installation.lock:
        if _installation is not None and not _installation.removed:
            return _installation
        installation = _Installation()
        _installation = installation
        module = sys.modules.get(_TRAINER_MODULE)
        # pylint: disable=protected-access
        if module is not None and getattr(module, "Trainer", None) is not None:
            installation._patch(_TRAINER_MODULE, module)
        else:
            installation._hook = _framework.ImportHook((_TRAINER_MODULE,),
                                                       installation._patch).install()
        return installation
