"""What trainscope concludes about real GPU training jobs, on a real NVIDIA GPU
(issue 27; scripts/gpu-suite.sh runs this file): `trainscope run --auto` on a
plain PyTorch CUDA training (every phase and layer timed on the GPU, the layers'
NVTX ranges selecting their kernels in Nsight Compute), two ranks sharing one GPU
under torchrun, the diagnosis's GPU-IDLE and device MEMORY-CREEP on jobs built to
show them, and `trainscope compare` of two runs that differ by a known amount of
GPU work. The jobs: tests/python/gpu_workload.py (`steps`) and
tests/python/auto_jobs/plain_train.py (`--device cuda`).

Every test skips with its reason without a GPU, torch with CUDA, a CUDA build of
trainscope, the CLI or the profiler it needs. Figures go to the JUnit XML as
properties (scripts/gpu-suite.sh reports them).
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

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "gpu_workload.py")
PLAIN = os.path.join(HERE, "auto_jobs", "plain_train.py")
CUDA = torch.cuda.is_available() and trainscope.CPUGPUTimer().gpu_available()
NCU = shutil.which("ncu")
needs_gpu = pytest.mark.skipif(
    not CUDA, reason="needs torch with CUDA, a GPU and a CUDA build of trainscope")
pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for name in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_RUNS_ROOT", "MLFLOW_TRACKING_URI",
                 "TRAINSCOPE_AUTO"):
        env.pop(name, None)
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def _run(run_dir, command, options=(), prefix=(), timeout=300):
    """`trainscope run --run-dir RUN_DIR [options] -- command`: the job's stdout."""
    argv = [*prefix, trainscope_cli(), "run", "--run-dir", os.fspath(run_dir), *options, "--",
            *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(),
                          check=False)
    assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n" \
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _job_json(stdout):
    """The last JSON object the job printed."""
    found = printed_json_objects(stdout)
    assert found, stdout[-2000:]
    return found[-1]


def _rows(run, key, device="CPU", rank=None):
    frame = run.regions
    frame = frame[(frame["key"] == key) & (frame["device"] == device)]
    if rank is not None:
        frame = frame[frame["rank"] == rank]
    return frame


def _steps(run_dir, *args, options=("--no-sample",)):
    return _job_json(_run(run_dir, [sys.executable, WORKLOAD, "steps", *args], options))


def test_the_steps_job_and_its_analysis_run_without_a_gpu(tmp_path):
    """The `steps` job with --cpu (its "GPU work" a wait) under `trainscope run`,
    diagnosed and compared as the GPU tests below do: the job and the reading of its
    results are checked on any machine, so a GPU session spends its minutes on GPUs."""
    a = _steps(tmp_path / "a", "--cpu", "--steps", "120", "--gpu-ms", "4", "--host-ms", "1")
    b = _steps(tmp_path / "b", "--cpu", "--steps", "120", "--gpu-ms", "5", "--host-ms", "1")
    assert a["gpu_ms_median"] == 4 and b["gpu_ms_median"] == 5
    run = trainscope.read_run(os.fspath(tmp_path / "a"))
    for key in ("BATCH", "FORWARD", "OPTIMIZER"):
        assert len(_rows(run, key)) == 120, key
    d = trainscope.diagnose(os.fspath(tmp_path / "a"))
    assert d.run.find("GPU-IDLE") is None  # no GPU-timed phase: a note, not a label
    assert any(n.startswith("GPU-IDLE") for n in d.run.notes), d.run.notes
    df = trainscope.compare(os.fspath(tmp_path / "a"), os.fspath(tmp_path / "b"))
    row = df[(df["quantity"] == "FORWARD") & (df["device"] == "CPU")].iloc[0]
    # The plumbing, not compare's power (the GPU version below asserts the figure): the
    # waits' wake-ups beside other load may leave it inconclusive, never faster.
    assert row["verdict"] in ("slower", "inconclusive"), row.to_dict()
    assert row["ratio"] > 1.1, row.to_dict()


@needs_gpu
def test_auto_times_a_cuda_training_on_the_gpu_phase_by_phase_and_layer_by_layer(
        tmp_path, record_property):
    run_dir = tmp_path / "auto"
    batches, epochs = 10, 2
    report = _job_json(_run(run_dir, [sys.executable, PLAIN, "--device", "cuda", "--workers", "2",
                                      "--batches", str(batches), "--epochs", str(epochs)],
                            ["--no-sample", "--auto=layers=1"]))
    assert report["steps"] == batches * epochs, report
    run = trainscope.read_run(os.fspath(run_dir))
    counts = {}
    for key in ("BATCH", "FORWARD", "BACKWARD", "OPTIMIZER", "layer/0", "layer/3"):
        cpu, gpu = _rows(run, key), _rows(run, key, "GPU")
        counts[key] = (len(cpu), len(gpu))
        assert len(gpu) == len(cpu) > 0, (key, len(cpu), len(gpu))
        assert (gpu["duration_ns"] > 0).all(), key
    record_property("auto_cpu_gpu_rows", counts)
    # One BATCH per fetched batch, nothing recorded by the two loader workers.
    assert counts["BATCH"][0] == batches * epochs
    assert set(run.regions["rank"]) == {0}
    forward_gpu = _rows(run, "FORWARD", "GPU")["duration_ns"].median()
    record_property("auto_forward_gpu_median_us", forward_gpu / 1e3)


@needs_gpu
@pytest.mark.skipif(not NCU, reason="Nsight Compute (ncu) is not on the PATH")
def test_auto_layer_ranges_select_their_kernels_in_nsight_compute(tmp_path, record_property):
    """--auto=layers opens an NVTX range per layer call (domain trainscope):
    `trainscope run --ncu=trainscope@layer/3` profiles that layer's kernels and no
    other's. ncu reads '/' in a filter as push/pop nesting (as given, the filter
    matched nothing on an H100): the run escapes it for trainscope's start/end ranges."""
    run_dir = tmp_path / "run"
    _run(run_dir, [sys.executable, PLAIN, "--device", "cuda", "--batches", "2"],
         ["--no-sample", "--auto=layers=1", "--ncu=trainscope@layer/3"])
    report = run_dir / "artifacts" / "profile.ncu-rep"
    assert report.is_file(), sorted(os.listdir(run_dir))
    export = subprocess.run([NCU, "--import", os.fspath(report), "--csv", "--page", "raw",
                             "--metrics", "gpu__time_duration.sum"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert export.returncode == 0, export.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO(
        "".join(line + "\n" for line in export.stdout.splitlines() if line.startswith('"')))))
    names = {r["ID"]: r.get("Kernel Name", "") for r in rows if r.get("ID", "").isdigit()}
    record_property("layer3_kernels_profiled", len(names))
    record_property("layer3_kernel_names", sorted(set(names.values()))[:8])
    # layer/3 is one Linear(32, 4): per forward call a GEMM (and its bias), 2 batches.
    assert 2 <= len(names) <= 8, names
    assert not any("relu" in n.lower() for n in names.values()), names  # layers 1, 2 stay out


@needs_gpu
def test_two_ranks_share_one_gpu_under_torchrun(tmp_path, record_property):
    run_dir = tmp_path / "ddp"
    out = _run(run_dir, [sys.executable, "-m", "torch.distributed.run", "--standalone",
                         "--nproc-per-node", "2", PLAIN, "--ddp", "--device", "cuda",
                         "--batches", "6"], ["--auto", "--interval", "0.2"])
    assert '"rank": 0' in out and '"rank": 1' in out, out[-2000:]
    run = trainscope.read_run(os.fspath(run_dir))
    assert run.status == "FINISHED", run.status
    for rank in (0, 1):
        for key in ("BATCH", "FORWARD", "BACKWARD", "OPTIMIZER"):
            cpu, gpu = _rows(run, key, rank=rank), _rows(run, key, "GPU", rank)
            assert len(gpu) == len(cpu) > 0, (rank, key, len(cpu), len(gpu))
        assert len(_rows(run, "BATCH", rank=rank)) == 6
    hardware = run.hardware
    proc = hardware[hardware["key"].astype(str).str.contains(r"gpu\.\d+\.proc\.mem_used_mb")]
    record_property("ddp_ranks_with_gpu_memory", sorted(set(proc["rank"])))
    d = trainscope.diagnose(os.fspath(run_dir))
    assert sorted(r.rank for r in d.ranks) == [0, 1]


@needs_gpu
def test_a_job_that_leaves_the_gpu_idle_is_gpu_idle(tmp_path, record_property):
    # The GPU busy a third of each step (a 6 ms kernel, then 12 ms of host work).
    idle = _steps(tmp_path / "idle", "--steps", "80", "--gpu-ms", "6", "--host-ms", "12")
    d = trainscope.diagnose(os.fspath(tmp_path / "idle"))
    label = d.run.find("GPU-IDLE")
    record_property("idle_truth_gpu_share", idle["gpu_share"])
    record_property("idle_labels", [l.name for l in d.run.labels])
    assert label is not None, [(l.name, l.kind) for l in d.run.labels]
    record_property("idle_busy_share", label.value.value)
    assert abs(label.value.value - idle["gpu_share"]) <= 0.05, (label.value, idle)
    # The same job with the GPU busy most of the step: no GPU-IDLE.
    busy = _steps(tmp_path / "busy", "--steps", "80", "--gpu-ms", "16", "--host-ms", "1")
    d = trainscope.diagnose(os.fspath(tmp_path / "busy"))
    record_property("busy_truth_gpu_share", busy["gpu_share"])
    assert d.run.find("GPU-IDLE") is None, (d.run.find("GPU-IDLE"), busy)


@needs_gpu
def test_device_memory_that_grows_every_step_is_memory_creep_of_the_device(
        tmp_path, record_property):
    # 16 MiB kept per step (above the caching allocator's 10 MiB, so one cudaMalloc each).
    creep = _steps(tmp_path / "creep", "--steps", "200", "--gpu-ms", "5", "--host-ms", "15",
                   "--keep-mib", "16", options=("--interval", "0.2"))
    assert creep["kept_mib"] == 200 * 16
    d = trainscope.diagnose(os.fspath(tmp_path / "creep"))
    device = [l for l in d.run.labels if l.name == "MEMORY-CREEP" and l.kind == "device"]
    record_property("creep_labels", [(l.name, l.kind) for l in d.run.labels])
    assert device, [(l.name, l.kind, l.evidence)
                    for l in d.run.labels]
    slope = device[0].value.value
    record_property("creep_mib_per_1k_steps", slope)
    assert abs(slope - 16_000) <= 0.2 * 16_000, device[0].value


@needs_gpu
def test_compare_finds_a_known_amount_of_extra_gpu_work(tmp_path, record_property):
    # The same spin kernel, 25% more cycles in B: FORWARD on the GPU 1.25x, at a steady clock.
    a = _steps(tmp_path / "a", "--steps", "120", "--spin-cycles", "8000000", "--host-ms", "1")
    cycles = 10_000_000
    b = _steps(tmp_path / "b", "--steps", "120", "--spin-cycles", str(cycles), "--host-ms", "1")
    truth = b["gpu_ms_median"] / a["gpu_ms_median"]  # 1.25 when the clock held
    record_property("compare_truth_ratio_by_torch_events", truth)
    df = trainscope.compare(os.fspath(tmp_path / "a"), os.fspath(tmp_path / "b"))
    row = df[(df["quantity"] == "FORWARD") & (df["device"] == "GPU")]
    assert len(row) == 1, df[["quantity", "device", "ratio", "verdict"]].to_string()
    row = row.iloc[0]
    record_property("compare_forward_gpu", {"ratio": row["ratio"], "low": row["low"],
                                            "high": row["high"], "verdict": row["verdict"]})
    assert row["verdict"] == "slower", row.to_dict()
    assert abs(row["ratio"] - truth) <= 0.01 * truth, (row.to_dict(), truth)
    assert abs(truth - 1.25) <= 0.03, (a, b)  # the kernels' own times: the clock held
    overall = df.attrs["overall"][0]
    record_property("compare_overall", {k: overall[k] for k in ("verdict", "ratio")
                                        if k in overall})


@needs_gpu
def test_an_out_of_memory_error_leaves_a_memory_snapshot_in_the_run(tmp_path):
    """--auto=memory: the OOM observer (trainscope._oom) pickles torch's memory snapshot,
    with each block's allocation history, into the run before the error propagates."""
    if not hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):  # pylint: disable=protected-access
        pytest.skip(f"torch {torch.__version__} has no out-of-memory observer (needs >= 2.1)")
    import pickle  # pylint: disable=import-outside-toplevel
    root = tmp_path / "runs"
    out = subprocess.run([trainscope_cli(), "run", "--root", str(root), "--no-sample",
                          "--auto=memory", "--", sys.executable,
                          os.path.join(HERE, "hang_jobs", "oom.py")],
                         capture_output=True, text=True, timeout=300, env=_env(), check=False)
    assert out.returncode != 0, out.stderr[-2000:]
    assert "OutOfMemoryError" in out.stderr or "out of memory" in out.stderr, out.stderr[-2000:]
    runs = [p for p in root.iterdir() if not p.name.startswith(".")]
    snapshot = runs[0] / "oom-snapshot-r0.pickle"
    assert snapshot.exists(), sorted(p.name for p in runs[0].iterdir())
    with open(snapshot, "rb") as f:
        data = pickle.load(f)
    assert data["segments"], "no segment in the snapshot"
    assert any(block.get("frames") for seg in data["segments"] for block in seg["blocks"]), \
        "no allocation history (--auto=memory)"
