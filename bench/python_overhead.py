#!/usr/bin/env python3
"""Cost of timing a region from Python: trainscope vs Deep500's pure-Python timer.

Prints, from the same loops in the same run (best of --repeats, GC off as in
timeit), the cost per iteration of: an empty loop, two bare
time.perf_counter() calls, a start+end pair of a re-implementation of
Deep500's Timer (the anchor), a start+end pair of trainscope's Timer and
CPUGPUTimer (no run: their regions are held for a run that may start later),
and of a Timer in a run (its regions streamed to the run's files by the export
thread, which shares the machine's cores: on two busy cores its work shows in
the loop's time; the loop thread's own CPU time is shown beside, and the export
thread's CPU per region); then get_time_stats over --stats-samples samples for Deep500's
(statistics module) and trainscope's. "net" subtracts the empty loop, so the
ratio compares the calls themselves.

    PYTHONPATH=<build>/python python bench/python_overhead.py
"""

import argparse
import collections
import enum
import functools
import gc
import platform
import statistics
import tempfile
import time
import typing

import trainscope


class TimeType(enum.Enum):
    """Deep500's keys: a plain Enum, as in deep500.utils.timer."""

    EPOCH = 1
    BATCH = 2
    FORWARD = 3
    BACKWARD = 4
    COMM = 5
    IO = 6
    OTHER = 7
    ALL = 8


class Deep500TimeStats(typing.NamedTuple):
    min: float
    mean: float
    median: float
    max: float
    stdev: float


class Deep500Timer:
    """Deep500's CPU Timer: per-key lists of start and end perf_counter() values."""

    def __init__(self):
        self.starts = collections.defaultdict(list)
        self.ends = collections.defaultdict(list)

    def start(self, key):
        if key == TimeType.ALL:
            raise ValueError("Cannot start timing for TimeType.ALL")
        if len(self.starts[key]) != len(self.ends[key]):
            raise RuntimeError(f"Detected nesting for timing region type {key}")
        self.starts[key].append(time.perf_counter())

    def end(self, key):
        end = time.perf_counter()
        if key == TimeType.ALL:
            raise ValueError("Cannot end timing for TimeType.ALL")
        if len(self.starts[key]) != len(self.ends[key]) + 1:
            raise RuntimeError(f"Unbalanced end for timing region type {key}")
        self.ends[key].append(end)

    def get_time(self, key):
        return [end - start for start, end in zip(self.starts[key], self.ends[key])]

    def get_time_stats(self, key):
        times = self.get_time(key)
        stdev = statistics.stdev(times) if len(times) > 1 else 0.0
        return Deep500TimeStats(min(times), statistics.mean(times), statistics.median(times),
                                max(times), stdev)


def loop_empty(n):
    for _ in range(n):
        pass


def loop_perf_counter(n):
    perf_counter = time.perf_counter
    for _ in range(n):
        perf_counter()
        perf_counter()


def loop_pairs(timer, key, n):
    # The call form of a training loop: method lookup on the timer each time.
    for _ in range(n):
        timer.start(key)
        timer.end(key)


def ns_per_iteration(make, n):
    """Wall, this thread's CPU and the other threads' CPU (the export thread's, in a
    run) per iteration, in ns."""
    loop = make()  # builds the timer outside the timed region
    process, thread = time.process_time_ns(), time.thread_time_ns()
    began = time.perf_counter_ns()
    loop(n)
    elapsed = time.perf_counter_ns() - began
    thread = time.thread_time_ns() - thread
    after = getattr(loop, "after", None)
    if after is not None:  # (a run to end, outside the timed region: it drains the queue)
        after()
    others = time.process_time_ns() - process - thread
    return elapsed / n, thread / n, max(others, 0) / n


def in_a_run(root):
    """A Timer attached to a run (its regions streamed to the run's files by the export
    thread) rather than held for a run that may start later."""
    def make():
        run = trainscope.start_run(root=root, run_name="python-overhead")
        loop = functools.partial(loop_pairs, trainscope.Timer(), trainscope.TimeType.BATCH)
        loop.after = run.end
        return loop
    return make


def seconds_of(call, repeats):
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - began)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stats-samples", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.iterations

    # Each run gets fresh timers so that sample storage does not accumulate.
    # Loops are module functions taking n, as in a training script.
    variants = [
        ("empty loop", lambda: loop_empty),
        ("2x time.perf_counter()", lambda: loop_perf_counter),
        ("Deep500 Timer start+end (Python)",
         lambda: functools.partial(loop_pairs, Deep500Timer(), TimeType.BATCH)),
        ("trainscope Timer start+end",
         lambda: functools.partial(loop_pairs, trainscope.Timer(), trainscope.TimeType.BATCH)),
        ("trainscope CPUGPUTimer start+end",
         lambda: functools.partial(loop_pairs, trainscope.CPUGPUTimer(),
                                   trainscope.TimeType.BATCH)),
        ("trainscope Timer start+end, in a run", in_a_run(tempfile.mkdtemp(prefix="overhead-"))),
    ]
    results = {name: float("inf") for name, _ in variants}
    cpu = {name: float("inf") for name, _ in variants}  # the loop thread's CPU time
    export = {name: float("inf") for name, _ in variants}  # the other threads' CPU time
    gc.disable()
    try:
        for _ in range(args.repeats):  # interleaved, so drift hits all variants alike
            for name, make in variants:
                wall, thread, others = ns_per_iteration(make, n)
                results[name] = min(results[name], wall)
                cpu[name] = min(cpu[name], thread)
                export[name] = min(export[name], others)
    finally:
        gc.enable()

    empty = results["empty loop"]
    bare = results["2x time.perf_counter()"] - empty
    cpu_empty = cpu["empty loop"]
    cpu_bare = cpu["2x time.perf_counter()"] - cpu_empty
    print(f"Python start+end overhead: CPython {platform.python_version()}, "
          f"{n} iterations, best of {args.repeats}")
    # "thread CPU": the loop thread's own CPU time (what the pair costs the training
    # thread); in a run the export thread's CPU per region is said apart: on free cores
    # it runs beside the loop, on busy ones it takes the loop's time (the wall figure).
    print(f"{'variant':<36}{'ns/iter':>10}{'net ns':>10}{'x bare pair':>13}"
          f"{'thread CPU x':>14}")
    for name, _ in variants:
        net = results[name] - empty
        if name == "empty loop":
            print(f"{name:<36}{results[name]:>10.1f}{'-':>10}{'-':>13}{'-':>14}")
        else:
            print(f"{name:<36}{results[name]:>10.1f}{net:>10.1f}{net / bare:>13.2f}"
                  f"{(cpu[name] - cpu_empty) / cpu_bare:>14.2f}")
    in_run = "trainscope Timer start+end, in a run"
    print(f"export thread, in a run: {export[in_run]:.1f} ns CPU per region "
          f"({export[in_run] / cpu_bare:.2f}x the bare pair), on other cores when free")

    m = args.stats_samples
    deep500 = Deep500Timer()
    ours = trainscope.Timer()
    loop_pairs(deep500, TimeType.BATCH, m)
    loop_pairs(ours, trainscope.TimeType.BATCH, m)
    stats_repeats = min(args.repeats, 3)
    deep500_s = seconds_of(lambda: deep500.get_time_stats(TimeType.BATCH), stats_repeats)
    ours_s = seconds_of(lambda: ours.get_time_stats(trainscope.TimeType.BATCH), stats_repeats)
    print()
    print(f"get_time_stats over {m} samples (best of {stats_repeats})")
    print(f"{'Deep500 (statistics module)':<36}{deep500_s * 1e3:>10.2f} ms")
    print(f"{'trainscope':<36}{ours_s * 1e3:>10.2f} ms{deep500_s / ours_s:>10.1f}x faster")


if __name__ == "__main__":
    main()
