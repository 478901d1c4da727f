"""`trainscope sweep --slurm` on a real (local, one-node) Slurm: the plan as one job array,
followed to the end; Ctrl-C scancels it and a resume submits only what did not finish.
Skipped, with the reason, without a cluster (slurm_support.py)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import trainscope
from run_files import read_json, rows, trainscope_cli

TRAIN = textwrap.dedent("""
    import sys, time, trainscope
    seconds = float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 0
    tmr = trainscope.Timer()
    for _ in range(3):
        with tmr.scope(trainscope.TimeType.BATCH):
            time.sleep(0.01 + seconds / 3)
""")


def _env():
    # The sweep submits from outside any job, as a user's shell would.
    return {k: v for k, v in os.environ.items()
            if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI")
            and not k.startswith("SLURM_") or k == "SLURM_CONF"}


def _runs(sweep_dir):
    """run.json of every run under the sweep, by run id, with the run's status as the run
    store derives it (trainscope.read_run)."""
    root = sweep_dir / "runs"
    if not root.is_dir():
        return {}
    out = {}
    for name in os.listdir(root):
        path = root / name / "run.json"
        if path.is_file():
            out[name] = {**read_json(path), "status": trainscope.read_run(root / name).status}
    return out


def _squeue_ids(slurm, name):
    listed = slurm.command("squeue", "--noheader", "--array", "--states=all",
                           f"--name={name}", "--format=%F|%K|%T")
    return [line.split("|") for line in listed.stdout.split()]


def test_a_grid_of_six_jobs_runs_as_one_array_and_every_run_finishes(slurm, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    started = time.monotonic()
    done = subprocess.run(
        [trainscope_cli(), "sweep", "--grid", "batch_size=32,64,128", "--grid", "lr=0.1,0.01",
         "--slurm", "--cpus-per-job", "1", "--array-parallel", "2", "--no-sample",
         "--dir", "sw", "--", sys.executable, "train.py"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "submitted 6 job(s) as Slurm job" in done.stderr, done.stderr
    runs = _runs(tmp_path / "sw")
    assert len(runs) == 6, runs.keys()
    assert all(r["status"] == "FINISHED" for r in runs.values()), runs
    assert sorted((r["params"]["batch_size"], r["params"]["lr"]) for r in runs.values()) == sorted(
        (b, lr) for b in ("32", "64", "128") for lr in ("0.1", "0.01"))
    job_ids = {r["tags"]["slurm.job_id"] for r in runs.values()}
    assert len(job_ids) == 1, job_ids  # one array
    assert sorted(int(r["tags"]["slurm.array_index"]) for r in runs.values()) == list(range(6))
    results = rows(tmp_path / "sw" / "results.csv")
    assert [r["status"] for r in results] == ["FINISHED"] * 6
    assert all(float(r["batch_mean_s"]) > 0.005 for r in results)
    state = read_json(tmp_path / "sw" / "sweep.json")
    assert all(j["slurm_job_id"] in job_ids for j in state["jobs"])
    print(f"6-job Slurm sweep: {elapsed:.1f} s")


def test_a_cancelled_sweep_resumes_without_rerunning_finished_jobs(slurm, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    command = [trainscope_cli(), "sweep", "--grid", "job=1,2,3,4,5,6", "--grid", "sleep=3",
               "--slurm", "--array-parallel", "2", "--no-sample", "--dir", "sw", "--",
               sys.executable, "train.py"]
    sweep = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            finished = [r for r in _runs(tmp_path / "sw").values() if r["status"] == "FINISHED"]
            if len(finished) >= 2:
                break
            assert sweep.poll() is None, sweep.communicate()
            time.sleep(0.2)
        else:
            raise AssertionError("no two jobs finished within 300 s")
        sweep.send_signal(signal.SIGINT)  # Ctrl-C: scancel, runs end KILLED
        _, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 1, stderr
    assert "stopping: scancel" in stderr, stderr
    before = _runs(tmp_path / "sw")
    finished_before = {k for k, r in before.items() if r["status"] == "FINISHED"}
    assert 2 <= len(finished_before) < 6, before
    job_id = next(iter(before.values()))["tags"]["slurm.job_id"]
    left = slurm.command("squeue", "--noheader", "--array", f"--jobs={job_id}",
                         "--format=%K|%T").stdout.split()
    assert not [t for t in left if t.split("|")[1] in ("PENDING", "RUNNING")], left

    again = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                           timeout=600, check=False)
    assert again.returncode == 0, again.stderr
    after = _runs(tmp_path / "sw")
    for run_id in finished_before:  # finished runs stay as they were
        assert after[run_id] == before[run_id]
    finished = [r for r in after.values() if r["status"] == "FINISHED"]
    assert sorted(r["params"]["job"] for r in finished) == ["1", "2", "3", "4", "5", "6"]
    assert len({r["tags"]["slurm.job_id"] for r in finished}) == 2  # one array each time
    state = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [j["status"] for j in state["jobs"]] == ["FINISHED"] * 6
