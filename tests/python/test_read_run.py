"""trainscope.read_run / search_runs: run directories as pandas DataFrames, with the
numbers the files hold; runs written by start_run, by hand (version 1), in progress,
crashed and damaged."""

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import trainscope
from run_files import read_json as _json, rows as _rows

pd = pytest.importorskip("pandas")

START_MS = 1761000000000
HOST = socket.gethostname()




def _write_json(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def _now_ms():
    return time.time_ns() // 1_000_000


def _run_json(run_dir, run_id="0" * 32, name="hand", params=None, tags=None, version=2,
              start_ms=START_MS):
    os.makedirs(run_dir, exist_ok=True)
    _write_json(os.path.join(run_dir, "run.json"), {
        "format": "trainscope.run", "version": version, "id": run_id, "name": name,
        "experiment": "Default", "start_time_ms": start_ms, "params": params or {},
        "tags": tags or {}})


def _rank_json(run_dir, rank, status="FINISHED", host="node17", pid=4242, world_size=1,
               start_ms=START_MS, end_ms=START_MS + 60_000, heartbeat_ms=None, version=2,
               flush_interval_ms=1000):
    _write_json(os.path.join(run_dir, f"rank-{rank}.json"), {
        "format": "trainscope.rank", "version": version, "rank": rank, "local_rank": rank,
        "world_size": world_size, "host": host, "pid": pid, "status": status,
        "start_time_ms": start_ms, "end_time_ms": end_ms,
        "heartbeat_ms": end_ms if heartbeat_ms is None else heartbeat_ms,
        "flush_interval_ms": flush_interval_ms})


def _summary_json(run_dir, rank, entries):
    full = []
    for key, device, count, median in entries:
        full.append({"key": key, "device": device, "count": count, "total": median * count,
                     "min": median, "mean": median, "median": median, "max": median,
                     "stdev": 0.0, "p5": median, "p25": median, "p75": median, "p95": median,
                     "p99": median, "cv": 0.0, "median_ci_low": None, "median_ci_high": None,
                     "warmup_excluded": 0, "approximate": False})
    _write_json(os.path.join(run_dir, f"summary-{rank}.json"), {
        "format": "trainscope.stats", "version": 1, "has_gpu_section": False, "entries": full})


REGIONS_HEADER = "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n"
METRICS_HEADER = "key,value,step,timestamp_ms,rank\n"


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --- runs written by trainscope ---------------------------------------------------

RANK_SCRIPT = """
    import os, time, trainscope
    rank = int(os.environ["RANK"])
    with trainscope.start_run(run_name="two", params={"lr": 0.1}, tags={"team": "perf"},
                              flush_interval=0.05):
        tmr = trainscope.Timer()
        for step in range(8):
            with tmr.scope(trainscope.TimeType.BATCH):
                time.sleep(0.002 + 0.04 * rank)  # far above a busy machine's late wake-ups
            trainscope.log_metric("loss", 1.0 / (step + 1) + rank, step=step)
"""


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    """A run of two ranks, each a process that joins TRAINSCOPE_RUN_DIR (rank 1 slower)."""
    run_dir = str(tmp_path_factory.mktemp("runs") / "job")
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI",)}
    children = [subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RANK_SCRIPT)],
        env=dict(env, TRAINSCOPE_RUN_DIR=run_dir, RANK=str(r), LOCAL_RANK=str(r),
                 WORLD_SIZE="2"), stderr=subprocess.PIPE, text=True) for r in range(2)]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    return run_dir


def test_a_two_rank_run_reads_back_as_its_files_say(two_rank_run):
    run = trainscope.read_run(two_rank_run)
    info = _json(os.path.join(two_rank_run, "run.json"))
    assert (run.id, run.name, run.experiment) == (info["id"], "two", info["experiment"])
    assert run.params == {"lr": "0.1"} and run.tags["team"] == "perf"
    assert run.status == "FINISHED" and not run.crashed
    assert run.world_size == 2 and run.hosts == [HOST]
    assert list(run.ranks["rank"]) == [0, 1]
    assert list(run.ranks["status"]) == ["FINISHED", "FINISHED"]
    ends = [_json(os.path.join(two_rank_run, f"rank-{r}.json"))["end_time_ms"] for r in (0, 1)]
    assert run.start_time_ms == info["start_time_ms"] and run.end_time_ms == max(ends)
    assert run.start_time == pd.Timestamp(info["start_time_ms"], unit="ms", tz="UTC")
    assert run.end_time == pd.Timestamp(max(ends), unit="ms", tz="UTC")
    assert run.duration_s == pytest.approx((max(ends) - info["start_time_ms"]) / 1000)
    assert run.launchers.empty and run.artifacts == []

    regions = run.regions
    assert list(regions.columns) == ["key", "device", "rank", "thread", "start_unix_ns",
                                     "duration_ns", "step", "epoch", "gpu_start_ns", "stream",
                                     "cpu_wait_ns"]
    assert str(regions["key"].dtype) == "category" and str(regions["device"].dtype) == "category"
    expected = [(r["key"], r["device"], int(r["rank"]), int(r["thread"]),
                 int(r["start_unix_ns"]), int(r["duration_ns"]), int(r["step"]), int(r["epoch"]))
                for rank in (0, 1)
                for r in _rows(os.path.join(two_rank_run, f"regions-{rank}.csv"))]
    assert [tuple(row)[:8] for row in regions.itertuples(index=False)] == expected
    assert regions["gpu_start_ns"].isna().all() and (regions["stream"] == 0).all()  # CPU rows
    assert len(expected) == 16

    metrics = run.metrics
    assert list(metrics.columns) == ["key", "value", "step", "timestamp_ms", "rank"]
    expected = [(m["key"], float(m["value"]), int(m["step"]), int(m["timestamp_ms"]),
                 int(m["rank"]))
                for rank in (0, 1)
                for m in _rows(os.path.join(two_rank_run, f"metrics-{rank}.csv"))]
    assert [tuple(row) for row in metrics.itertuples(index=False)] == expected
    assert sorted(metrics.loc[metrics["rank"] == 1, "value"]) == sorted(
        1.0 / (s + 1) + 1 for s in range(8))
    assert run.hardware.empty and "host" in run.hardware.columns

    summaries = run.summaries
    for rank in (0, 1):
        (entry,) = _json(os.path.join(two_rank_run, f"summary-{rank}.json"))["entries"]
        row = summaries[summaries["rank"] == rank].iloc[0]
        assert (row["key"], row["device"], row["count"]) == ("BATCH", "CPU", 8)
        for stat in ("total", "min", "mean", "median", "max", "p95", "stdev"):
            assert row[stat] == entry[stat], stat


def test_summaries_columns_follow_the_time_stats_fields(two_rank_run):
    summaries = trainscope.read_run(two_rank_run).summaries
    fields = trainscope._core._TIME_STATS_FIELDS
    assert list(summaries.columns) == ["rank", "key", "device"] + [f[0] for f in fields]
    dtypes = {"integer": "int64", "double": "float64", "boolean": "bool"}
    for name, kind, _ in fields:
        assert str(summaries[name].dtype) == dtypes[kind], name


def test_search_runs_takes_any_numeric_time_stats_field(two_rank_run):
    numeric = [name for name, kind, _ in trainscope._core._TIME_STATS_FIELDS
               if kind != "boolean"]
    assert "warmup_excluded" in numeric and "median_ci_high" in numeric
    runs = trainscope.search_runs(two_rank_run, keys=["BATCH"], stat="warmup_excluded")
    files = [_json(os.path.join(two_rank_run, f"summary-{rank}.json"))["entries"][0]
             for rank in (0, 1)]
    assert list(runs["regions.BATCH.warmup_excluded"]) == [
        sum(entry["warmup_excluded"] for entry in files) / 2]
    with pytest.raises(ValueError, match="unknown statistic 'approximate'"):
        trainscope.search_runs(two_rank_run, stat="approximate")


def test_stragglers_name_the_slow_rank_at_every_step(two_rank_run):
    run = trainscope.read_run(two_rank_run)
    stragglers = run.stragglers()  # BATCH on the CPU
    assert list(stragglers.index) == list(range(8)) and stragglers.index.name == "step"
    assert list(stragglers.columns) == ["slowest_rank", "slowest_s", "median_rank", "median_s",
                                        "lag_s", "n_ranks"]
    assert (stragglers["slowest_rank"] == 1).all() and (stragglers["median_rank"] == 0).all()
    assert (stragglers["n_ranks"] == 2).all() and (stragglers["lag_s"] >= 0.02).all()
    times = run.step_times(trainscope.TimeType.BATCH, "cpu")
    assert list(times.columns) == [0, 1]
    assert list(stragglers["lag_s"]) == pytest.approx(list(times[1] - times[0]))
    batch = run.regions[run.regions["key"] == "BATCH"]
    assert times.loc[3, 1] == pytest.approx(
        batch.loc[(batch["rank"] == 1) & (batch["step"] == 3), "duration_ns"].sum() * 1e-9)
    with pytest.raises(ValueError, match=r'"FORWARD" on CPU \(recorded: BATCH \(CPU\)\)'):
        run.stragglers("FORWARD")


def test_median_rank_and_lag_with_more_ranks(tmp_path):
    run_dir = str(tmp_path / "run")
    _run_json(run_dir)
    durations = {0: [10, 40], 1: [30, 10], 2: [20, 20], 3: [50, 30]}  # ms per step 0, 1
    for rank, per_step in durations.items():
        _rank_json(run_dir, rank, world_size=4)
        lines = "".join(f"BATCH,CPU,{rank},0,{START_MS * 10**6 + step},{ms * 10**6},{step},0\n"
                        for step, ms in enumerate(per_step))
        # Two FORWARD regions in step 0: a step's duration is their sum.
        lines += f"FORWARD,CPU,{rank},0,1,{rank + 1},0,0\nFORWARD,CPU,{rank},0,2,5,0,0\n"
        _write(os.path.join(run_dir, f"regions-{rank}.csv"), REGIONS_HEADER + lines)
    stragglers = trainscope.read_run(run_dir).stragglers("BATCH")
    # Step 0: 10 20 30 50 -> slowest 3, lower median rank 2 (20 ms).
    # Step 1: 10 20 30 40 -> slowest 0, lower median rank 2 (20 ms).
    assert list(stragglers["slowest_rank"]) == [3, 0]
    assert list(stragglers["median_rank"]) == [2, 2]
    assert list(stragglers["lag_s"]) == pytest.approx([0.030, 0.020])
    forward = trainscope.read_run(run_dir).stragglers("FORWARD")
    assert list(forward["slowest_rank"]) == [3]
    assert forward["slowest_s"].iloc[0] == pytest.approx(9e-9)


# --- hand-written directories --------------------------------------------------------


def test_a_version_1_run_puts_its_hardware_rows_in_hardware(tmp_path):
    run_dir = str(tmp_path / "old")
    _run_json(run_dir, name="old", params={"lr": "0.1"}, version=1)
    _rank_json(run_dir, 0, version=1)
    _write(os.path.join(run_dir, "regions-0.csv"), REGIONS_HEADER +
           "BATCH,CPU,0,0,1761000000123456789,8123456,0,0\n"
           '"data aug, ""v2""",GPU,0,0,1761000000123400000,2041000,0,0\n')
    _write(os.path.join(run_dir, "metrics-0.csv"), METRICS_HEADER +
           "train/loss,0.6931471805599453,0,1761000000100,0\n"
           "system/cpu.util_pct,37.5,0,1761000001000,0\n"
           "train/loss,0.5,1,1761000000200,0\n"
           "system/memory.used_mb,2048,0,1761000001000,0\n")
    _summary_json(run_dir, 0, [("BATCH", "CPU", 1, 0.008123456)])
    run = trainscope.read_run(run_dir)
    assert run.version == 1 and run.status == "FINISHED" and run.duration_s == 60.0
    assert run.hosts == ["node17"] and run.world_size == 1 and run.launchers.empty
    assert list(run.regions["key"]) == ["BATCH", 'data aug, "v2"']
    assert list(run.regions["device"]) == ["CPU", "GPU"]
    assert list(run.regions["duration_ns"]) == [8123456, 2041000]
    assert [(m.key, m.value, m.step) for m in run.metrics.itertuples()] == [
        ("train/loss", 0.6931471805599453, 0, ), ("train/loss", 0.5, 1)]
    hardware = run.hardware
    assert list(hardware.columns) == ["key", "value", "step", "timestamp_ms", "rank", "host"]
    assert list(hardware["key"]) == ["system/cpu.util_pct", "system/memory.used_mb"]
    assert list(run.metrics["key"].cat.categories) == ["train/loss"]
    assert list(hardware["value"]) == [37.5, 2048.0]
    assert list(hardware["host"]) == ["node17", "node17"]
    assert str(hardware["rank"].dtype) == "Int64" and list(hardware["rank"]) == [0, 0]
    assert run.summaries.loc[0, "median"] == 0.008123456


def test_a_run_in_progress_ignores_the_line_being_written(tmp_path):
    run_dir = str(tmp_path / "live")
    now = _now_ms()
    _run_json(run_dir, start_ms=now - 5000)
    _rank_json(run_dir, 0, status="RUNNING", host=HOST, pid=os.getpid(), start_ms=now - 5000,
               end_ms=0, heartbeat_ms=now - 1000)
    _write_json(os.path.join(run_dir, f"launcher-{HOST}-{os.getpid()}.json"), {
        "format": "trainscope.launcher", "version": 2, "host": HOST, "pid": os.getpid(),
        "command": ["python", "train.py"], "status": "RUNNING", "exit_code": -1,
        "term_signal": 0, "start_time_ms": now - 5000, "end_time_ms": 0,
        "heartbeat_ms": now - 500, "flush_interval_ms": 1000})
    _write(os.path.join(run_dir, "regions-0.csv"), REGIONS_HEADER +
           "BATCH,CPU,0,0,1761000000000000000,1000,0,0\n"
           "BATCH,CPU,0,0,1761000000000002000,2000,1,0\n"
           "BATCH,CPU,0,0,17610000")  # cut short
    _write(os.path.join(run_dir, "metrics-0.csv"),
           METRICS_HEADER + "loss,1.5,0,1761000000100,0\nlo")
    host_file = "host-" + re.sub(r"[^A-Za-z0-9._-]", "_", HOST) + ".csv"
    _write(os.path.join(run_dir, host_file), METRICS_HEADER +
           "system/cpu.util_pct,37.5,0,1761000001000,\n"
           "system/proc.rss_mb,2048,0,1761000001000,0\n"
           "system/cpu.util_pct,40")
    run = trainscope.read_run(run_dir)
    assert run.status == "RUNNING" and not run.crashed
    assert run.end_time_ms is None and run.end_time is pd.NaT
    assert run.duration_s == pytest.approx(4.5)  # to the latest heartbeat
    assert list(run.regions["duration_ns"]) == [1000, 2000]
    assert list(run.metrics["value"]) == [1.5]
    hardware = run.hardware
    assert list(hardware["value"]) == [37.5, 2048.0]
    assert hardware["rank"].isna().tolist() == [True, False] and hardware["rank"][1] == 0
    assert list(hardware["host"]) == [HOST, HOST]
    launcher = run.launchers.iloc[0]
    assert launcher["command"] == ["python", "train.py"] and launcher["exit_code"] == -1
    assert run.summaries.empty and list(run.summaries.columns[:3]) == ["rank", "key", "device"]


def test_a_line_cut_inside_a_quoted_key_with_a_line_break(tmp_path):
    run_dir = str(tmp_path / "live")
    _run_json(run_dir)
    _write(os.path.join(run_dir, "regions-0.csv"), REGIONS_HEADER +
           '"two\nlines",CPU,0,0,1,5,0,0\n'
           '"two\nli')
    assert list(trainscope.read_run(run_dir).regions["key"]) == ["two\nlines"]


def test_a_crashed_rank_fails_the_run(tmp_path):
    run_dir = str(tmp_path / "crashed")
    now = _now_ms()
    _run_json(run_dir, start_ms=now - 20_000)
    _rank_json(run_dir, 0, host=HOST, world_size=3, start_ms=now - 20_000, end_ms=now - 3000)
    # Killed with -9: RUNNING, its pid gone, its heartbeat still fresh.
    _rank_json(run_dir, 1, status="RUNNING", host=HOST, pid=_dead_pid(), world_size=3,
               start_ms=now - 20_000, end_ms=0, heartbeat_ms=now - 2000)
    _write(os.path.join(run_dir, "regions-1.csv"), REGIONS_HEADER + "BATCH,CPU,1,0,1,5,0,0\nBAT")
    run = trainscope.read_run(run_dir)
    assert run.status == "FAILED" and run.crashed
    assert list(run.ranks["crashed"]) == [False, True]
    assert list(run.ranks["status"]) == ["FINISHED", "RUNNING"]  # as the files say
    assert run.end_time_ms == now - 2000  # its last sign of life
    assert run.world_size == 3 and list(run.regions["rank"]) == [1]


@pytest.mark.parametrize("silence_ms, flush_ms, status", [
    (60_000, 1000, "FAILED"),   # silent for a minute on another host: crashed
    (5000, 1000, "RUNNING"),    # 5 s < 10 s minimum
    (25_000, 10_000, "RUNNING"),  # 25 s < 3 flush intervals
])
def test_a_silent_rank_on_another_host(tmp_path, silence_ms, flush_ms, status):
    run_dir = str(tmp_path / "run")
    now = _now_ms()
    _run_json(run_dir, start_ms=now - 100_000)
    _rank_json(run_dir, 0, status="RUNNING", host="elsewhere", pid=1, start_ms=now - 100_000,
               end_ms=0, heartbeat_ms=now - silence_ms, flush_interval_ms=flush_ms)
    run = trainscope.read_run(run_dir)
    assert run.status == status and run.crashed == (status == "FAILED")


@pytest.mark.parametrize("rank_statuses, launcher_status, status", [
    (["FINISHED", "KILLED"], None, "KILLED"),
    (["FAILED", "KILLED"], None, "FAILED"),
    (["FINISHED", "FINISHED"], "FAILED", "FAILED"),
    ([], "FAILED", "FAILED"),   # the command failed before any rank recorded
    ([], None, "RUNNING"),      # nothing started yet
])
def test_the_status_combines_ranks_and_launchers(tmp_path, rank_statuses, launcher_status,
                                                  status):
    run_dir = str(tmp_path / "run")
    _run_json(run_dir)
    for rank, rank_status in enumerate(rank_statuses):
        _rank_json(run_dir, rank, status=rank_status, world_size=len(rank_statuses))
    if launcher_status:
        _write_json(os.path.join(run_dir, "launcher-node17-4200.json"), {
            "format": "trainscope.launcher", "version": 2, "host": "node17", "pid": 4200,
            "command": ["python", "train.py"], "status": launcher_status, "exit_code": 1,
            "term_signal": 0, "start_time_ms": START_MS, "end_time_ms": START_MS + 1000,
            "heartbeat_ms": START_MS + 1000, "flush_interval_ms": 1000})
    run = trainscope.read_run(run_dir)
    assert run.status == status
    assert run.world_size == len(rank_statuses)
    if launcher_status:
        assert list(run.launchers["exit_code"]) == [1] and run.hosts == ["node17"]


# --- search_runs ------------------------------------------------------------------


@pytest.fixture
def runs_root(tmp_path):
    root = tmp_path / "runs"
    specs = [  # id, lr, status, start, BATCH medians per rank
        ("a" * 32, "0.1", "FINISHED", START_MS + 3000, [1.0, 3.0]),
        ("b" * 32, "0.2", "FAILED", START_MS + 2000, [5.0]),
        ("c" * 32, "0.1", "KILLED", START_MS + 1000, []),
    ]
    for run_id, lr, status, start_ms, medians in specs:
        run_dir = str(root / run_id)
        params = {"lr": lr, "batch size": "32"} if run_id[0] == "b" else {"lr": lr}
        _run_json(run_dir, run_id=run_id, name=f"run-{run_id[0]}", params=params,
                  tags={"team": "perf"} if run_id[0] == "a" else {}, start_ms=start_ms)
        for rank, median in enumerate(medians or [None]):
            _rank_json(run_dir, rank, status=status, world_size=max(1, len(medians)),
                       start_ms=start_ms, end_ms=start_ms + 10_000)
            if median is not None:
                _summary_json(run_dir, rank, [("BATCH", "CPU", 10, median),
                                              ("BATCH", "GPU", 10, 100.0)])
                # The rows the summary counts: a rank that lost them is a damaged run.
                _write(os.path.join(run_dir, f"regions-{rank}.csv"), REGIONS_HEADER + "".join(
                    f"BATCH,{device},{rank},0,{start_ms * 10**6 + step},{int(seconds * 1e9)},"
                    f"{step},0\n" for device, seconds in (("CPU", median), ("GPU", 100.0))
                    for step in range(10)))
    (root / "not-a-run").mkdir()
    (root / "notes.txt").write_text("not a run either")
    return root


def test_search_runs_gives_one_row_per_run_newest_first(runs_root):
    frame = trainscope.search_runs(runs_root)
    assert list(frame.columns) == [
        "run_id", "name", "experiment", "status", "start_time", "end_time", "duration_s",
        "world_size", "dir", "params.batch size", "params.lr", "tags.team", "regions.BATCH.median",
        "regions.EPOCH.median"]
    assert list(frame["run_id"]) == ["a" * 32, "b" * 32, "c" * 32]
    assert list(frame["status"]) == ["FINISHED", "FAILED", "KILLED"]
    assert list(frame["params.lr"]) == ["0.1", "0.2", "0.1"]
    assert frame["tags.team"].tolist()[0] == "perf" and frame["tags.team"].isna().tolist()[1:] == [
        True, True]
    assert list(frame["duration_s"]) == [10.0, 10.0, 10.0]
    assert list(frame["world_size"]) == [2, 1, 1]
    batch = frame["regions.BATCH.median"].tolist()
    assert batch[:2] == [2.0, 5.0] and pd.isna(batch[2])  # mean over ranks; none recorded
    assert frame["regions.EPOCH.median"].isna().all()
    assert frame["start_time"][0] == pd.Timestamp(START_MS + 3000, unit="ms", tz="UTC")
    gpu = trainscope.search_runs(runs_root, keys=["BATCH"], stat="p95", device="GPU")
    assert gpu["regions.BATCH.p95"].tolist()[:2] == [100.0, 100.0]


def test_search_runs_has_each_logged_metrics_last_value_and_reads_a_sweep(tmp_path):
    # Two runs in a sweep directory's runs/ (no sweep.json needed to find them): the
    # metrics they logged are columns of their own, the last value of each (each rank's
    # last, the mean over ranks), apart from the regions' statistics.
    sweep = tmp_path / "sweep"
    for lr, losses in (("0.1", [1.0, 0.5, 0.25]), ("0.2", [2.0, 0.75])):
        with trainscope.start_run(root=str(sweep / "runs"), params={"lr": lr}):
            tmr = trainscope.Timer()
            for step, loss in enumerate(losses):
                with tmr.scope(trainscope.TimeType.BATCH):
                    pass
                trainscope.log_metric("loss", loss, step=step)
            trainscope.log_metric("accuracy", 0.9)
    frame = trainscope.search_runs(sweep, keys=["BATCH"])
    assert sorted(frame["params.lr"]) == ["0.1", "0.2"]
    by_lr = frame.set_index("params.lr")
    assert by_lr.loc["0.1", "metrics.loss"] == 0.25 and by_lr.loc["0.2", "metrics.loss"] == 0.75
    assert (by_lr["metrics.accuracy"] == 0.9).all()
    assert (by_lr["regions.BATCH.median"] > 0).all()
    assert list(frame.columns)[-3:] == ["regions.BATCH.median", "metrics.accuracy", "metrics.loss"]
    assert len(trainscope.search_runs(sweep, filter="metrics.loss < 0.5")) == 1


def test_search_runs_of_a_directory_without_runs_says_why(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.warns(trainscope.TrainscopeWarning, match="neither .* nor .*runs has a run"):
        frame = trainscope.search_runs(tmp_path / "empty")
    assert len(frame) == 0


@pytest.mark.parametrize("filter_, ids", [
    ("params.lr = '0.1' and status = 'FINISHED'", "a"),
    ("params.lr = '0.1'", "ac"),
    ("params.lr != '0.1'", "b"),
    ("params.lr > 0.15", "b"),
    ("params.lr <= 0.1 AND attributes.status != 'KILLED'", "a"),
    ("regions.BATCH.median >= 2", "ab"),
    ("regions.BATCH.median < 3", "a"),
    ("tags.team = 'perf'", "a"),
    ("params.missing = 'x'", ""),
    ('name = "run-b"', "b"),
    ("world_size > 1", "a"),
    (f"start_time >= {START_MS + 2000}", "ab"),
    ("start_time < '2025-10-20T22:40:02Z'", "c"),
    ("params.`batch size` = '32'", "b"),
    ("params.`batch size` >= 32 and params.lr = '0.2'", "b"),
    ("  ", "abc"),
])
def test_search_runs_filters_as_mlflow(runs_root, filter_, ids):
    frame = trainscope.search_runs(runs_root, filter=filter_)
    assert [run_id[0] for run_id in frame["run_id"]] == list(ids)


def test_search_runs_takes_a_callable_filter(runs_root):
    seen = []

    def keep(row):
        seen.append(row)
        return row["status"] != "FAILED" and row.get("params.lr") == "0.1"

    frame = trainscope.search_runs(runs_root, filter=keep, keys=[trainscope.TimeType.BATCH])
    assert list(frame["name"]) == ["run-a", "run-c"]
    assert {row["run_id"][0] for row in seen} == {"a", "b", "c"}
    assert "tags.team" not in seen[0] or seen[0]["run_id"][0] == "a"
    assert seen[0]["regions.BATCH.median"] in (2.0, 5.0) or pd.isna(seen[0]["regions.BATCH.median"])


@pytest.mark.parametrize("filter_", [
    "params.lr ~ '0.1'",
    "params.lr = '0.1' or status = 'FAILED'",
    "params.lr = ",
    "params.lr = '0.1' and",
    "bogus = 1",
    "params.lr = '0.1 and status",
])
def test_a_bad_filter_is_a_value_error_naming_it(runs_root, filter_):
    with pytest.raises(ValueError, match="bad filter") as error:
        trainscope.search_runs(runs_root, filter=filter_)
    assert repr(filter_) in str(error.value)


def test_search_runs_skips_a_corrupt_run_with_a_warning(runs_root):
    bad = runs_root / ("d" * 32)
    bad.mkdir()
    (bad / "run.json").write_text("{not json")
    with pytest.warns(trainscope.TrainscopeWarning, match=r"d{32}: skipped: .*run.json"):
        frame = trainscope.search_runs(runs_root)
    assert len(frame) == 3
    with pytest.raises(ValueError, match="unknown statistic 'p42'"):
        trainscope.search_runs(runs_root, stat="p42")


def test_search_runs_of_an_empty_root_and_of_one_run(tmp_path, runs_root):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.warns(trainscope.TrainscopeWarning, match="not a run"):  # says why it is empty
        frame = trainscope.search_runs(empty)
    assert frame.empty and list(frame.columns)[:4] == ["run_id", "name", "experiment", "status"]
    one = trainscope.search_runs(runs_root / ("a" * 32))
    assert list(one["run_id"]) == ["a" * 32]
    with pytest.raises(FileNotFoundError, match="no such directory"):
        trainscope.search_runs(tmp_path / "missing")


# --- errors ---------------------------------------------------------------------------


def test_a_path_that_is_no_run(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'missing'}: no such run directory"):
        trainscope.read_run(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="is not a trainscope run: it has no run.json"):
        trainscope.read_run(tmp_path)


@pytest.mark.parametrize("file_name, content, message", [
    ("run.json", "{not json", r"run.json: not valid JSON"),
    ("run.json", json.dumps({"format": "trainscope.run", "version": 3, "id": "x",
                             "start_time_ms": 0}), r"run.json: .*version 3"),
    ("run.json", json.dumps({"format": "trainscope.run", "version": 2, "id": 7,
                             "start_time_ms": 0}), r'run.json: field "id" is 7, not a string'),
    ("rank-0.json", json.dumps({"format": "trainscope.rank", "version": 2, "rank": 0,
                                "host": "h", "pid": 1, "status": "DONE", "start_time_ms": 0,
                                "end_time_ms": 0, "heartbeat_ms": 0,
                                "flush_interval_ms": 1}), r'rank-0.json: field "status"'),
    ("rank-0.json", json.dumps({"format": "trainscope.rank", "version": 2, "rank": 0}),
     r'rank-0.json: field "host" is missing'),
])
def test_a_damaged_json_file_is_named(tmp_path, file_name, content, message):
    run_dir = str(tmp_path / "run")
    _run_json(run_dir)
    _write(os.path.join(run_dir, file_name), content)
    with pytest.raises(ValueError, match=message):
        trainscope.read_run(run_dir)


# The C++ RunReader's messages (the CLI's): file, line and field.
@pytest.mark.parametrize("file_name, content, message", [
    ("regions-0.csv", "key,device\nBATCH,CPU\n",
     r"regions-0.csv:1: 2 fields, expected 11 \(or 10 or 8, written before steps' waits and before device starts\)$"),
    ("regions-0.csv", REGIONS_HEADER.replace("step", "stop") + "BATCH,CPU,0,0,1,5,0,0\n",
     r'regions-0.csv:1: header "key,.*,stop,epoch", '
     r'expected "key,.*,step,epoch,gpu_start_ns,stream,cpu_wait_ns"$'),
    ("regions-0.csv", REGIONS_HEADER + "BATCH,CPU,0,0,1,5,0,0,9\n",
     r"regions-0.csv:2: 9 fields, expected 11 \(or 10 or 8, written before steps' waits and before device starts\)$"),
    ("regions-0.csv", REGIONS_HEADER + "BATCH,CPU,0,0,1,5,0,0\nBATCH,CPU,0,0,1,5,0,0,9\n",
     r"regions-0.csv:3: 9 fields, expected 11 \(or 10 or 8, written before steps' waits and before device starts\)$"),
    ("regions-0.csv", REGIONS_HEADER + "BATCH,CPU,0,0,1,5,0\n",
     r"regions-0.csv:2: 7 fields, expected 11 \(or 10 or 8, written before steps' waits and before device starts\)$"),
    ("regions-0.csv", REGIONS_HEADER + "BATCH,CPU,0,0,1,five,0,0\n",
     r'regions-0.csv:2: duration_ns is "five", not an integer in range$'),
    ("regions-0.csv", REGIONS_HEADER + "BATCH,TPU,0,0,1,5,0,0\n",
     r'regions-0.csv:2: device is "TPU", not CPU or GPU$'),
    ("metrics-0.csv", METRICS_HEADER + "loss,high,0,1,0\n",
     r'metrics-0.csv:2: value is "high", not a finite number$'),
    ("host-h.csv", METRICS_HEADER + "system/x,1,0,1,\nsystem/x,1,0,1,-1\n",
     r'host-h.csv:3: rank is "-1", not an integer in range$'),
])
def test_a_damaged_csv_or_summary_is_named(tmp_path, file_name, content, message):
    run_dir = str(tmp_path / "run")
    _run_json(run_dir)
    _write(os.path.join(run_dir, file_name), content)
    run = trainscope.read_run(run_dir)  # the frames are read on first use
    with pytest.raises(ValueError, match=message):
        _ = run.regions, run.metrics, run.hardware, run.summaries


def test_import_trainscope_does_not_import_pandas():
    code = ("import sys, trainscope; assert callable(trainscope.read_run); "
            "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_timestamps_come_back_in_milliseconds_too(two_rank_run):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = trainscope.read_run(two_rank_run)
    assert run.start_time.value // 1_000_000 == run.start_time_ms
    assert "FINISHED" in repr(run) and run.id in repr(run)
