"""FSDP's communication under `trainscope run --auto` (issue 39, trainscope._torch_comm):
a two-rank FSDP2 job (`fully_shard`, gloo on CPU: tests/python/auto_jobs/fsdp_train.py,
no trainscope line in it) has its all-gathers and reduce-scatters as
COMM/all_gather/world and COMM/reduce_scatter/world, the bytes of one call (each
layer's parameters) as tags, and the reduce-scatters backward waits for as
COMM_EXPOSED. FSDP1 needs an accelerator in this torch: the GPU suite's.

Needs TRAINSCOPE_CLI and TRAINSCOPE_FRAMEWORK_PYTHON (torch >= 2.4 with fully_shard).
The bounds hold beside a CPU burner: a delay of 0.2 s against the milliseconds a
loaded machine adds.
"""

import json
import os
import re
import subprocess

import pytest

import trainscope
from test_auto import CLI, LAUNCH2, needs_cli, rows, run_cli  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))
FSDP_JOB = os.path.join(HERE, "auto_jobs", "fsdp_train.py")
FRAMEWORK_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_framework = pytest.mark.skipif(
    not FRAMEWORK_PYTHON, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x "
    "(tests/python/requirements-frameworks.txt) for FSDP2")
STEPS = 16
DELAY_S = 0.2
GATHER = "COMM/all_gather/world"
SCATTER = "COMM/reduce_scatter/world"


def fsdp_job(tmp_path, *args):
    """The run and the job's report (rank -> the bytes of each layer's parameters)."""
    if FRAMEWORK_PYTHON:
        done = subprocess.run([FRAMEWORK_PYTHON, "-c", "from torch.distributed.fsdp import "
                               "fully_shard"], capture_output=True, check=False)
        if done.returncode != 0:
            done = subprocess.run([FRAMEWORK_PYTHON, "-c", "from torch.distributed._composable."
                                   "fsdp import fully_shard"], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip("the framework python's torch has no FSDP2 (fully_shard)")
    run_dir, out, err = run_cli(tmp_path, "--auto", [
        FRAMEWORK_PYTHON, LAUNCH2, FSDP_JOB, "--steps", str(STEPS)] + list(args))
    # The two ranks' lines (one stdout: they may interleave on one line).
    found = re.findall(r'\{"rank": \d+, "layer_bytes": \{[^}]*\}\}', out)
    reports = [json.loads(report) for report in found]
    assert sorted(r["rank"] for r in reports) == [0, 1], (out[-2000:], err[-3000:])
    return trainscope.read_run(run_dir), {r["rank"]: r["layer_bytes"] for r in reports}


def seconds(frame):
    return frame["duration_ns"].astype(float) / 1e9


def per_backward(run, key, rank, phase="BACKWARD"):
    """Seconds of `key`'s rows inside each `phase` row of the rank, in order."""
    backward = rows(run, phase, rank)
    frame = rows(run, key, rank)
    sums = []
    for start, duration in zip(backward["start_unix_ns"], backward["duration_ns"]):
        inside = frame[(frame["start_unix_ns"] >= start) &
                       (frame["start_unix_ns"] + frame["duration_ns"] <= start + duration)]
        sums.append(seconds(inside).sum())
    return sums


@needs_cli
@needs_framework
def test_fsdp_all_gathers_and_reduce_scatters_are_timed_with_their_bytes(tmp_path):
    run, layer_bytes = fsdp_job(tmp_path)
    for rank in (0, 1):
        # Per step and layer: an all-gather in forward, another in backward (resharded
        # after forward), one reduce-scatter in backward.
        gathers, scatters = rows(run, GATHER, rank), rows(run, SCATTER, rank)
        assert len(gathers) == 4 * STEPS, rank
        assert len(scatters) == 2 * STEPS, rank
        forward, backward = rows(run, "FORWARD", rank), rows(run, "BACKWARD", rank)
        assert len(forward) == len(backward) == STEPS
        # A collective FSDP calls is its phase's time: no COMM row of its own.
        assert len(rows(run, "COMM", rank)) == 0
        for phase in ("FORWARD", "BACKWARD"):
            gathered = per_backward(run, GATHER, rank, phase)
            assert all(s > 0 for s in gathered), (phase, gathered)
        assert all(s > 0 for s in per_backward(run, SCATTER, rank))
        # Backward waits for each reduce-scatter on CPU (gloo returns when it is done):
        # COMM_EXPOSED is their sum, step by step.
        exposed = rows(run, "COMM_EXPOSED", rank)
        assert len(exposed) == STEPS, rank
        summed = per_backward(run, SCATTER, rank)
        waited = per_backward(run, "COMM_EXPOSED", rank)
        assert waited == pytest.approx(summed, abs=1e-5), (waited, summed)
    # The bytes of one call: each layer's parameters (float32), gathered whole and
    # reduced whole.
    expected = sorted(layer_bytes[0].values())
    for op in ("all_gather", "reduce_scatter"):
        tag = run.tags[f"trainscope.comm.bytes.{op}/world"]
        assert sorted(int(b) for b in tag.split(", ")) == expected, (op, tag)
    # The diagnosis JSON has the communication.
    done = subprocess.run([CLI, "diagnose", run.dir, "--json", "--threshold", "warmup_steps=1",
                           "--threshold", "min_steps=4"], capture_output=True, text=True,
                          check=True)
    phases = {p["phase"]: p for p in json.loads(done.stdout)["run"]["phases"]
              if p["device"] == "CPU"}
    assert phases["comm"]["median_s"] > 0, phases
    assert 0 < phases["comm_exposed"]["median_s"] <= phases["comm"]["median_s"], phases


@needs_cli
@needs_framework
def test_a_late_reduce_scatter_is_exposed_and_comm_bound(tmp_path):
    """Rank 1 enters each reduce-scatter 0.2 s late (through FSDP's
    set_custom_reduce_scatter): rank 0's backward waits that long in each, COMM_EXPOSED
    (two a step); the diagnosis reads COMM-BOUND on reduce_scatter, naming rank 1 as the
    late one."""
    run, _ = fsdp_job(tmp_path, "--late-s", str(DELAY_S))
    scatters = rows(run, SCATTER, 0)
    assert len(scatters) == 2 * STEPS
    waits = sorted(seconds(scatters.iloc[2:]))  # (the first step's: warm-up)
    assert 0.8 * DELAY_S <= waits[len(waits) // 2] <= 1.2 * DELAY_S, waits
    waited = per_backward(run, "COMM_EXPOSED", 0)[1:]
    assert sorted(waited)[len(waited) // 2] >= 1.6 * DELAY_S, waited
    assert waited == pytest.approx(per_backward(run, SCATTER, 0)[1:], abs=1e-5)
    late = sorted(per_backward(run, "COMM_EXPOSED", 1)[1:])
    assert late[len(late) // 2] < 0.5 * DELAY_S, late
    scope = trainscope.diagnose(run.dir, thresholds={"warmup_steps": 1, "min_steps": 4}).run
    comm_bound = scope.find("COMM-BOUND")
    assert comm_bound is not None, [str(label.name) for label in scope.labels]
    assert "reduce_scatter on group world" in comm_bound.evidence, comm_bound.evidence
    assert comm_bound.rank == 1, comm_bound.evidence
    (scatter,) = [c for c in scope.collectives if c.key == SCATTER]
    assert scatter.last_rank == 1 and scatter.last_share >= 0.9, scatter
    assert 0.8 * DELAY_S <= scatter.lag_s <= 1.2 * DELAY_S, scatter
