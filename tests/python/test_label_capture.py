"""A label's capture (issue 40): when STRAGGLER, MEMORY-CREEP or THROUGHPUT-DRIFT first
appears in a running job, `trainscope run`'s watch writes capture-request.json into the
run, and each rank asked captures its next steps with torch.profiler, named for the label
(captures/capture-r<rank>-s<step>-<label>.json); `trainscope diagnose` names it at its
step. A steady job gets none; a damaged request file is said, naming it, and the run
loses nothing.

Needs torch; the jobs need the CLI binary (TRAINSCOPE_CLI).
"""

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

import trainscope

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("TRAINSCOPE_CLI")
JOB = os.path.join(HERE, "hang_jobs", "label_anomaly.py")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="needs torch")
needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")


def _env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _trace_events(path):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)  # Chrome trace JSON: the object or the array format (torch 1.13)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def _request(run_dir, label, step, ranks):
    doc = {"format": "trainscope.capture_request", "version": 1,
           "requests": [{"label": label, "step": step, "ranks": ranks, "time_ms": 0}]}
    path = os.path.join(run_dir, "capture-request.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)
    return path


def _steps(capture, n):
    import torch  # pylint: disable=import-outside-toplevel
    for _ in range(n):
        torch.ones(8, 8).mm(torch.ones(8, 8))
        capture.step()


def _ask(capture, label, step, ranks, then):
    """A request of `trainscope run`'s watch, the poller's look, then `then` steps."""
    _request(capture.run_dir, label, step, ranks)
    capture._poller.poll()  # pylint: disable=protected-access  (the thread's look, here)
    _steps(capture, then)


def test_a_request_naming_the_rank_captures_its_next_steps_named_for_the_label(tmp_path):
    from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
    capture = _anomaly.AnomalyCapture(str(tmp_path), 1, steps=3)
    try:
        _steps(capture, 5)
        _ask(capture, "MEMORY-CREEP", 4, [0, 1], then=10)
        _ask(capture, "MEMORY-CREEP", 4, [0, 1], then=10)  # the same request again
        # Another launcher of the job (a Slurm task's) writes the label at its own step.
        _ask(capture, "MEMORY-CREEP", 9, [1], then=10)
    finally:
        capture.close()
    # It began after the rank's step 5 (when it saw the request).
    assert [os.path.basename(p) for p in capture.captures] == ["capture-r1-s5-memory-creep.json"]
    assert any(str(e.get("name", "")).startswith("aten::")
               for e in _trace_events(capture.captures[0]))


def test_a_request_for_other_ranks_captures_nothing(tmp_path):
    from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
    capture = _anomaly.AnomalyCapture(str(tmp_path), 1, steps=3)
    try:
        _steps(capture, 3)
        _ask(capture, "STRAGGLER", 2, [0], then=8)
    finally:
        capture.close()
    assert capture.captures == []


@pytest.mark.parametrize("text,said", [
    ("{\"format\": \"trainscope.capture_request\", \"vers", "not JSON"),
    ("{\"format\": \"trainscope.capture_request\", \"version\": 1, \"requests\": "
     "[{\"label\": \"HANG\", \"step\": 1, \"ranks\": [0]}]}", "requests[0].label"),
    ("{\"format\": \"trainscope.capture_request\", \"version\": 1, \"requests\": "
     "[{\"label\": \"STRAGGLER\", \"step\": -1, \"ranks\": [0]}]}", "requests[0].step"),
    ("[]", "\"format\""),
    ("[" * 100000, "not JSON"),
])
def test_a_damaged_request_file_is_said_naming_it_and_ignored(tmp_path, capsys, text, said):
    from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
    capture = _anomaly.AnomalyCapture(str(tmp_path), 0, steps=2)
    path = tmp_path / "capture-request.json"
    path.write_text(text, encoding="utf-8")
    try:
        _steps(capture, 3)
        capture._poller.poll()  # pylint: disable=protected-access
        capture._poller.poll()  # pylint: disable=protected-access  (said once)
        _steps(capture, 5)
        # A good request written after it is still read.
        _ask(capture, "THROUGHPUT-DRIFT", 7, [0], then=5)
    finally:
        capture.close()
    err = capsys.readouterr().err
    assert err.count("capture request ignored") == 1, err
    assert str(path) in err and said in err, err
    assert [os.path.basename(p) for p in capture.captures] == [
        "capture-r0-s8-throughput-drift.json"]


def test_the_request_parser_raises_only_value_errors_on_any_mutation():
    # The parser's fuzz (a seeded mutation of a good file): a damaged file is a ValueError
    # naming the file, never another exception, whatever its bytes.
    import random  # pylint: disable=import-outside-toplevel
    from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
    good = json.dumps({"format": "trainscope.capture_request", "version": 1, "requests": [
        {"label": "STRAGGLER", "step": 3, "ranks": [0, 1], "time_ms": 5},
        {"label": "MEMORY-CREEP", "step": 9, "ranks": [1], "time_ms": 6}]})
    assert _anomaly.parse_requests(good, "f.json") == [("STRAGGLER", 3, (0, 1)),
                                                       ("MEMORY-CREEP", 9, (1,))]
    rng = random.Random(40)
    pieces = ['"', "{", "}", "[", "]", ",", ":", "-1", "1e400", "null", "true", '"x"', " ", "0"]
    for _ in range(3000):
        text = list(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(text))
            choice = rng.random()
            if choice < 0.4:
                del text[i]
            elif choice < 0.8:
                text.insert(i, rng.choice(pieces))
            else:
                text[i] = chr(rng.randrange(1, 0x2FF))
        try:
            _anomaly.parse_requests("".join(text), "f.json")
        except ValueError as error:
            assert str(error).startswith("f.json"), error


def test_the_poller_is_a_daemon_thread_that_ends_with_its_capture(tmp_path):
    from trainscope import _anomaly  # pylint: disable=import-outside-toplevel
    capture = _anomaly.AnomalyCapture(str(tmp_path), 0, steps=2)
    try:
        thread = capture._poller.thread  # pylint: disable=protected-access
        assert thread.name == "trainscope-capture-requests" and thread.daemon
        assert thread.is_alive()
        _request(str(tmp_path), "STRAGGLER", 0, [0])
        deadline = time.monotonic() + 30
        while not capture._asked and time.monotonic() < deadline:  # pylint: disable=protected-access
            time.sleep(0.1)
        assert list(capture._asked) == ["STRAGGLER"]  # pylint: disable=protected-access
    finally:
        capture.close()
    thread.join(30)
    assert not thread.is_alive()  # close() ends it
    assert _anomaly.AnomalyCapture(str(tmp_path), 0, steps=0)._poller is None  # pylint: disable=protected-access
    # A capture dropped without close() (a new run's) ends its thread within a look.
    dropped = _anomaly.AnomalyCapture(str(tmp_path), 0, steps=2)
    thread = dropped._poller.thread  # pylint: disable=protected-access
    assert thread.is_alive() and thread.daemon
    del dropped
    thread.join(30)
    assert not thread.is_alive()


def _label_job(tmp_path, mode, *extra):
    root = tmp_path / "runs"
    cmd = [CLI, "run", "--root", str(root), "--interval", "0.2", "--auto", "--",
           sys.executable, JOB, "--mode", mode] + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False,
                         env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    runs = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1, runs
    return str(runs[0]), out.stderr


@needs_cli
@pytest.mark.parametrize("mode,label", [("creep", "MEMORY-CREEP"),
                                        ("drift", "THROUGHPUT-DRIFT")])
def test_a_label_appearing_gives_one_capture_named_for_it(tmp_path, mode, label):
    run_dir, err = _label_job(tmp_path, mode, "--steps", "2000", "--until-captured")
    found = [c for c in trainscope.diagnose(run_dir).captures if c["label"] == label]
    assert len(found) == 1, (trainscope.diagnose(run_dir).captures, err[-3000:])
    c = found[0]
    assert c["rank"] == 0 and c["step"] > 0, c
    assert c["path"] == f"captures/capture-r0-s{c['step']}-{label.lower()}.json"
    assert any(str(e.get("name", "")).startswith("aten::")
               for e in _trace_events(os.path.join(run_dir, c["path"])))
    with open(os.path.join(run_dir, "capture-request.json"), encoding="utf-8") as f:
        requests = json.load(f)["requests"]
    assert [r["label"] for r in requests].count(label) == 1, requests
    assert f"{label} appeared at step" in err, err[-3000:]
    text = subprocess.run([CLI, "diagnose", run_dir], capture_output=True, text=True,
                          timeout=120, check=False).stdout
    assert f"rank 0: {label} appeared by step {c['step']}" in text, text


@needs_cli
def test_a_steady_job_gets_no_label_capture(tmp_path):
    run_dir, err = _label_job(tmp_path, "steady", "--steps", "250")
    request = os.path.join(run_dir, "capture-request.json")
    said = open(request, encoding="utf-8").read() if os.path.exists(request) else ""
    assert said == "", (said, err[-3000:])
    # A slow step's capture (a late wake-up on a loaded machine) is another matter.
    found = trainscope.diagnose(run_dir).captures
    assert [c for c in found if c["label"] is not None] == [], (found, err[-3000:])


@needs_cli
def test_a_two_rank_straggler_gets_a_capture_on_both_ranks(tmp_path):
    # STRAGGLER asks every rank that runs: the straggler's trace beside the one waiting.
    launch2 = os.path.join(HERE, "diagnosis_jobs", "launch2.py")
    root = tmp_path / "runs"
    env = _env()
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out = subprocess.run([CLI, "run", "--root", str(root), "--no-sample", "--", sys.executable,
                          launch2, os.path.join(HERE, "diagnosis_jobs", "straggler.py"),
                          "--steps", "300", "--capture-on-anomaly"],
                         capture_output=True, text=True, timeout=300, check=False, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = [p for p in root.iterdir() if not p.name.startswith(".")]
    run_dir = str(runs[0])
    found = [c for c in trainscope.diagnose(run_dir).captures if c["label"] == "STRAGGLER"]
    assert sorted(c["rank"] for c in found) == [0, 1], (found, out.stderr[-3000:])
    for c in found:
        assert c["path"] == f"captures/capture-r{c['rank']}-s{c['step']}-straggler.json"
        assert any(str(e.get("name", "")).startswith("aten::")
                   for e in _trace_events(os.path.join(run_dir, c["path"])))
    assert "STRAGGLER appeared at step" in out.stderr and "asked ranks 0, 1" in out.stderr


@needs_cli
def test_capture_steps_0_asks_for_nothing(tmp_path):
    root = tmp_path / "runs"
    out = subprocess.run([CLI, "run", "--root", str(root), "--interval", "0.2", "--auto",
                          "--capture-steps", "0", "--", sys.executable, JOB, "--mode", "creep",
                          "--steps", "300"], capture_output=True, text=True, timeout=300,
                         check=False, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert "MEMORY-CREEP" in out.stderr, out.stderr[-3000:]  # the end-of-run diagnosis says it
    assert not (run_dir / "capture-request.json").exists()
    assert not (run_dir / "captures").exists()
