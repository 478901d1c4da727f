"""Processes started with the same RANK: one records the rank, the others say so by name
and record nothing (docs/run-format.md, "Ownership"); a rank killed with kill -9 is
claimed again by its restart."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from run_files import rows as _rows

pytestmark = pytest.mark.usefixtures("no_inherited_run")

REGIONS = 5000

# Times REGIONS regions once all `n` processes of the test have built their timer
# (so all of them live at once), as a training with a wrong RANK would.
RANK_ZERO = """
    import os, sys, time
    import trainscope
    tmr = trainscope.Timer()  # joins TRAINSCOPE_RUN_DIR as rank 0
    trainscope.log_param("pid", os.getpid())  # write-once: a second claimant's would conflict
    barrier, n = sys.argv[1], int(sys.argv[2])
    open(os.path.join(barrier, str(os.getpid())), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(barrier)) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range({regions}):
        tmr.start(trainscope.TimeType.BATCH)
        tmr.end(trainscope.TimeType.BATCH)
        trainscope.log_metric("loss", 1.0 / (i + 1), step=i)
"""


def _env(run_dir):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(TRAINSCOPE_RUN_DIR=str(run_dir), RANK="0", PYTHONWARNINGS="default")
    return env


def _json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_four_processes_with_rank_0_record_one_rank_and_the_others_name_it(tmp_path):
    run_dir, barrier = tmp_path / "job", tmp_path / "barrier"
    barrier.mkdir()
    script = textwrap.dedent(RANK_ZERO.format(regions=REGIONS))
    children = [subprocess.Popen([sys.executable, "-c", script, str(barrier), "4"],
                                 env=_env(run_dir), stderr=subprocess.PIPE, text=True)
                for _ in range(4)]
    errors = {}
    for child in children:
        _, errors[child.pid] = child.communicate(timeout=300)
        assert child.returncode == 0, errors[child.pid]  # the training never fails

    rank = _json(run_dir / "rank-0.json")
    owner = rank["pid"]
    assert owner in errors and rank["status"] == "FINISHED"
    assert "records nothing" not in errors[owner], errors[owner]
    for pid, err in errors.items():
        if pid == owner:
            continue
        assert (f"rank 0 of run {run_dir} is already recorded by pid {owner} on host "
                f"{rank['host']}: this process (pid {pid} on host") in err, err
        assert err.count("records nothing") == 1, err  # warned once
    assert _json(run_dir / "run.json")["params"] == {"pid": str(owner)}
    # One process's rows, as its summary counts them (not 4 x REGIONS).
    assert len(_rows(run_dir / "regions-0.csv")) == REGIONS
    assert len(_rows(run_dir / "metrics-0.csv")) == REGIONS
    (entry,) = _json(run_dir / "summary-0.json")["entries"]
    assert entry["count"] == REGIONS
    assert sorted(os.listdir(run_dir)) == sorted(
        [".lock", "artifacts", "dump-0.txt", "metrics-0.csv", "rank-0.json", "rank-0.lock", "regions-0.csv",
         "run.json", "summary-0.json"])


def test_a_rank_restarted_after_kill_9_claims_it_again(tmp_path):
    run_dir = tmp_path / "job"
    first = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        import trainscope
        trainscope.start_run()
        print("started", flush=True)
        time.sleep(600)
    """)], env=_env(run_dir), stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline() == "started\n"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
        first.stdout.close()
    assert _json(run_dir / "rank-0.json")["pid"] == first.pid  # left RUNNING

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    restart = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RANK_ZERO.format(regions=10)), str(barrier), "1"],
        env=_env(run_dir), stderr=subprocess.PIPE, text=True)
    _, err = restart.communicate(timeout=120)
    assert restart.returncode == 0, err
    assert "records nothing" not in err, err
    rank = _json(run_dir / "rank-0.json")
    assert (rank["pid"], rank["status"]) == (restart.pid, "FINISHED")
    assert len(_rows(run_dir / "regions-0.csv")) == 10


def test_read_run_names_a_regions_file_two_processes_wrote_at_once(tmp_path):
    """A child process that times BATCH shares its parent's rank (it is a descendant), so both
    count steps from 0 in one file, as processes started with the same RANK did before ranks were
    claimed: read_run warns, naming the first line where the two series mix."""
    import trainscope

    run_dir = tmp_path / "job"
    parent = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, subprocess, sys, time
        import trainscope
        with trainscope.start_run(flush_interval=0.05) as run:
            tmr = trainscope.Timer()
            def batches(n):
                for _ in range(n):
                    tmr.start(trainscope.TimeType.BATCH)
                    tmr.end(trainscope.TimeType.BATCH)
            batches(20)
            path = os.path.join(run.dir, "regions-0.csv")
            deadline = time.monotonic() + 120
            while sum(1 for _ in open(path)) < 21 and time.monotonic() < deadline:
                time.sleep(0.01)  # the parent's rows are on disk before the child's
            subprocess.run([sys.executable, "-c", sys.argv[1]], check=True)
            batches(20)
    """), textwrap.dedent("""
        import trainscope
        tmr = trainscope.Timer()
        for _ in range(10):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
    """)], env=_env(run_dir), capture_output=True, text=True, timeout=300)
    assert parent.returncode == 0, parent.stderr
    assert "records nothing" not in parent.stderr  # the child is no second claimant
    assert len(_rows(run_dir / "regions-0.csv")) == 50
    with pytest.warns(trainscope.TrainscopeWarning, match="rows of more than one process"):
        run = trainscope.read_run(run_dir)
    (warning,) = run.warnings
    # Lines 2-21 the parent's steps 0-19, 22-31 the child's 0-9, 32 the parent's step 20.
    # (A child's series as long as the parent's so far would read as a restart: 10, not 20.)
    assert warning.startswith(f"{run_dir}/regions-0.csv:32: rows of more than one process: "
                              "thread 0's BATCH rows on CPU go on at step 20"), warning
    assert len(run.regions) == 50 and run.status == "FINISHED"
