"""MLflow export against a real tracking server: `trainscope sync <run-dir>`.

The run directory is written here in the documented format (docs/run-format.md)
so that every value is known; the CLI (TRAINSCOPE_CLI) uploads it; the values
are read back through MLflow's REST API. The server runs from its own venv
(TRAINSCOPE_MLFLOW_SERVER_PYTHON, see conftest.py) with a sqlite backend, and
is stopped and restarted in the middle of a run.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import SERVER_PYTHON_ENV, SERVER_START_TIMEOUT_S, _free_port, _healthy, _stop

CLI_ENV = "TRAINSCOPE_CLI"
REGIONS_HEADER = "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n"
METRICS_HEADER = "key,value,step,timestamp_ms,rank\n"
START_MS = 1_760_000_000_000
STATS_FIELDS = ("total", "min", "mean", "median", "max", "stdev", "p5", "p25", "p75", "p95",
                "p99", "cv", "median_ci_low", "median_ci_high")


@pytest.fixture
def cli():
    path = os.environ.get(CLI_ENV)
    if not path:
        pytest.skip(f"{CLI_ENV} is not set: point it at the built `trainscope` tool "
                    "(<build>/tools/trainscope)")
    return path


class Server:
    """An MLflow server that a test can stop and restart on the same port and db."""

    def __init__(self, root):
        self.python = os.environ.get(SERVER_PYTHON_ENV)
        if not self.python:
            pytest.skip(f"{SERVER_PYTHON_ENV} is not set (see conftest.py)")
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self):
        log_path = self.root / "server.log"
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.python, "-m", "mlflow", "server",
                 "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                 "--default-artifact-root", str(self.root / "artifacts"),
                 "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"MLflow server did not come up at {self.url}:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)

    def stop(self):
        if self.process is not None:
            _stop(self.process)
            self.process = None


@pytest.fixture
def restartable_server(tmp_path):
    server = Server(tmp_path / "server")
    server.root.mkdir()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class RunDir:
    """A run directory in trainscope's format, written row by row."""

    def __init__(self, path, name="mlflow-test", params=None, tags=None):
        self.path = path
        self.regions = []  # (key, device, step, start_ns, duration_ns)
        self.metrics = []  # (key, value, step, timestamp_ms)
        path.mkdir()
        (path / "run.json").write_text(json.dumps({
            "format": "trainscope.run", "version": 1, "id": "0123456789abcdef0123456789abcdef",
            "name": name, "experiment": "Default", "start_time_ms": START_MS,
            "params": params or {}, "tags": tags or {}}))
        (path / "regions-0.csv").write_text(REGIONS_HEADER)
        (path / "metrics-0.csv").write_text(METRICS_HEADER)
        self.set_status("RUNNING")

    def set_status(self, status, end_time_ms=0):
        (self.path / "rank-0.json").write_text(json.dumps({
            "format": "trainscope.rank", "version": 1, "rank": 0, "local_rank": 0,
            "world_size": 1, "host": "localhost", "pid": os.getpid(), "status": status,
            "start_time_ms": START_MS, "end_time_ms": end_time_ms,
            "heartbeat_ms": int(time.time() * 1000), "flush_interval_ms": 3_600_000}))

    def add_regions(self, key, durations_ns, device="CPU"):
        with open(self.path / "regions-0.csv", "a") as f:
            for duration in durations_ns:
                step = sum(1 for r in self.regions if r[0] == key and r[1] == device)
                start_ns = (START_MS + 10 * len(self.regions)) * 1_000_000
                self.regions.append((key, device, step, start_ns, duration))
                f.write(f"{key},{device},0,0,{start_ns},{duration},{step},0\n")

    def add_metrics(self, key, values):
        with open(self.path / "metrics-0.csv", "a") as f:
            for value in values:
                step = sum(1 for m in self.metrics if m[0] == key)
                timestamp = START_MS + 1000 + len(self.metrics)
                self.metrics.append((key, value, step, timestamp))
                f.write(f"{key},{value!r},{step},{timestamp},0\n")

    def end(self, summary_means):
        entries = []
        for (key, device), mean in summary_means.items():
            entry = {"key": key, "device": device, "count": 3}
            entry.update({field: mean for field in STATS_FIELDS})
            entry.update({"warmup_excluded": 0, "approximate": False})
            entries.append(entry)
        (self.path / "summary-0.json").write_text(json.dumps({
            "format": "trainscope.stats", "version": 1, "has_gpu_section": False,
            "entries": entries}))
        self.set_status("FINISHED", end_time_ms=START_MS + 60_000)

    def cursor(self):
        return json.loads((self.path / "mlflow-sync.json").read_text())


def sync(cli, run_dir, url, *extra, env=None):
    return subprocess.run([cli, "sync", str(run_dir.path), "--tracking-uri", url, *extra],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **(env or {})})


def api(url, endpoint, **query):
    full = f"{url}/api/2.0/mlflow/{endpoint}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(full, timeout=30) as response:
        return json.loads(response.read())


def history(url, run_id, key):
    points = api(url, "metrics/get-history", run_id=run_id, metric_key=key,
                 max_results=25000).get("metrics", [])
    return sorted((p["step"], p["timestamp"], p["value"]) for p in points)


def expected_regions(run_dir, key, device="CPU"):
    return sorted((step, start_ns // 1_000_000, duration / 1e9)
                  for k, d, step, start_ns, duration in run_dir.regions if (k, d) == (key, device))


def expected_metrics(run_dir, key):
    return sorted((step, timestamp, value) for k, value, step, timestamp in run_dir.metrics
                  if k == key)


def test_sync_uploads_every_value_params_tags_summary_and_status(cli, mlflow_server, tmp_path):
    run_dir = RunDir(tmp_path / "run", name="full-run", params={"lr": "0.1", "batch": "32"},
                     tags={"team": "perf"})
    run_dir.add_regions("BATCH", [1_500_000, 2_000_001, 1_999_999, 3_000_000])
    run_dir.add_regions("EPOCH", [9_000_000_000])
    run_dir.add_regions("BATCH", [4_000_000], device="GPU")
    run_dir.add_metrics("loss", [0.9, 0.5, 0.25, 0.125])
    run_dir.end({("EPOCH", "CPU"): 9.0, ("BATCH", "CPU"): 0.002125})

    result = sync(cli, run_dir, mlflow_server, "--experiment", "trainscope-sync-full")
    assert result.returncode == 0, result.stderr
    run_id = run_dir.cursor()["run_id"]

    run = api(mlflow_server, "runs/get", run_id=run_id)["run"]
    assert run["info"]["status"] == "FINISHED"
    assert run["info"]["end_time"] == START_MS + 60_000
    assert run["info"]["run_name"] == "full-run"
    params = {p["key"]: p["value"] for p in run["data"].get("params", [])}
    assert params == {"lr": "0.1", "batch": "32"}
    tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
    assert tags["team"] == "perf"
    assert tags["mlflow.runName"] == "full-run"
    assert history(mlflow_server, run_id, "CPU/BATCH") == expected_regions(run_dir, "BATCH")
    assert history(mlflow_server, run_id, "CPU/EPOCH") == expected_regions(run_dir, "EPOCH")
    assert history(mlflow_server, run_id, "GPU/BATCH") == expected_regions(run_dir, "BATCH", "GPU")
    assert history(mlflow_server, run_id, "loss") == expected_metrics(run_dir, "loss")
    # Deep500's summary keys: the mean.
    assert [p[2] for p in history(mlflow_server, run_id, "train/CPU/EPOCH")] == [9.0]
    assert [p[2] for p in history(mlflow_server, run_id, "train/CPU/BATCH")] == [0.002125]

    # A second sync has nothing left to send.
    again = sync(cli, run_dir, mlflow_server)
    assert again.returncode == 0, again.stderr
    assert "0 metric values, 0 params, 0 tags" in again.stdout
    assert len(history(mlflow_server, run_id, "loss")) == 4


def test_server_stop_and_restart_mid_run_loses_and_duplicates_nothing(cli, restartable_server,
                                                                      tmp_path):
    server = restartable_server
    run_dir = RunDir(tmp_path / "run", params={"seed": "7"})
    run_dir.add_regions("BATCH", range(1_000_000, 1_000_000 + 1500 * 1000, 1000))  # 2 batches
    run_dir.add_metrics("loss", [1.0 / (i + 1) for i in range(300)])
    first = sync(cli, run_dir, server.url)
    assert first.returncode == 0, first.stderr
    cursor_before = run_dir.cursor()
    run_id = cursor_before["run_id"]

    server.stop()
    run_dir.add_regions("BATCH", range(5_000_000, 5_000_000 + 700 * 1000, 1000))
    run_dir.add_metrics("loss", [0.5 ** i for i in range(50)])
    down = sync(cli, run_dir, server.url, env={"MLFLOW_TRACKING_USERNAME": "alice",
                                               "MLFLOW_TRACKING_PASSWORD": "s3cr3t-pw"})
    assert down.returncode == 1
    assert "runs/log-batch" in down.stderr and "cannot reach MLflow" in down.stderr
    assert "s3cr3t-pw" not in down.stderr + down.stdout
    assert run_dir.cursor() == cursor_before  # nothing was accepted, nothing advanced

    server.start()
    run_dir.add_metrics("loss", [42.0])
    run_dir.end({("BATCH", "CPU"): 0.002})
    up = sync(cli, run_dir, server.url)
    assert up.returncode == 0, up.stderr

    regions = history(server.url, run_id, "CPU/BATCH")
    assert len(regions) == len(run_dir.regions) == 2200  # each value exactly once
    assert regions == expected_regions(run_dir, "BATCH")
    assert history(server.url, run_id, "loss") == expected_metrics(run_dir, "loss")
    run = api(server.url, "runs/get", run_id=run_id)["run"]
    assert run["info"]["status"] == "FINISHED"
    assert "s3cr3t-pw" not in (run_dir.path / "mlflow-sync.json").read_text()


def test_changed_param_is_a_clear_mlflow_error(cli, mlflow_server, tmp_path):
    run_dir = RunDir(tmp_path / "run", params={"lr": "0.1"})
    assert sync(cli, run_dir, mlflow_server).returncode == 0
    info = json.loads((run_dir.path / "run.json").read_text())
    info["params"]["lr"] = "0.2"  # MLflow params are write-once
    (run_dir.path / "run.json").write_text(json.dumps(info))
    result = sync(cli, run_dir, mlflow_server)
    assert result.returncode == 1
    assert "MLflow POST runs/log-batch: HTTP 400 INVALID_PARAMETER_VALUE" in result.stderr
    assert "lr" in result.stderr


def test_invalid_key_is_skipped_with_a_warning_and_the_rest_arrives(cli, mlflow_server, tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run_dir.add_metrics("loss", [1.0])
    run_dir.add_metrics("bad key!", [2.0])
    run_dir.add_metrics("loss", [0.5])
    result = sync(cli, run_dir, mlflow_server)
    assert result.returncode == 0, result.stderr
    assert "bad key!" in result.stderr and "skipped 1" in result.stdout
    run_id = run_dir.cursor()["run_id"]
    assert [p[2] for p in history(mlflow_server, run_id, "loss")] == [1.0, 0.5]


def test_unreachable_server_and_bad_usage_exit_codes(cli, tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run_dir.add_metrics("loss", [1.0])
    port = _free_port()
    down = sync(cli, run_dir, f"http://bob:hunter2@127.0.0.1:{port}")
    assert down.returncode == 1
    assert "hunter2" not in down.stderr and f"http://***@127.0.0.1:{port}" in down.stderr
    assert not (run_dir.path / "mlflow-sync.json").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    usage = subprocess.run([cli, "sync", str(run_dir.path)], capture_output=True, text=True,
                           env=env, check=False)
    assert usage.returncode == 2 and "--tracking-uri" in usage.stderr
    assert subprocess.run([cli, "--version"], capture_output=True, check=False).returncode == 0


LIVE_RUN = textwrap.dedent("""
    import sys, time
    import trainscope
    with trainscope.start_run(run_name="live", params={"lr": "0.1"}, root=sys.argv[1],
                              flush_interval=0.2) as run:
        print(run.dir, flush=True)
        tmr = trainscope.Timer()
        for i in range(50):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
            trainscope.log_metric("loss", 1.0 / (i + 1), step=i)
        time.sleep(3)  # several flushes: the live exporter uploads
        print("phase1", flush=True)
        sys.stdin.readline()  # the test stops the server
        for i in range(50, 120):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
            trainscope.log_metric("loss", 1.0 / (i + 1), step=i)
        time.sleep(1)
""")


def test_live_export_survives_a_server_outage_then_sync_completes(cli, restartable_server,
                                                                   tmp_path):
    import trainscope  # pylint: disable=import-outside-toplevel
    if not hasattr(trainscope, "start_run"):
        pytest.skip("this build of the trainscope module has no start_run")
    server = restartable_server
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url,
           "MLFLOW_EXPERIMENT_NAME": "trainscope-live"}
    child = subprocess.Popen([sys.executable, "-c", LIVE_RUN, str(tmp_path / "runs")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        run_dir = child.stdout.readline().strip()
        assert child.stdout.readline().strip() == "phase1"
        # Uploaded while the run goes on (polled: a loaded machine may take longer than 3 s).
        cursor_path = os.path.join(run_dir, "mlflow-sync.json")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(cursor_path):
                run_id = json.loads(open(cursor_path).read())["run_id"]
                live = history(server.url, run_id, "loss")
                if len(live) == 50 and len(history(server.url, run_id, "CPU/BATCH")) == 50:
                    break
            time.sleep(0.2)
        assert os.path.exists(cursor_path), "the live exporter never created its cursor"
        live = history(server.url, run_id, "loss")
        assert [p[0] for p in live] == list(range(50))
        assert len(history(server.url, run_id, "CPU/BATCH")) == 50
        server.stop()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=120) == 0  # an outage never fails the training script
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    server.start()
    result = subprocess.run([cli, "sync", run_dir, "--tracking-uri", server.url],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    losses = history(server.url, run_id, "loss")
    assert [p[0] for p in losses] == list(range(120))  # each step exactly once
    assert [p[2] for p in losses] == [1.0 / (i + 1) for i in range(120)]
    assert len(history(server.url, run_id, "CPU/BATCH")) == 120
    assert len(history(server.url, run_id, "train/CPU/BATCH")) == 1
    run = api(server.url, "runs/get", run_id=run_id)["run"]
    assert run["info"]["status"] == "FINISHED"
    assert {p["key"]: p["value"] for p in run["data"]["params"]} == {"lr": "0.1"}


def test_trainscope_run_uploads_the_diagnosis_tags_set_at_its_end(cli, mlflow_server, tmp_path):
    """`trainscope run --mlflow`: the diagnosis tags, set after the command exited, reach the
    server with the run's end (the launcher's syncer uploads them from run.json)."""
    from run_files import INPUT_BOUND_JOB  # pylint: disable=import-outside-toplevel
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT")}
    env["MLFLOW_EXPERIMENT_NAME"] = "trainscope-run-diagnosis"
    result = subprocess.run([cli, "run", "--root", str(tmp_path / "runs"), "--no-sample",
                             "--mlflow", mlflow_server, "--", sys.executable, "-c",
                             INPUT_BOUND_JOB],
                            capture_output=True, text=True, timeout=300, check=False, env=env)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    tags = json.loads((run_dir / "run.json").read_text())["tags"]
    assert tags["trainscope.diagnosis"].startswith("INPUT-BOUND")
    run_id = json.loads((run_dir / "mlflow-sync.json").read_text())["run_id"]
    run = api(mlflow_server, "runs/get", run_id=run_id)["run"]
    uploaded = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
    for key in ("trainscope.diagnosis", "trainscope.diagnosis.labels",
                "trainscope.diagnosis.input_bound", "trainscope.exit_code"):
        assert uploaded.get(key) == tags[key], key
    assert run["info"]["status"] == "FINISHED"


LEDGER_JOB = textwrap.dedent('''
    import json, os, sys, time, urllib.parse, urllib.request
    import trainscope
    server, run_dir = sys.argv[1], os.environ["TRAINSCOPE_RUN_DIR"]
    timer = trainscope.Timer()
    def seen_on_server():
        try:
            with open(os.path.join(run_dir, "mlflow-sync.json"), encoding="utf-8") as f:
                run_id = json.load(f)["run_id"]
            query = urllib.parse.urlencode({"run_id": run_id, "metric_key": "ledger/tokens_per_s"})
            url = f"{server}/api/2.0/mlflow/metrics/get-history?{query}"
            with urllib.request.urlopen(url, timeout=10) as response:
                return bool(json.loads(response.read()).get("metrics"))
        except (OSError, ValueError, KeyError):
            return False
    # Trains until the server shows the ledger's tokens/s (at most 90 s): it
    # arrived while the job ran.
    deadline, step, live = time.monotonic() + 90, 0, False
    while time.monotonic() < deadline:
        timer.start("BATCH")
        time.sleep(0.01)
        timer.end("BATCH")
        trainscope.log_step_work(samples=4, tokens=4 * 64)
        step += 1
        if step % 100 == 0 and seen_on_server():
            live = True
            break
    for _ in range(50):  # a few more steps after it was seen
        timer.start("BATCH")
        time.sleep(0.01)
        timer.end("BATCH")
        trainscope.log_step_work(samples=4, tokens=4 * 64)
    print("LIVE" if live else "NOT LIVE")
''')


def test_trainscope_run_logs_the_ledger_live_and_its_final_figures(cli, mlflow_server, tmp_path):
    """`trainscope run --mlflow` (issue 42): the ledger's tokens/s reaches the server while the
    job trains (the job waits to see it), and its last point is the end-of-run ledger's, the
    figure `trainscope diagnose` derives (one derivation)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT")}
    env["MLFLOW_EXPERIMENT_NAME"] = "trainscope-run-ledger"
    result = subprocess.run([cli, "run", "--root", str(tmp_path / "runs"), "--no-sample",
                             "--mlflow", mlflow_server, "--", sys.executable, "-c", LEDGER_JOB,
                             mlflow_server],
                            capture_output=True, text=True, timeout=300, check=False, env=env)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "LIVE" in (run_dir / "stdout.log").read_text() and \
        "NOT LIVE" not in (run_dir / "stdout.log").read_text()
    run_id = json.loads((run_dir / "mlflow-sync.json").read_text())["run_id"]
    tokens = history(mlflow_server, run_id, "ledger/tokens_per_s")
    samples = history(mlflow_server, run_id, "ledger/samples_per_s")
    assert len(tokens) >= 2 and len(samples) == len(tokens)  # live points, then the final one
    assert [p[0] for p in tokens] == sorted({p[0] for p in tokens})  # steps grow, each once
    diagnosis = json.loads(subprocess.run([cli, "diagnose", str(run_dir), "--json"],
                                          capture_output=True, text=True, timeout=120,
                                          check=True).stdout)
    final = tokens[-1][2]
    assert final == pytest.approx(diagnosis["ledger"]["tokens_per_s"], rel=1e-9)
    assert samples[-1][2] == pytest.approx(final / 64, rel=1e-9)
    # About 256 tokens a step of a little over 10 ms.
    assert 10_000 < final < 26_000
