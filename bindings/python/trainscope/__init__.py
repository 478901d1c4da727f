"""trainscope: low-overhead region timers for deep-learning training.

A drop-in replacement for Deep500's timers::

    import trainscope as timer          # from deep500.utils import timer
    import trainscope.torch as timer    # from deep500.utils import timer_torch as timer

    tmr = timer.Timer()
    tmr.start(timer.TimeType.EPOCH)
    ...
    tmr.end(timer.TimeType.EPOCH)
    tmr.print_all_time_stats()

Misuse raises Deep500's exception types (RuntimeError for nesting and
unbalanced ends, ValueError for TimeType.ALL and gpu-flag mismatches) and
leaves the timer unchanged. save_all_time_stats raises FileExistsError
(a subclass of OSError) when the file exists, as Deep500's open(mode='x').
"""

import contextlib as _contextlib
import enum as _enum
import math as _math

from trainscope import _core
from trainscope import run as _run_api
from trainscope._core import TimeStats, TrainscopeWarning, built_with_cuda
from trainscope.run import (ActiveRun, active_run, end_run, log_artifact, log_metric, log_metrics,
                            log_param, log_params, set_tag, set_tags, start_run)
from trainscope._reading import read_run, search_runs
from trainscope.diagnosis import diagnose, read_diagnosis
from trainscope._compare import compare, failing_rows
from trainscope._stalls import TimedLoader as _TimedLoader
from trainscope._report import Report, report
from trainscope._work import ledger, log_step_flops, log_step_work

__version__ = _core.__version__

__all__ = [
    "ActiveRun",
    "CPUGPUTimer",
    "Report",
    "TimeStats",
    "TimeType",
    "Timer",
    "TrainscopeWarning",
    "active_run",
    "built_with_cuda",
    "compare",
    "diagnose",
    "failing_rows",
    "ledger",
    "end_run",
    "log_artifact",
    "log_metric",
    "log_metrics",
    "log_param",
    "log_params",
    "log_step_flops",
    "log_step_work",
    "read_diagnosis",
    "read_run",
    "report",
    "search_runs",
    "set_tag",
    "set_tags",
    "start_run",
]


class TimeType(_enum.IntEnum):
    """Deep500's region keys. Any str is a key too ("EPOCH" is EPOCH)."""

    EPOCH = 1
    BATCH = 2
    FORWARD = 3
    BACKWARD = 4
    COMM = 5
    IO = 6
    OTHER = 7
    ALL = 8  # every key; start/end reject it (ValueError)


_core._register_time_type(TimeType)


class _Scope(_contextlib.ContextDecorator):
    """A region as a context manager or decorator (a fresh region per call)."""

    def __init__(self, timer, key, kwargs):
        self._timer = timer
        self._key = key
        self._kwargs = kwargs

    def __enter__(self):
        self._timer.start(self._key, **self._kwargs)
        return self

    def __exit__(self, *exc_info):
        # Like C++'s ScopedRegion, a body that raises still ends its region.
        self._timer.end(self._key, **self._kwargs)
        return False


def _key_name(key):
    return key.name if isinstance(key, TimeType) else key


def _mean_metrics(sections, prefix):
    """Deep500's {prefix/KEY: mean}; keys whose samples were all warm-up are skipped."""
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    means = {}
    for section, keys, stats_of in sections:
        for key in keys:
            mean = stats_of(key).mean
            if not _math.isnan(mean):
                means[prefix + section + _key_name(key)] = mean
    return means


def _log_mlflow(means):
    try:
        import mlflow  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise RuntimeError("log_mlflow_all needs the mlflow package: pip install mlflow") from error
    mlflow.log_metrics(means)


def _log_wb(means):
    try:
        import wandb  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise RuntimeError("log_wb_all needs the wandb package: pip install wandb") from error
    wandb.log(means)


def _attach_to_active_run(timer):
    """A timer streams into the active run, joins the one of TRAINSCOPE_RUN_DIR (as
    under `trainscope run`), or waits for the next run to start."""
    _run_api._timer_built(timer)  # pylint: disable=protected-access


class Timer(_core.Timer):
    """CPU region timer, Deep500's Timer.

    Timer(*, warmup=0, exact_sample_cap=2**24, sketch_relative_error=0.01, nvtx=True)
    """

    __slots__ = ()

    def __init__(self, **options):
        super().__init__(**options)
        _attach_to_active_run(self)

    def scope(self, key):
        """The region of `key` as a context manager or decorator."""
        return _Scope(self, key, {})

    def timed(self, iterable, key=TimeType.IO, copy_to=None):
        """`iterable` (a DataLoader or any iterable) with the wait for each item timed
        as the region `key` (and the wait that learns a pass is over: one more per pass
        than items), each step from one item to the next as 'iteration', each pass as
        'loader_epoch'; copy_to=device also times the host-to-device copy as 'h2d'.
        What the loop receives is unchanged (but copied to copy_to). docs/stalls.md."""
        return _TimedLoader(self, iterable, key, copy_to=copy_to)

    def _means(self, prefix):
        return _mean_metrics([("", self.keys(), self.get_time_stats)], prefix)

    def log_mlflow_all(self, prefix=""):
        """Logs the mean of every key to the active MLflow run as prefix/KEY."""
        _log_mlflow(self._means(prefix))

    def log_wb_all(self, prefix=""):
        """Logs the mean of every key to the active W&B run as prefix/KEY."""
        _log_wb(self._means(prefix))


class CPUGPUTimer(_core.CPUGPUTimer):
    """CPU + GPU region timer, Deep500's CPUGPUTimer.

    CPUGPUTimer(*, warmup=0, exact_sample_cap=2**24, sketch_relative_error=0.01,
                nvtx=True, require_gpu=False, stream=None, harvest_per_end=4)
    """

    __slots__ = ()

    def __init__(self, *args, **options):
        super().__init__(*args, **options)
        _attach_to_active_run(self)

    def scope(self, key, gpu=False):
        """The region of `key` (timed on the GPU too if gpu) as a context manager or decorator."""
        return _Scope(self, key, {"gpu": gpu})

    def timed(self, iterable, key=TimeType.IO, copy_to=None):
        """`iterable` with the wait for each item timed as the region `key` (on the CPU);
        copy_to=device also times the host-to-device copy as 'h2d' on the CPU and
        the GPU. What the loop receives is unchanged (but copied to copy_to)."""
        return _TimedLoader(self, iterable, key, copy_to=copy_to,
                            gpu=copy_to is not None and self.gpu_available())

    def _means(self, prefix):
        return _mean_metrics(
            [
                ("CPU/", self.keys(), self.get_time_stats),
                ("GPU/", self.keys(gpu=True), lambda key: self.get_time_stats(key, gpu=True)),
            ],
            prefix,
        )

    def log_mlflow_all(self, prefix=""):
        """Logs the means to the active MLflow run as prefix/CPU/KEY and prefix/GPU/KEY."""
        _log_mlflow(self._means(prefix))

    def log_wb_all(self, prefix=""):
        """Logs the means to the active W&B run as prefix/CPU/KEY and prefix/GPU/KEY."""
        _log_wb(self._means(prefix))
