"""Fixtures of the Python tests: a real MLflow tracking server, W&B offline runs.

Run against a build tree (PYTHONPATH=<build>/python) or an installed wheel.
The MLflow server runs from its own venv (full mlflow, which the test venv's
torch/numpy pins cannot share): set TRAINSCOPE_MLFLOW_SERVER_PYTHON to that
venv's python, or the tests that need the server are skipped.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from slurm_support import slurm  # noqa: F401  (the `slurm` fixture, for every test)

try:
    import trainscope  # (fail early with a hint, not per test)
except ImportError as error:
    raise pytest.UsageError(
        f"cannot import trainscope ({error}): build with -DTRAINSCOPE_BUILD_PYTHON=ON and set "
        "PYTHONPATH=<build>/python, or pip install the repository") from error

@pytest.fixture
def no_inherited_run(monkeypatch):
    """No run inherited from the environment (TRAINSCOPE_RUN_DIR, MLflow), and none left
    active afterwards."""
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # Timers earlier tests built with no run (kept alive by a traceback) would join this
    # test's first run with what they held: they are no part of it.
    trainscope.run._waiting_timers.clear()  # pylint: disable=protected-access
    trainscope._core._forget_held()  # pylint: disable=protected-access
    yield
    trainscope.end_run()


SERVER_PYTHON_ENV = "TRAINSCOPE_MLFLOW_SERVER_PYTHON"
SERVER_START_TIMEOUT_S = 240  # a cold start on a busy 2-core machine takes ~30 s


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process):
    # The server forks uvicorn workers and a job runner: end the whole group
    # it leads (it was started in a new session, so only its own processes).
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """URL of a real MLflow tracking server on 127.0.0.1 (sqlite backend)."""
    python = os.environ.get(SERVER_PYTHON_ENV)
    if not python:
        pytest.skip(f"{SERVER_PYTHON_ENV} is not set: point it at the python of a venv with "
                    "mlflow installed (tests/python/requirements-mlflow-server.txt)")
    pytest.importorskip("mlflow", reason="the test venv needs the mlflow client (mlflow-skinny)")
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = root / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [python, "-m", "mlflow", "server",
             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
             "--default-artifact-root", str(root / "artifacts"),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"MLflow server did not come up at {url}:\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(process)


@pytest.fixture
def mlflow_tracking(request, tmp_path, monkeypatch):
    """The mlflow module, tracking to the real server if configured, else to a
    file store under tmp_path; in a fresh experiment, with no active run."""
    mlflow = pytest.importorskip("mlflow", reason="the test venv needs mlflow-skinny")
    if os.environ.get(SERVER_PYTHON_ENV):
        uri = request.getfixturevalue("mlflow_server")
    else:
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = (tmp_path / "mlruns").as_uri()
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(f"{request.node.name}-{time.time_ns()}")
    try:
        yield mlflow
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(previous)


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """wandb with an offline run under tmp_path (no network, no account)."""
    wandb = pytest.importorskip("wandb", reason="wandb is not installed in the test venv")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=str(tmp_path), project="trainscope-tests")
    try:
        yield wandb
    finally:
        run.finish()


@pytest.fixture
def run_python():
    """Runs Python code in a fresh interpreter (same env): run_python(*argv) -> CompletedProcess."""

    def run(*args, timeout=300):
        return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, check=False)

    return run


@pytest.fixture(autouse=True)
def _isolate_mlflow_environment():
    """mlflow.set_experiment() exports MLFLOW_EXPERIMENT_ID into os.environ, which
    every later subprocess (the trainscope CLI, child runs) would inherit and
    apply to another test's server: restore MLFLOW_* after each test."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_")}
    yield
    for key in [k for k in os.environ if k.startswith("MLFLOW_")]:
        if key not in saved:
            del os.environ[key]
    os.environ.update(saved)
