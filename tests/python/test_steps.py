"""One meaning per quantity (issue 38): read_run's steps and host load are the C++ steps room's
(docs/steps.md), so Python shows what the diagnosis, `trainscope stalls` and `trainscope
compare` show for one run: the data-wait share, the job's CPU and the step count, on a run of
two ranks on one host (each step's wait for the next batch lies between two BATCH rows; both
ranks' process trees sampled at the same times). tests/report/one_meaning_test.cpp holds the
same run to the report's sections."""

import json
import os
import subprocess
import sys

import pytest

import trainscope
from run_files import trainscope_cli

T0 = 1_700_000_000_000_000_000  # ns
MS = 1_000_000
STEPS = 40
SHARE = 1 / 6  # every step waits a sixth of its period
OTHER = 55.0  # % of the host's 4 cores: 95% busy, the job 100% + 60% of one core


WARMUP = 5  # steps::kWarmupSteps: every run-wide figure leaves a rank's first 5 steps out


def write_run(path, warmup_wait_ms=2):
    """Each step waits 2 ms for its next batch (a sixth of its period), the first WARMUP
    steps warmup_wait_ms."""
    os.makedirs(path)
    with open(os.path.join(path, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "trainscope.run", "version": 1, "id": "0123456789abcdef" * 2,
                   "name": "n", "experiment": "e", "start_time_ms": 1, "params": {}, "tags": {}}, f)
    for rank in (0, 1):
        with open(os.path.join(path, f"rank-{rank}.json"), "w", encoding="utf-8") as f:
            json.dump({"format": "trainscope.rank", "version": 1, "rank": rank,
                       "local_rank": rank, "world_size": 2, "host": "h", "pid": 1 + rank,
                       "status": "FINISHED", "start_time_ms": 1, "end_time_ms": 2,
                       "heartbeat_ms": 2, "flush_interval_ms": 1000}, f)
        rows = ["key,device,rank,thread,start_unix_ns,duration_ns,step,epoch"]
        start = T0
        for i in range(STEPS):
            wait = (warmup_wait_ms if i < WARMUP else 2) * MS
            if i + 1 < STEPS:
                rows.append(f"BATCH,CPU,{rank},0,{start},{10 * MS},0,0")
                rows.append(f"IO,CPU,{rank},0,{start + 10 * MS},{wait},0,0")
            else:
                rows.append(f"IO,CPU,{rank},0,{start + MS},{10 * MS // 6},0,0")
                rows.append(f"BATCH,CPU,{rank},0,{start},{10 * MS},0,0")
            start += 10 * MS + wait
        with open(os.path.join(path, f"regions-{rank}.csv"), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    host = ["key,value,step,timestamp_ms,rank"]
    for s in range(12):  # enough for the diagnosis's interval
        t = T0 // MS + 50 + s * 35
        host.append(f"system/cpu.util_pct,95,0,{t},")
        host += [f"system/cpu.{c}.util_pct,95,0,{t}," for c in range(4)]
        host.append(f"system/proc.cpu_pct,100,0,{t},0")
        host.append(f"system/proc.cpu_pct,60,0,{t},1")
    with open(os.path.join(path, "host-h.csv"), "w", encoding="utf-8") as f:
        f.write("\n".join(host) + "\n")
    return path


def cli(*args):
    done = subprocess.run([trainscope_cli(), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_read_run_shows_what_every_view_shows(tmp_path):
    run = trainscope.read_run(write_run(str(tmp_path / "run")))
    steps = run.steps
    assert steps.groupby("rank").size().to_dict() == {0: STEPS, 1: STEPS}
    for _, rank in steps.groupby("rank"):
        assert rank["data_wait_s"].sum() / rank["period_s"].sum() == pytest.approx(SHARE, abs=1e-6)
    load = run.host_load
    assert list(load["cores"].unique()) == [4]
    assert load["job_cpu_pct"].tolist() == pytest.approx([40.0] * 12)
    assert load["other_cpu_pct"].tolist() == pytest.approx([OTHER] * 12)

    d = trainscope.diagnose(run.dir, thresholds={"warmup_steps": 0})
    (wait,) = [p for p in d.run.phases if p.phase == "data_wait" and p.device == "CPU"]
    assert wait.share == pytest.approx(SHARE, abs=1e-6)
    assert [r.steps for r in d.ranks] == [STEPS, STEPS]
    pressure = d.run.find("HOST-PRESSURE")
    assert pressure is not None and pressure.value.value == pytest.approx(OTHER / 100)

    stalls = cli("stalls", run.dir, "--json")
    assert stalls["run"]["data_wait_share"] == pytest.approx(SHARE, abs=1e-6)
    assert [r["data_wait_share"] for r in stalls["ranks"]] == pytest.approx([SHARE] * 2, abs=1e-6)


def test_a_run_whose_warm_up_waits_longer_shows_one_data_wait_share(tmp_path):
    # Issue 38: the diagnosis left out its warm-up and stalls did not (the report showed 0.098%
    # and 0.356% for one run). One rule, the steps room's: Run.steps marks the warm-up steps.
    run = trainscope.read_run(write_run(str(tmp_path / "run"), warmup_wait_ms=30))
    steps = run.steps
    assert steps.groupby("rank")["warmup"].sum().to_dict() == {0: WARMUP, 1: WARMUP}
    assert steps[steps["warmup"]]["step"].max() == WARMUP - 1
    past = steps[~steps["warmup"]]
    shares = past.groupby("rank")["data_wait_s"].sum() / past.groupby("rank")["period_s"].sum()
    assert shares.tolist() == pytest.approx([SHARE] * 2, abs=1e-6)
    every = steps["data_wait_s"].sum() / steps["period_s"].sum()
    assert every > SHARE + 0.1  # the warm-up's waits would change the figure

    d = trainscope.diagnose(run.dir)  # its default warm-up
    (wait,) = [p for p in d.run.phases if p.phase == "data_wait" and p.device == "CPU"]
    assert wait.share == pytest.approx(SHARE, abs=1e-6)
    stalls = cli("stalls", run.dir, "--json")
    assert stalls["run"]["data_wait_share"] == pytest.approx(SHARE, abs=1e-6)
    assert [r["data_wait_share"] for r in stalls["ranks"]] == pytest.approx([SHARE] * 2, abs=1e-6)


CONTENDED_JOB = """
import os, sys, time, multiprocessing
import trainscope

def spin():
    while True:
        pass

if __name__ == "__main__":
    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})  # the job and, later, its neighbour on one core
    timer = trainscope.Timer()
    for step in range(10):  # alone on the core, sleeping: hardly any wait
        with timer.scope("BATCH"):
            time.sleep(0.01)
    neighbour = multiprocessing.Process(target=spin, daemon=True)
    neighbour.start()  # inherits the one core
    time.sleep(0.2)
    for step in range(10):  # spinning beside it: about half of the step waits
        with timer.scope("BATCH"):
            end = time.perf_counter() + 0.04
            while time.perf_counter() < end:
                pass
    neighbour.terminate()
"""


def test_each_step_carries_its_own_wait_for_a_cpu(tmp_path):
    """Issue 41: a timer attached to the run reads its thread's run-queue wait when BATCH
    starts and ends; the row carries it (regions' cpu_wait_ns), the steps room's cpu_wait_s is
    that, and compare shows the step less its wait and each side's step wait share."""
    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("no /proc/thread-self/schedstat on this kernel")
    job = tmp_path / "job.py"
    job.write_text(CONTENDED_JOB, encoding="utf-8")
    env = dict(os.environ)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    run_dir = str(tmp_path / "run")
    done = subprocess.run([trainscope_cli(), "run", "--run-dir", run_dir, "--no-sample", "--",
                           sys.executable, str(job)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    run = trainscope.read_run(run_dir)
    regions = run.regions
    batches = regions[regions.key == "BATCH"]
    assert len(batches) == 20 and batches.cpu_wait_ns.notna().all()
    assert regions[regions.key != "BATCH"].cpu_wait_ns.isna().all()
    steps = run.steps
    assert steps.cpu_wait_s.tolist() == pytest.approx((batches.cpu_wait_ns / 1e9).tolist())
    share = (steps.cpu_wait_s / (batches.duration_ns.to_numpy() / 1e9)).to_numpy()
    alone, beside = share[:10].mean(), share[10:].mean()
    # Beside one spinner on its core a step that always wants the CPU waits about half of it
    # (more beside a burner); a sleeping step, woken ahead of a spinner, hardly waits.
    assert beside > 0.3, share
    assert beside > alone + 0.2, share

    compared = subprocess.run([trainscope_cli(), "compare", run_dir, run_dir],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert "step-less-wait" in compared.stdout
    doc = json.loads(subprocess.run([trainscope_cli(), "compare", run_dir, run_dir, "--json"],
                                    capture_output=True, text=True, timeout=120).stdout)
    assert doc["pairs"][0]["step_wait_a"] == pytest.approx(doc["b"]["runs"][0]["step_wait_share"])
    assert doc["pairs"][0]["step_wait_a"] > 0.05
    frame = trainscope.compare(run_dir, run_dir, min_steps=10)  # Python: the same call
    assert frame.attrs["overall"][0]["step_wait_b"] == pytest.approx(doc["pairs"][0]["step_wait_b"])
    assert "step-less-wait" in frame["quantity"].tolist()
