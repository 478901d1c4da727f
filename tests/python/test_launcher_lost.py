"""The training outlives `trainscope run`, and each launcher of a run keeps its own records.

- `kill -9` of the launcher (the OOM killer picks it, a user kills the wrong pid): the command
  wrote into pipes the launcher read, so a Python job died of BrokenPipeError at its next print
  and the run read FAILED forever. Now the command writes straight into the run's log files: it
  finishes, its output after the kill is in stdout.log, and the run reads FINISHED from its
  ranks, with the launcher `lost`.
- Two launchers on one --run-dir overwrote each other's environment.json and pip freeze, and
  mixed their output in stdout.log. Now each has its own, named by host and pid.

Needs the CLI binary: TRAINSCOPE_CLI=<build>/tools/trainscope (skipped otherwise).
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import trainscope

CLI = os.environ.get("TRAINSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")

# Generous: the waits end as soon as the condition holds, and only a hang reaches them.
DEADLINE_S = 120


def _env():
    env = dict(os.environ)
    for name in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT", "RANK",
                 "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
                 "PMIX_NAMESPACE"):
        env.pop(name, None)
    return env


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _wait_for(condition, what):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


# Prints every 50 ms while recording as a rank; after the test says the launcher is dead, 20
# more lines, then it ends its run normally.
JOB = textwrap.dedent("""
    import os, sys, time
    import trainscope
    killed = sys.argv[1]
    with trainscope.start_run() as run:
        i = 0
        while not os.path.exists(killed):
            print(f"before {i}", flush=True)
            trainscope.log_metric("i", i)
            i += 1
            time.sleep(0.05)
        for j in range(20):
            print(f"after {j}", flush=True)
            print(f"stderr after {j}", file=sys.stderr, flush=True)
            trainscope.log_metric("i", i + j)
            time.sleep(0.05)
""")


def test_the_training_outlives_a_launcher_killed_with_sigkill(tmp_path):
    run_dir = str(tmp_path / "run")
    job = tmp_path / "job.py"
    job.write_text(JOB)
    killed = tmp_path / "killed"
    code = tmp_path / "exit-code"
    # sh keeps the job's exit status, which nobody else can see once its launcher is gone.
    command = ["sh", "-c", '"$0" "$1" "$2"; echo $? > "$3"', sys.executable, str(job), str(killed),
               str(code)]
    launcher = subprocess.Popen(
        [CLI, "run", "--run-dir", run_dir, "--no-sample", "--no-diagnosis", "--", *command],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout_log = os.path.join(run_dir, "stdout.log")
        _wait_for(lambda: os.path.exists(stdout_log) and "before 3" in _read(stdout_log),
                  "the job's first lines in stdout.log")
        launcher.kill()  # SIGKILL
        launcher.wait()  # reaped: its pid is gone, as for any launcher killed so
        killed.touch()
        _wait_for(code.exists, "the job's exit code")
        assert _read(code).strip() == "0", _read(os.path.join(run_dir, "stderr.log"))
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        killed.touch()
    output = _read(stdout_log)
    assert [f"after {j}" for j in range(20)] == [
        line for line in output.splitlines() if line.startswith("after")]
    assert "stderr after 19" in _read(os.path.join(run_dir, "stderr.log"))

    run = trainscope.read_run(run_dir)
    assert run.status == "FINISHED"
    assert not run.crashed
    assert list(run.ranks["status"]) == ["FINISHED"]
    assert len(run.launchers) == 1
    gone = run.launchers.iloc[0]
    assert gone["status"] == "RUNNING"  # as its file was left
    assert gone["pid"] == launcher.pid
    assert bool(gone["lost"]) and not bool(gone["crashed"])
    # The rank kept recording after the kill: every metric point is there.
    assert len(run.metrics) == run.metrics["value"].max() + 1 >= 20


def test_a_lost_launcher_without_ranks_still_fails_the_run(tmp_path):
    # Nothing but its launcher tells how such a command went: it stays a crash.
    run_dir = str(tmp_path / "run")
    launcher = subprocess.Popen(
        [CLI, "run", "--run-dir", run_dir, "--no-sample", "--no-diagnosis", "--",
         "sh", "-c", "echo started; while [ ! -e \"$0\" ]; do sleep 0.05; done",
         str(tmp_path / "stop")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout_log = os.path.join(run_dir, "stdout.log")
        _wait_for(lambda: os.path.exists(stdout_log) and "started" in _read(stdout_log),
                  "the command's output")
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    finally:
        (tmp_path / "stop").touch()
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    run = trainscope.read_run(run_dir)
    assert run.status == "FAILED" and run.crashed
    assert bool(run.launchers.iloc[0]["lost"]) and bool(run.launchers.iloc[0]["crashed"])


def test_two_launchers_on_one_run_dir_keep_their_own_records(tmp_path):
    run_dir = str(tmp_path / "run")
    go = tmp_path / "go"

    def start(name):
        # Both wait for `go`, so that both run at once.
        script = (f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
                  f"for i in range(3): print('{name}', i, flush=True)\n")
        return subprocess.Popen(
            [CLI, "run", "--run-dir", run_dir, "--no-sample", "--no-diagnosis", "--",
             sys.executable, "-c", script],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first, second = start("A"), start("B")
    try:
        _wait_for(lambda: os.path.isdir(run_dir) and sum(
            name.startswith("launcher-") and name.endswith(".json")
            for name in os.listdir(run_dir)) == 2, "two launchers")
        go.touch()
        outs = [p.communicate(timeout=DEADLINE_S) for p in (first, second)]
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert first.returncode == 0 and second.returncode == 0, outs
    # Each launcher still shows its own command's output.
    assert outs[0][0] == "A 0\nA 1\nA 2\n" and outs[1][0] == "B 0\nB 1\nB 2\n"

    run = trainscope.read_run(run_dir)
    assert run.status == "FINISHED"
    reader = trainscope._core._RunReader.open(run_dir)
    host = reader.launchers[0]["host"]
    plain = _read(os.path.join(run_dir, "stdout.log"))
    own_logs, freezes = [], []
    for p, name in ((first, "A"), (second, "B")):
        launcher = f"{host}:{p.pid}"
        own = os.path.join(run_dir, f"stdout-{host}-{p.pid}.log")
        assert _read(own) == f"{name} 0\n{name} 1\n{name} 2\n"  # not mixed
        own_logs.append(_read(own))
        assert reader.log_tail("stdout", 100, launcher) == _read(own).encode()
        env = json.loads(reader.environment(launcher))
        assert env["launcher"] == launcher and env["command_line"][0] == sys.executable
        if "pip_freeze" in env:  # where pip is installed
            assert env["pip_freeze"] == f"artifacts/pip-freeze-{host}-{p.pid}.txt"
            freezes.append(os.path.join(run_dir, env["pip_freeze"]))
    # The plain names are the first launcher's, one file (a hard link), not a mix.
    assert plain in own_logs
    assert json.loads(reader.environment())["launcher"] in (
        f"{host}:{first.pid}", f"{host}:{second.pid}")
    assert all(os.path.exists(path) for path in freezes)
    with pytest.raises(ValueError, match="no launcher 'nohost:1'"):
        reader.environment("nohost:1")
