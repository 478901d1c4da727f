#!/usr/bin/env python3
"""Reading a run's regions in Python: trainscope.read_run(...).regions vs pandas.read_csv.

Writes a one-rank run with --rows region rows (4 keys, CPU and GPU rows,
realistic nanosecond timestamps and durations) and --metric-rows rows in each
of metrics-0.csv (4 user keys) and host-bench-host.csv (10 hardware keys, most
without a rank) into --dir (default: a temporary directory, removed
afterwards), then times, median of --repeats, from the same process and page
cache:
  pandas.read_csv(regions-0.csv)          (the baseline: dtypes inferred)
  trainscope.read_run(dir).regions        (the C++ RunReader's checks, cut-line
                                           handling, categorical key/device,
                                           int64 columns)
and likewise run.metrics and run.hardware against read_csv of their files;
prints the ratio read_run / read_csv of the regions; the target is <= 2.0
(--check makes exceeding it the exit status 1). To compare two builds, run
it with each one's PYTHONPATH on the same --dir (written once, then reused).

    PYTHONPATH=<build>/python python bench/read_run_bench.py [--rows 5000000]
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time

import numpy as np
import pandas as pd

import trainscope

TARGET = 2.0
RUN_ID = "0123456789abcdef0123456789abcdef"


def write_run(run_dir, rows, metric_rows):
    """A finished one-rank run (format 2) with `rows` region rows and `metric_rows`
    rows of user metrics and of hardware readings; kept when already there."""
    path = os.path.join(run_dir, "regions-0.csv")
    done = os.path.join(run_dir, "written")
    sizes = f"{rows} {metric_rows}\n"
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            if f.read() == sizes:
                return path
    os.makedirs(run_dir, exist_ok=True)
    start_ms = 1761000000000
    with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "trainscope.run", "version": 2, "id": RUN_ID, "name": "bench",
                   "experiment": "Default", "start_time_ms": start_ms, "params": {},
                   "tags": {}}, f)
    with open(os.path.join(run_dir, "rank-0.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "trainscope.rank", "version": 2, "rank": 0, "local_rank": 0,
                   "world_size": 1, "host": "bench-host", "pid": 1, "status": "FINISHED",
                   "start_time_ms": start_ms, "end_time_ms": start_ms + rows,
                   "heartbeat_ms": start_ms + rows, "flush_interval_ms": 1000}, f)
    rng = np.random.default_rng(0)
    index = np.arange(rows, dtype=np.int64)
    which = index % 4
    keys = np.array(["BATCH", "FORWARD", "BACKWARD", "data aug"])
    frame = pd.DataFrame({
        "key": keys[which],
        "device": np.where(which == 1, "GPU", "CPU"),
        "rank": 0,
        "thread": 0,
        "start_unix_ns": start_ms * 1_000_000 + index * 250_000 + rng.integers(0, 1000, rows),
        "duration_ns": rng.integers(10_000, 50_000_000, rows),
        "step": index // 4,
        "epoch": index // 40_000,
    })
    frame.to_csv(path, index=False)
    index = np.arange(metric_rows, dtype=np.int64)
    keys = np.array(["train/loss", "train/acc", "lr", "grad_norm"])
    pd.DataFrame({"key": keys[index % 4], "value": rng.random(metric_rows), "step": index // 4,
                  "timestamp_ms": start_ms + index, "rank": 0}).to_csv(
                      os.path.join(run_dir, "metrics-0.csv"), index=False)
    keys = np.array([f"system/gpu.{g}.util_pct" for g in range(8)] +
                    ["system/cpu.util_pct", "system/proc.rss_mb"])
    pd.DataFrame({"key": keys[index % 10],
                  "value": np.round(rng.random(metric_rows) * 100, 1), "step": index // 10,
                  "timestamp_ms": start_ms + index,
                  "rank": np.where(index % 10 == 9, "0", "")}).to_csv(
                      os.path.join(run_dir, "host-bench-host.csv"), index=False)
    with open(done, "w", encoding="utf-8") as f:
        f.write(sizes)
    return path


def median_times(fns, repeats):
    """Median seconds of each function, the runs interleaved so that drift on a
    shared machine affects both alike."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, samples in zip(fns, times):
            start = time.perf_counter()
            result = fn()
            samples.append(time.perf_counter() - start)
            del result
    return [statistics.median(samples) for samples in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--metric-rows", type=int,
                        help="rows of metrics and of hardware readings (default: rows / 5)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where to write the run (default: a temporary directory)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit with status 1 if the ratio exceeds {TARGET}")
    args = parser.parse_args()
    if args.metric_rows is None:
        args.metric_rows = args.rows // 5

    parent = args.dir or tempfile.mkdtemp(prefix="read_run_bench-")
    run_dir = os.path.join(parent, RUN_ID)
    try:
        start = time.perf_counter()
        path = write_run(run_dir, args.rows, args.metric_rows)
        written_s = time.perf_counter() - start
        size_mb = os.path.getsize(path) / 1e6

        # Same rows from both, so neither reads something the other does not.
        regions = trainscope.read_run(run_dir).regions
        assert len(regions) == args.rows == len(pd.read_csv(path, usecols=["step"]))
        del regions

        baseline_s, ours_s = median_times(
            [lambda: pd.read_csv(path), lambda: trainscope.read_run(run_dir).regions],
            args.repeats)
        ratio = ours_s / baseline_s
        metrics_path = os.path.join(run_dir, "metrics-0.csv")
        host_path = os.path.join(run_dir, "host-bench-host.csv")
        others = args.metric_rows and median_times(
            [lambda: pd.read_csv(metrics_path), lambda: trainscope.read_run(run_dir).metrics,
             lambda: pd.read_csv(host_path), lambda: trainscope.read_run(run_dir).hardware],
            args.repeats)
    finally:
        if not args.dir:
            shutil.rmtree(parent, ignore_errors=True)

    print(f"read_run bench: {args.rows} region rows, {size_mb:.0f} MB, "
          f"{args.metric_rows} metric and hardware rows each "
          f"(written in {written_s:.1f} s), median of {args.repeats}; CPython "
          f"{platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{'variant':<34}{'seconds':>10}{'rows/s':>14}")
    print(f"{'pandas.read_csv':<34}{baseline_s:>10.3f}{args.rows / baseline_s:>14.3g}")
    print(f"{'trainscope.read_run().regions':<34}{ours_s:>10.3f}{args.rows / ours_s:>14.3g}")
    if args.metric_rows:
        names = ["pandas.read_csv(metrics-0.csv)", "trainscope.read_run().metrics",
                 "pandas.read_csv(host-*.csv)", "trainscope.read_run().hardware"]
        for name, seconds in zip(names, others):
            print(f"{name:<34}{seconds:>10.3f}{args.metric_rows / seconds:>14.3g}")
    print(f"ratio read_run / read_csv: {ratio:.2f} (target <= {TARGET:.1f}: "
          f"{'met' if ratio <= TARGET else 'NOT met'})")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
