"""The one recorder of zero-code instrumentation in a process.

`trainscope run --auto`, ``trainscope.torch.instrument()``, the Hugging Face
callback (``trainscope.hf``) and the Lightning callback (``trainscope.lightning``)
all record through ``recorder()``: one timer per process (a CPUGPUTimer on
torch's current stream when CUDA is there, else a Timer), attached to the
active run as any timer (under `trainscope run`, the run of TRAINSCOPE_RUN_DIR).

Keys (docs/auto.md): IO (data wait), FORWARD, LOSS (a module call that owns
no parameter to train: a loss, a metric; the diagnosis counts it in the forward
phase), BACKWARD, OPTIMIZER (the optimizer step; the diagnosis's
kOptimizerKey), COMM, BATCH (the step), EPOCH,
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
LOSS = "LOSS"  # in the diagnosis's forward phase (diagnosis::default_key_map)
BACKWARD = "BACKWARD"
OPTIMIZER = "OPTIMIZER"  # diagnosis::kOptimizerKey
COMM = "COMM"
BATCH = "BATCH"
EPOCH = "EPOCH"
EVAL_PREFIX = "eval/"
LAYER_PREFIX = "layer/"

_ENV = "TRAINSCOPE_AUTO"

# The run's tags of what --auto found (read by the diagnosis: AutoFound, KeyRow::callers).
TAG_STEPS = "trainscope.auto.steps"  # what ends a step: loader, optimizer, backward, hf, lightning
TAG_FOUND = "trainscope.auto.found"  # the same in words, with what was not found
TAG_CALLERS = "trainscope.auto.callers."  # + key: the modules one key's rows come from
# What ends a step, in words (the tag TAG_FOUND and the line on stderr).
_STEP_SOURCES = {
    "loader": "steps from the DataLoader: a step runs from one training fetch to the next",
    "optimizer": "steps from the optimizer (no training DataLoader): a step runs from one "
                 "optimizer step to the next",
    "backward": "steps from backward (no training DataLoader, no torch.optim optimizer): a "
                "step runs from one backward to the next",
    "hf": "steps from the Hugging Face Trainer's callback: one per optimizer step",
    "lightning": "steps from the Lightning Trainer's callback: one per optimizer step",
}


def auto_mode():
    """What `trainscope run --auto[=MODE]` asked for: None (off), or a dict with
    'layers' (0: none; N: module depth) taken from TRAINSCOPE_AUTO ("1", "layers",
    "layers=N")."""
    value = os.environ.get(_ENV, "")
    if value in ("", "0", "off"):
        return None
    layers = 0
    if value == "memory":  # the CUDA allocator's history, for the OOM snapshot (trainscope._oom)
        return {"layers": 0, "memory": True}
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
        self._step_owner = None
        self._tags = {}  # tags set (or waiting for a run: set when one starts)
        self._tagged_run = None  # the run the tags were set in
        self._set_tags = {}  # ... and their values there
        self._callers = {}  # key -> {module class: its name}, for TAG_CALLERS
        self._pending_params = {}  # params waiting for this process to record
        # True while a framework runs its evaluation loop (trainscope.hf): the
        # torch patches then record eval/ keys even with gradients on.
        self.evaluating = False
        # The keys the torch patches record (trainscope.torch.instrument).
        self.patched = set()
        # The anomaly capture of the timer's run (trainscope._anomaly), called at each BATCH end.
        self._anomaly = None
        # Steps (BATCH) ended in the timer's run; `on_step(n)` is told when step n begins
        # (the layer clock's sample of steps whose layer backward is timed: trainscope._torch_auto).
        self.steps = 0
        self.on_step = None
        os.register_at_fork(after_in_child=self._after_fork)

    @property
    def step_owner(self):
        return self._step_owner

    @step_owner.setter
    def step_owner(self, owner):
        # A framework callback takes the steps over: a step the PyTorch patches
        # opened (a training forward before the Trainer's first step) is none.
        if owner is not None and self._step_owner is None and BATCH in self._open:
            self.cancel(BATCH)
        self._step_owner = owner
        if owner is not None:
            self.steps_from(owner)

    def steps_from(self, source):
        """Says, once per source and process, what ends a step (_STEP_SOURCES): as the
        run's tags and, under --auto, one line on stderr (rank 0's)."""
        text = _STEP_SOURCES.get(source, source)
        if self._tags.get(TAG_STEPS) == source or not self.enabled():
            return
        self.set_tag(TAG_STEPS, source)
        self.set_tag(TAG_FOUND, text)
        if auto_mode() is not None and os.environ.get("RANK", "0") == "0":
            try:
                import sys  # pylint: disable=import-outside-toplevel
                sys.stderr.write(f"trainscope --auto: {text}\n")
            except Exception:  # pylint: disable=broad-except
                pass

    def called(self, key, module):
        """Notes which module a `key` row comes from; a key that mixes modules of
        two classes (a GAN's two models, two losses) gets the run's tag
        TAG_CALLERS + key naming them, which the per-key views show."""
        kind = type(module)
        seen = self._callers.get(key)
        if seen is None:
            self._callers[key] = {kind: kind.__name__}
            return
        if kind in seen or len(seen) >= 8:
            return
        seen[kind] = kind.__name__
        self.set_tag(TAG_CALLERS + key, ", ".join(seen.values()))

    def set_tag(self, key, value):
        """A tag of the run the regions go to; kept until one is active (never
        starts a run of its own)."""
        self._tags[key] = str(value)
        self._flush_tags()

    def _flush_tags(self):
        if not self._tags or not self.enabled():
            return
        run = _active_run()
        if run is None:
            if not os.environ.get("TRAINSCOPE_RUN_DIR"):
                return  # no run yet: set when one starts (timer())
            try:
                import trainscope  # pylint: disable=import-outside-toplevel
                trainscope.set_tags({})  # joins the run of TRAINSCOPE_RUN_DIR
            except Exception:  # pylint: disable=broad-except
                return
            run = _active_run()
            if run is None:
                return
        if run is not self._tagged_run:
            self._tagged_run, self._set_tags = run, {}
        for key, value in list(self._tags.items()):
            if self._set_tags.get(key) == value:
                continue
            try:
                run.set_tag(key, value)
                self._set_tags[key] = value
            except Exception as error:  # pylint: disable=broad-except
                self.warn(("tag", key), f"trainscope: tag {key!r} not set: {error}")

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
                    self._anomaly = _anomaly_capture(self._timer_run)
                    self.steps = 0
                    if self.on_step is not None:
                        self.on_step(0)
                    _oom_snapshot(self._timer_run)
            if self._timer_run is not None:
                self._flush_tags()
                self._flush_params()
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
                # pylint: disable=import-outside-toplevel
                from trainscope._torch_timer import CPUGPUTimer
                self._gpu = True
                return CPUGPUTimer()
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

    def live(self):
        """The timer to record into now, or None (recording off): for callers that
        time strict start/end pairs themselves (layer regions, with `gpu`); start()
        and end() keep the books of open keys for everyone else."""
        timer = self._timer
        if timer is None or self._off is not None or _runs is None or \
                _runs._active is not self._timer_run:  # pylint: disable=protected-access
            timer = self.timer()
        return timer

    @property
    def gpu(self):
        """The timer is a CPUGPUTimer: a region is gpu=True."""
        return self._gpu

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
        if key == BATCH:
            self.steps += 1
            if self.on_step is not None:
                self.on_step(self.steps)
            if self._anomaly is not None:
                self._anomaly.step()
            self._step_ended()

    def _step_ended(self):
        # The step's work (samples, tokens; the FLOPs of one step): trainscope._work.
        try:
            from trainscope._work import work  # pylint: disable=import-outside-toplevel
            work().step_ended(self)
        except Exception as error:  # pylint: disable=broad-except
            self.warn("step-work", f"trainscope: the work of a step not recorded: {error}")

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
        """params as the run's, less those it has already with the same value (params
        are write-once: the command line's "2e-5" and a framework's 2e-05 are one)."""
        if not self.enabled():
            return
        import trainscope  # pylint: disable=import-outside-toplevel
        existing = _run_params()
        for key, value in params.items():
            if key in existing and _same_value(existing[key], value):
                continue
            try:
                trainscope.log_param(key, value)
            except Exception as error:  # pylint: disable=broad-except
                self.warn(("param", key), f"trainscope: param {key!r} not logged: {error}")

    def log_params_when_recording(self, params):
        """params logged once this process records (its timer is built): a process
        that never trains (torchrun's own, a launcher script) leaves no params."""
        self._pending_params.update(params)
        if self._timer is not None and self._timer_run is not None:
            self._flush_params()

    def _flush_params(self):
        params, self._pending_params = self._pending_params, {}
        if params:
            self.log_params(params)


def _run_params():
    """The params the run has now (e.g. `trainscope run` logs the command's
    ``--learning_rate 2e-5``), {} when unknown."""
    try:
        import trainscope  # pylint: disable=import-outside-toplevel
        run = trainscope.active_run()
        directory = run.dir if run is not None else os.environ.get("TRAINSCOPE_RUN_DIR")
        if not directory:
            return {}
        from trainscope import _core  # pylint: disable=import-outside-toplevel
        return dict(_core._RunReader.open(directory).params)  # the one reader of the run format
    except Exception:  # pylint: disable=broad-except
        return {}


def _same_value(text, value):
    if text == str(value):
        return True
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return str(text).lower() == str(value).lower()


def _param_value(value):
    """An argparse value as a param: numbers, strings, booleans, None and lists of
    them as they read; anything else by its repr; at most 500 characters."""
    text = str(value) if isinstance(value, (str, int, float, bool, type(None), list, tuple)) \
        else repr(value)
    return text if len(text) <= 500 else text[:497] + "..."


def record_argparse():
    """Under --auto: the first Namespace argparse parses in the process (the
    outermost parse_known_args, which parse_args calls), by dest name, becomes the
    run's params once the process records (Recorder.log_params_when_recording)."""
    import argparse  # pylint: disable=import-outside-toplevel
    parser_class = argparse.ArgumentParser
    original = parser_class.parse_known_args
    if getattr(original, "_trainscope", False):
        return
    state = {"depth": 0, "done": False}

    def parse_known_args(self, *args, **kwargs):
        state["depth"] += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            state["depth"] -= 1
        if not state["done"] and state["depth"] == 0:
            state["done"] = True
            try:
                namespace = result[0]
                params = {key: _param_value(value) for key, value in vars(namespace).items()
                          if not key.startswith("_")}
                recorder().log_params_when_recording(params)
            except Exception:  # pylint: disable=broad-except
                pass
        return result

    parse_known_args._trainscope = True  # pylint: disable=protected-access
    parse_known_args.__wrapped__ = original
    parser_class.parse_known_args = parse_known_args


_runs = None  # trainscope.run, once a timer was built (its _active: the active run)


def _anomaly_capture(run):
    """--auto's anomaly capture of `run` (TRAINSCOPE_CAPTURE_STEPS, default 3; 0: off), or None."""
    if run is None or auto_mode() is None:
        return None
    try:
        steps = int(os.environ.get("TRAINSCOPE_CAPTURE_STEPS", "3"))
        most = int(os.environ.get("TRAINSCOPE_CAPTURE_MAX", "3"))
        if steps <= 0 or most <= 0:
            return None
        from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
        return _anomaly.AnomalyCapture(run.dir, run.rank, steps=steps, max_captures=most)
    except Exception:  # pylint: disable=broad-except
        return None


def _oom_snapshot(run):
    """--auto: a CUDA memory snapshot into `run` on out-of-memory (trainscope._oom)."""
    mode = auto_mode()
    if run is None or mode is None:
        return
    try:
        from trainscope import _oom  # pylint: disable=import-outside-toplevel
        _oom.install(run.dir, run.rank, history=bool(mode.get("memory")))
    except Exception:  # pylint: disable=broad-except
        pass


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
