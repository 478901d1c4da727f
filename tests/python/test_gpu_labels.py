"""Device-aware labels on real CUDA jobs (issue 39; scripts/gpu-suite.sh runs this
file): `trainscope run --auto` on tests/python/auto_jobs/gpu_shapes.py. A
matmul-bound job reads COMPUTE-BOUND on the GPU (not WAIT-HEAVY: the host's wait
at loss.item() is the device's compute), a job of many tiny kernels reads
LAUNCH-BOUND (not COMPUTE-BOUND), an input-bound CUDA job reads INPUT-BOUND, and
the GPU busy time per step (the GPU-timed compute rows, docs/steps.md) agrees
with Nsight Compute's kernel durations summed, within 5%.

Every test skips with its reason without a GPU, torch with CUDA, a CUDA build of
trainscope, the CLI or Nsight Compute. Figures go to the JUnit XML as properties.
"""

import csv
import io
import os
import shutil
import subprocess
import sys

import pytest

from run_files import printed_json_objects, trainscope_cli

torch = pytest.importorskip("torch")

import trainscope  # noqa: E402
from test_gpu_jobs import _env  # noqa: E402  (the job's environment, one definition)

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "auto_jobs", "gpu_shapes.py")
CUDA = torch.cuda.is_available() and trainscope.CPUGPUTimer().gpu_available()
NCU = shutil.which("ncu")
needs_gpu = pytest.mark.skipif(
    not CUDA, reason="needs torch with CUDA, a GPU and a CUDA build of trainscope")
pytestmark = [needs_gpu, pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")]
COMPUTE_ROWS = ("H2D", "h2d", "FORWARD", "LOSS", "BACKWARD", "OPTIMIZER")


def _job(run_dir, shape, batches=60):
    argv = [trainscope_cli(), "run", "--run-dir", os.fspath(run_dir), "--auto",
            "--interval", "0.1", "--", sys.executable, JOB, shape, "--batches", str(batches)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env(),
                          check=False)
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert printed_json_objects(done.stdout), done.stdout[-2000:]
    return trainscope.diagnose(os.fspath(run_dir))


def _labels(d):
    return [(l.name, l.kind, l.device, round(l.value.value, 3)) for l in d.run.labels]


def test_a_matmul_bound_cuda_job_is_compute_bound_on_the_gpu(tmp_path, record_property):
    d = _job(tmp_path / "matmul", "matmul")
    record_property("matmul_labels", _labels(d))
    primary = d.run.labels[0]
    assert primary.name == "COMPUTE-BOUND", _labels(d)
    assert primary.device == "GPU", _labels(d)
    assert d.run.find("WAIT-HEAVY") is None and d.run.find("LAUNCH-BOUND") is None, _labels(d)
    record_property("matmul_compute_share", primary.value.value)


def test_a_job_of_many_tiny_kernels_is_launch_bound(tmp_path, record_property):
    d = _job(tmp_path / "tiny", "tiny", batches=200)
    record_property("tiny_labels", _labels(d))
    assert d.run.labels[0].name == "LAUNCH-BOUND", _labels(d)
    assert d.run.find("COMPUTE-BOUND") is None, _labels(d)
    record_property("tiny_cpu_gpu_ratio", d.run.labels[0].value.value)
    record_property("tiny_evidence", d.run.labels[0].evidence)


def test_an_input_bound_cuda_job_is_input_bound(tmp_path, record_property):
    d = _job(tmp_path / "input", "input", batches=40)
    record_property("input_labels", _labels(d))
    assert d.run.labels[0].name == "INPUT-BOUND", _labels(d)


@pytest.mark.skipif(not NCU, reason="Nsight Compute (ncu) is not on the PATH")
def test_gpu_busy_per_step_matches_nsight_compute_kernel_durations(tmp_path, record_property):
    batches = 8
    _job(tmp_path / "busy", "matmul", batches=batches)
    run = trainscope.read_run(os.fspath(tmp_path / "busy"))
    regions = run.regions
    gpu = regions[(regions["device"] == "GPU") & regions["key"].isin(COMPUTE_ROWS)]
    assert len(gpu), "no GPU-timed compute rows"
    busy_ns = gpu["duration_ns"].sum() / batches
    log = tmp_path / "ncu.csv"
    done = subprocess.run([NCU, "--csv", "--metrics", "gpu__time_duration.sum", "--log-file",
                           os.fspath(log), sys.executable, JOB, "matmul", "--batches",
                           str(batches)], capture_output=True, text=True, timeout=900,
                          env=_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    text = log.read_text()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    scale = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}
    kernel_ns = sum(float(r["Metric Value"].replace(",", "")) * scale[r["Metric Unit"]]
                    for r in rows if r["Metric Name"] == "gpu__time_duration.sum") / batches
    record_property("busy_per_step_ms", busy_ns / 1e6)
    record_property("ncu_kernels_per_step_ms", kernel_ns / 1e6)
    record_property("ncu_kernels", len(rows))
    assert abs(busy_ns - kernel_ns) <= 0.05 * kernel_ns, (busy_ns, kernel_ns)
