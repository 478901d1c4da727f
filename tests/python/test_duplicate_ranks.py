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
    # One process's rows, as its summary counts them (not 4 x REGIONS).
    assert len(_rows(run_dir / "regions-0.csv")) == REGIONS
    assert len(_rows(run_dir / "metrics-0.csv")) == REGIONS
    (entry,) = _json(run_dir / "summary-0.json")["entries"]
    assert entry["count"] == REGIONS
    assert sorted(os.listdir(run_dir)) == sorted(
        [".lock", "artifacts", "metrics-0.csv", "rank-0.json", "rank-0.lock", "regions-0.csv",
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
