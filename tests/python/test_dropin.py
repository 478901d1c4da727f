"""Deep500's complete PyTorch example (deep500_dropin.py) on trainscope."""

import pathlib
import re

import pytest

pytest.importorskip("torch")

import deep500_dropin  # noqa: E402  (needs torch)
import trainscope  # noqa: E402

SCRIPT = pathlib.Path(deep500_dropin.__file__)
EPOCHS = 2
STATS_LINE = re.compile(
    r"^min: (\d+\.\d{5}) mean: (\d+\.\d{5}) median: (\d+\.\d{5}) max: (\d+\.\d{5}) "
    r"stdev: (\d+\.\d{5})$")
CPU_KEYS = ["IO", "FORWARD", "BACKWARD", "BATCH", "EPOCH"]  # first-completed order
GPU_KEYS = ["FORWARD", "BACKWARD", "BATCH"]


def deep500_block(text):
    """The lines of the printed statistics: from CPU to the second ---.

    MLflow prints a "View run" line of its own when a run on a server ends.
    """
    lines = text.splitlines()
    first = lines.index("CPU")
    gpu = lines.index("GPU", first)
    return lines[first:lines.index("---", gpu) + 1]


def check_deep500_layout(text, gpu):
    """CPU, its keys each with a stats line, ---, GPU, its keys, ---."""
    lines = deep500_block(text)
    names = [line for line in lines if not STATS_LINE.match(line)]
    assert names == ["CPU", *CPU_KEYS, "---", "GPU", *(GPU_KEYS if gpu else []), "---"], text
    for i, line in enumerate(lines):
        if line in CPU_KEYS:
            assert STATS_LINE.match(lines[i + 1]), text


@pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")
def test_deep500_example_runs_unchanged(mlflow_tracking, capsys):
    with mlflow_tracking.start_run() as run:
        tmr, batches = deep500_dropin.run(EPOCHS)
        printed = capsys.readouterr().out
    assert isinstance(tmr, trainscope.torch.CPUGPUTimer)
    gpu = tmr.gpu_available()

    expected = {"EPOCH": EPOCHS, "BATCH": EPOCHS * batches, "IO": EPOCHS * batches,
                "FORWARD": EPOCHS * batches, "BACKWARD": EPOCHS * batches}
    for name, count in expected.items():
        stats = tmr.get_time_stats(name)
        assert stats.count == count, name
        assert stats.min > 0 and stats.mean > 0, name
    assert [k.name for k in tmr.keys()] == CPU_KEYS
    for name in GPU_KEYS:
        assert tmr.get_time_stats(name, gpu=True).count == (EPOCHS * batches if gpu else 0)
    assert tmr.outstanding() == 0  # printing completed everything

    check_deep500_layout(printed, gpu)
    assert printed == tmr.format_all_time_stats()

    metrics = mlflow_tracking.MlflowClient().get_run(run.info.run_id).data.metrics
    expected_metrics = {f"train/CPU/{name}": tmr.get_time_stats(name).mean for name in CPU_KEYS}
    if gpu:
        expected_metrics.update({f"train/GPU/{name}": tmr.get_time_stats(name, gpu=True).mean
                                 for name in GPU_KEYS})
    assert metrics == expected_metrics


def test_deep500_example_as_a_script(mlflow_tracking, run_python):
    result = run_python(SCRIPT, "--num-epochs", EPOCHS, "--mlflow-tracking-uri",
                        mlflow_tracking.get_tracking_uri())
    assert result.returncode == 0, result.stderr
    gpu = trainscope.CPUGPUTimer().gpu_available()
    check_deep500_layout(result.stdout, gpu)
    # gpu=True without a GPU: timed on the CPU, said once, not per region.
    warnings = result.stderr.count("TrainscopeWarning")
    assert warnings == (0 if gpu else 1), result.stderr


def test_script_refuses_to_run_without_a_tracking_uri(run_python, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    result = run_python(SCRIPT, "--num-epochs", 1)
    assert result.returncode == 2
    assert "--mlflow-tracking-uri" in result.stderr
