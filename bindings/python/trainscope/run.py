"""Runs, with MLflow's names: start_run, log_metric, log_param, set_tag, log_artifact.

    with trainscope.start_run(run_name="baseline", params={"lr": 0.1}) as run:
        tmr = trainscope.Timer()           # attached to the active run
        ...
        trainscope.log_metric("loss", loss, step=step)

Records land in ./trainscope-runs/<run-id>/ (docs/run-format.md), and in
MLflow too when MLFLOW_TRACKING_URI is set. Leaving the block ends the run:
FINISHED, FAILED on an exception, KILLED on KeyboardInterrupt or SIGTERM.
Child processes and the other ranks of a job attach to the same run through
TRAINSCOPE_RUN_DIR.
"""

import os
import signal
import threading
import weakref

from trainscope import _core

__all__ = [
    "ActiveRun",
    "active_run",
    "end_run",
    "log_artifact",
    "log_metric",
    "log_metrics",
    "log_param",
    "log_params",
    "set_tag",
    "set_tags",
    "start_run",
]

_RUN_DIR_ENV = "TRAINSCOPE_RUN_DIR"
_lock = threading.Lock()
_active = None


class ActiveRun:
    """The run started by start_run(); a context manager that ends it."""

    def __init__(self, core):
        self._core = core
        self._timers = weakref.WeakSet()
        self._ended = False
        # The C++ side setenv()s TRAINSCOPE_RUN_DIR for a run it created, but
        # os.environ (what subprocess passes on) is Python's own copy.
        self._exported_dir = _RUN_DIR_ENV not in os.environ
        if self._exported_dir:
            os.environ[_RUN_DIR_ENV] = core.dir

    id = property(lambda self: self._core.id)
    name = property(lambda self: self._core.name)
    dir = property(lambda self: self._core.dir)
    rank = property(lambda self: self._core.rank)

    def attach(self, timer):
        """Streams the timer's regions into the run; its summary is stored at the end."""
        self._core.attach(timer)
        self._timers.add(timer)

    def log_metric(self, key, value, step=None):
        self._core.log_metric(key, float(value), step)

    def log_param(self, key, value):
        self._core.log_param(key, str(value))

    def set_tag(self, key, value):
        self._core.set_tag(key, str(value))

    def log_artifact(self, local_path):
        self._core.log_artifact(os.fspath(local_path))

    def end(self, status="FINISHED"):
        """Stores the attached timers' summaries, flushes and records the status."""
        global _active
        if self._ended:
            return
        self._ended = True
        for timer in list(self._timers):
            self._core.add_summary_of(timer)
        self._core.end(status)
        if self._exported_dir:
            os.environ.pop(_RUN_DIR_ENV, None)
        with _lock:
            if _active is self:
                _active = None
        _restore_sigterm()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is None:
            self.end("FINISHED")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.end("KILLED")
        else:
            self.end("FAILED")
        return False


_previous_sigterm = None


def _on_sigterm(signum, frame):  # pylint: disable=unused-argument
    run = _active
    if run is not None:
        run.end("KILLED")
    # Then die of SIGTERM as the process would have without us.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm():
    """Only where SIGTERM still has its default action: a host's own handler wins."""
    global _previous_sigterm
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        _previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)


def _restore_sigterm():
    global _previous_sigterm
    if _previous_sigterm is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _previous_sigterm)
        _previous_sigterm = None


def start_run(run_name=None, experiment_name=None, params=None, tags=None, root=None,
              flush_interval=1.0, wandb=False, wandb_dir=None, perfetto=None):
    """Starts (or, under TRAINSCOPE_RUN_DIR, joins) a run and makes it the active one.

    Besides the run directory (and MLflow when MLFLOW_TRACKING_URI is set):
    wandb=True also writes a W&B offline run under wandb_dir (default
    $WANDB_DIR/wandb or ./wandb) for `wandb sync`; perfetto="trace.json" writes
    a Chrome/Perfetto trace of every region (one file per rank: put {rank} in
    the name for multi-rank jobs).
    """
    global _active
    with _lock:
        if _active is not None:
            raise RuntimeError(f"run {_active.id} is already active; end it first (end_run())")
        core = _core._Run.start(  # pylint: disable=protected-access
            root=None if root is None else os.fspath(root), name=run_name,
            experiment=experiment_name,
            params={str(k): str(v) for k, v in (params or {}).items()},
            tags={str(k): str(v) for k, v in (tags or {}).items()},
            flush_interval=float(flush_interval))
        try:
            if wandb:
                core.add_wandb_exporter(
                    wandb_dir=None if wandb_dir is None else os.fspath(wandb_dir),
                    project=experiment_name)
            if perfetto is not None:
                core.add_perfetto_exporter(os.fspath(perfetto).format(rank=core.rank))
        except Exception:
            core.end("FAILED")
            raise
        _active = ActiveRun(core)
    _install_sigterm()
    return _active


def active_run():
    """The run started by start_run() and not yet ended, or None."""
    return _active


def _require_active(what):
    run = _active
    if run is None:
        raise RuntimeError(f"{what}: no active run; call trainscope.start_run() first")
    return run


def end_run(status="FINISHED"):
    run = _active
    if run is not None:
        run.end(status)


def log_metric(key, value, step=None):
    _require_active("log_metric").log_metric(key, value, step)


def log_metrics(metrics, step=None):
    run = _require_active("log_metrics")
    for key, value in metrics.items():
        run.log_metric(key, value, step)


def log_param(key, value):
    _require_active("log_param").log_param(key, value)


def log_params(params):
    run = _require_active("log_params")
    for key, value in params.items():
        run.log_param(key, value)


def set_tag(key, value):
    _require_active("set_tag").set_tag(key, value)


def set_tags(tags):
    run = _require_active("set_tags")
    for key, value in tags.items():
        run.set_tag(key, value)


def log_artifact(local_path):
    _require_active("log_artifact").log_artifact(local_path)
