"""Helpers of the Python tests that read run directories or drive the CLI (one of each)."""

import csv
import json
import os
import signal

import pytest


def printed_json_objects(stdout):
    """The JSON objects a job's processes printed (plain_train.py: one per rank). Processes
    that share one stdout may put two objects back to back on one line (seen in CI): every
    object is decoded wherever it starts, not one per line."""
    decoder = json.JSONDecoder()
    found = []
    for line in stdout.splitlines():
        pos = line.find("{")
        while pos != -1:
            try:
                value, end = decoder.raw_decode(line, pos)
            except json.JSONDecodeError:
                pos = line.find("{", pos + 1)
                continue
            if isinstance(value, dict):
                found.append(value)
            pos = line.find("{", end)
    return found


def rows(path):
    """The rows of a run CSV file as dicts of strings."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def trainscope_cli():
    """The built `trainscope` command (TRAINSCOPE_CLI, set by ctest), or skip with the reason."""
    cli = os.environ.get("TRAINSCOPE_CLI")
    if not cli:
        pytest.skip("TRAINSCOPE_CLI (the built trainscope command) is not set")
    return cli


# ---- Run directories written in the documented format (docs/run-format.md) ----------------------

HARDWARE_KEYS = (
    ("system/cpu.util_pct", None), ("system/mem.used_mb", None), ("system/disk.read_mb_s", None),
    ("system/gpu.0.util_pct", None), ("system/gpu.0.mem_used_mb", None), ("system/proc.cpu_pct", 0))


def write_run(path, *, run_id="0123456789abcdef0123456789abcdef", name="run", params=None,
              world_size=1, keys=(("BATCH", "CPU"), ("BATCH", "GPU"), ("data", "CPU")),
              rows_per_key=100, hardware_samples=0, state="FINISHED", start_ms=1761000000000,
              seed=0, command=("python", "train.py"), scale=1.0):
    """Writes a run directory by hand: run.json, per rank its rank file, regions (rows_per_key rows
    of each (key, device) per rank, lognormal times with a 10x spike every 97th row, one step per
    row) and metrics (loss), and, with hardware_samples, a launcher file and host-<host>.csv with
    that many readings in all (spread over HARDWARE_KEYS).

    state: FINISHED; RUNNING (in progress: this host, this process's pid, a fresh heartbeat);
    CRASHED (RUNNING on another host whose heartbeat is long past). scale multiplies every
    region's time and the steps' spacing (their period). Returns the path.
    Needs numpy and pandas (the Python tests' environment has both).
    """
    import socket
    import time

    import numpy as np
    import pandas as pd

    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    running = state != "FINISHED"
    host = socket.gethostname() if state != "CRASHED" else "elsewhere"
    now_ms = int(time.time() * 1000)
    if state == "RUNNING":
        start_ms = now_ms - 600_000
    step_s = 0.012 * scale  # a slower job's steps start further apart (their period)
    end_ms = start_ms + int(rows_per_key * step_s * 1000) + 1000
    heartbeat_ms = now_ms if state == "RUNNING" else end_ms
    with open(os.path.join(path, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "trainscope.run", "version": 2, "id": run_id, "name": name,
                   "experiment": "Default", "start_time_ms": start_ms, "params": params or {},
                   "tags": {}}, f)
    for rank in range(world_size):
        with open(os.path.join(path, f"rank-{rank}.json"), "w", encoding="utf-8") as f:
            json.dump({"format": "trainscope.rank", "version": 2, "rank": rank, "local_rank": rank,
                       "world_size": world_size, "host": host,
                       "pid": os.getpid() if state == "RUNNING" else 999999,
                       "status": "RUNNING" if running else "FINISHED", "start_time_ms": start_ms,
                       "end_time_ms": 0 if running else end_ms, "heartbeat_ms": heartbeat_ms,
                       "flush_interval_ms": 1000}, f)
        frames = []
        # Where each step starts: its period varies as the times do (a separate stream, so
        # the times stay what they were).
        periods = np.random.default_rng(seed + 1000 * (rank + 1)).lognormal(
            np.log(step_s), 0.15, rows_per_key)
        starts = start_ms * 1_000_000 + np.concatenate(([0], np.cumsum(periods[:-1]) * 1e9))
        for key, device in keys:
            n = rows_per_key
            seconds = rng.lognormal(np.log(0.01 * scale * (1 + 0.2 * rank)), 0.15, n)
            seconds[96::97] *= 10.0
            frames.append(pd.DataFrame({
                "key": key, "device": device, "rank": rank, "thread": 0,
                "start_unix_ns": starts.astype(np.int64),
                "duration_ns": (seconds * 1e9).astype(np.int64),
                "step": np.arange(n, dtype=np.int64), "epoch": np.arange(n, dtype=np.int64) // 1000}))
        regions = pd.concat(frames) if frames else pd.DataFrame(
            columns=["key", "device", "rank", "thread", "start_unix_ns", "duration_ns", "step",
                     "epoch"])
        regions.to_csv(os.path.join(path, f"regions-{rank}.csv"), index=False)
        steps = max(rows_per_key // 10, 1) if keys else 0
        pd.DataFrame({"key": "train/loss", "value": np.exp(-np.arange(steps) / 50.0) + 0.1,
                      "step": np.arange(steps) * 10, "timestamp_ms": start_ms + np.arange(steps) * 120,
                      "rank": rank}).to_csv(os.path.join(path, f"metrics-{rank}.csv"), index=False)
    if hardware_samples:
        pid = os.getpid() if state == "RUNNING" else 4200
        with open(os.path.join(path, f"launcher-{host}-{pid}.json"), "w", encoding="utf-8") as f:
            json.dump({"format": "trainscope.launcher", "version": 2, "host": host, "pid": pid,
                       "command": list(command), "status": "RUNNING" if running else "FINISHED",
                       "exit_code": -1 if running else 0, "term_signal": 0,
                       "start_time_ms": start_ms, "end_time_ms": 0 if running else end_ms,
                       "heartbeat_ms": heartbeat_ms, "flush_interval_ms": 1000}, f)
        per_key = hardware_samples // len(HARDWARE_KEYS)
        frames = []
        for i, (key, rank) in enumerate(HARDWARE_KEYS):
            t = start_ms + np.linspace(0, end_ms - start_ms, per_key).astype(np.int64)
            value = 50 + 30 * np.sin(np.arange(per_key) / 40.0 + i) + rng.normal(0, 3, per_key)
            value[per_key // 2] = 500.0  # one spike, which every view must keep
            frames.append(pd.DataFrame({"key": key, "value": value, "step": 0, "timestamp_ms": t,
                                        "rank": "" if rank is None else str(rank)}))
        pd.concat(frames).sort_values("timestamp_ms", kind="stable").to_csv(
            os.path.join(path, f"host-{host}.csv"), index=False)
    return path


def write_summary(run_dir, rank, entries):
    """summary-<rank>.json counting (key, device, count, warmup_excluded, seconds) entries:
    every statistic of a key is `seconds` (its total seconds * count)."""
    full = []
    for key, device, count, warmup, seconds in entries:
        full.append({"key": key, "device": device, "count": count, "total": seconds * count,
                     "min": seconds, "mean": seconds, "median": seconds, "max": seconds,
                     "stdev": 0.0, "p5": seconds, "p25": seconds, "p75": seconds,
                     "p95": seconds, "p99": seconds, "cv": 0.0, "median_ci_low": None,
                     "median_ci_high": None, "warmup_excluded": warmup, "approximate": False})
    with open(os.path.join(run_dir, f"summary-{rank}.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "trainscope.stats", "version": 1, "has_gpu_section": False,
                   "entries": full}, f)


# ---- A job whose diagnosis is known by construction -----------------------------------------------

# Each of its 40 steps (BATCH) waits 20 ms for data (IO), then computes 8 ms (a wait, as on a
# GPU): a data-wait share near 0.7, INPUT-BOUND (`trainscope run` tags the run with it at the
# end).
INPUT_BOUND_JOB = """
import time
import trainscope
with trainscope.start_run():
    timer = trainscope.Timer()
    for step in range(40):
        with timer.scope("BATCH"):
            with timer.scope("IO"):
                time.sleep(0.02)
            time.sleep(0.008)  # the step: a wait, as on a GPU (a spin stretches under load)
"""


def job_processes(variable, mark):
    """The live processes (no zombie) whose environment holds variable=mark: every process
    of a job started with it in its environment, wherever it went (a new session too)."""
    entry = f"{variable}={mark}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if entry in environ and state not in ("Z", "X"):
            pids.append(int(name))
    return pids


def kill_job(variable, mark):
    """SIGKILL to every process of job_processes(variable, mark)."""
    for pid in job_processes(variable, mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
