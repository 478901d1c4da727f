"""The ledger's GPU energy (issue 42) on a real NVIDIA GPU (scripts/gpu-suite.sh runs
this file): a loop of matrix products under `trainscope run` that logs its work; the
ledger's `gpu_energy_j` is NVML's total energy counter of the job's GPU over the steps'
time, so it agrees with the power readings NVML gave meanwhile (their mean times the
steps' seconds) and the energy per 1,000 tokens is that over the tokens. Skips
without a GPU.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from run_files import trainscope_cli

torch = pytest.importorskip("torch")

import trainscope  # noqa: E402

CUDA = torch.cuda.is_available() and trainscope.CPUGPUTimer().gpu_available()
needs_gpu = pytest.mark.skipif(
    not CUDA, reason="needs torch with CUDA, a GPU and a CUDA build of trainscope")

JOB = """
    import time, torch, trainscope
    x = torch.randn(8192, 8192, device="cuda")
    timer = trainscope.Timer()
    end = time.monotonic() + 20  # 20 s of steps: NVML's power is sampled once a second
    while time.monotonic() < end:
        timer.start("BATCH")
        for _ in range(8):
            x = torch.tanh(x @ x * 1e-4)
        torch.cuda.synchronize()
        timer.end("BATCH")
        trainscope.log_step_work(samples=8, tokens=8 * 1024)
"""


@needs_gpu
def test_the_ledgers_gpu_energy_is_nvmls_counter_over_the_steps(tmp_path, record_property):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_RUNS_ROOT", "TRAINSCOPE_AUTO")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    run_dir = tmp_path / "run"
    done = subprocess.run([trainscope_cli(), "run", "--run-dir", os.fspath(run_dir),
                           "--devices", "0", "--", sys.executable, os.fspath(script)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    ledger = json.loads(subprocess.run([trainscope_cli(), "diagnose", os.fspath(run_dir),
                                        "--json"], capture_output=True, text=True, timeout=120,
                                       check=True).stdout)["ledger"]
    record_property("gpu_energy_j", ledger["gpu_energy_j"])
    record_property("seconds", ledger["seconds"])
    assert ledger["gpus"] == 1
    assert ledger["gpu_energy_j"] > 0
    run = trainscope.read_run(os.fspath(run_dir))
    hw = run.hardware
    power = hw[hw["key"] == "system/gpu.0.power_w"]["value"]
    assert len(power) >= 10
    expected = power.mean() * ledger["seconds"]
    record_property("power_mean_w", float(power.mean()))
    # The counter and the sampled power agree within 20% (power is an average NVML
    # updates about every 100 ms; the samples are once a second).
    assert ledger["gpu_energy_j"] == pytest.approx(expected, rel=0.2)
    tokens = run.metrics[run.metrics["key"] == "work/tokens"]["value"].sum()
    assert ledger["energy_per_1k_tokens_j"] == pytest.approx(
        ledger["energy_j"] / (tokens / 1000), rel=0.05)
