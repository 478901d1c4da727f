"""Runs, with MLflow's names: start_run, log_metric, log_param, set_tag, log_artifact.

    with trainscope.start_run(run_name="baseline", params={"lr": 0.1}) as run:
        tmr = trainscope.Timer()           # attached to the active run
        ...
        trainscope.log_metric("loss", loss, step=step)

Records land in ./trainscope-runs/<run-id>/ (docs/run-format.md), and in
MLflow too when MLFLOW_TRACKING_URI is set. Leaving the block ends the run:
FINISHED, FAILED on an exception, KILLED on KeyboardInterrupt, SIGTERM or SIGHUP.
Child processes and the other ranks of a job attach to the same run through
TRAINSCOPE_RUN_DIR.

As MLflow's fluent API, log_metric/log_param/set_tag/log_artifact without
start_run() start a run on first use (or join the one in TRAINSCOPE_RUN_DIR,
as under `trainscope run`); a timer built under TRAINSCOPE_RUN_DIR joins it
the same way. Such an implicit run ends when the interpreter exits: FAILED
after an uncaught exception, KILLED after KeyboardInterrupt, SIGTERM or SIGHUP,
FINISHED otherwise. Timers built before any run started stream into the
first run that starts, with the regions they timed before it: those are held
in memory (up to 64 MiB for the process, about 2.8 million regions; more are
counted and warned about when the run starts) and land in the run's files.
"""

import atexit
import operator
import os
import signal
import sys
import threading
import warnings
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
_lock = threading.RLock()
_active = None
# Timers built while no run was active: the next run to start attaches them.
_waiting_timers = weakref.WeakSet()
# What ended the interpreter, for the status of an implicit run at exit.
_exit_status = None
_atexit_registered = False
# Called with the run as it ends, before its timers' summaries are stored.
_end_hooks = []


class ActiveRun:
    """The run started by start_run(); a context manager that ends it."""

    def __init__(self, core, implicit=False):
        self._core = core
        self._timers = weakref.WeakSet()
        self._ended = False
        self.end_error = None  # what end() could not write (a message naming the file)
        # Started by a fluent call or a timer, not by start_run(): ended at exit.
        self.implicit = implicit
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
        try:
            value = float(value)  # also a 0-d tensor or a numpy scalar
        except (TypeError, ValueError) as error:
            raise type(error)(f"log_metric({key!r}): the value {value!r:.80} is not a number "
                              f"({error})") from None
        if step is not None:
            try:
                step = operator.index(step)  # an int, a numpy integer; not 1.5
            except TypeError:
                raise TypeError(f"log_metric({key!r}): the step {step!r:.80} is not an "
                                f"integer") from None
        self._core.log_metric(key, value, step)

    def log_param(self, key, value):
        self._core.log_param(key, str(value))

    def set_tag(self, key, value):
        self._core.set_tag(key, str(value))

    def log_artifact(self, local_path):
        self._core.log_artifact(os.fspath(local_path))

    def end(self, status="FINISHED"):
        """Stores the attached timers' summaries, flushes and records the status.

        Never raises for the disk (full, failing): what could not be written is
        warned about (a TrainscopeWarning naming the file), kept in end_error and
        returned; None when everything was written.
        """
        global _active
        if self._ended:
            return self.end_error
        # What is still open records into this run first (a timed loader's pass
        # that a framework never exhausted: Lightning's last epoch).
        for hook in list(_end_hooks):
            try:
                hook(self)
            except Exception as error:  # pylint: disable=broad-except
                warnings.warn(f"run {self.dir}: {error}", _core.TrainscopeWarning, stacklevel=2)
        self._ended = True
        for timer in list(self._timers):
            self._core.add_summary_of(timer)
        try:
            self.end_error = self._core.end(status)
        finally:
            if self._exported_dir:
                os.environ.pop(_RUN_DIR_ENV, None)
            with _lock:
                if _active is self:
                    _active = None
            _restore_sigterm()
        if self.end_error is not None:
            warnings.warn(f"run {self.dir} ended {status}, but not all was written: "
                          f"{self.end_error}", _core.TrainscopeWarning, stacklevel=2)
        return self.end_error

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.end("FINISHED" if exc_type is None else _status_of_exception(exc_type, exc))
        return False


def _status_of_exception(exc_type, exc):
    """KILLED for an interrupt, and for an error raised while one was being handled: Ctrl-C
    (or a launcher's SIGINT) in a DataLoader loop also kills its workers, whose SIGCHLD
    raises "DataLoader worker ... exited unexpectedly" over the KeyboardInterrupt, and a
    DDP peer that died of the same signal fails this rank's collective. FAILED otherwise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return "KILLED"
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return "KILLED" if exc_type is not None and issubclass(exc_type, KeyboardInterrupt) \
        else "FAILED"


# SIGTERM and SIGHUP (a closed terminal or ssh session; `trainscope run`
# forwards it) end the active run KILLED, then do what they did before.
# Python runs this handler on the main thread only, once it is back in the
# interpreter: a main thread blocked in native code (a DDP backward waiting
# for a gloo peer that died) would hold the signal off for the collective's
# timeout. The C++ side backs the handler up: 3 s after the signal, a run
# still not ended ends KILLED there and the process dies of the signal.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_previous_handlers = {}
_handlers_pid = None  # the process that installed them; a forked child inherits them


def _on_terminating_signal(signum, frame):  # pylint: disable=unused-argument
    run = _active
    # A forked child (a DataLoader worker) never ends its parent's run: it has
    # not the threads that write it, and would wait for them forever.
    if run is not None and os.getpid() == _handlers_pid:
        run.end("KILLED")
    # Then die of the signal as the process would have without us.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_sigterm(core):
    """Only where a signal still has its default action: a host's own handler wins,
    and an ignored one (nohup) stays ignored."""
    global _handlers_pid
    if threading.current_thread() is not threading.main_thread():
        return
    installed = []
    for signum in _TERMINATING:
        if signum not in _previous_handlers and signal.getsignal(signum) is signal.SIG_DFL:
            _previous_handlers[signum] = signal.signal(signum, _on_terminating_signal)
            installed.append(int(signum))
    if installed:
        _handlers_pid = os.getpid()
        core.back_up_signal_handlers(installed)


def _restore_sigterm_in_child():
    """A forked child dies of SIGTERM and SIGHUP as it would without trainscope.

    Python runs a handler between bytecodes only, and checks for one before a lock's
    blocking wait, not while it blocks: a fork-context Pool worker that its terminate()
    signalled between the two waited on the pool's lock forever (1 in ~100 under load).
    The child has no run of its parent's to end, so it gets back the action it would
    have had; a run of its own installs the handlers again. A signal that came before
    this (before the child first ran: Python's after-fork work wipes what its handler
    noted) killed the child in the C++ wrapper of these handlers (ForkedChild).
    """
    global _handlers_pid
    try:
        while _previous_handlers:
            signum, previous = _previous_handlers.popitem()
            signal.signal(signum, previous)
    except (ValueError, OSError):  # not the main thread of an embedding host
        _previous_handlers.clear()
    _handlers_pid = None


def _restore_sigterm():
    if threading.current_thread() is not threading.main_thread():
        return
    while _previous_handlers:
        signum, previous = _previous_handlers.popitem()
        signal.signal(signum, previous)


def start_run(run_name=None, experiment_name=None, params=None, tags=None, root=None,
              flush_interval=1.0, wandb=False, wandb_dir=None, perfetto=None):
    """Starts (or, under TRAINSCOPE_RUN_DIR, joins) a run and makes it the active one.

    Besides the run directory (and MLflow when MLFLOW_TRACKING_URI is set):
    wandb=True also writes a W&B offline run under wandb_dir (default
    $WANDB_DIR/wandb or ./wandb) for `wandb sync`; perfetto="trace.json" writes
    a Chrome/Perfetto trace of every region (one file per rank: put {rank} in
    the name for multi-rank jobs).
    """
    with _lock:
        if _active is not None:
            if _active.implicit and not _active._exported_dir:  # pylint: disable=protected-access
                # A timer or a fluent call already joined TRAINSCOPE_RUN_DIR's run (as under
                # `trainscope run`): start_run joins that same run, so it is this one.
                return _adopt(_active, params=params, tags=tags, wandb=wandb,
                              wandb_dir=wandb_dir, experiment_name=experiment_name,
                              perfetto=perfetto)
            raise RuntimeError(f"run {_active.id} is already active; end it first (end_run())")
        return _start(dict(run_name=run_name, experiment_name=experiment_name, params=params,
                           tags=tags, root=root, flush_interval=flush_interval, wandb=wandb,
                           wandb_dir=wandb_dir, perfetto=perfetto), implicit=False)


def _start(args, implicit):
    """Starts a run with start_run()'s arguments; the caller holds _lock."""
    global _active
    core = _core._Run.start(  # pylint: disable=protected-access
        root=None if args["root"] is None else os.fspath(args["root"]), name=args["run_name"],
        experiment=args["experiment_name"],
        params={str(k): str(v) for k, v in (args["params"] or {}).items()},
        tags={str(k): str(v) for k, v in (args["tags"] or {}).items()},
        flush_interval=float(args["flush_interval"]))
    try:
        _add_exporters(core, args["wandb"], args["wandb_dir"], args["experiment_name"],
                       args["perfetto"])
    except Exception:
        core.end("FAILED")
        raise
    _active = ActiveRun(core, implicit=implicit)
    # What the waiting timers timed before this run: into its files first.
    lost = core.adopt_held()
    if lost:
        warnings.warn(f"run {core.dir}: {lost} regions timed before the run started did not "
                      f"fit in the 64 MiB kept for them and are not in its files (the timers' "
                      f"statistics keep them); start the run before timing",
                      _core.TrainscopeWarning, stacklevel=3)
    for timer in list(_waiting_timers):
        _active.attach(timer)
    _waiting_timers.clear()
    if implicit:
        _register_exit_hooks()
    _install_sigterm(core)
    _install_dump(core)
    return _active


def _install_dump(core):
    """The dump handler of `trainscope dump` (trainscope._hang); never fails the run."""
    try:
        from trainscope import _hang  # pylint: disable=import-outside-toplevel
        _hang.install(core.dir, core.rank)
    except Exception:  # pylint: disable=broad-except
        pass


def _add_exporters(core, wandb, wandb_dir, experiment_name, perfetto):
    """start_run()'s wandb= and perfetto= exporters on a started or joined run."""
    if wandb:
        core.add_wandb_exporter(wandb_dir=None if wandb_dir is None else os.fspath(wandb_dir),
                                project=experiment_name)
    if perfetto is not None:
        core.add_perfetto_exporter(os.fspath(perfetto).format(rank=core.rank))


def _adopt(run, params, tags, wandb, wandb_dir, experiment_name, perfetto):
    """start_run() on the run a timer or fluent call joined: what joining would have done
    (params write-once, tags, exporters), and it is now start_run()'s to end."""
    for key, value in (params or {}).items():
        run.log_param(str(key), value)
    for key, value in (tags or {}).items():
        run.set_tag(str(key), value)
    _add_exporters(run._core, wandb, wandb_dir, experiment_name,  # pylint: disable=protected-access
                   perfetto)
    run.implicit = False
    return run


def _implicit_run():
    """The active run, or one started now (joined under TRAINSCOPE_RUN_DIR)."""
    run = _active
    if run is not None:
        return run
    with _lock:
        if _active is not None:
            return _active
        return _start(dict(run_name=None, experiment_name=None, params=None, tags=None,
                           root=None, flush_interval=1.0, wandb=False, wandb_dir=None,
                           perfetto=None), implicit=True)


def _timer_built(timer):
    """A new timer streams into the active run; under TRAINSCOPE_RUN_DIR it joins that
    run; otherwise it waits for the next run to start."""
    with _lock:
        run = _active
        if run is None and os.environ.get(_RUN_DIR_ENV):
            run = _implicit_run()
        if run is not None:
            run.attach(timer)
        else:
            # Its regions are held until a run starts and adopts them.
            _core._hold(timer)  # pylint: disable=protected-access
            _waiting_timers.add(timer)


def _register_exit_hooks():
    """Ends an implicit run at interpreter exit with the status of how it exited."""
    global _atexit_registered
    if _atexit_registered:
        return
    _atexit_registered = True
    previous_hook = sys.excepthook

    def excepthook(exc_type, exc, traceback):
        global _exit_status
        _exit_status = _status_of_exception(exc_type, exc)
        previous_hook(exc_type, exc, traceback)

    sys.excepthook = excepthook
    atexit.register(_end_implicit_at_exit)


def _end_implicit_at_exit():
    run = _active
    if run is not None and run.implicit:
        run.end(_exit_status or "FINISHED")


def _after_fork_in_child():
    """A forked child starts with no run: the parent's threads, which write it, are not here.

    The child never ends, flushes or writes the parent's run (its C++ side refuses
    and, when collected, lets go without waiting: src/common/fork_owner.hpp). Timers
    the child inherited stream nowhere until a run of the child's own starts: their
    regions are held for it, as any timer built before a run. A child that records
    (a fluent call, a new timer) starts one, which under TRAINSCOPE_RUN_DIR joins the
    parent's run as a process of the same rank (docs/run-format.md, "Ownership").
    """
    global _active, _lock, _exit_status
    # Another thread may have held it at the fork: it would stay held forever.
    _lock = threading.RLock()
    _exit_status = None
    _restore_sigterm_in_child()
    run = _active
    _active = None
    if run is None:
        return
    run._ended = True  # pylint: disable=protected-access
    for timer in list(run._timers):  # pylint: disable=protected-access
        try:
            _core._hold(timer)  # pylint: disable=protected-access
        except Exception:  # pylint: disable=broad-except
            continue
        _waiting_timers.add(timer)


os.register_at_fork(after_in_child=_after_fork_in_child)


def active_run():
    """The run started by start_run() and not yet ended, or None."""
    return _active


def end_run(status="FINISHED"):
    run = _active
    if run is not None:
        run.end(status)


def log_metric(key, value, step=None):
    _implicit_run().log_metric(key, value, step)


def log_metrics(metrics, step=None):
    run = _implicit_run()
    for key, value in metrics.items():
        run.log_metric(key, value, step)


def log_param(key, value):
    _implicit_run().log_param(key, value)


def log_params(params):
    run = _implicit_run()
    for key, value in params.items():
        run.log_param(key, value)


def set_tag(key, value):
    _implicit_run().set_tag(key, value)


def set_tags(tags):
    run = _implicit_run()
    for key, value in tags.items():
        run.set_tag(key, value)


def log_artifact(local_path):
    _implicit_run().log_artifact(local_path)
