"""The two readers of a run directory agree: trainscope.read_run (Python, pandas) and the C++
RunReader as the `trainscope report` CLI uses it. read_run takes the format, the status, the
crash rule, ranks, launchers and hosts from the C++ RunReader (trainscope._core._RunReader);
these tests read the same directories (damaged, crashed, live, old and new versions, several
ranks and hosts) three ways, read_run, _RunReader and the page `trainscope report` writes,
and check each against what the files were built to say."""

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

import trainscope
from trainscope import _core
from run_files import trainscope_cli

pd = pytest.importorskip("pandas")

START_MS = 1761000000000
HOST = socket.gethostname()
REGIONS_HEADER = "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n"
METRICS_HEADER = "key,value,step,timestamp_ms,rank\n"
LOG_TAIL_BYTES = 6000  # what the report page shows of each log


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def _now_ms():
    return time.time_ns() // 1_000_000


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _run_json(run_dir, version=2, start_ms=START_MS):
    os.makedirs(run_dir, exist_ok=True)
    _write(os.path.join(run_dir, "run.json"), json.dumps({
        "format": "trainscope.run", "version": version, "id": "f" * 32, "name": "parity",
        "experiment": "Default", "start_time_ms": start_ms, "params": {"lr": "0.1"},
        "tags": {"team": "perf"}}))


def _rank_json(run_dir, rank, status="FINISHED", host="node1", pid=4242, world_size=1,
               end_ms=START_MS + 60_000, heartbeat_ms=None, version=2, launcher=None):
    doc = {"format": "trainscope.rank", "version": version, "rank": rank, "local_rank": rank,
           "world_size": world_size, "host": host, "pid": pid, "status": status,
           "start_time_ms": START_MS, "end_time_ms": end_ms,
           "heartbeat_ms": end_ms if heartbeat_ms is None else heartbeat_ms,
           "flush_interval_ms": 1000}
    if launcher:
        doc["launcher"] = launcher
    _write(os.path.join(run_dir, f"rank-{rank}.json"), json.dumps(doc))


def _launcher_json(run_dir, host, pid, status="FINISHED", exit_code=0, end_ms=START_MS + 61_000):
    part = re.sub(r"[^A-Za-z0-9._-]", "_", host)  # as docs/run-format.md names the file
    _write(os.path.join(run_dir, f"launcher-{part}-{pid}.json"), json.dumps({
        "format": "trainscope.launcher", "version": 2, "host": host, "pid": pid,
        "command": ["python", "train.py", "--lr", "0.1"], "status": status,
        "exit_code": exit_code, "term_signal": 0, "start_time_ms": START_MS,
        "end_time_ms": end_ms, "heartbeat_ms": end_ms, "flush_interval_ms": 1000}))


def _regions(run_dir, rank, rows, cut=""):
    _write(os.path.join(run_dir, f"regions-{rank}.csv"), REGIONS_HEADER + "".join(
        f"BATCH,CPU,{rank},0,{START_MS * 1_000_000 + i * 1000},{1000 + i},{i},0\n"
        for i in range(rows)) + cut)


def _page(run_dir, tmp_path):
    """The run's metadata as the CLI's report page holds it (the C++ reader's view)."""
    out = tmp_path / (os.path.basename(run_dir) + ".html")
    done = subprocess.run([trainscope_cli(), "report", run_dir, "-o", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="trainscope-data">(.*?)</script>', text,
                  re.S)
    assert m, "no data block in the page"
    return json.loads(m.group(1))["run"]


def _cli_error(run_dir, tmp_path):
    done = subprocess.run([trainscope_cli(), "report", run_dir, "-o", str(tmp_path / "x.html"),
                           "--quiet"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    return done.stderr


def _check_parity(run_dir, tmp_path):
    """read_run, _RunReader and the CLI's page say the same of run_dir; returns read_run's Run."""
    run = trainscope.read_run(run_dir)
    reader = _core._RunReader.open(run_dir)
    page = _page(run_dir, tmp_path)

    # Python against the C++ reader's own fields: nothing added, nothing contradicted.
    assert (run.status, run.crashed, run.world_size, run.hosts, run.version) == (
        reader.status, reader.crashed, reader.world_size, reader.hosts, reader.version)
    assert (run.id, run.name, run.params, run.tags) == (
        reader.id, reader.name, reader.params, reader.tags)
    assert (run.end_time_ms is None) == reader.in_progress
    assert (run.end_time_ms or 0) == reader.end_time_ms
    assert run.ranks.to_dict("records") == [
        {c: r[c] for c in run.ranks.columns} for r in reader.ranks]
    assert run.launchers.to_dict("records") == [
        {c: r[c] for c in run.launchers.columns} for r in reader.launchers]

    # Python against the page `trainscope report` wrote.
    assert page["recorded_status"] == run.status and page["crashed"] == run.crashed
    assert page["status"] == ("CRASHED" if run.crashed else run.status)
    assert page["in_progress"] == (run.status == "RUNNING" and not run.crashed)
    assert page["hosts"] == run.hosts and page["world_size"] == run.world_size
    assert page["end_ms"] == (run.end_time_ms or 0)
    assert [(r["rank"], r["host"], r["pid"], r["status"], r["crashed"], r["heartbeat_ms"])
            for r in page["ranks"]] == list(run.ranks[
                ["rank", "host", "pid", "status", "crashed", "heartbeat_ms"]].itertuples(
                    index=False, name=None))
    assert [(l["host"], l["pid"], l["status"], l["crashed"], l["command"], l["exit_code"])
            for l in page["launchers"]] == [
                (l["host"], l["pid"], l["status"], l["crashed"], l["command"], l["exit_code"])
                for l in run.launchers.to_dict("records")]
    return run, page


# --- damaged, crashed and live directories -----------------------------------------------------


def test_a_last_line_cut_short_is_left_out_by_both(tmp_path):
    run_dir = str(tmp_path / "cut")
    _run_json(run_dir)
    _rank_json(run_dir, 0)
    _regions(run_dir, 0, 5, cut="BATCH,CPU,0,0,176100")
    run, page = _check_parity(run_dir, tmp_path)
    assert run.status == "FINISHED" and not run.crashed
    assert len(run.regions) == 5 and page["region_rows"] == 5


def test_a_missing_rank_file(tmp_path):
    # Rank 1 recorded regions but (yet) no rank file: not one of the run's ranks.
    run_dir = str(tmp_path / "missing")
    _run_json(run_dir)
    _rank_json(run_dir, 0, world_size=3)
    _rank_json(run_dir, 2, world_size=3)
    for rank in range(3):
        _regions(run_dir, rank, 2)
    run, page = _check_parity(run_dir, tmp_path)
    assert list(run.ranks["rank"]) == [0, 2] and run.world_size == 3
    assert run.status == "FINISHED"
    assert sorted(set(run.regions["rank"])) == [0, 1, 2]  # every file there, as documented
    assert page["region_rows"] == 4  # the page: the ranks' files


@pytest.mark.parametrize("content, message", [
    ("garbage{", r"rank-1\.json: not valid JSON"),
    (json.dumps({"format": "trainscope.rank", "version": 2, "rank": 1, "host": "h", "pid": 1,
                 "status": "DONE", "start_time_ms": 0, "end_time_ms": 0, "heartbeat_ms": 0,
                 "flush_interval_ms": 1}),
     r'rank-1\.json: field "status" is "DONE", not one of RUNNING'),
    (json.dumps({"format": "trainscope.rank", "version": 2, "rank": 7, "host": "h", "pid": 1,
                 "status": "FINISHED", "start_time_ms": 0, "end_time_ms": 0,
                 "heartbeat_ms": 0, "flush_interval_ms": 1}), r"rank-1\.json: records rank 7"),
])
def test_a_garbage_rank_file_is_the_same_error_in_both(tmp_path, content, message):
    run_dir = str(tmp_path / "garbage")
    _run_json(run_dir)
    _rank_json(run_dir, 0, world_size=2)
    _write(os.path.join(run_dir, "rank-1.json"), content)
    with pytest.raises(ValueError, match=message):
        trainscope.read_run(run_dir)
    assert re.search(message, _cli_error(run_dir, tmp_path))


def test_a_dead_rank_with_a_stale_heartbeat_is_crashed_a_live_one_not(tmp_path):
    now = _now_ms()
    run_dir = str(tmp_path / "dead")
    _run_json(run_dir, start_ms=now - 120_000)
    # This host: one rank's process is gone, the other's (this test's) lives.
    _rank_json(run_dir, 0, status="RUNNING", host=HOST, pid=os.getpid(), world_size=2, end_ms=0,
               heartbeat_ms=now - 500)
    _rank_json(run_dir, 1, status="RUNNING", host=HOST, pid=_dead_pid(), world_size=2, end_ms=0,
               heartbeat_ms=now - 90_000)
    run, page = _check_parity(run_dir, tmp_path)
    assert list(run.ranks["crashed"]) == [False, True]
    assert run.crashed and run.status == "FAILED" and page["status"] == "CRASHED"
    assert run.end_time_ms is None  # rank 0 still runs

    # Only the live one: running, nothing crashed.
    os.remove(os.path.join(run_dir, "rank-1.json"))
    _rank_json(run_dir, 0, status="RUNNING", host=HOST, pid=os.getpid(), world_size=1, end_ms=0,
               heartbeat_ms=_now_ms() - 500)
    run, page = _check_parity(run_dir, tmp_path)
    assert not run.crashed and run.status == "RUNNING" and page["in_progress"]


def test_a_silent_rank_on_another_host_is_crashed(tmp_path):
    now = _now_ms()
    run_dir = str(tmp_path / "silent")
    _run_json(run_dir, start_ms=now - 120_000)
    _rank_json(run_dir, 0, status="RUNNING", host="elsewhere", pid=1, end_ms=0,
               heartbeat_ms=now - 60_000)
    run, _ = _check_parity(run_dir, tmp_path)
    assert run.crashed and run.status == "FAILED"
    assert run.end_time_ms == now - 60_000  # its last sign of life


# --- versions ----------------------------------------------------------------------------------


def test_version_1_and_2_read_alike(tmp_path):
    for version in (1, 2):
        run_dir = str(tmp_path / f"v{version}")
        _run_json(run_dir, version=version)
        _rank_json(run_dir, 0, version=version)
        _regions(run_dir, 0, 3)
        run, page = _check_parity(run_dir, tmp_path)
        assert run.version == version and run.status == "FINISHED"
        assert page["region_rows"] == 3


@pytest.mark.parametrize("file_name", ["run.json", "rank-0.json"])
def test_a_future_version_is_refused_by_both(tmp_path, file_name):
    run_dir = str(tmp_path / "future")
    _run_json(run_dir, version=3 if file_name == "run.json" else 2)
    _rank_json(run_dir, 0, version=3 if file_name == "rank-0.json" else 2)
    message = re.escape(file_name) + r": format \"trainscope\.\w+\" version 3 .*versions 1 to 2"
    with pytest.raises(ValueError, match=message):
        trainscope.read_run(run_dir)
    assert re.search(message, _cli_error(run_dir, tmp_path))


# --- several ranks and hosts ---------------------------------------------------------------------


def test_ranks_and_launchers_on_several_hosts(tmp_path):
    run_dir = str(tmp_path / "multi")
    _run_json(run_dir)
    for rank in range(4):
        host = "node1" if rank < 2 else "node/2"  # sanitized in file names
        pid = 100 if rank < 2 else 200
        _rank_json(run_dir, rank, host=host, pid=1000 + rank, world_size=4,
                   launcher=f"{host}:{pid}")
        _regions(run_dir, rank, 2 + rank)
    _launcher_json(run_dir, "node1", 100)
    _launcher_json(run_dir, "node/2", 200, status="FAILED", exit_code=3)
    for host in ("node1", "node_2"):
        _write(os.path.join(run_dir, f"host-{host}.csv"),
               METRICS_HEADER + f"system/cpu.util_pct,50,0,{START_MS + 1000},\n")
    run, page = _check_parity(run_dir, tmp_path)
    assert run.hosts == ["node/2", "node1"] and run.world_size == 4
    assert run.status == "FAILED" and not run.crashed  # a launcher's command failed
    assert list(run.ranks["launcher"]) == ["node1:100", "node1:100", "node/2:200", "node/2:200"]
    assert list(run.launchers["exit_code"]) == [0, 3]
    assert len(run.regions) == 2 + 3 + 4 + 5 == page["region_rows"]
    # host-node_2.csv is node/2's in both.
    assert sorted(set(run.hardware["host"])) == ["node/2", "node1"]
    assert page["hardware_rows"] == 2


def test_ranks_written_by_the_cpp_writer(tmp_path):
    """Two ranks of one run, each a process that joins TRAINSCOPE_RUN_DIR (the C++ writer)."""
    run_dir = str(tmp_path / "job")
    script = ("import trainscope\n"
              "with trainscope.start_run(run_name='w', flush_interval=0.05):\n"
              "    trainscope.log_metric('loss', 1.0, step=0)\n")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    for rank in range(2):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, check=False,
                              env=dict(env, TRAINSCOPE_RUN_DIR=run_dir, RANK=str(rank),
                                       LOCAL_RANK=str(rank), WORLD_SIZE="2"))
        assert done.returncode == 0, done.stderr
    run, _ = _check_parity(run_dir, tmp_path)
    assert run.status == "FINISHED" and list(run.ranks["rank"]) == [0, 1]
    assert run.hosts == [HOST] and run.world_size == 2 and run.version == 2
    assert (run.ranks["flush_interval_ms"] == 50).all()


# --- what `trainscope run` adds: environment and logs ------------------------------------------


def test_environment_and_log_tails(tmp_path):
    run_dir = str(tmp_path / "launched")
    _run_json(run_dir)
    _rank_json(run_dir, 0)
    lines = "".join(f"line {i:05d} of the training's output\n" for i in range(400))
    _write(os.path.join(run_dir, "stdout.log"), lines)
    _write(os.path.join(run_dir, "stderr.log"), "one warning\n")
    _write(os.path.join(run_dir, "environment.json"), json.dumps({"hostname": "node1"}))
    reader = _core._RunReader.open(run_dir)
    tail = lines.encode()[-LOG_TAIL_BYTES:]
    tail = tail[tail.index(b"\n") + 1:]  # from the first whole line
    assert reader.log_tail("stdout", LOG_TAIL_BYTES) == tail
    assert reader.log_tail("stderr", LOG_TAIL_BYTES) == b"one warning\n"
    assert json.loads(reader.environment()) == {"hostname": "node1"}
    page = _page(run_dir, tmp_path)
    assert page["stdout_tail"].encode() == tail and page["stderr_tail"] == "one warning\n"
    assert page["environment"] == {"hostname": "node1"}

    # None recorded: nothing to show; a damaged one: an error naming it, a note on the page.
    for name in ("stdout.log", "stderr.log", "environment.json"):
        os.remove(os.path.join(run_dir, name))
    assert reader.log_tail("stdout", 100) is None and reader.environment() is None
    _write(os.path.join(run_dir, "environment.json"), '{"hostname": ')
    with pytest.raises(ValueError, match=r"environment\.json: not valid JSON"):
        reader.environment()
    page = _page(run_dir, tmp_path)
    assert "environment" not in page and page["stdout_tail"] == ""
    assert any("environment.json" in note for note in page["notes"])
