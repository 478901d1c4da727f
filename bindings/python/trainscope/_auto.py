"""The one recorder of zero-code instrumentation in a process.

`trainscope run --auto`, ``trainscope.torch.instrument()``, the Hugging Face
callback (``trainscope.hf``) and the Lightning callback (``trainscope.lightning``)
all record through ``recorder()``: one timer per process (a CPUGPUTimer on
torch's current stream when CUDA is there, else a Timer), attached to the
active run as any timer (under `trainscope run`, the run of TRAINSCOPE_RUN_DIR).

Keys (docs/auto.md): IO (data wait), FORWARD, BACKWARD, OPTIMIZER (the
optimizer step; the diagnosis's kOptimizerKey), COMM, BATCH (the step), EPOCH,
``eval/...`` for evaluation (``eval/IO``, ``eval/FORWARD``, ``eval/BATCH``) and
``layer/<module path>`` / ``layer/<module path>/backward`` for layers.

It never lets the training fail: a region that cannot be recorded is dropped
with one TrainscopeWarning naming the key, and recording stops in DataLoader
worker processes (they record nothing) and in a child forked from a recording
process.
"""

import os
import threading
import warnings

IO = "IO"
FORWARD = "FORWARD"
BACKWARD = "BACKWARD"
OPTIMIZER = "OPTIMIZER"  # diagnosis::kOptimizerKey
COMM = "COMM"
BATCH = "BATCH"
EPOCH = "EPOCH"
EVAL_PREFIX = "eval/"
LAYER_PREFIX = "layer/"

_ENV = "TRAINSCOPE_AUTO"


def auto_mode():
    """What `trainscope run --auto[=MODE]` asked for: None (off), or a dict with
    'layers' (0: none; N: module depth) taken from TRAINSCOPE_AUTO ("1", "layers",
    "layers=N")."""
    value = os.environ.get(_ENV, "")
    if value in ("", "0", "off"):
        return None
    layers = 0
    if value.startswith("layers"):
        _, _, depth = value.partition("=")
        try:
            layers = int(depth) if depth else 2
        except ValueError:
            layers = 2
        layers = max(layers, 1)
    return {"layers": layers}


def _in_dataloader_worker():
    try:
        import torch.utils.data  # pylint: disable=import-outside-toplevel
    except Exception:  # pylint: disable=broad-except
        return False
    return torch.utils.data.get_worker_info() is not None


class Recorder:
    """start/end of auto-instrumented regions; never raises."""

    def __init__(self):
        self._lock = threading.Lock()
        self._timer = None
        self._timer_run = None  # the run the timer records into
        self._gpu = False
        self._off = None  # why recording stopped in this process (None: on)
        self._checked = False  # worker check done in this process
        self._warned = set()
        self._open = set()  # keys started and not ended
        self._gpu_open = set()  # ... on the GPU
        # Who delimits steps (BATCH): "hf" or "lightning" when a framework
        # callback does, so that the torch patches record only the phases.
        self.step_owner = None
        # True while a framework runs its evaluation loop (trainscope.hf): the
        # torch patches then record eval/ keys even with gradients on.
        self.evaluating = False
        # The keys the torch patches record (trainscope.torch.instrument).
        self.patched = set()
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self):
        # A forked child (a DataLoader worker, most often) cannot use the
        # parent's timer: the threads that write it did not survive the fork.
        # It records nothing, and the timer stays referenced: destroying it
        # here would wait on those threads' locks forever.
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._timer is not None:
            self._off = "a forked child of a recording process records nothing"

    def enabled(self):
        if self._off is not None:
            return False
        if not self._checked:
            self._checked = True
            if _in_dataloader_worker():
                self._off = "a DataLoader worker records nothing"
                return False
        return True

    def timer(self):
        """The process's timer (built on first use), or None when recording is off."""
        if not self.enabled():
            return None
        run = _active_run()
        if self._timer is None or (run is not None and run is not self._timer_run):
            # The first timer, or a new run started since (a timer records into
            # the run it was attached to): a fresh one for it.
            with self._lock:
                if self._timer is None or (run is not None and run is not self._timer_run):
                    self._open = set()
                    self._gpu_open = set()
                    self._timer = self._build()
                    self._timer_run = _active_run()
        return self._timer

    def _build(self):
        try:
            import trainscope  # pylint: disable=import-outside-toplevel
            gpu = False
            try:
                import torch  # pylint: disable=import-outside-toplevel
                gpu = bool(trainscope.built_with_cuda() and torch.cuda.is_available())
            except Exception:  # pylint: disable=broad-except
                gpu = False
            if gpu:
                import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel
                self._gpu = True
                return ts_torch.CPUGPUTimer()
            self._gpu = False
            return trainscope.Timer()
        except Exception as error:  # pylint: disable=broad-except
            self._off = f"no timer: {error}"
            self.warn("timer", f"trainscope auto-instrumentation is off: {error}")
            return None

    def warn(self, what, message):
        """One warning per `what` and process."""
        if what in self._warned:
            return
        self._warned.add(what)
        try:
            from trainscope import TrainscopeWarning  # pylint: disable=import-outside-toplevel
            category = TrainscopeWarning
        except Exception:  # pylint: disable=broad-except
            category = RuntimeWarning
        warnings.warn(message, category, stacklevel=3)

    def start(self, key):
        """Starts `key` (and on the GPU too with CUDA); False when it was not started."""
        timer = self._timer
        # The hot path: a timer, recording on, and still the run it records into.
        if timer is None or self._off is not None or _runs is None or \
                _runs._active is not self._timer_run:  # pylint: disable=protected-access
            timer = self.timer()
            if timer is None:
                return False
        # With CUDA, one gpu=True region: timed on the CPU and on the GPU (a key is open
        # once, so not a CPU region beside it). Should the GPU start fail, the CPU one.
        if self._gpu:
            try:
                timer.start(key, gpu=True)
                self._gpu_open.add(key)
                self._open.add(key)
                return True
            except Exception as error:  # pylint: disable=broad-except
                self.warn(("start-gpu", key), f"trainscope: GPU region {key!r} not recorded: "
                          f"{error}")
        try:
            timer.start(key)
        except Exception as error:  # pylint: disable=broad-except
            self.warn(("start", key), f"trainscope: region {key!r} not recorded: {error}")
            return False
        self._open.add(key)
        return True

    def end(self, key):
        open_keys = self._open
        if key not in open_keys:
            return
        open_keys.discard(key)
        timer = self._timer
        if timer is None:
            return
        try:
            if key in self._gpu_open:
                self._gpu_open.discard(key)
                timer.end(key, gpu=True)  # its CPU time too
            else:
                timer.end(key)
        except Exception as error:  # pylint: disable=broad-except
            self.warn(("end", key), f"trainscope: region {key!r} not recorded: {error}")

    def cancel(self, key):
        """Closes `key` without recording it (a fetch that found the loader exhausted)."""
        open_keys = self._open
        if key not in open_keys:
            return
        open_keys.discard(key)
        self._gpu_open.discard(key)
        timer = self._timer
        if timer is None:
            return
        try:
            timer.cancel(key)
        except Exception as error:  # pylint: disable=broad-except
            self.warn(("cancel", key), f"trainscope: region {key!r} not closed: {error}")

    def is_open(self, key):
        return key in self._open

    def log_metric(self, key, value, step=None):
        if not self.enabled():
            return
        try:
            import trainscope  # pylint: disable=import-outside-toplevel
            trainscope.log_metric(key, float(value), step=step)
        except Exception as error:  # pylint: disable=broad-except
            self.warn(("metric", key), f"trainscope: metric {key!r} not logged: {error}")

    def log_params(self, params):
        if not self.enabled():
            return
        import trainscope  # pylint: disable=import-outside-toplevel
        for key, value in params.items():
            try:
                trainscope.log_param(key, value)
            except Exception as error:  # pylint: disable=broad-except
                self.warn(("param", key), f"trainscope: param {key!r} not logged: {error}")


_runs = None  # trainscope.run, once a timer was built (its _active: the active run)


def _active_run():
    global _runs
    if _runs is None:
        try:
            from trainscope import run  # pylint: disable=import-outside-toplevel
        except Exception:  # pylint: disable=broad-except
            return None
        _runs = run
    return _runs._active  # pylint: disable=protected-access


_recorder = None
_recorder_lock = threading.Lock()


def recorder():
    """The process's Recorder."""
    global _recorder
    if _recorder is None:
        with _recorder_lock:
            if _recorder is None:
                _recorder = Recorder()
    return _recorder
