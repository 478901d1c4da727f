"""Anomaly capture (issue 40): a step slower than `factor` (5) x the rolling p99 of the
steps before it starts a torch.profiler capture of the next `steps` (3) steps, saved into
the run as a Chrome trace: <run>/captures/capture-r<rank>-s<step>.json (<step>: the slow
step, from 0), at most `max_captures` (3) per process and `max_bytes` (100 MB) in all; a
capture past the bytes is deleted and said once.

AnomalyCapture.step() is called at the end of each step: `trainscope run --auto` calls it
at each BATCH end (TRAINSCOPE_CAPTURE_STEPS / TRAINSCOPE_CAPTURE_MAX set by --capture-steps,
--capture-max; 0 steps turns it off); code calls trainscope.torch.capture_on_anomaly() and
.step(). Off the step path when no anomaly: a clock read, an append and one comparison;
the p99 is computed again every 32 steps. The capture costs what the profiler costs for
`steps` steps (CPU, and CUDA activities when a GPU is there; no stacks, no shapes).
"""
import collections
import os
import sys
import time

CAPTURES_DIR = "captures"
WARMUP_STEPS = 32  # steps before the first judgement (and between p99 updates)
_HISTORY = 256


def capture_name(rank, step):
    return f"capture-r{int(rank)}-s{int(step)}.json"


class AnomalyCapture:
    """Watches step periods; captures the steps after a slow one."""

    def __init__(self, run_dir, rank, factor=5.0, steps=3, max_captures=3,
                 max_bytes=100 * 1000 * 1000):
        self.run_dir = os.fspath(run_dir)
        self.rank = int(rank)
        self.factor = float(factor)
        self.steps = int(steps)
        self.max_captures = int(max_captures)
        self.max_bytes = int(max_bytes)
        self.captures = []  # paths written
        self._bytes = 0
        self._periods = collections.deque(maxlen=_HISTORY)
        self._limit = float("inf")  # factor x p99: no judgement before WARMUP_STEPS
        self._last = None
        self._index = -1  # the step that just ended
        self._profiler = None
        self._left = 0
        self._slow_step = None
        self._off = self.steps <= 0 or self.max_captures <= 0

    def step(self):
        """The end of a step (the first call starts the clock)."""
        now = time.perf_counter()
        last, self._last = self._last, now
        self._index += 1
        if last is None or self._off:
            return
        period = now - last
        if self._profiler is not None:
            self._left -= 1
            if self._left <= 0:
                self._stop()
            return
        if period > self._limit:
            self._start(self._index, period)
            return
        periods = self._periods
        periods.append(period)
        if self._index % WARMUP_STEPS == 0 and len(periods) >= WARMUP_STEPS:
            ordered = sorted(periods)
            self._limit = self.factor * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]

    def _start(self, index, period):
        try:
            import torch.profiler as tp  # pylint: disable=import-outside-toplevel
            import torch  # pylint: disable=import-outside-toplevel
            activities = [tp.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(tp.ProfilerActivity.CUDA)
            profiler = tp.profile(activities=activities, record_shapes=False,
                                  with_stack=False, profile_memory=False)
            profiler.__enter__()
        except Exception as error:  # pylint: disable=broad-except
            self._off = True
            sys.stderr.write(f"trainscope: no anomaly capture: {error}\n")
            return
        self._profiler = profiler
        self._left = self.steps
        self._slow_step = (index, period, self._limit)

    def _stop(self):
        profiler, self._profiler = self._profiler, None
        index, _, _ = self._slow_step
        path = os.path.join(self.run_dir, CAPTURES_DIR, capture_name(self.rank, index))
        try:
            profiler.__exit__(None, None, None)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            profiler.export_chrome_trace(path)
            size = os.path.getsize(path)
            if self._bytes + size > self.max_bytes:
                os.remove(path)
                self._off = True
                sys.stderr.write(f"trainscope: anomaly capture of step {index} dropped: "
                                 f"{self._bytes + size} bytes pass the {self.max_bytes} kept\n")
                return
            self._bytes += size
            self.captures.append(path)
        except Exception as error:  # pylint: disable=broad-except
            self._off = True
            sys.stderr.write(f"trainscope: anomaly capture of step {index} failed: {error}\n")
            return
        if len(self.captures) >= self.max_captures:
            self._off = True

    def close(self):
        """Ends a capture in progress (saved with the steps it has)."""
        if self._profiler is not None:
            self._stop()
