"""`trainscope sweep` from the command line: a grid on CPU slots, resume, radT's CSV."""

import os
import subprocess
import sys
import textwrap

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
