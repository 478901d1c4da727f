"""`trainscope sweep` as a new user meets it (issue 26): each grid and command in its own
directory and a different sweep in an existing one refused, results.csv's measured step rate
and last metric values, and radT's collocation example on CPU slots with its rows written
back as the jobs end. Through the real CLI, with small jobs."""

import json
import math
import os
import subprocess
import sys
import textwrap

from run_files import rows, trainscope_cli


def _env():
    return {k: v for k, v in os.environ.items()
            if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "SLURM_JOB_ID")}


def _path_env():
    """radT's File runs under `python`: this interpreter's directory first on PATH."""
    return {**_env(), "PATH": os.path.dirname(sys.executable) + ":" + os.environ.get("PATH", "")}


def _sweep(*args, cwd):
    return subprocess.run([trainscope_cli(), "sweep", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)


def _sweep_dirs(root):
    return sorted(os.listdir(root / "trainscope-sweeps"))


def _runs(sweep_dir):
    return sorted(os.listdir(sweep_dir / "runs"))


def test_each_grid_and_command_gets_its_own_directory_and_another_sweep_is_refused(tmp_path):
    program = ["--", sys.executable, "-c", "pass"]
    first = _sweep("--grid", "a=1,2", "--slots", "2", "--no-sample", *program, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    [first_dir] = _sweep_dirs(tmp_path)
    assert first_dir.startswith("grid-a-"), first_dir
    assert f"trainscope-sweeps/{first_dir}" in first.stderr
    first_path = tmp_path / "trainscope-sweeps" / first_dir
    first_runs = _runs(first_path)
    assert len(first_runs) == 2

    # Another grid goes to another directory: every job of it runs, none merges into the first.
    second = _sweep("--grid", "a=1,2,3", "--slots", "2", "--no-sample", *program, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert len(_sweep_dirs(tmp_path)) == 2
    [second_dir] = set(_sweep_dirs(tmp_path)) - {first_dir}
    assert len(_runs(tmp_path / "trainscope-sweeps" / second_dir)) == 3
    assert _runs(first_path) == first_runs

    # Another command is another sweep too.
    other = _sweep("--grid", "a=1,2", "--slots", "2", "--no-sample", "--", sys.executable, "-c",
                   "pass  # v2", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert len(_sweep_dirs(tmp_path)) == 3
    assert _runs(first_path) == first_runs

    # The same grid and command again continue the first: nothing runs again.
    again = _sweep("--grid", "a=1,2", "--slots", "2", "--no-sample", *program, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(_sweep_dirs(tmp_path)) == 3 and _runs(first_path) == first_runs

    # Asked into the first's directory, another command is refused before anything runs, naming
    # both commands and the ways out.
    state = (first_path / "sweep.json").read_text()
    refused = _sweep("--grid", "a=1,2", "--slots", "2", "--no-sample", "--dir", str(first_path),
                     "--", sys.executable, "-c", "pass  # v2", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert f"{sys.executable} -c pass`" in refused.stderr, refused.stderr
    assert f"{sys.executable} -c 'pass  # v2'`" in refused.stderr, refused.stderr
    assert "another --dir" in refused.stderr and f"--resume {first_path}" in refused.stderr
    assert _runs(first_path) == first_runs
    assert (first_path / "sweep.json").read_text() == state

    # --resume DIR alone continues the recorded sweep, as before.
    resumed = _sweep("--resume", str(first_path), "--slots", "1", "--no-sample", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _runs(first_path) == first_runs


def test_a_config_file_whose_program_changed_is_refused_in_its_directory(tmp_path):
    """A JSON config's jobs are named by their params alone: with another program they would be
    found done. The directory is the file's name; the stored jobs' command decides."""
    (tmp_path / "config.json").write_text('{"lr": [1, 2]}')
    first = _sweep("config.json", "--slots", "2", "--no-sample", "--", sys.executable, "-c",
                   "pass", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert _sweep_dirs(tmp_path) == ["config"]
    runs = _runs(tmp_path / "trainscope-sweeps" / "config")
    changed = _sweep("config.json", "--slots", "2", "--no-sample", "--", sys.executable, "-c",
                     "print(1)", cwd=tmp_path)
    assert changed.returncode == 1, changed.stderr
    assert "-c pass`" in changed.stderr and "-c 'print(1)'`" in changed.stderr, changed.stderr
    assert _runs(tmp_path / "trainscope-sweeps" / "config") == runs


STEPS = textwrap.dedent("""
    import time, trainscope
    tmr = trainscope.Timer()
    for i in range(5):
        with tmr.scope(trainscope.TimeType.BATCH):
            time.sleep(0.005)
        time.sleep(0.02)  # between steps: part of the measured rate
        trainscope.log_metric("loss", 1.0 / (i + 1))
        trainscope.log_metric("acc", i / 10)
""")


def _measured_rate(run_dir):
    """Steps over the wall time from the first BATCH's start to the last one's end, from the
    run's own rows."""
    batches = [r for r in rows(run_dir / "regions-0.csv")
               if r["key"] == "BATCH" and r["device"] == "CPU"]
    first = min(int(r["start_unix_ns"]) for r in batches)
    last = max(int(r["start_unix_ns"]) + int(r["duration_ns"]) for r in batches)
    return len(batches), len(batches) * 1e9 / (last - first)


def test_results_report_the_measured_step_rate_and_the_last_logged_metrics(tmp_path):
    (tmp_path / "train.py").write_text(STEPS)
    done = _sweep("--grid", "lr=0.1,0.2", "--slots", "2", "--no-sample", "--dir", "sw", "--",
                  sys.executable, "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = rows(tmp_path / "sw" / "results.csv")
    assert len(results) == 2
    for row in results:
        steps, rate = _measured_rate(tmp_path / "sw" / row["run_dir"])
        assert steps == 5
        throughput = float(row["throughput_batches_per_s"])
        assert math.isclose(throughput, rate, rel_tol=1e-6), (throughput, rate)
        # The time between steps counts: below the rate of back-to-back batches.
        assert throughput < 1.0 / float(row["batch_mean_s"])
        assert float(row["metric.loss"]) == 0.2
        assert float(row["metric.acc"]) == 0.4
    header = (tmp_path / "sw" / "results.csv").read_text().splitlines()[0]
    assert header.endswith("throughput_batches_per_s,metric.acc,metric.loss"), header


# radT's examples/csv/experiment_collocation.csv (itu-rad/radt), as it is.
COLLOCATION_CSV = """\
Experiment,Workload,Name,Status,Run,Devices,Collocation,File,Listeners,Params
0,1,no sharing,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,2,shared gpu 1,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,2,shared gpu 2,,,0,-,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,3,MPS shared gpu 1,,,0,MPS,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,3,MPS shared gpu 2,,,0,MPS,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,4,MIG shared gpu 1,,,2,3g.20gb,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
0,4,MIG shared gpu 2,,,2,3g.20gb,../pytorch/cifar10_context.py,smi+top,--batch-size 128 --learning-rate 0.01
"""

# The example's program, standing in for the CIFAR-10 training: it finds its workload from
# its run's name (e0-w<W>-...), waits for the other rows of its workload to start (collocated:
# they run together, so on 3 slots those of one device share its slot), and waits until radT's
# CSV shows every row of the earlier workloads FINISHED with a run: written back while the
# sweep runs, as each job ended.
COLLOCATION_TRAIN = textwrap.dedent("""
    import csv, json, os, sys, time
    assert sys.argv[1:] == ["--batch-size", "128", "--learning-rate", "0.01"], sys.argv
    name = json.load(open(os.path.join(os.environ["TRAINSCOPE_RUN_DIR"], "run.json")))["name"]
    workload = int(name.split("-")[1][1:])
    rows_of = {1: 1, 2: 2, 3: 2, 4: 2}
    marks = "../marks"
    os.makedirs(marks, exist_ok=True)
    open(f"{marks}/{workload}-{name}.started", "w").close()
    def started():
        return len([f for f in os.listdir(marks) if f.startswith(f"{workload}-")])
    def earlier_marked():
        with open("experiment_collocation.csv", newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["Workload"]) < workload]
        return all(r["Status"] == "FINISHED" and len(r["Run"]) == 32 for r in rows)
    for _ in range(6000):
        if started() == rows_of[workload] and earlier_marked():
            break
        time.sleep(0.01)
    else:
        sys.exit(10 if started() != rows_of[workload] else 11)
""")


def test_radt_collocation_example_runs_on_cpu_slots_and_marks_rows_as_jobs_end(tmp_path):
    (tmp_path / "csv").mkdir()
    (tmp_path / "pytorch").mkdir()
    csv_path = tmp_path / "csv" / "experiment_collocation.csv"
    csv_path.write_text(COLLOCATION_CSV)
    (tmp_path / "pytorch" / "cifar10_context.py").write_text(COLLOCATION_TRAIN)
    done = subprocess.run([trainscope_cli(), "sweep", "experiment_collocation.csv", "--slots",
                           "3", "--no-sample", "--timeout", "120"], cwd=tmp_path / "csv",
                          env=_path_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "cannot start" not in done.stderr
    # One note per collocated workload that CPU slots do not set up.
    assert done.stderr.count("Collocation 'mps' is not set up on CPU slots") == 1, done.stderr
    assert done.stderr.count("Collocation '3g.20gb' is not set up on CPU slots") == 1, done.stderr
    written = rows(csv_path)
    assert [r["Status"] for r in written] == ["FINISHED"] * 7
    assert len({r["Run"] for r in written}) == 7 and all(len(r["Run"]) == 32 for r in written)
    # Every other byte of radT's file is as it was.
    original = COLLOCATION_CSV.splitlines()
    for line, row in zip(csv_path.read_text().splitlines()[1:], written):
        assert line.replace(f",FINISHED,{row['Run']},", ",,,") in original
    state = json.loads((tmp_path / "csv" / "trainscope-sweeps" / "experiment_collocation"
                        / "sweep.json").read_text())
    assert [j["devices"] for j in state["jobs"]] == [[0], [0], [0], [0], [0], [2], [2]]
    assert len(os.listdir(tmp_path / "marks")) == 7
