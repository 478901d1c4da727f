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

A label's capture: when STRAGGLER, MEMORY-CREEP or THROUGHPUT-DRIFT first appears,
`trainscope run`'s watch writes <run>/capture-request.json (its one writer:
trainscope/diagnosis/capture_request.hpp; docs/run-format.md). A daemon thread of each
AnomalyCapture looks at that file once a second (one os.stat; it reads it only when it
changed) and hands a request naming this rank to the training thread, whose step() (one
attribute read) then captures the next `steps` steps within the same caps, into
captures/capture-r<rank>-s<step>-<label>.json (<step>: the step it began after; <label>
in lower case). A damaged request file is said once, naming it, and left alone.
"""
import collections
import json
import os
import sys
import threading
import time
import weakref

CAPTURES_DIR = "captures"
REQUEST_FILE = "capture-request.json"
REQUEST_POLL_S = 1.0
ASKING_LABELS = ("STRAGGLER", "MEMORY-CREEP", "THROUGHPUT-DRIFT")
WARMUP_STEPS = 32  # steps before the first judgement (and between p99 updates)
_HISTORY = 256


def capture_name(rank, step, label=None):
    if label is None:
        return f"capture-r{int(rank)}-s{int(step)}.json"
    return f"capture-r{int(rank)}-s{int(step)}-{label.lower()}.json"


def parse_requests(text, source):
    """The requests of a capture-request.json: [(label, step, ranks)]; ValueError naming
    `source` and the key when it is damaged."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{source}: not JSON ({error})") from None
    if not isinstance(doc, dict) or doc.get("format") != "trainscope.capture_request":
        raise ValueError(f"{source}: \"format\" is not \"trainscope.capture_request\"")
    if doc.get("version") != 1:
        raise ValueError(f"{source}: \"version\" {doc.get('version')!r} (1 is read)")
    requests = doc.get("requests")
    if not isinstance(requests, list):
        raise ValueError(f"{source}: \"requests\" is not a list")
    out = []
    for i, r in enumerate(requests):
        where = f"{source}: requests[{i}]"
        if not isinstance(r, dict):
            raise ValueError(f"{where} is not an object")
        label, step, ranks = r.get("label"), r.get("step"), r.get("ranks")
        if label not in ASKING_LABELS:
            raise ValueError(f"{where}.label {label!r}: one of {', '.join(ASKING_LABELS)}")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"{where}.step {step!r}: a step number")
        if not isinstance(ranks, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ranks):
            raise ValueError(f"{where}.ranks {ranks!r}: a list of ranks")
        out.append((label, step, tuple(ranks)))
    return out


class AnomalyCapture:
    """Watches step periods; captures the steps after a slow one."""

    def __init__(self, run_dir, rank, factor=5.0, steps=3, max_captures=3,
                 max_bytes=100 * 1000 * 1000, on_labels=True):
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
        self._label = None  # the label of the capture in progress (None: a slow step)
        # Labels whose capture this rank was asked for (the poller appends, step() takes).
        self._asked = collections.deque()
        self._poller = None
        if on_labels and not self._off:
            self._poller = _RequestPoller(self)

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
        if self._asked:
            self._label = self._asked.popleft()
            self._start(self._index, period)
            return
        if period > self._limit:
            self._label = None
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
        path = os.path.join(self.run_dir, CAPTURES_DIR,
                            capture_name(self.rank, index, self._label))
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
        """Ends a capture in progress (saved with the steps it has) and the request poll."""
        if self._profiler is not None:
            self._stop()
        if self._poller is not None:
            self._poller.stop()


class _RequestPoller:
    """A daemon thread: one os.stat of <run>/capture-request.json a second; when it
    changed, the requests not seen yet that name this rank go to capture._asked. It ends
    once the capture is off (its caps reached), closed or gone (it holds it weakly)."""

    def __init__(self, capture):
        self._capture = weakref.ref(capture)
        self.path = os.path.join(capture.run_dir, REQUEST_FILE)
        # The labels handled: each once per run, also when several launchers of one job
        # (one per Slurm task) each write the file with their own step.
        self._seen = set()
        self._stamp = None  # (mtime_ns, size) of the file last read
        self._stopped = threading.Event()
        self.polls = 0
        self.thread = threading.Thread(target=self._loop, name="trainscope-capture-requests",
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self._stopped.set()

    def _loop(self):
        while not self._stopped.wait(REQUEST_POLL_S):
            capture = self._capture()
            if capture is None or capture._off:  # pylint: disable=protected-access
                return
            del capture
            try:
                self.poll()
            except Exception:  # pylint: disable=broad-except
                return  # never the training's problem

    def poll(self):
        """One look at the file (the thread's, once a second; tests call it too)."""
        self.polls += 1
        try:
            st = os.stat(self.path)
        except OSError:
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            with open(self.path, encoding="utf-8") as f:
                requests = parse_requests(f.read(), self.path)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            sys.stderr.write(f"trainscope: capture request ignored: {error}\n")
            return
        capture = self._capture()
        if capture is None:
            return
        for label, _, ranks in requests:
            if label in self._seen or capture.rank not in ranks:
                continue
            self._seen.add(label)
            capture._asked.append(label)  # pylint: disable=protected-access
