"""What the framework integrations share (trainscope.hf, trainscope.lightning; the
PyTorch patches of ``--auto`` are the third party to the recorder's books).

- ``guarded(owner)``: a hook that never raises, never changes the framework's
  control (returns None) and warns once per hook and process.
- ``Hooks``: a callback's open keys (a second start of an open key ends it and
  starts it again: a hook that ran twice, or an end that was missed, leaves one
  region per start, none spanning both), the keys left to the PyTorch patches
  (``recorder().patched``), step ownership (``recorder().step_owner`` while the
  framework trains, given back as it was) and params logged once, checked
  against the run's (``Recorder.log_params``: a param the run has with the same
  value is not logged again).
- ``number``: a logged value (0-d tensor, numpy scalar, number) as a float.
- ``InitPatch``: ``Trainer.__init__`` wrapped to hand each new trainer to a
  function, marked ``__trainscope_original__``; ``remove()`` undoes it.
- ``ImportHook`` (``trainscope._import_hook``): the one import hook, which the
  bootstrap of ``--auto`` embeds too.
"""

import functools
import threading

from trainscope import _auto
from trainscope._import_hook import ImportHook  # noqa: F401  (re-export)

SUBSTEP = "substep"  # one micro-batch of a gradient-accumulation group, inside its BATCH
ORIGINAL = "__trainscope_original__"  # what a patched function of ours wraps


def warn(owner, what, message):
    try:
        _auto.recorder().warn((owner, what), f"trainscope.{owner}: {message}")
    except Exception:  # pylint: disable=broad-except
        pass


def guarded(owner):
    """A hook that never raises and returns None (a Lightning hook returning -1 would
    stop its epoch); a failure warns once per hook. A callback whose ``_active`` is
    False (another one of the same trainer records) does nothing."""
    def decorate(method):
        name = method.__name__

        @functools.wraps(method)
        def hook(self, *args, **kwargs):
            try:
                if self._active is not False:  # pylint: disable=protected-access
                    method(self, *args, **kwargs)
            except Exception as error:  # pylint: disable=broad-except
                warn(owner, name, f"{name} failed and is not recorded: {error!r} (training "
                                  "goes on)")
            return None
        return hook
    return decorate


def number(value):
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


class Hooks:
    """The books of a framework callback: OWNER names it (the step owner, warnings);
    OWN_KEYS are recorded by the callback even where the PyTorch patches record
    their base key."""

    OWNER = None
    OWN_KEYS = frozenset((_auto.BATCH, SUBSTEP, _auto.EPOCH, _auto.EVAL_PREFIX + _auto.BATCH,
                          _auto.EVAL_PREFIX + _auto.EPOCH))
    _active = None  # None: not decided; False: another callback of the trainer records

    def _reset_books(self):
        self._rec = _auto.recorder()  # the process's one recorder
        self._open = {}  # keys this callback started and has not ended, in start order
        self._owner_before = None
        self._owning = False
        self._params_done = False

    def _left_to_patches(self, key):
        if key in self.OWN_KEYS:
            return False
        patched = getattr(self._rec, "patched", None)
        if not patched:
            return False
        prefix = _auto.EVAL_PREFIX
        return key in patched or (key.startswith(prefix) and key[len(prefix):] in patched)

    def _start(self, key):
        if self._left_to_patches(key):
            return
        if key in self._open:  # a hook ran twice, or the last end was missed
            self._end(key)
        if self._rec.start(key):
            self._open[key] = True

    def _end(self, key):
        if self._open.pop(key, None) is not None:
            self._rec.end(key)

    def _end_all(self, keys=None):
        for key in reversed(list(self._open)):
            if keys is None or key in keys:
                self._end(key)

    def _take_steps(self):
        """The callback delimits the steps (BATCH) until _give_steps_back()."""
        if not self._owning:
            self._owner_before = self._rec.step_owner
            self._owning = True
        self._rec.step_owner = self.OWNER

    def _give_steps_back(self):
        if self._owning:
            self._owning = False
            if self._rec.step_owner == self.OWNER:
                self._rec.step_owner = self._owner_before

    def _log_metric(self, key, value, step):
        """A logged value (number()) at `step`; one that is no number is left out."""
        value = number(value)
        if value is not None:
            self._rec.log_metric(str(key), value, step=step)

    def _log_params(self, params):
        """The framework's params, once per callback, less those the run has already."""
        if self._params_done:
            return
        self._params_done = True
        params = {key: value for key, value in params.items() if value is not None}
        if params:
            self._rec.log_params(params)


class InitPatch:
    """``trainer_class.__init__`` wrapped to call ``on_new(trainer)`` (guarded: a
    failure warns as `owner`) after the original, until remove()."""

    def __init__(self, owner, trainer_class, on_new):
        self.owner = owner
        self.trainer_class = trainer_class
        self.removed = False
        original = trainer_class.__dict__.get("__init__", trainer_class.__init__)
        patch = self

        @functools.wraps(original)
        def __init__(trainer, *args, **kwargs):
            original(trainer, *args, **kwargs)
            if patch.removed:  # (removed while another patch sat on top of ours)
                return
            try:
                on_new(trainer)
            except Exception as error:  # pylint: disable=broad-except
                warn(owner, "install", f"this Trainer is not instrumented ({error!r})")

        setattr(__init__, ORIGINAL, original)
        self.wrapper = __init__
        trainer_class.__init__ = __init__

    def remove(self):
        if self.removed:
            return
        self.removed = True
        try:
            if self.trainer_class.__dict__.get("__init__") is self.wrapper:
                self.trainer_class.__init__ = getattr(self.wrapper, ORIGINAL)
        except Exception as error:  # pylint: disable=broad-except
            warn(self.owner, "remove", f"could not undo the Trainer patch ({error!r})")


class Installation:
    """What a framework's install() did: Trainer.__init__ patched (an InitPatch per
    trainer class); remove() undoes it (trainers built meanwhile keep their callback)."""

    lock = threading.RLock()  # (installs are rare: one lock for all)

    def __init__(self, owner):
        self.owner = owner
        self.removed = False
        self._patches = {}  # what is patched (a package) -> InitPatch

    def _patch_init(self, key, trainer_class, on_new):
        """Patches trainer_class.__init__ unless `key` is patched; whether it did."""
        with self.lock:
            if self.removed or key in self._patches:
                return False
            self._patches[key] = InitPatch(self.owner, trainer_class, on_new)
            return True

    def _undo(self):
        """What else the framework patched (called by remove())."""

    def remove(self):
        """Undoes install(): trainers built from now on get no callback of ours."""
        with self.lock:
            if self.removed:
                return
            self.removed = True
            patches, self._patches = self._patches, {}
            for patch in patches.values():
                patch.remove()
            self._undo()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()
        return False


class CallbackClasses:
    """The callback class per framework package, built on first use as a subclass of
    (hooks, the package's callback base)."""

    def __init__(self, hooks, module_name, doc):
        self._hooks, self._module, self._doc = hooks, module_name, doc
        self._classes = {}
        self._lock = threading.Lock()

    def get(self, key, base):
        """key: the package; base: a function giving its callback class."""
        with self._lock:
            cls = self._classes.get(key)
            if cls is None:
                cls = type("TrainscopeCallback", (self._hooks, base()), {
                    "__module__": self._module, "__qualname__": "TrainscopeCallback",
                    "__doc__": self._doc.format(package=key)})
                self._classes[key] = cls
        return cls
