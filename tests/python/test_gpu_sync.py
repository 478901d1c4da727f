"""The host's waits for the GPU under `trainscope run --auto` (issue 39,
trainscope._torch_sync), on a real NVIDIA GPU (scripts/gpu-suite.sh runs this
file): a loop of matrix products whose `loss.item()` every step waits for the
GPU shows SYNC rows, one a step, holding that wait (the GPU's work, not the
launches), and the steps room's `sync` phase; trainscope adds no wait of its
own (the phases' CPU times stay launch times). Skips without a GPU.
"""

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

STEPS = 30
JOB = f"""
    import torch
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(4096, 4096, device="cuda")
    for step in range({STEPS}):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        print(step, loss.item(), flush=True)  # waits for the step's kernels
"""


@needs_gpu
def test_item_in_the_loop_is_the_sync_phase(tmp_path, record_property):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_RUNS_ROOT", "TRAINSCOPE_AUTO")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    run_dir = tmp_path / "run"
    done = subprocess.run([trainscope_cli(), "run", "--run-dir", os.fspath(run_dir), "--no-sample",
                           "--auto", "--", sys.executable, os.fspath(script)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    run = trainscope.read_run(os.fspath(run_dir))
    regions = run.regions
    sync = regions[(regions["key"] == "SYNC") & (regions["device"] == "CPU")]
    assert len(sync) == STEPS, len(sync)
    backward = regions[(regions["key"] == "BACKWARD") & (regions["device"] == "GPU")]
    sync_s = sync["duration_ns"].median() / 1e9
    gpu_backward_s = backward["duration_ns"].median() / 1e9
    record_property("sync_median_s", sync_s)
    record_property("gpu_backward_median_s", gpu_backward_s)
    # The wait holds the GPU's work still running at .item(): a good part of backward's.
    assert sync_s >= 0.3 * gpu_backward_s, (sync_s, gpu_backward_s)
    assert run.steps["sync_s"].median() > 0
