"""`trainscope sweep` from the command line: a grid on CPU slots, resume (also from the stored
plan alone), radT's CSV (its README example on stand-in CPU slots), slot discovery, bad input,
live update."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from run_files import rows, trainscope_cli

TRAIN = textwrap.dedent("""
    import sys, time, trainscope
    tmr = trainscope.Timer()
    for _ in range(3):
        with tmr.scope(trainscope.TimeType.BATCH):
            time.sleep(0.01)
""")


def _env():
    return {k: v for k, v in os.environ.items()
            if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "SLURM_JOB_ID")}


def _sweep(*args, cwd):
    return subprocess.run([trainscope_cli(), "sweep", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_grid_runs_every_config_once_and_resumes_without_rerunning(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    grid = ["--grid", "batch_size=32,64,128", "--grid", "lr=0.1,0.01", "--slots", "2",
            "--no-sample", "--dir", "sw", "--", sys.executable, "train.py"]
    done = _sweep(*grid, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = rows(tmp_path / "sw" / "results.csv")
    assert sorted((r["batch_size"], r["lr"]) for r in results) == sorted(
        (b, lr) for b in ("32", "64", "128") for lr in ("0.1", "0.01"))
    assert all(r["status"] == "FINISHED" and float(r["batch_mean_s"]) > 0.005 for r in results)
    runs = os.listdir(tmp_path / "sw" / "runs")
    assert len(runs) == 6
    again = _sweep(*grid, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(os.listdir(tmp_path / "sw" / "runs")) == sorted(runs)  # nothing ran again


def test_dry_run_prints_the_plan(tmp_path):
    done = _sweep("--grid", "a=1,2", "--repeat", "2", "--dry-run", "--", "prog", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 job(s)" in done.stdout and "--a 2" in done.stdout


def test_radt_csv_runs_in_workload_order_and_writes_status_back(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    csv_path = tmp_path / "exp.csv"
    csv_path.write_text(
        "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
        "1,1,,,0,-,train.py,top,--batch-size=8\n"
        "1,1,,,1,-,train.py,top,--batch-size=16\n"
        "1,2,,,0,-,train.py,top,--batch-size=32\n")
    done = subprocess.run([trainscope_cli(), "sweep", str(csv_path), "--slots", "2", "--no-sample",
                           "--dir", "sw"], cwd=tmp_path,
                          env={**_env(), "PATH": os.path.dirname(sys.executable) + ":"
                               + os.environ.get("PATH", "")},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    written = rows(csv_path)
    assert [r["Status"] for r in written] == ["FINISHED"] * 3
    assert all(len(r["Run"]) == 32 for r in written)


def test_bad_input_is_a_clear_usage_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"
                   "1,1,,,0,-\n")
    done = _sweep(str(bad), cwd=tmp_path)
    assert done.returncode == 2
    assert "bad.csv:2" in done.stderr


def _trainscope_path_env():
    """The environment with this interpreter's directory first on PATH (radT's File runs
    under `python`)."""
    return {**_env(), "PATH": os.path.dirname(sys.executable) + ":" + os.environ.get("PATH", "")}


def test_resume_without_the_input_runs_the_stored_queued_jobs(tmp_path):
    """`--resume DIR` alone rebuilds the plan from DIR/sweep.json: the jobs left queued run,
    the finished one does not run again."""
    (tmp_path / "train.py").write_text(TRAIN + "\nif '--a' in sys.argv and sys.argv[-1] == '1':"
                                               "\n    sys.exit(1)\n")
    first = _sweep("--grid", "a=1,2,3", "--slots", "1", "--max-failures", "1", "--no-sample",
                   "--dir", "sw", "--", sys.executable, "train.py", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    state = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [j["status"] for j in state["jobs"]] == ["FAILED", "QUEUED", "QUEUED"]
    runs_before = set(os.listdir(tmp_path / "sw" / "runs"))
    resumed = _sweep("--resume", "sw", "--slots", "1", "--no-sample", cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stderr  # a=1 stays FAILED (no --retry-failed)
    results = {r["a"]: r["status"] for r in rows(tmp_path / "sw" / "results.csv")}
    assert results == {"1": "FAILED", "2": "FINISHED", "3": "FINISHED"}
    assert len(set(os.listdir(tmp_path / "sw" / "runs")) - runs_before) == 2
    missing = _sweep("--resume", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "holds no sweep" in missing.stderr


def test_without_devices_or_slots_the_gpus_are_found_or_one_cpu_slot_says_why(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: the slots are its GPUs (tests/sweep/slots_test covers them)")
    (tmp_path / "train.py").write_text(TRAIN)
    done = _sweep("--grid", "a=1,2", "--no-sample", "--dir", "sw", "--", sys.executable,
                  "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no GPU (" in done.stderr and "one CPU slot" in done.stderr, done.stderr


def test_a_device_that_does_not_exist_is_a_usage_error(tmp_path):
    done = _sweep("--grid", "a=1", "--devices", "63", "--", "true", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--devices" in done.stderr and "63" in done.stderr, done.stderr
    assert "does not exist" in done.stderr or "has no GPU" in done.stderr, done.stderr
    assert not (tmp_path / "trainscope-sweeps").exists()


RADT_HEADER = "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n"


def test_bad_input_names_file_and_line_and_loses_nothing_recorded(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    env = _trainscope_path_env()
    csv_path = tmp_path / "exp.csv"
    csv_path.write_text(RADT_HEADER + "1,1,,,0,-,train.py,top,--batch-size=8\n")

    def sweep(*args):
        return subprocess.run([trainscope_cli(), "sweep", str(csv_path), "--slots", "2",
                               "--no-sample", "--dir", "sw", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    done = sweep()
    assert done.returncode == 0, done.stderr
    recorded = csv_path.read_text()
    state = (tmp_path / "sw" / "sweep.json").read_text()
    results = (tmp_path / "sw" / "results.csv").read_text()
    runs = sorted(os.listdir(tmp_path / "sw" / "runs"))

    cases = [
        ("1,1,,,0,-,train.py,top\n", "exp.csv:3", 2),                 # wrong number of fields
        ("1,2,,,5,-,train.py,top,--batch-size=8\n", "exp.csv:3", 1),  # device 5 of --slots 2
        ("1,2,,,0,-,missing.py,top,--batch-size=8\n", "exp.csv:3", 1),  # script not there
        ("1,2,,,0,-,train.py,gpustat,--batch-size=8\n", "exp.csv:3", 2),  # unknown listener
    ]
    for row, where, code in cases:
        csv_path.write_text(recorded + row)
        bad = sweep()
        assert bad.returncode == code, (row, bad.stderr)
        assert where in bad.stderr, (row, bad.stderr)
        # Nothing recorded is lost: the rows written back, the sweep's state and runs.
        assert csv_path.read_text().startswith(recorded)
        assert (tmp_path / "sw" / "sweep.json").read_text() == state
        assert (tmp_path / "sw" / "results.csv").read_text() == results
        assert sorted(os.listdir(tmp_path / "sw" / "runs")) == runs

    unknown = tmp_path / "cols.csv"
    unknown.write_text("Experiment,Workload,Colour\n1,1,red\n")
    done = _sweep(str(unknown), cwd=tmp_path)
    assert done.returncode == 2 and "cols.csv:1: unknown column 'Colour'" in done.stderr

    config = tmp_path / "config.json"
    config.write_text('{"lr": [0.1, 0.2], "data": null}')
    done = _sweep(str(config), "--", sys.executable, "train.py", cwd=tmp_path)
    assert done.returncode == 2 and "config.json" in done.stderr and "'data'" in done.stderr

    nothing = _sweep("--grid", "a=1", "--slots", "1", "--", "no-such-program-trainscope",
                     cwd=tmp_path)
    assert nothing.returncode == 1
    assert "command 'no-such-program-trainscope' not found on PATH" in nothing.stderr


WAIT_FOR_GO = textwrap.dedent("""
    import os, sys, time
    for _ in range(6000):
        if os.path.exists("go"):
            break
        time.sleep(0.01)
    else:
        sys.exit(1)
""")


def test_a_live_update_adds_two_configs_and_drops_a_queued_one(tmp_path):
    (tmp_path / "wait.py").write_text(WAIT_FOR_GO)
    # A W&B-style YAML sweep: its job ids come from the params, so they stay the same when
    # the file changes. (Furcate's folder names hold the config's position: see the notes.)
    config = tmp_path / "sweep.yaml"
    config.write_text("method: grid\nparameters:\n  lr:\n    values: [1, 2, 3]\n")
    sweep = subprocess.Popen([trainscope_cli(), "sweep", str(config), "--slots", "1",
                              "--no-sample", "--dir", "sw", "--", sys.executable, "wait.py"],
                             cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    state_path = tmp_path / "sw" / "sweep.json"

    def state():
        try:
            return json.loads(state_path.read_text())["jobs"]
        except (OSError, ValueError, KeyError):
            return []

    def jobs():
        return {j["job"]["id"]: j["status"] for j in state()}

    def wait_until(condition, what):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if condition():
                return
            assert sweep.poll() is None, sweep.communicate()
            time.sleep(0.05)
        raise AssertionError(f"not within 120 s: {what}: {jobs()}")

    try:
        wait_until(lambda: "RUNNING" in jobs().values(), "a job running")
        running = [j for j in state() if j["status"] == "RUNNING"]
        assert len(running) == 1
        ran = int(float(dict(running[0]["job"]["params"])["lr"]))
        # Drop one queued config, add two.
        dropped = next(v for v in (1, 2, 3) if v != ran)
        kept = [v for v in (1, 2, 3) if v != dropped]
        config.write_text("method: grid\nparameters:\n  lr:\n    values: "
                          + json.dumps(kept + [4, 5]) + "\n")
        wait_until(lambda: len(jobs()) == 4, "the new plan")
        (tmp_path / "go").write_text("")
        _, stderr = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, stderr
    assert "plan: 2 new, 1 dropped" in stderr, stderr
    finished = sorted(int(float(r["lr"])) for r in rows(tmp_path / "sw" / "results.csv")
                      if r["status"] == "FINISHED")
    assert finished == sorted(kept + [4, 5])
    assert len(os.listdir(tmp_path / "sw" / "runs")) == 4  # the dropped one never ran


SEED_CSV = """\
Experiment,Workload,Status,Run,Devices,Collocation,    File,    Listeners,Params
         1,       1,      ,   ,      0,          -,train.py,smi+top+dcgmi,batch-size=128
         1,       1,      ,   ,      1,          -,train.py,smi+top+dcgmi,batch-size=128
         1,       2,      ,   ,      2,    3g.20gb,train.py,smi+top+dcgmi,batch-size=128
         1,       2,      ,   ,      2,    3g.20gb,train.py,smi+top+dcgmi,batch-size=128
         1,       3,      ,   ,      1,          -,train.py,smi+top+dcgmi,batch-size=256
"""

# Each job finds its workload from its run's name (e<E>-w<W>-...), marks that it started,
# waits for the other rows of its workload to start (collocated: they run together) and
# fails if an earlier workload has a row that has not ended.
SEED_TRAIN = textwrap.dedent("""
    import json, os, sys, time
    name = json.load(open(os.path.join(os.environ["TRAINSCOPE_RUN_DIR"], "run.json")))["name"]
    workload = int(name.split("-")[1][1:])
    rows = {1: 2, 2: 2, 3: 1}
    os.makedirs("marks", exist_ok=True)
    open(f"marks/{workload}-{name}.started", "w").close()
    for _ in range(6000):
        if len([f for f in os.listdir("marks") if f.startswith(f"{workload}-")
                and f.endswith(".started")]) == rows[workload]:
            break
        time.sleep(0.01)
    else:
        sys.exit(10)
    ended = [f for f in os.listdir("marks") if f.endswith(".ended")]
    if len(ended) != sum(n for w, n in rows.items() if w < workload):
        sys.exit(11)
    with open(f"marks/{workload}-{name}.devices", "w") as out:
        out.write(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    time.sleep(0.1)
    open(f"marks/{workload}-{name}.ended", "w").close()
""")


def test_radt_seed_example_on_cpu_slots_standing_in_for_gpus(tmp_path):
    """The documented --slots test mode: radT's README example, its Devices mapped to CPU
    slots 0-2 (two jobs each, as the MIG rows share device 2), collocated rows starting
    together, workloads in order, Status and Run written back."""
    (tmp_path / "train.py").write_text(SEED_TRAIN)
    csv_path = tmp_path / "exp.csv"
    csv_path.write_text(SEED_CSV)
    done = subprocess.run([trainscope_cli(), "sweep", str(csv_path), "--slots", "3",
                           "--per-gpu", "2", "--no-sample", "--dir", "sw"], cwd=tmp_path,
                          env=_trainscope_path_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Collocation '3g.20gb' is not set up on CPU slots" in done.stderr, done.stderr
    written = rows(csv_path)
    assert [r["Status"].strip() for r in written] == ["FINISHED"] * 5
    assert all(len(r["Run"].strip()) == 32 for r in written)
    assert len({r["Run"] for r in written}) == 5
    state = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [j["devices"] for j in state["jobs"]] == [[0], [1], [2], [2], [1]]
    marks = os.listdir(tmp_path / "marks")
    assert len([m for m in marks if m.endswith(".ended")]) == 5
    assert all((tmp_path / "marks" / m).read_text() == "unset"
               for m in marks if m.endswith(".devices"))
