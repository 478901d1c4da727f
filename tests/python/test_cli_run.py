"""`trainscope run -- cmd`: a Python command joins the wrapper's run; SIGTERM ends it KILLED.

Needs the CLI binary: TRAINSCOPE_CLI=<build>/tools/trainscope (skipped otherwise).
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from run_files import INPUT_BOUND_JOB
from run_files import rows as _rows

CLI = os.environ.get("TRAINSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")


def _env():
    env = dict(os.environ)
    for name in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT"):
        env.pop(name, None)
    return env


def _only_run(root):
    runs = os.listdir(root)
    assert len(runs) == 1, runs
    return os.path.join(root, runs[0])


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()



def test_a_python_command_logs_into_the_wrappers_run(tmp_path):
    script = textwrap.dedent("""
        import trainscope
        with trainscope.start_run() as run:
            timer = trainscope.Timer()
            with timer.scope("step"):
                pass
            trainscope.log_metric("loss", 0.5, step=0)
            print(run.dir)
    """)
    done = subprocess.run(
        [CLI, "run", "--root", str(tmp_path), "--no-sample", "--",
         sys.executable, "-c", script, "--lr", "0.1", "--note=a 'b' c"],
        env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    assert done.stdout.strip() == run_dir  # still shown ...
    assert _read(os.path.join(run_dir, "stdout.log")).strip() == run_dir  # ... and saved
    info = json.loads(_read(os.path.join(run_dir, "run.json")))
    assert info["params"] == {"lr": "0.1", "note": "a 'b' c"}
    assert info["tags"]["trainscope.exit_code"] == "0"
    assert json.loads(_read(os.path.join(run_dir, "rank-0.json")))["status"] == "FINISHED"
    metrics = _rows(os.path.join(run_dir, "metrics-0.csv"))
    assert [(m["key"], float(m["value"])) for m in metrics] == [("loss", 0.5)]
    assert [r["key"] for r in _rows(os.path.join(run_dir, "regions-0.csv"))] == ["step"]


def _wait_for(predicate, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _logged(run_dir, prefix):
    """A row whose key starts with prefix in rank 0's metrics or a host's hardware file."""
    paths = [os.path.join(run_dir, name) for name in os.listdir(run_dir)
             if name == "metrics-0.csv" or (name.startswith("host-") and name.endswith(".csv"))]
    return any(m["key"].startswith(prefix) for path in paths for m in _rows(path))


def _launcher(run_dir):
    """The one launcher record of a run (the `trainscope run` process is no rank)."""
    names = [n for n in os.listdir(run_dir) if n.startswith("launcher-") and n.endswith(".json")]
    assert len(names) == 1, names
    return json.loads(_read(os.path.join(run_dir, names[0])))


def test_sigterm_ends_the_run_killed_with_everything_on_disk(tmp_path):
    script = textwrap.dedent("""
        import time
        import trainscope
        with trainscope.start_run(flush_interval=0.1):
            trainscope.log_metric("loss", 1.0, step=0)
            print("ready", flush=True)
            time.sleep(60)
    """)
    process = subprocess.Popen(
        [CLI, "run", "--root", str(tmp_path), "--interval", "0.1", "--", sys.executable, "-c", script],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n"
        run_dir = _only_run(tmp_path)
        _wait_for(lambda: _logged(run_dir, "loss") and _logged(run_dir, "system/"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        process.kill()
        process.communicate()
    # The training process (rank 0) and the launcher both ended KILLED.
    assert json.loads(_read(os.path.join(run_dir, "rank-0.json")))["status"] == "KILLED"
    assert _launcher(run_dir)["status"] == "KILLED"
    info = json.loads(_read(os.path.join(run_dir, "run.json")))
    assert info["tags"]["trainscope.signal"] == str(int(signal.SIGTERM))
    assert _logged(run_dir, "loss") and _logged(run_dir, "system/")
    assert _read(os.path.join(run_dir, "stdout.log")) == "ready\n"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# Prints its pid and whether SIGHUP is ignored, then ticks until `stop` exists.
_TICKER = textwrap.dedent("""
    import os, signal, sys, time
    print(os.getpid(), signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, flush=True)
    while not os.path.exists(sys.argv[1]):
        print("tick", flush=True)
        time.sleep(0.05)
    print("done", flush=True)
""")


def _default_sighup():
    """What a terminal gives its commands, even when this suite runs under nohup."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start_ticker(tmp_path, prefix=(), **popen):
    popen.setdefault("preexec_fn", _default_sighup)
    process = subprocess.Popen(
        [*prefix, CLI, "run", "--root", str(tmp_path / "runs"), "--no-sample", "--",
         sys.executable, "-c", _TICKER, str(tmp_path / "stop")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    pid, ignored = process.stdout.readline().split()
    return process, int(pid), ignored == "True"


def test_sighup_ends_the_run_killed_like_sigterm(tmp_path):
    """A closed terminal or ssh session: forwarded, waited for, KILLED, exit 129."""
    import trainscope

    process, child, ignored = _start_ticker(tmp_path)
    try:
        assert not ignored
        assert process.stdout.readline() == "tick\n"
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 128 + signal.SIGHUP, err
        assert not _alive(child)  # forwarded, and reaped before the launcher exited
    finally:
        process.kill()
        process.communicate()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
    assert _last_line(err).startswith("trainscope run: killed by signal 1 ("), err
    assert _last_line(err).endswith(" KILLED"), err
    run_dir = _only_run(tmp_path / "runs")
    run = trainscope.read_run(run_dir)
    assert run.status == "KILLED" and not run.crashed
    assert list(run.launchers["status"]) == ["KILLED"]
    assert list(run.launchers["term_signal"]) == [signal.SIGHUP]
    assert run.tags["trainscope.signal"] == str(int(signal.SIGHUP))
    assert _launcher(run_dir)["status"] == "KILLED"


def test_sighup_ends_a_rank_that_records_killed_too(tmp_path):
    """The forwarded SIGHUP ends a rank's own run KILLED (not a crash read as FAILED)."""
    import trainscope

    stop = tmp_path / "stop"
    code = textwrap.dedent("""
        import os, sys, time, trainscope
        with trainscope.start_run():
            trainscope.log_metric("loss", 1.0, step=0)
            print(os.getpid(), flush=True)
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.05)
    """)
    process = subprocess.Popen(
        [CLI, "run", "--root", str(tmp_path / "runs"), "--no-sample", "--",
         sys.executable, "-c", code, str(stop)],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sighup)
    child = int(process.stdout.readline())
    try:
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 128 + signal.SIGHUP, err
    finally:
        process.kill()
        process.communicate()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
    run = trainscope.read_run(_only_run(tmp_path / "runs"))
    assert list(run.ranks["status"]) == ["KILLED"], err
    assert run.status == "KILLED" and not run.crashed
    assert list(run.metrics["value"]) == [1.0]


@pytest.mark.parametrize("how", ["nohup", "SIG_IGN"])
def test_an_ignored_sighup_lets_the_run_go_on(tmp_path, how):
    """`nohup trainscope run ...`: SIGHUP stays ignored by the launcher and the command."""
    import trainscope

    if how == "nohup":
        process, child, ignored = _start_ticker(tmp_path, prefix=["nohup"])
    else:
        process, child, ignored = _start_ticker(
            tmp_path, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        assert ignored  # the command inherits the ignored SIGHUP
        process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert process.poll() is None and _alive(child)
        (tmp_path / "stop").touch()
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
    finally:
        process.kill()
        process.communicate()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
    assert out.endswith("tick\ndone\n")
    run_dir = _only_run(tmp_path / "runs")
    run = trainscope.read_run(run_dir)
    assert run.status == "FINISHED"
    assert list(run.launchers["status"]) == ["FINISHED"]
    assert list(run.launchers["exit_code"]) == [0]


def test_a_missing_command_exits_127(tmp_path):
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--",
                           "trainscope-no-such-command"],
                          env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 127
    assert "command not found: 'trainscope-no-such-command'" in done.stderr
    run_dir = _only_run(tmp_path)
    launcher = _launcher(run_dir)
    assert launcher["status"] == "FAILED" and launcher["exit_code"] == 127
    assert launcher["command"] == ["trainscope-no-such-command"]
    assert not os.path.exists(os.path.join(run_dir, "rank-0.json"))  # nothing ran


def test_help_explains_usage():
    done = subprocess.run([CLI, "run", "--help"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0
    assert "usage: trainscope run" in done.stdout and "examples:" in done.stdout
    help_text = " ".join(done.stdout.split())
    assert "SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) are passed" in help_text
    assert "Under `nohup trainscope run ...` SIGHUP stays ignored" in help_text


def test_two_launchers_with_one_run_dir_join_one_run(tmp_path):
    shared = tmp_path / "shared"
    for rank in (0, 1):
        done = subprocess.run(
            [CLI, "run", "--no-sample", "--run-dir", str(shared), "--", sys.executable, "-c",
             "import trainscope; trainscope.log_metric('loss', 1.0)"],
            env={**_env(), "RANK": str(rank), "WORLD_SIZE": "2"}, capture_output=True,
            text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
    names = sorted(os.listdir(shared))
    assert [n for n in names if n.startswith("rank-") and n.endswith(".json")] == [
        "rank-0.json", "rank-1.json"]
    assert len([n for n in names if n.startswith("launcher-")]) == 2
    for rank in (0, 1):
        assert [m["key"] for m in _rows(os.path.join(shared, f"metrics-{rank}.csv"))] == ["loss"]


def test_process_readings_name_the_rank_host_readings_none(tmp_path):
    script = textwrap.dedent("""
        import time
        import trainscope
        trainscope.log_metric("loss", 1.0)   # this process is now rank 0 of the run
        time.sleep(1.5)                      # several samples with the rank known
    """)
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--interval", "0.1", "--",
                           sys.executable, "-c", script], env=_env(), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    hosts = [n for n in os.listdir(run_dir) if n.startswith("host-") and n.endswith(".csv")]
    assert len(hosts) == 1, hosts
    rows = _rows(os.path.join(run_dir, hosts[0]))
    process = [r for r in rows if r["key"].startswith("system/proc.")]
    host_wide = [r for r in rows if r["key"].startswith("system/cpu.")]
    assert host_wide and all(r["rank"] == "" for r in host_wide)
    assert any(r["rank"] == "0" for r in process), process[-5:]
    # Until the rank registered, its tree's readings could not name it: empty, never wrong.
    assert {r["rank"] for r in process} <= {"", "0"}


# ---- The diagnosis at the end of a run ----------------------------------------------------------

def _last_line(text):
    return text.rstrip("\n").splitlines()[-1]


def test_the_end_of_a_run_prints_its_diagnosis_and_tags_the_run(tmp_path):
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--",
                           sys.executable, "-c", INPUT_BOUND_JOB],
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    tags = json.loads(_read(os.path.join(run_dir, "run.json")))["tags"]
    assert tags["trainscope.diagnosis.labels"].split(",")[0] == "INPUT-BOUND", tags
    assert tags["trainscope.diagnosis"].startswith("INPUT-BOUND"), tags
    # The label's estimate and its interval: the data-wait share, built in near 0.7 (less on a
    # loaded machine, whose steps stretch).
    share = re.fullmatch(r"(\S*share\S*) (\S+) \[(\S+), (\S+)\]",
                         tags["trainscope.diagnosis.input_bound"])
    assert share, tags["trainscope.diagnosis.input_bound"]
    value, low, high = (float(x) for x in share.groups()[1:])
    assert 0.35 < low <= value <= high < 0.9
    # Every label has its tag, and no other diagnosis tag is there.
    names = tags["trainscope.diagnosis.labels"].split(",")
    assert {k for k in tags if k.startswith("trainscope.diagnosis.")} == {
        "trainscope.diagnosis.labels"} | {
        "trainscope.diagnosis." + n.lower().replace("-", "_") for n in names}
    # The summary: the diagnosis, where the run is and how to see more; the last line stays.
    summary = done.stderr[:done.stderr.rindex("trainscope run: exit code")]
    assert "INPUT-BOUND" in summary
    assert run_dir in summary
    assert "trainscope report" in summary
    assert _last_line(done.stderr) == f"trainscope run: exit code 0, run {run_dir} FINISHED"


def test_quiet_keeps_only_the_last_line_and_still_tags_the_run(tmp_path):
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--quiet", "--",
                           sys.executable, "-c", INPUT_BOUND_JOB],
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    assert done.stderr == f"trainscope run: exit code 0, run {run_dir} FINISHED\n"
    tags = json.loads(_read(os.path.join(run_dir, "run.json")))["tags"]
    assert tags["trainscope.diagnosis"].startswith("INPUT-BOUND")


def test_no_diagnosis_leaves_no_summary_and_no_tags(tmp_path):
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--no-diagnosis",
                           "--", sys.executable, "-c", INPUT_BOUND_JOB],
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    assert done.stderr == f"trainscope run: exit code 0, run {run_dir} FINISHED\n"
    tags = json.loads(_read(os.path.join(run_dir, "run.json")))["tags"]
    assert not any(key.startswith("trainscope.diagnosis") for key in tags), tags
    # The run is still there to diagnose later.
    later = subprocess.run([CLI, "diagnose", run_dir], capture_output=True, text=True,
                           timeout=60, check=False)
    assert later.returncode == 0 and "INPUT-BOUND" in later.stdout, later.stderr


def test_a_run_past_1_gib_of_regions_is_not_diagnosed_at_the_end(tmp_path):
    # A sparse file: 1.1 GB of region rows as the directory lists them, no disk used.
    script = 'truncate -s 1100M "$TRAINSCOPE_RUN_DIR/regions-7.csv"'
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--",
                           "/bin/sh", "-c", script],
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path)
    lines = done.stderr.rstrip("\n").splitlines()
    assert lines[0] == (f"trainscope run: warning: no diagnosis of {run_dir}: its region rows "
                        f"are 1153 MB, past the 1 GiB the end of a run reads; "
                        f"`trainscope diagnose {run_dir}` gives it"), done.stderr
    assert lines[-1] == f"trainscope run: exit code 0, run {run_dir} FINISHED"


def test_a_failed_diagnosis_is_one_warning_and_keeps_the_exit_code(tmp_path):
    # The command damages its own run: a rank file that is no JSON.
    script = 'printf "{" > "$TRAINSCOPE_RUN_DIR/rank-0.json"; exit 3'
    done = subprocess.run([CLI, "run", "--root", str(tmp_path), "--no-sample", "--",
                           "/bin/sh", "-c", script],
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    run_dir = _only_run(tmp_path)
    lines = done.stderr.rstrip("\n").splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(f"trainscope run: warning: no diagnosis of {run_dir}: ")
    assert "rank-0.json" in lines[0]
    assert lines[1] == f"trainscope run: exit code 3, run {run_dir} FAILED"
    # The run still ended: its launcher recorded how.
    assert _launcher(run_dir)["status"] == "FAILED" and _launcher(run_dir)["exit_code"] == 3
    assert "trainscope.diagnosis" not in json.loads(_read(os.path.join(run_dir, "run.json")))["tags"]


def test_help_names_the_summary_quiet_and_the_diagnosis_tags():
    done = subprocess.run([CLI, "run", "--help"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0
    for text in ("--quiet", "--no-diagnosis", "1 GiB", "trainscope.diagnosis.labels",
                 "trainscope.diagnosis.<label>"):
        assert text in done.stdout, text


def _environment(run_dir):
    with open(os.path.join(run_dir, "environment.json"), encoding="utf-8") as f:
        return json.load(f)


def test_pip_freeze_is_the_commands_own_interpreters_and_cached_per_environment(tmp_path):
    # PATH's python3 is another interpreter than the command's (the case:
    # a pyenv first on PATH recorded its packages for `-- /usr/bin/python3 train.py`).
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    other = fake_bin / "python3"
    other.write_text("#!/bin/sh\necho 'wrong-interpreter==1.0'\n")
    other.chmod(0o755)
    env = _env()
    env["PATH"] = f"{fake_bin}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINSCOPE_CACHE_DIR"] = str(tmp_path / "cache")
    expected = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True,
                              text=True, timeout=120, check=True).stdout

    def run(name):
        done = subprocess.run([CLI, "run", "--root", str(tmp_path / name), "--no-diagnosis",
                               "--", sys.executable, "-c", "pass"],
                              capture_output=True, text=True, timeout=120, env=env, check=False)
        assert done.returncode == 0, done.stderr
        run_dir = _only_run(tmp_path / name)
        return _environment(run_dir), _read(os.path.join(run_dir, "artifacts", "pip-freeze.txt"))

    first, freeze = run("first")
    assert first["python"]["path"] == sys.executable
    assert first["python"]["from"] == "the command"
    assert first["python"]["pip_freeze_cached"] is False
    assert freeze == expected and "wrong-interpreter" not in freeze
    second, freeze = run("second")  # the same environment: pip does not run again
    assert second["python"]["pip_freeze_cached"] is True and freeze == expected
    # A package installed (its directory's time changes): the list is taken again.
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))
            and os.path.isdir(p) and p.startswith(sys.prefix)]
    if not site:
        pytest.skip(f"no package directory under {sys.prefix} to touch")
    stat = os.stat(site[0])
    os.utime(site[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        third, freeze = run("third")
    finally:
        os.utime(site[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert third["python"]["pip_freeze_cached"] is False and freeze == expected
    # A command that runs no Python: PATH's python3, and the record says so.
    done = subprocess.run([CLI, "run", "--root", str(tmp_path / "shell"), "--no-diagnosis", "--",
                           "true"], capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    shell = _environment(_only_run(tmp_path / "shell"))
    assert shell["python"] == {"path": "python3", "from": "PATH (python3)",
                               "pip_freeze_cached": False}


def test_a_second_launchers_other_name_is_warned_naming_both(tmp_path):
    """Two launchers of one run (--run-dir), the second with another --name: the run keeps the
    first name and the second launcher says so, naming both (issue 36: dropped silently)."""
    run_dir = str(tmp_path / "run")
    first = subprocess.run([CLI, "run", "--run-dir", run_dir, "--no-sample", "--name", "alpha",
                            "--", "true"], env=_env(), capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 0, first.stderr
    assert "not applied" not in first.stderr
    second = subprocess.run([CLI, "run", "--run-dir", run_dir, "--no-sample", "--name", "beta",
                             "--", "true"], env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"run {run_dir}: --name 'beta' not applied: the run is already named 'alpha'" in \
        second.stderr, second.stderr
    assert json.loads(_read(os.path.join(run_dir, "run.json")))["name"] == "alpha"
