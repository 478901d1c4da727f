"""log_mlflow_all against a real MLflow server, log_wb_all against an offline W&B run."""

import sys

import pytest

import trainscope
from trainscope import TimeType

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def filled_timer():
    tmr = trainscope.Timer()
    for _ in range(3):
        tmr.start(TimeType.EPOCH)
        for _ in range(4):
            tmr.start(TimeType.BATCH)
            tmr.end(TimeType.BATCH)
        tmr.end(TimeType.EPOCH)
    tmr.start("data_aug")
    tmr.end("data_aug")
    return tmr


def filled_cpu_gpu_timer():
    tmr = trainscope.CPUGPUTimer()
    for _ in range(3):
        tmr.start(TimeType.BATCH, gpu=True)
        tmr.start(TimeType.IO)
        tmr.end(TimeType.IO)
        tmr.end(TimeType.BATCH, gpu=True)
    return tmr


def expected_means(tmr, prefix):
    if isinstance(tmr, trainscope.CPUGPUTimer):
        sections = [("CPU/", False), ("GPU/", True)]
        stats = {f"{prefix}{section}{getattr(key, 'name', key)}": tmr.get_time_stats(key, gpu=gpu)
                 for section, gpu in sections for key in tmr.keys(gpu=gpu)}
    else:
        stats = {f"{prefix}{getattr(key, 'name', key)}": tmr.get_time_stats(key)
                 for key in tmr.keys()}
    return {name: s.mean for name, s in stats.items()}


def logged_metrics(mlflow, run_id):
    return mlflow.MlflowClient().get_run(run_id).data.metrics


@pytest.mark.parametrize("prefix, logged_prefix", [("train", "train/"), ("train/", "train/"),
                                                   ("", "")])
def test_log_mlflow_all_logs_deep500_names_and_means(mlflow_server, mlflow_tracking, prefix,
                                                     logged_prefix):
    assert mlflow_tracking.get_tracking_uri() == mlflow_server
    tmr = filled_timer()
    with mlflow_tracking.start_run() as run:
        tmr.log_mlflow_all(prefix)
    metrics = logged_metrics(mlflow_tracking, run.info.run_id)
    assert metrics == expected_means(tmr, logged_prefix)
    assert set(metrics) == {f"{logged_prefix}EPOCH", f"{logged_prefix}BATCH",
                            f"{logged_prefix}data_aug"}


def test_log_mlflow_all_of_a_cpu_gpu_timer(mlflow_server, mlflow_tracking):
    tmr = filled_cpu_gpu_timer()
    with mlflow_tracking.start_run() as run:
        tmr.log_mlflow_all("train")
    metrics = logged_metrics(mlflow_tracking, run.info.run_id)
    assert metrics == expected_means(tmr, "train/")
    assert {"train/CPU/BATCH", "train/CPU/IO"} <= set(metrics)
    assert ("train/GPU/BATCH" in metrics) == tmr.gpu_available()


def test_keys_without_statistics_are_not_logged(mlflow_tracking):
    tmr = trainscope.Timer(warmup=1)
    tmr.start(TimeType.EPOCH)  # all of EPOCH's samples are warm-up: NaN mean
    tmr.end(TimeType.EPOCH)
    for _ in range(2):
        tmr.start(TimeType.BATCH)
        tmr.end(TimeType.BATCH)
    with mlflow_tracking.start_run() as run:
        tmr.log_mlflow_all("train")
    assert logged_metrics(mlflow_tracking, run.info.run_id) == {
        "train/BATCH": tmr.get_time_stats(TimeType.BATCH).mean}


def test_log_wb_all_logs_the_means(wandb_offline):
    tmr = filled_cpu_gpu_timer()
    tmr.log_wb_all("train")
    summary = dict(wandb_offline.run.summary)
    for name, mean in expected_means(tmr, "train/").items():
        assert summary[name] == mean
    cpu = filled_timer()
    cpu.log_wb_all()
    summary = dict(wandb_offline.run.summary)
    assert summary["EPOCH"] == cpu.get_time_stats(TimeType.EPOCH).mean
    assert summary["_step"] == 1  # one wandb.log call per log_wb_all


@pytest.mark.parametrize("method, package", [("log_mlflow_all", "mlflow"),
                                             ("log_wb_all", "wandb")])
@pytest.mark.parametrize("make", [filled_timer, filled_cpu_gpu_timer])
def test_missing_package_raises_runtime_error(monkeypatch, method, package, make):
    monkeypatch.setitem(sys.modules, package, None)  # makes the import fail
    with pytest.raises(RuntimeError) as raised:
        getattr(make(), method)("train")
    assert str(raised.value) == f"{method} needs the {package} package: pip install {package}"
