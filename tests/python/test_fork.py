"""A process that records and then forks: the child never hangs, and the job ends as it would
without trainscope (its exit code, its run's status), under `trainscope run` (with and without
--auto) and with start_run() and no launcher.

The child of a fork has none of its parent's threads; before the fix, its exit waited forever
for the export thread (Run::end -> ExportPipeline::flush), and the parent waited for the child.
Each program runs in a session of its own and is killed, with whatever it left, after a limit
that only a hang reaches (they take about a second).

Needs the CLI binary: TRAINSCOPE_CLI=<build>/tools/trainscope (skipped otherwise).
"""

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from run_files import rows as _rows

CLI = os.environ.get("TRAINSCOPE_CLI")
HANG_S = 90  # a hang, not a speed: each program takes about a second

# The five lines: one region, a child that exits through sys.exit (atexit, finalizers).
FORK = """
    import os, sys, trainscope
    tmr = trainscope.Timer()
    with tmr.scope("BATCH"):
        pass
    if os.fork() == 0:
        sys.exit(0)
    os.wait()
"""

# A fork-context Pool of 4 workers (Python's default on Linux before 3.14): its `with` block
# ends with terminate(), which SIGTERMs the workers; they inherited the run's handler.
POOL = """
    import multiprocessing, trainscope
    tmr = trainscope.Timer()

    def square(x):
        with tmr.scope("WORK"):
            return x * x

    if __name__ == "__main__":
        with tmr.scope("BATCH"):
            pass
        with multiprocessing.get_context("fork").Pool(4) as pool:
            assert pool.map(square, range(100)) == [x * x for x in range(100)]
        trainscope.log_metric("after_pool", 1.0)
"""

# A child process started by subprocess (fork + exec): it joins the run and records.
SUBPROCESS = """
    import subprocess, sys, trainscope
    tmr = trainscope.Timer()
    with tmr.scope("BATCH"):
        pass
    subprocess.run([sys.executable, "-c",
                    "import trainscope; trainscope.log_metric('from_subprocess', 3.0)"],
                   check=True)
"""

# A DataLoader worker (itself forked from the recording process) that forks.
DATALOADER = """
    import os, sys
    import torch
    import trainscope

    class Forking(torch.utils.data.Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            pid = os.fork()
            if pid == 0:
                sys.exit(0)
            os.waitpid(pid, 0)
            return torch.tensor([float(i)])

    if __name__ == "__main__":
        tmr = trainscope.Timer()
        loader = torch.utils.data.DataLoader(Forking(), batch_size=2, num_workers=2)
        for batch in loader:
            with tmr.scope("MYSTEP"):
                batch.sum()
"""

# A child that records: it starts a run of its own, which joins the parent's run directory as a
# process of the same rank; what its inherited timer times after the fork lands there too.
CHILD_RECORDS = """
    import os, sys, trainscope
    tmr = trainscope.Timer()
    with tmr.scope("BATCH"):
        pass
    pid = os.fork()
    if pid == 0:
        with tmr.scope("CHILD"):
            pass
        trainscope.log_metric("from_child", 2.0)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    trainscope.log_metric("parent_after", 1.0)
"""


def _env():
    env = dict(os.environ)
    for name in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT"):
        env.pop(name, None)
    # On a hang, SIGABRT makes each Python process of the job print every thread's stack.
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def _session(sid):
    """The pids of a session (the launcher puts its command in a group of its own)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if state != "Z" and os.getsid(int(name)) == sid:  # a zombie is gone
                    pids.append(int(name))
            except (OSError, IndexError):
                continue
    return pids


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().replace("\0", " ").strip()
    except OSError:
        return "?"


def _where_they_wait(pids):
    """Each process of a hung job and each of its threads: its state and the kernel function
    it sleeps in; then SIGABRT to the Python ones, whose faulthandler prints their stacks to
    the job's stderr. What a hang that CI alone meets leaves to read."""
    lines = []
    for pid in pids:
        stat = _read(f"/proc/{pid}/stat").rsplit(")", 1)[-1].split()
        parent = stat[1] if len(stat) > 1 else "?"
        lines.append(f"pid {pid} (parent {parent}): {_read(f'/proc/{pid}/cmdline')}")
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            tids = []
        for tid in tids:
            task = f"/proc/{pid}/task/{tid}"
            state = (_read(f"{task}/stat").rsplit(")", 1)[-1].split() or ["?"])[0]
            lines.append(f"  thread {tid} {_read(f'{task}/comm')}: {state} in "
                         f"{_read(f'{task}/wchan')}")
    for pid in pids:
        if "python" in _read(f"/proc/{pid}/cmdline"):
            try:
                os.kill(pid, signal.SIGABRT)
            except OSError:
                pass
    time.sleep(2)
    return "\n".join(lines)


def _run_or_kill(argv, cwd, env=None):
    """Runs argv in a session of its own; on a hang kills the whole session and fails."""
    with subprocess.Popen(argv, cwd=cwd, env=env or _env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            where = _where_they_wait(_session(proc.pid))
            for pid in _session(proc.pid):
                os.kill(pid, signal.SIGKILL)
            out, err = proc.communicate()
            # `trainscope run` keeps the job's stderr in the run directory (the stacks land there).
            logs = "".join(f"{path}:\n{_read(path)[-20000:]}\n"
                           for path in glob.glob(os.path.join(cwd, "**", "stderr-*.log"),
                                                 recursive=True))
            pytest.fail(f"hung (killed after {HANG_S} s): {argv}\nwhere each waited:\n{where}\n"
                        f"stdout:\n{out}\nstderr:\n{err}\n{logs}")
    # Nothing of the job is left behind (a child still holding the pipes would show here);
    # one that is exiting gets a moment.
    deadline = time.monotonic() + 10
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _session(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the job left behind: {left}"
    return proc.returncode, out, err


def _only_run(root):
    runs = [name for name in os.listdir(root) if not name.startswith(".")]
    assert len(runs) == 1, runs
    return os.path.join(root, runs[0])


def _status(run_dir):
    with open(os.path.join(run_dir, "rank-0.json"), encoding="utf-8") as f:
        return json.load(f)["status"]


def _region_keys(run_dir):
    return [row["key"] for row in _rows(os.path.join(run_dir, "regions-0.csv"))]


def _metric_keys(run_dir):
    return {row["key"] for row in _rows(os.path.join(run_dir, "metrics-0.csv"))}


def _script(tmp_path, body, name="job.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _under_launcher(tmp_path, body, auto):
    if not CLI:
        pytest.skip("set TRAINSCOPE_CLI to the trainscope binary")
    root = tmp_path / "runs"
    argv = [CLI, "run", "--root", str(root), "--no-sample"] + (["--auto"] if auto else [])
    code, out, err = _run_or_kill(argv + ["--", sys.executable, _script(tmp_path, body)],
                                  cwd=tmp_path)
    assert code == 0, err
    return _only_run(root), out, err


LAUNCHED = pytest.mark.parametrize("auto", [False, True], ids=["plain", "auto"])


@LAUNCHED
def test_a_forked_child_that_exits_never_hangs_the_job(tmp_path, auto):
    run_dir, _, err = _under_launcher(tmp_path, FORK, auto)
    assert _status(run_dir) == "FINISHED", err
    assert _region_keys(run_dir).count("BATCH") == 1


def test_a_forked_child_never_hangs_a_run_started_without_a_launcher(tmp_path):
    body = """
        import os, sys, trainscope
        with trainscope.start_run(root=sys.argv[1]) as run:
            tmr = trainscope.Timer()
            with tmr.scope("BATCH"):
                pass
            if os.fork() == 0:
                sys.exit(0)
            os.wait()
    """
    root = tmp_path / "runs"
    code, _, err = _run_or_kill([sys.executable, _script(tmp_path, body), str(root)], tmp_path)
    assert code == 0, err
    run_dir = _only_run(root)
    assert _status(run_dir) == "FINISHED", err
    assert _region_keys(run_dir) == ["BATCH"]


@LAUNCHED
def test_a_fork_context_pool_ends_its_with_block(tmp_path, auto):
    run_dir, _, err = _under_launcher(tmp_path, POOL, auto)
    assert _status(run_dir) == "FINISHED", err
    assert "after_pool" in _metric_keys(run_dir)
    assert _region_keys(run_dir).count("BATCH") == 1


@LAUNCHED
def test_a_subprocess_of_a_recording_process_records_into_the_run(tmp_path, auto):
    run_dir, _, err = _under_launcher(tmp_path, SUBPROCESS, auto)
    assert _status(run_dir) == "FINISHED", err
    assert "from_subprocess" in _metric_keys(run_dir)


@LAUNCHED
def test_a_fork_inside_a_dataloader_worker_never_hangs_the_job(tmp_path, auto):
    pytest.importorskip("torch", reason="the DataLoader case needs torch")
    run_dir, _, err = _under_launcher(tmp_path, DATALOADER, auto)
    assert _status(run_dir) == "FINISHED", err
    assert _region_keys(run_dir).count("MYSTEP") == 4


def test_a_forked_child_that_records_joins_the_run_as_a_process_of_its_rank(tmp_path):
    run_dir, _, err = _under_launcher(tmp_path, CHILD_RECORDS, auto=False)
    assert _status(run_dir) == "FINISHED", err
    keys = _region_keys(run_dir)
    # The parent's region once (the child never re-sends what its parent streamed), and the
    # child's own.
    assert keys.count("BATCH") == 1, keys
    assert keys.count("CHILD") == 1, keys
    assert {"from_child", "parent_after"} <= _metric_keys(run_dir)


# A child signalled before it first ran: the parent pinned to one CPU runs on past its fork
# and signals at once (a fork-context Pool's terminate() under load, with a worker not yet
# started). Python's handler only notes a signal, and Python's after-fork work in the child
# wipes that note: the child lived on and the parent, blocked on it, hung the job (CI, 1 in a
# few hundred; here 16 children of 20 before the fix). Now each dies of the signal.
EARLY_SIGNAL = """
    import os, signal, sys, time, trainscope
    with trainscope.start_run(root=sys.argv[1]) as run:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        lived = 0
        for _ in range(20):
            pid = os.fork()
            if pid == 0:
                time.sleep(2)
                os._exit(7)
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
            if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGTERM:
                lived += 1
        print("lived", lived)
"""


def test_a_child_signalled_before_it_first_ran_dies_of_it(tmp_path):
    root = tmp_path / "runs"
    code, out, err = _run_or_kill([sys.executable, _script(tmp_path, EARLY_SIGNAL), str(root)],
                                  tmp_path)
    assert code == 0, err
    assert "lived 0" in out, out + err
    assert _status(_only_run(root)) == "FINISHED", err


def test_the_exit_code_of_a_program_that_forks_is_kept(tmp_path):
    body = FORK + "\n    sys.exit(3)\n"
    if not CLI:
        pytest.skip("set TRAINSCOPE_CLI to the trainscope binary")
    root = tmp_path / "runs"
    code, _, err = _run_or_kill([CLI, "run", "--root", str(root), "--no-sample", "--",
                                 sys.executable, _script(tmp_path, body)], tmp_path)
    assert code == 3, err
    with open(os.path.join(_only_run(root), "run.json"), encoding="utf-8") as f:
        assert json.load(f)["tags"]["trainscope.exit_code"] == "3"


# A forked child blocked in a read (a Pool worker waiting for its next task) and sent SIGTERM
# (Pool.terminate()): the handler trainscope backs Python's up with must not restart the read
# (SA_RESTART), or Python's handler never runs and the child never dies.
BLOCKED_CHILD = """
    import os, signal, sys, time, trainscope
    tmr = trainscope.Timer()
    with tmr.scope("BATCH"):
        pass
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)  # blocks: nothing is ever written
        os._exit(0)
    time.sleep(0.5)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
            sys.exit(0)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    sys.exit("the child blocked in read() outlived SIGTERM")
"""


def test_a_forked_child_blocked_in_a_read_dies_of_sigterm(tmp_path):
    run_dir, _, err = _under_launcher(tmp_path, BLOCKED_CHILD, auto=False)
    assert _status(run_dir) == "FINISHED", err


# A forked child has the action it would have had without trainscope: Python runs a handler
# between bytecodes only and checks for one before a lock's blocking wait, not while it waits,
# so a Pool worker signalled by terminate() between the two waited on the pool's lock forever
# with trainscope's inherited handler (1 run in ~100 under load). The kernel's mask of caught
# signals (/proc/self/status SigCgt) says whether any handler, C or Python, is still in place.
CHILD_ACTIONS = """
    import os, signal, sys, trainscope
    tmr = trainscope.Timer()
    with tmr.scope("BATCH"):
        pass

    def caught():
        with open("/proc/self/status", encoding="utf-8") as f:
            mask = int(next(l for l in f if l.startswith("SigCgt:")).split()[1], 16)
        return {s: bool(mask >> (s - 1) & 1) for s in (signal.SIGTERM, signal.SIGHUP)}

    assert all(caught().values()), caught()  # the run's handlers, in the parent
    pid = os.fork()
    if pid == 0:
        ok = (not any(caught().values())
              and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
              and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child kept the run's handlers"
    assert all(caught().values()), caught()  # the parent keeps them
"""


def test_a_forked_child_dies_of_sigterm_and_sighup_as_without_trainscope(tmp_path):
    run_dir, _, err = _under_launcher(tmp_path, CHILD_ACTIONS, auto=False)
    assert _status(run_dir) == "FINISHED", err
