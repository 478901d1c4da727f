"""One meaning per quantity (issue 38): read_run's steps and host load are the C++ steps room's
(docs/steps.md), so Python shows what the diagnosis, `trainscope stalls` and `trainscope
compare` show for one run: the data-wait share, the job's CPU and the step count, on a run of
two ranks on one host (each step's wait for the next batch lies between two BATCH rows; both
ranks' process trees sampled at the same times). tests/report/one_meaning_test.cpp holds the
same run to the report's sections."""

import json
import os
import subprocess

import pytest

import trainscope
from run_files import trainscope_cli

T0 = 1_700_000_000_000_000_000  # ns
MS = 1_000_000
STEPS = 40
SHARE = 1 / 6  # every step waits a sixth of its period
OTHER = 55.0  # % of the host's 4 cores: 95% busy, the job 100% + 60% of one core


def write_run(path):
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
        for i in range(STEPS):
            start = T0 + i * 12 * MS
            if i + 1 < STEPS:
                rows.append(f"BATCH,CPU,{rank},0,{start},{10 * MS},0,0")
                rows.append(f"IO,CPU,{rank},0,{start + 10 * MS},{2 * MS},0,0")
            else:
                rows.append(f"IO,CPU,{rank},0,{start + MS},{10 * MS // 6},0,0")
                rows.append(f"BATCH,CPU,{rank},0,{start},{10 * MS},0,0")
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
