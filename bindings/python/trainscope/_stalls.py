"""The timed loader: ``for batch in tmr.timed(loader):`` times the wait for each
batch (the time spent in the loader's ``__next__``) as a region of `key`
(TimeType.IO by default), and hands on exactly what the loader yields.

Besides `key` it records, on the same timer:
  ``loader_epoch``  one region per pass over the loader (iter() to exhaustion),
  ``iteration``     from one batch handed out to the next (compute + wait),
  ``h2d``           the host-to-device copy, when ``copy_to`` is given.
At the end of each pass it logs the pass's data-wait share and its spread as
metrics of the active run (``stalls/...``, step = pass number), so they reach
the run's exporters (MLflow, W&B) as the run goes.

Under ``trainscope stalls`` the environment selects a mode (see
docs/stalls.md): TRAINSCOPE_STALLS_MODE=synthetic hands out the first batch
again and again (pure compute); =loader takes batches from the loader as fast
as it gives them and hands none out (the loader's own rate, no compute);
TRAINSCOPE_STALLS_ITERATIONS=N with
TRAINSCOPE_STALLS_WARMUP=W ends the process cleanly (run FINISHED) once W + N
batches were handed out, whatever epoch loop surrounds the loader.
"""

import sys
import time
import weakref

from trainscope import _core
from trainscope import run as _run_api

# The names are C++'s (include/trainscope/stalls/): one definition for both loaders.
MODE_ENV = _core._STALLS_MODE_ENV
ITERATIONS_ENV = _core._STALLS_ITERATIONS_ENV
WARMUP_ENV = _core._STALLS_WARMUP_ENV

EPOCH_KEY = _core._STALLS_PASS_KEY
ITERATION_KEY = _core._STALLS_ITERATION_KEY
COPY_KEY = "h2d"


class _Budget:
    """Batches handed out across every pass of one process (the stop rule)."""

    def __init__(self):
        # The environment read as the C++ timed loader reads it: a bad variable
        # (another mode, a count that is not a whole number >= 0) raises
        # ValueError naming the variable and its value.
        control = _core._stalls_loop_control()
        self.handed_out = 0
        self.mode = control["mode"]
        self.synthetic = control["synthetic"]
        self.loader_only = control["loader_only"]
        self.limit = control["limit"]
        self.first_batch = None
        self.logged_for = None  # the run whose stalls params were logged
        self.passes = weakref.WeakKeyDictionary()  # timer -> passes it timed (metric steps)


_budget = None


def _process_budget():
    global _budget
    if _budget is None:
        _budget = _Budget()
    return _budget


def _batch_size(batch):
    """The leading dimension of the first tensor-like in `batch`, else None."""
    seen = 0
    while seen < 8:
        seen += 1
        if isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)) and batch and not hasattr(batch, "shape"):
            first = batch[0]
            if hasattr(first, "shape") or isinstance(first, (dict, list, tuple)):
                batch = first
            else:
                return len(batch)
        else:
            break
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else None


def _copy(batch, device):
    if hasattr(batch, "to"):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: _copy(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        copied = [_copy(v, device) for v in batch]
        return type(batch)(copied) if isinstance(batch, list) else tuple(copied)
    return batch


def pass_metrics(waits, wall_s):
    """The stalls/ metrics of one pass, name -> value: waits (seconds per batch) over
    wall seconds, named and computed by the C++ analysis
    (trainscope::stalls::pass_metrics), as the C++ timed loader logs them and
    `trainscope stalls RUN_DIR` computes them from the rows."""
    return _core._pass_metrics(waits, wall_s)


class TimedLoader:
    """What ``Timer.timed(iterable, ...)`` returns: iterate it like `iterable`."""

    def __init__(self, timer, iterable, key, copy_to=None, gpu=None):
        self._timer = timer
        self._iterable = iterable
        self._key = key
        self._copy_to = copy_to
        self._gpu_kwargs = {} if gpu is None else {"gpu": gpu}

    def __len__(self):
        return len(self._iterable)

    def __iter__(self):
        budget = _process_budget()
        if budget.synthetic:
            return self._timed(budget, self._first_again(budget), copy=False)
        timed = self._timed(budget, iter(self._iterable), copy=self._copy_to is not None)
        if budget.loader_only:
            return self._drained(timed)
        return timed

    @staticmethod
    def _drained(timed):
        """The loader alone: every batch taken as soon as it is ready, none handed
        to the loop (which sees an empty pass), until the limit ends the process."""
        for _batch in timed:
            pass
        return
        yield  # a generator that yields nothing

    def _first_again(self, budget):
        """The first batch again and again (on the device when copy_to is set), as
        many times as the loader has batches: pure compute, the ingestion rate."""
        if budget.first_batch is None:
            batch = next(iter(self._iterable))
            budget.first_batch = batch if self._copy_to is None else _copy(batch, self._copy_to)
        try:
            count = len(self._iterable)
        except TypeError:
            count = None
        handed = 0
        while count is None or handed < count:
            handed += 1
            yield budget.first_batch

    def _timed(self, budget, iterator, copy):
        timer = self._timer
        # A pass begins at its first fetch (a framework may call iter() and never
        # fetch), and ends the one this loader still has open (a loop that left
        # its iterator alive without exhausting it).
        for earlier in list(_open_passes):
            if earlier.loader is self:
                earlier.finish(stopping=False)
        number = budget.passes.get(timer, 0) + 1
        budget.passes[timer] = number
        state = _Pass(self, budget, number)
        _open_passes.add(state)
        timer.start(EPOCH_KEY)
        try:
            while True:
                timer.start(self._key)
                t0 = time.perf_counter()
                try:
                    batch = next(iterator)
                except StopIteration:
                    # Learning that the pass is over is no batch's wait: no IO region,
                    # so a pass of N batches has N (its time is in the pass's wall).
                    timer.cancel(self._key)
                    break
                timer.end(self._key)
                state.waits.append(time.perf_counter() - t0)
                if copy:
                    timer.start(COPY_KEY, **self._gpu_kwargs)
                    batch = _copy(batch, self._copy_to)
                    timer.end(COPY_KEY, **self._gpu_kwargs)
                state.end_iteration()
                if budget.limit is not None and budget.handed_out >= budget.limit:
                    # The W + N measured iterations are done (this batch is
                    # not handed out): end the run, then the process.
                    state.finish(stopping=True)
                    _stop_process()
                self._note_batch(budget, batch)
                if not state.done:
                    timer.start(ITERATION_KEY)
                    state.iteration_open = True
                yield batch
        finally:
            state.finish(stopping=False)

    def _note_batch(self, budget, batch):
        budget.handed_out += 1
        run = _run_api.active_run()
        if run is not None and budget.logged_for != run.id:
            budget.logged_for = run.id
            size = _batch_size(batch)
            if size is not None:
                run.set_tag(_core._STALLS_BATCH_SIZE_PARAM, size)
            if budget.mode:
                run.set_tag(_core._STALLS_MODE_PARAM, budget.mode)

class _Pass:
    """One pass over a timed loader: its waits, its open iteration, and its end,
    which comes once: at the loader's exhaustion, when the loop leaves it, or when
    the run ends with the pass still open (a framework that stops at the last
    batch without asking for more, as Lightning's last epoch: the pass then
    ends with the run, so no pass goes unrecorded)."""

    def __init__(self, loader, budget, number):
        self.loader = loader  # whose next pass ends this one
        self.timer = loader._timer  # pylint: disable=protected-access
        self.budget = budget
        self.number = number  # the metrics' step
        self.began = time.perf_counter()
        self.waits = []
        self.iteration_open = False
        self.done = False

    def end_iteration(self):
        if self.iteration_open:
            self.iteration_open = False
            self.timer.end(ITERATION_KEY)

    def finish(self, stopping):
        if self.done:
            return
        self.done = True
        _open_passes.discard(self)
        self.end_iteration()
        self.timer.end(EPOCH_KEY)
        wall = time.perf_counter() - self.began
        run = _run_api.active_run()
        if run is not None and self.waits:
            for name, value in pass_metrics(self.waits, wall).items():
                run.log_metric(name, value, step=self.number)
        if stopping and run is not None:
            run.log_metric(_core._STALLS_HANDED_OUT_METRIC, self.budget.handed_out,
                           step=self.number)


# Passes begun and not yet ended; a run that ends ends them first.
_open_passes = weakref.WeakSet()


def _end_open_passes(run):  # pylint: disable=unused-argument
    for state in list(_open_passes):
        state.finish(stopping=False)


_run_api._end_hooks.append(_end_open_passes)  # pylint: disable=protected-access


def _stop_process():
    """W + N iterations done: end the run (everything flushed, FINISHED) and the
    process, with status 0, as DS-Analyzer's instrumented script does."""
    _run_api.end_run("FINISHED")
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(0)
