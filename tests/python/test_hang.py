"""Hangs (issue 40): a two-rank gloo job in which rank 1 stops before the all-reduce of
step 20 (tests/python/hang_jobs/hang.py) is HANG in `trainscope diagnose --json` and
`trainscope top --once`, naming rank 1; `trainscope dump` writes each rank's stacks (rank
1's holding sleep_forever, rank 0's waiting in all_reduce); `trainscope run --on-hang kill`
ends the job KILLED with the tag trainscope.end_reason=hang; a two-lock deadlock's dump
shows both threads. hang_min_s is 5 s here (--threshold hang_min_s=5).

Every wait is bounded and every process of a job is killed at the end, whatever happened.
Needs the CLI binary (TRAINSCOPE_CLI) and torch.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import trainscope
from run_files import job_processes, kill_job

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("TRAINSCOPE_CLI")
LAUNCH2 = os.path.join(HERE, "diagnosis_jobs", "launch2.py")
JOB = os.path.join(HERE, "hang_jobs", "hang.py")
MARK = "TRAINSCOPE_TEST_HANG_JOB"

pytestmark = [
    pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

START_S = 240  # torch's import and gloo's rendezvous on a busy two-core machine
HANG_S = 90  # hang_min_s (5) + the watch's poll + the ranks' flush, generously


def _env(mark):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env[MARK] = mark
    return env


def _job_processes(mark):
    return job_processes(MARK, mark)


def _kill_all(mark):
    kill_job(MARK, mark)


def _start(tmp_path, how, on_hang="none"):
    root = tmp_path / "runs"
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    cmd = [CLI, "run", "--root", str(root), "--no-sample", "--kill-after", "20",
           "--on-hang", on_hang, "--threshold", "hang_min_s=5", "--",
           sys.executable, LAUNCH2, JOB, "--how", how]
    launcher = subprocess.Popen(cmd, env=_env(mark), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    return launcher, root, mark


def _run_dir(root, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if root.is_dir():
            runs = [p for p in root.iterdir() if not p.name.startswith(".")]
            if runs:
                return str(runs[0])
        time.sleep(0.2)
    raise AssertionError(f"no run under {root} within {timeout} s")


def _wait_for(what, check, timeout, every=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cli(*args, timeout=60):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def _hang_labels(run_dir):
    out = _cli("diagnose", run_dir, "--json", "--threshold", "hang_min_s=5")
    if out.returncode != 0:
        return None
    doc = json.loads(out.stdout)
    return [l for l in doc["window"]["labels"] if l["name"] == "HANG"] or None


def _end(launcher, mark):
    """Ends the job whatever happened: SIGTERM to the launcher, then SIGKILL to all of it."""
    try:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.communicate(timeout=10)
    finally:
        _kill_all(mark)


def test_a_rank_that_stops_is_hung_with_its_stack_and_the_other_waits_in_the_collective(
        tmp_path):
    launcher, root, mark = _start(tmp_path, "sleep")
    try:
        run_dir = _run_dir(root, START_S)
        _wait_for("rank 1 stops", lambda: "stops at step 20" in _read(
            os.path.join(run_dir, "stdout.log")), START_S)
        hangs = _wait_for("HANG in diagnose --json", lambda: _hang_labels(run_dir), HANG_S)
        assert 1 in [l["rank"] for l in hangs], hangs
        # The launcher noticed it with no reader running: its line on stderr.log.
        _wait_for("the launcher's HANG line", lambda: "trainscope run: HANG:" in _read(
            os.path.join(run_dir, "stderr.log")), HANG_S)
        # Evidence: every rank's stacks.
        out = _cli("dump", run_dir)
        assert out.returncode == 0, out.stderr
        assert "asked ranks 0, 1" in out.stdout, out.stdout
        _wait_for("rank 1's stack", lambda: "sleep_forever" in _read(
            os.path.join(run_dir, "dump-1.txt")), 30)
        _wait_for("rank 0's stack", lambda: "all_reduce" in _read(
            os.path.join(run_dir, "dump-0.txt")), 30)
        dump1 = _wait_for("dump-1.json", lambda: _read(os.path.join(run_dir, "dump-1.json")), 30)
        main1 = [t for t in json.loads(dump1)["threads"] if t["main"]][0]
        assert main1["frames"][0]["function"] == "sleep_forever", main1
        # The diagnosis now says where rank 1 is.
        hangs = _wait_for("HANG with the stack", lambda: [
            l for l in (_hang_labels(run_dir) or [])
            if l["rank"] == 1 and "sleep_forever" in l["evidence"]], 30)
        assert "has not ended for" in hangs[0]["evidence"]
        top = _cli("top", run_dir, "--once", "--threshold", "hang_min_s=5")
        assert top.returncode == 0, top.stderr
        assert "HANG" in top.stdout and "rank 1" in top.stdout and "HUNG" in top.stdout, \
            top.stdout
        assert launcher.poll() is None  # --on-hang none: left running
    finally:
        _end(launcher, mark)
    assert not _job_processes(mark)


def test_on_hang_kill_ends_the_job_killed_with_reason_hang_and_dumps_first(tmp_path):
    launcher, root, mark = _start(tmp_path, "sleep", on_hang="kill")
    try:
        _, stderr = launcher.communicate(timeout=START_S + HANG_S)
        run_dir = _run_dir(root, 1)
        run = trainscope.read_run(run_dir)
        assert run.status == "KILLED", stderr
        assert run.tags.get("trainscope.end_reason") == "hang", run.tags
        assert "ending the job (--on-hang kill)" in stderr, stderr
        assert "sleep_forever" in _read(os.path.join(run_dir, "dump-1.txt"))
        # The end-of-run summary says HANG, judged at the job's end, with rank 1's stack.
        summary = stderr[stderr.index("trainscope: run "):]
        assert "HANG: step 20 has not ended" in summary, summary
        assert "ran until the job was ended for the hang" in summary, summary
        assert "sleep_forever" in summary, summary
    finally:
        _end(launcher, mark)
    assert not _job_processes(mark)


def test_a_two_lock_deadlock_dumps_both_threads(tmp_path):
    launcher, root, mark = _start(tmp_path, "deadlock", on_hang="kill")
    try:
        launcher.communicate(timeout=START_S + HANG_S)
        run_dir = _run_dir(root, 1)
        doc = json.loads(_read(os.path.join(run_dir, "dump-1.json")))
        by_name = {t["name"]: [f["function"] for f in t["frames"]] for t in doc["threads"]}
        main = [t for t in doc["threads"] if t["main"]][0]
        assert main["frames"][0]["function"] == "deadlock", main
        assert by_name["lock-taker"][0] == "take_the_other_way", by_name
        stacks = _read(os.path.join(run_dir, "dump-1.txt"))
        assert "deadlock" in stacks and "take_the_other_way" in stacks
    finally:
        _end(launcher, mark)
    assert not _job_processes(mark)


def test_dump_on_a_finished_run_says_so(tmp_path):
    root = tmp_path / "runs"
    out = subprocess.run([CLI, "run", "--root", str(root), "--no-sample", "--", sys.executable,
                          "-c", "import trainscope; t = trainscope.Timer(); t.start(1); t.end(1)"],
                         capture_output=True, text=True, timeout=120, check=False,
                         env=_env("finished"))
    assert out.returncode == 0, out.stderr
    run_dir = _run_dir(root, 1)
    dump = _cli("dump", run_dir)
    assert dump.returncode == 0 and "has ended" in dump.stdout, dump.stdout + dump.stderr


# ---- Anomaly capture ---------------------------------------------------------

ANOMALY_JOB = os.path.join(HERE, "hang_jobs", "anomaly.py")


def _anomaly_job(tmp_path, slow_step):
    env = _env("anomaly")
    out = subprocess.run([sys.executable, ANOMALY_JOB, "--root", str(tmp_path / "runs"),
                          "--slow-step", str(slow_step)], capture_output=True, text=True,
                         timeout=240, check=False, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_slow_step_gives_one_capture_of_the_steps_after_it(tmp_path):
    captures = _anomaly_job(tmp_path, 40)
    assert len(captures) == 1, captures
    path = captures[0]
    assert os.path.basename(path) == "capture-r0-s40.json"
    assert os.path.basename(os.path.dirname(path)) == "captures"
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)  # Chrome trace JSON: the object or the array format (torch 1.13)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e.get("name") for e in events}
    assert {"step 41", "step 42", "step 43"} <= names, sorted(n for n in names if n)[:50]
    assert "step 44" not in names and "step 39" not in names
    assert any(str(n).startswith("aten::") for n in names)
    # The diagnosis names the step (C++ and Python alike).
    run_dir = os.path.dirname(os.path.dirname(path))
    assert trainscope.diagnose(run_dir).captures == [
        {"rank": 0, "step": 40, "path": "captures/capture-r0-s40.json", "label": None}]
    text = _cli("diagnose", run_dir).stdout
    assert "rank 0: step 40 was slow" in text, text


def test_a_steady_job_gives_no_capture(tmp_path):
    assert _anomaly_job(tmp_path, -1) == []
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and not (runs[0] / "captures").exists()


AUTO_ANOMALY_JOB = os.path.join(HERE, "hang_jobs", "auto_anomaly.py")


@pytest.mark.parametrize("slow_step,captures", [(40, 1), (-1, 0)])
def test_under_auto_a_slow_step_is_captured_without_code(tmp_path, slow_step, captures):
    root = tmp_path / "runs"
    out = subprocess.run([CLI, "run", "--root", str(root), "--no-sample", "--auto", "--",
                          sys.executable, AUTO_ANOMALY_JOB, "--slow-step", str(slow_step)],
                         capture_output=True, text=True, timeout=240, check=False,
                         env=_env("auto-anomaly"))
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = _run_dir(root, 1)
    found = trainscope.diagnose(run_dir).captures
    assert len(found) == captures, (found, out.stderr[-2000:])
    if captures:
        # BATCH runs from one fetch to the next; the loop's step 40 is the slow one.
        assert found[0]["rank"] == 0 and found[0]["step"] == 40, found
        with open(os.path.join(run_dir, found[0]["path"]), encoding="utf-8") as f:
            trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        assert any(str(e.get("name", "")).startswith("aten::") for e in events)
