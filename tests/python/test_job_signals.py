"""A signalled `trainscope run` ends every process of its job (issue 36, "Ranks that outlive
their run").

A two-rank gloo DDP job with DataLoader workers, started by a shell script (`torchrun` inside
`run.sh`) under `trainscope run`: SIGHUP, SIGTERM or SIGINT to the launcher, or the tmux session
around it killed, must end every process of the job (the script, torchrun, both ranks in the
sessions torchrun gives them, their workers) within seconds, the ranks and the run KILLED and
the launcher's exit status 128 + N, with no process left for the launcher's SIGKILL. Before:
the DataLoader workers ran trainscope's inherited SIGHUP handler, which ended the parent's run
in the forked child and waited forever for its writer thread; their sockets kept the dead
rank's gloo connections open, so the other rank waited in its DDP backward (the Python handler
never ran) until torchrun's SIGKILL, and the launcher had returned as soon as the script did.

Also without torch: a rank whose main thread is blocked in native code, a forked child of a
recording process, and a command that ignores the signal (the launcher's SIGKILL after
--kill-after).

Needs TRAINSCOPE_CLI; the gloo job needs TRAINSCOPE_FRAMEWORK_PYTHON (torch 2.x with torchrun,
tests/python/requirements-frameworks.txt) and, for the tmux case, tmux.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import trainscope
from run_files import job_processes, kill_job

CLI = os.environ.get("TRAINSCOPE_CLI")
FRAMEWORK_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
TMUX = shutil.which("tmux")
HERE = os.path.dirname(os.path.abspath(__file__))
DDP_JOB = os.path.join(HERE, "framework_jobs", "ddp_until_signalled.py")
MARK = "TRAINSCOPE_TEST_JOB"  # in the launcher's environment: every process of the job has it

pytestmark = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_framework = pytest.mark.skipif(
    not FRAMEWORK_PYTHON, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x "
    "(tests/python/requirements-frameworks.txt) for torchrun")
needs_tmux = pytest.mark.skipif(not TMUX, reason="tmux is not installed (scripts/setup.sh)")

# Bounds, generous: a job ends in seconds; these only stop a test that hangs.
START_S = 240  # torch's import and torchrun's rendezvous on a busy two-core machine
GONE_S = 60
KILL_AFTER = "60"  # the launcher's SIGKILL comes after every bound the tests wait for


def _env(mark=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO", MARK)}
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if mark is not None:
        env[MARK] = mark
    return env


def _default_sighup():
    """What a terminal gives its commands, even when this suite runs under nohup."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _job_processes(mark):
    """The live processes (no zombie) whose environment holds MARK=mark."""
    return job_processes(MARK, mark)


def _describe(pids):
    if not pids:
        return ""
    return subprocess.run(["ps", "-o", "pid,ppid,pgid,sid,stat,wchan:24,args", "-p",
                           ",".join(map(str, pids))], capture_output=True, text=True,
                          check=False).stdout


def _left_after(mark, timeout):
    """The job's processes still there `timeout` seconds from now (none: at once)."""
    deadline = time.monotonic() + timeout
    while True:
        left = _job_processes(mark)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _kill_all(mark):
    kill_job(MARK, mark)


def _only_run(root):
    runs = [name for name in os.listdir(root) if not name.startswith(".")]
    assert len(runs) == 1, runs
    return os.path.join(root, runs[0])


def _wait_for_text(path, needles, timeout):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        if all(n in text for n in needles):
            return
        time.sleep(0.25)
    raise AssertionError(f"{needles} not in {path} within {timeout} s:\n{text[-3000:]}")


def _wait_for_run(root, needles, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (os.path.isdir(root) and os.listdir(root)):
        time.sleep(0.1)
    run_dir = _only_run(root)
    _wait_for_text(os.path.join(run_dir, "stdout.log"), needles, max(deadline - time.monotonic(), 1))
    return run_dir


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _launcher_record(run_dir):
    names = [n for n in os.listdir(run_dir) if n.startswith("launcher-") and n.endswith(".json")]
    assert len(names) == 1, names
    return json.loads(_read(os.path.join(run_dir, names[0])))


def _ddp_script(tmp_path):
    """run.sh: torchrun as the shell's foreground child, then a line (so bash outlives it)."""
    script = tmp_path / "run.sh"
    script.write_text(f'#!/bin/bash\n"{FRAMEWORK_PYTHON}" -m torch.distributed.run --standalone '
                      f'--nproc-per-node 2 "{DDP_JOB}"\necho "torchrun exited $?"\n')
    return script


def _assert_killed_by_itself(run_dir, signum, stderr):
    """Every rank ended KILLED on the signal: none was left for a SIGKILL (the launcher's, or
    torchrun's after its 30 s), which would leave its rank file RUNNING."""
    assert "SIGKILL" not in stderr, stderr[-3000:]
    run = trainscope.read_run(run_dir)
    assert sorted(run.ranks["rank"]) == [0, 1]
    assert list(run.ranks["status"]) == ["KILLED", "KILLED"], run.ranks
    assert run.status == "KILLED"
    assert "trainscope.sigkill" not in run.tags
    record = _launcher_record(run_dir)
    assert (record["status"], record["exit_code"], record["term_signal"]) == (
        "KILLED", 128 + signum, signum)


@needs_framework
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT],
                         ids=["SIGHUP", "SIGTERM", "SIGINT"])
def test_a_signalled_two_rank_gloo_job_under_a_shell_script_ends_whole(tmp_path, signum):
    mark = uuid.uuid4().hex
    runs = tmp_path / "runs"
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        launcher = subprocess.Popen(
            [CLI, "run", "--root", str(runs), "--no-sample", "--quiet", "--kill-after",
             KILL_AFTER, "--", "bash", str(_ddp_script(tmp_path))],
            env=_env(mark), stdout=out, stderr=err, preexec_fn=_default_sighup)
    try:
        run_dir = _wait_for_run(runs, ["rank 0 step 20", "rank 1 step 20"], START_S)
        launcher.send_signal(signum)
        # The shell script exits 0 after torchrun on SIGINT: the status still says the signal.
        assert launcher.wait(timeout=GONE_S) == 128 + signum, _read(tmp_path / "err")[-3000:]
        left = _left_after(mark, GONE_S)
        assert not left, _describe(left)
    finally:
        launcher.kill()
        launcher.wait()
        _kill_all(mark)
    _assert_killed_by_itself(run_dir, signum, _read(tmp_path / "err"))


@needs_framework
@needs_tmux
def test_killing_the_tmux_session_ends_the_job(tmp_path):
    """tmux kill-session: the pane's shell and the launcher get SIGHUP, the launcher passes
    it on; the whole job ends, as above."""
    mark = uuid.uuid4().hex
    runs = tmp_path / "runs"
    socket = "trainscope-signals-" + mark[:8]
    command = (f"env {MARK}={mark} {CLI} run --root {runs} --no-sample --quiet --kill-after "
               f"{KILL_AFTER} -- bash {_ddp_script(tmp_path)} 2> {tmp_path}/err")
    subprocess.run([TMUX, "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "job",
                    "-x", "120", "-y", "40", command], env=_env(), check=True, timeout=30)
    try:
        run_dir = _wait_for_run(runs, ["rank 0 step 20", "rank 1 step 20"], START_S)
        subprocess.run([TMUX, "-L", socket, "kill-session", "-t", "job"], check=True, timeout=30)
        left = _left_after(mark, GONE_S)
        assert not left, _describe(left)
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True, timeout=30,
                       check=False)
        _kill_all(mark)
    _assert_killed_by_itself(run_dir, signal.SIGHUP, _read(tmp_path / "err"))


# A rank whose main thread waits in native code that no signal interrupts (as a DDP
# backward waiting on a gloo peer): a mutex locked twice by the same thread.
_BLOCKED_RANK = textwrap.dedent("""
    import ctypes, os
    import trainscope
    trainscope.log_metric("loss", 1.0, step=0)  # joins the launcher's run: handlers installed
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    print(os.getpid(), flush=True)
    libc.pthread_mutex_lock(mutex)  # for ever
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_rank_blocked_in_native_code_still_ends_killed(tmp_path, signum):
    """Python runs trainscope's SIGTERM/SIGHUP handler only once the main thread is back in
    the interpreter; the C++ side ends the run KILLED 3 s later and the rank dies of it."""
    mark = uuid.uuid4().hex
    runs = tmp_path / "runs"
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        launcher = subprocess.Popen(
            [CLI, "run", "--root", str(runs), "--no-sample", "--quiet", "--kill-after",
             KILL_AFTER, "--", sys.executable, "-c", _BLOCKED_RANK],
            env=_env(mark), stdout=out, stderr=err, preexec_fn=_default_sighup)
    try:
        run_dir = _wait_for_run(runs, ["\n"], START_S)
        _wait_for_text(os.path.join(run_dir, "rank-0.json"), ['"RUNNING"'], GONE_S)
        launcher.send_signal(signum)
        assert launcher.wait(timeout=GONE_S) == 128 + signum, _read(tmp_path / "err")
        assert not _left_after(mark, GONE_S)
    finally:
        launcher.kill()
        launcher.wait()
        _kill_all(mark)
    stderr = _read(tmp_path / "err")
    assert "SIGKILL" not in stderr, stderr
    run = trainscope.read_run(run_dir)
    assert list(run.ranks["status"]) == ["KILLED"] and not run.crashed
    assert list(run.metrics["value"]) == [1.0]


# A recording process with a forked child that sleeps (a DataLoader worker, a Pool's).
_FORKING_RANK = textwrap.dedent("""
    import os, time
    import trainscope
    trainscope.log_metric("loss", 1.0, step=0)
    if os.fork() == 0:
        while True:
            time.sleep(0.05)
    print(os.getpid(), flush=True)
    while True:
        time.sleep(0.05)
""")


def test_a_forked_child_of_a_rank_dies_of_the_signal(tmp_path):
    """The child inherits trainscope's SIGHUP handler; it must never end (and wait forever
    on) its parent's run, but die as it would have without trainscope."""
    mark = uuid.uuid4().hex
    runs = tmp_path / "runs"
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        launcher = subprocess.Popen(
            [CLI, "run", "--root", str(runs), "--no-sample", "--quiet", "--kill-after",
             KILL_AFTER, "--", sys.executable, "-c", _FORKING_RANK],
            env=_env(mark), stdout=out, stderr=err, preexec_fn=_default_sighup)
    try:
        run_dir = _wait_for_run(runs, ["\n"], START_S)
        launcher.send_signal(signal.SIGHUP)
        left = _left_after(mark, GONE_S)
        assert not left, _describe(left)
        assert launcher.wait(timeout=GONE_S) == 128 + signal.SIGHUP
    finally:
        launcher.kill()
        launcher.wait()
        _kill_all(mark)
    assert "SIGKILL" not in _read(tmp_path / "err")
    run = trainscope.read_run(run_dir)
    assert list(run.ranks["status"]) == ["KILLED"] and run.status == "KILLED"


# Ignores SIGINT/SIGTERM/SIGHUP and starts a child in a session of its own that does too.
_STUBBORN = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
    print(os.getpid(), child.pid, flush=True)
    time.sleep(600)
""")


def test_a_job_that_ignores_the_signal_is_killed_after_kill_after(tmp_path):
    mark = uuid.uuid4().hex
    runs = tmp_path / "runs"
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        launcher = subprocess.Popen(
            [CLI, "run", "--root", str(runs), "--no-sample", "--quiet", "--kill-after", "1",
             "--", sys.executable, "-c", _STUBBORN],
            env=_env(mark), stdout=out, stderr=err, preexec_fn=_default_sighup)
    try:
        run_dir = _wait_for_run(runs, ["\n"], START_S)
        pids = [int(p) for p in _read(os.path.join(run_dir, "stdout.log")).split()]
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=GONE_S) == 128 + signal.SIGTERM
        assert not _left_after(mark, GONE_S)
    finally:
        launcher.kill()
        launcher.wait()
        _kill_all(mark)
    stderr = _read(tmp_path / "err")
    line = (f"trainscope run: 2 processes of the command still ran 1 s after signal 15 "
            f"({signal.strsignal(signal.SIGTERM)}): killed with SIGKILL (pids")
    assert line in stderr, stderr
    assert all(str(pid) in stderr for pid in pids), (pids, stderr)
    assert line in _read(os.path.join(run_dir, "stderr.log"))  # in the run too
    run = trainscope.read_run(run_dir)
    assert run.status == "KILLED"
    assert run.tags["trainscope.sigkill"] == "2"
    record = _launcher_record(run_dir)
    assert (record["exit_code"], record["term_signal"]) == (128 + signal.SIGTERM, signal.SIGTERM)
