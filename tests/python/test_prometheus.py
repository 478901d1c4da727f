"""The Prometheus endpoint against a real Prometheus (issue 43's proof).

Starts Debian's `prometheus` on 127.0.0.1 (scrape interval 1 s, a temporary
storage directory, stopped after) scraping a live two-rank job under
`trainscope run --prometheus`, and asks its HTTP API: for both ranks the step
time within 5% of what `trainscope diagnose` says at the same moment, the
data-wait share, and the diagnosis info metric. Also `trainscope serve`, a port
in use, and `promtool check metrics` on the live exposition.

Needs TRAINSCOPE_CLI=<build>/tools/trainscope and the `prometheus` binary
(Debian's prometheus package, scripts/setup.sh); skipped otherwise.
"""

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

CLI = os.environ.get("TRAINSCOPE_CLI")
HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "prometheus_jobs", "steady_ranks.py")
LAUNCH2 = os.path.join(HERE, "diagnosis_jobs", "launch2.py")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")

needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_prometheus = pytest.mark.skipif(
    not PROMETHEUS, reason="the prometheus binary is not installed (Debian's prometheus)")

IO_MS, FORWARD_MS, RANK1_EXTRA_MS = 20.0, 30.0, 15.0
SAMPLES, TOKENS, FLOPS, PEAK = 16, 16 * 128, 5e6, 1e9  # the ledger's work per step
MIN_STEPS = 150  # per rank before measuring: the window (100 after 5 warm-up) is full
DEADLINE_S = 180


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(what, probe, deadline_s=DEADLINE_S, processes=()):
    """Calls probe() until it returns something true; fails naming `what`."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        for p in processes:
            if p.poll() is not None:
                out, err = p.communicate()
                pytest.fail(f"{what}: {p.args[0]} exited {p.returncode}: {err[-3000:]}")
        try:
            result = probe()
            if result:
                return result
        except (OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {deadline_s} s (last error: {last})")


class Prometheus:
    def __init__(self, tmp_path, target_port):
        self.port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: trainscope\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for("prometheus ready", lambda: get(self.url("/-/ready"))[0] == 200,
                 processes=[self.process])

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def query(self, expr):
        """The instant vector: [(labels, value)]."""
        _, body = get(self.url("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]

    def stop(self):
        self.process.terminate()
        try:
            self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()


def start_job(tmp_path, listen, extra=()):
    stop = tmp_path / "stop"
    cmd = [CLI, "run", "--root", str(tmp_path / "runs"), "--name", "prom", "--quiet",
           "--prometheus", listen, *extra, "--", sys.executable, LAUNCH2, JOB,
           "--io-ms", str(IO_MS), "--forward-ms", str(FORWARD_MS),
           "--rank1-extra-ms", str(RANK1_EXTRA_MS), "--stop", str(stop), "--lr", "0.25",
           "--samples", str(SAMPLES), "--tokens", str(TOKENS), "--flops", str(FLOPS),
           "--peak-flops", str(PEAK)]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, stop


def finish(process, stop):
    stop.write_text("")
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, err


def by_rank(samples):
    return {s[0]["rank"]: s[1] for s in samples}


@needs_cli
@needs_prometheus
def test_prometheus_scrapes_a_live_two_rank_job_and_agrees_with_diagnose(tmp_path):
    port = free_port()
    job, stop = start_job(tmp_path, f"127.0.0.1:{port}", ["--prometheus-labels", "lr"])
    prometheus = None
    try:
        wait_for("the endpoint", lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200,
                 processes=[job])
        prometheus = Prometheus(tmp_path, port)
        # Both ranks past the warm-up and a full window, as Prometheus saw them.
        wait_for("both ranks' steps in Prometheus",
                 lambda: len(steps := by_rank(prometheus.query("trainscope_steps_total"))) == 2
                 and min(steps.values()) >= MIN_STEPS, processes=[job, prometheus.process])
        up = prometheus.query('up{job="trainscope"}')
        assert up and up[0][1] == 1.0, up
        # The same moment: Prometheus' latest scrape, then diagnose at once.
        p50 = by_rank(prometheus.query("trainscope_step_p50_seconds"))
        wait_share = by_rank(prometheus.query('trainscope_step_phase_ratio{phase="data_wait"}'))
        info = prometheus.query("trainscope_diagnosis_info")
        tokens = by_rank(prometheus.query("trainscope_tokens_per_second"))
        mfu = by_rank(prometheus.query("trainscope_mfu_ratio"))
        # Ratios within one scrape (an instant query reads both families at one moment).
        per_sample = by_rank(prometheus.query(
            "trainscope_tokens_per_second / trainscope_samples_per_second"))
        mfu_per_token = by_rank(prometheus.query(
            "trainscope_mfu_ratio / trainscope_tokens_per_second"))
        job_tokens = prometheus.query(
            "vector(scalar(trainscope_run_tokens_per_second)"
            " / scalar(sum(trainscope_tokens_per_second)))")
        job_mfu = prometheus.query(
            "vector(scalar(trainscope_run_mfu_ratio) / scalar(avg(trainscope_mfu_ratio)))")
        run_dir = os.path.join(tmp_path / "runs", os.listdir(tmp_path / "runs")[0])
        done = subprocess.run([CLI, "diagnose", run_dir, "--json"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        d = json.loads(done.stdout)
    finally:
        rc, err = finish(job, stop)
        if prometheus:
            prometheus.stop()
    assert rc == 0, err[-3000:]

    assert sorted(p50) == ["0", "1"], p50
    ranks = {str(r["rank"]): r for r in d["ranks"]}
    for rank in ("0", "1"):
        said = ranks[rank]["window"]["step_p50_s"]
        assert p50[rank] == pytest.approx(said, rel=0.05), (rank, p50[rank], said)
        said_wait = ranks[rank]["window"]["phase_share"]["data_wait"]
        assert wait_share[rank] == pytest.approx(said_wait, abs=0.03), (rank, wait_share, said_wait)
    # The ledger (docs/ledger.md) while the run goes on: per rank and job-wide, as diagnose's
    # (rates over every step with work: a few more steps by diagnose's moment change little).
    said = {str(r["rank"]): r for r in d["ledger"]["ranks"]}
    for rank in ("0", "1"):
        assert tokens[rank] == pytest.approx(said[rank]["tokens_per_s"], rel=0.1), (rank, tokens)
        assert mfu[rank] == pytest.approx(said[rank]["mfu"], rel=0.1), (rank, mfu)
        assert per_sample[rank] == pytest.approx(TOKENS / SAMPLES), (rank, per_sample)
        assert mfu_per_token[rank] == pytest.approx(FLOPS / PEAK / TOKENS), (rank, mfu_per_token)
    assert tokens["1"] < tokens["0"]  # rank 1's steps are longer
    # Job-wide: the ranks' tokens/s summed, their MFU's mean.
    assert len(job_tokens) == 1 and job_tokens[0][1] == pytest.approx(1.0), job_tokens
    assert len(job_mfu) == 1 and job_mfu[0][1] == pytest.approx(1.0), job_mfu
    # Rank 1's step is longer by construction, and its wait share smaller.
    assert p50["1"] > p50["0"]
    assert wait_share["1"] < wait_share["0"]
    # The diagnosis as an info metric: the window's labels, with the run's labels.
    labels = {m["label"] for m, v in info if v == 1.0}
    window_labels = {label["name"] for label in d["window"]["labels"]}
    assert labels & window_labels, (labels, window_labels)
    for m, _ in info:
        assert m["run"] == d["run_id"] and m["run_name"] == "prom" and m["lr"] == "0.25", m

    # Python's diagnose binds the same per-rank figures as the CLI's document.
    trainscope = pytest.importorskip("trainscope")
    ended = json.loads(subprocess.run([CLI, "diagnose", run_dir, "--json"], capture_output=True,
                                      text=True, timeout=120, check=True).stdout)
    for r in trainscope.diagnose(run_dir).ranks:
        said = {str(x["rank"]): x for x in ended["ranks"]}[str(r.rank)]
        assert r.step_p50_s == pytest.approx(said["window"]["step_p50_s"])
        assert r.phase_share["data_wait"] == pytest.approx(said["window"]["phase_share"]["data_wait"])
        assert math.isnan(r.phase_share["comm"])  # never timed


@needs_cli
def test_the_live_exposition_passes_promtool_and_other_requests_get_404(tmp_path):
    port = free_port()
    job, stop = start_job(tmp_path, str(port))
    try:
        def scraped():
            _, body = get(f"http://127.0.0.1:{port}/metrics")
            return body if 'trainscope_steps_total{' in body and "phase=" in body else None
        body = wait_for("a scrape with steps", scraped, processes=[job])
        for method, path in [("GET", "/"), ("POST", "/metrics"), ("GET", "/metrics/../x")]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                             data=b"" if method == "POST" else None)
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(request, timeout=5)
            assert e.value.code == 404, (method, path)
        # A second endpoint on the same port: an error before its command starts.
        marker = tmp_path / "started"
        second = subprocess.run([CLI, "run", "--root", str(tmp_path / "runs2"), "--prometheus",
                                 str(port), "--", sys.executable, "-c",
                                 f"open({str(marker)!r}, 'w')"],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"127.0.0.1:{port}: the port is in use" in second.stderr, second.stderr
        assert not marker.exists()
    finally:
        rc, err = finish(job, stop)
    assert rc == 0, err[-3000:]
    assert "Prometheus metrics at http://127.0.0.1:" in err
    # The docs' table and the Grafana dashboard name the families the endpoint has.
    families = set(re.findall(r"^# TYPE (\S+) ", body, re.M))
    root = os.path.dirname(os.path.dirname(HERE))
    with open(os.path.join(root, "docs", "prometheus.md")) as f:
        documented = set(re.findall(r"^\| `(trainscope_\w+)`", f.read(), re.M))
    assert documented == families, (documented ^ families)
    with open(os.path.join(root, "examples", "grafana", "trainscope-dashboard.json")) as f:
        drawn = set(re.findall(r"trainscope_\w+", f.read()))
    assert drawn and drawn <= families, drawn - families
    if not PROMTOOL:
        pytest.skip("promtool is not installed (Debian's prometheus)")
    checked = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", \
        checked.stdout + checked.stderr


@needs_cli
def test_serve_exports_the_live_runs_under_a_root(tmp_path):
    port = free_port()
    root = tmp_path / "runs"
    root.mkdir()
    serve = subprocess.Popen([CLI, "serve", "--prometheus", str(port), str(root), "--grace", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job = None
    try:
        wait_for("serve", lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200,
                 processes=[serve])
        job, stop = start_job(tmp_path, str(free_port()))
        wait_for("the job's ranks in serve's output",
                 lambda: get(f"http://127.0.0.1:{port}/metrics")[1].count(
                     "trainscope_steps_total{") == 2, processes=[serve, job])
        rc, err = finish(job, stop)
        assert rc == 0, err[-3000:]
        # Ended: it leaves after the grace period (1 s).
        wait_for("the ended run to leave",
                 lambda: "trainscope_steps_total{" not in get(
                     f"http://127.0.0.1:{port}/metrics")[1], processes=[serve])
    finally:
        serve.terminate()
        out, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in err
