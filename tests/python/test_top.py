"""`trainscope top` in a real terminal: tmux runs it beside a live two-rank job (two
processes with RANK=0/1, WORLD_SIZE=2 under one `trainscope run`, each timing BATCH, IO and
FORWARD per step) and `capture-pane` must show the diagnosis, both ranks and a step count that
grows between two captures; a resize to 40x10 still draws and `q` quits with 0; a run that ends
while followed shows its final status; a vanished run shows a message naming it. Also the
plain (`--once`) and JSON (`--json`) snapshots, a path that is no run (exit 1) and a sweep
directory (its jobs, ETA and the running job's run).

Needs the CLI (TRAINSCOPE_CLI) and, for the terminal tests, tmux; skipped otherwise.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

CLI = os.environ.get("TRAINSCOPE_CLI")
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_tmux = pytest.mark.skipif(not TMUX, reason="tmux is not installed (scripts/setup.sh)")

LABELS = ("BALANCED", "INPUT-BOUND", "COMPUTE-BOUND", "WAIT-HEAVY", "STRAGGLER", "MEMORY-CREEP",
          "THROUGHPUT-DRIFT", "GPU-IDLE", "HOST-PRESSURE", "HANG", "NO-DATA", "COMM-BOUND",
          "LAUNCH-BOUND")
JOB_SECONDS = 40  # long enough for every live test of the module; the last waits for its end

TRAIN = """
    import os, sys, time
    import trainscope

    seconds = float(sys.argv[1])
    rank = int(os.environ["RANK"])
    tmr = trainscope.Timer()            # joins TRAINSCOPE_RUN_DIR as this RANK
    # The ledger's work (docs/ledger.md): SAMPLES x SEQ tokens and FLOPS per step, PEAK FLOP/s.
    trainscope.log_step_flops(FLOPS)
    if rank == 0:
        trainscope.log_param("work/peak_flops", str(PEAK))
    end = time.time() + seconds
    while time.time() < end:
        tmr.start(trainscope.TimeType.BATCH)
        with tmr.scope(trainscope.TimeType.IO):
            time.sleep(0.010)
        with tmr.scope(trainscope.TimeType.FORWARD):
            time.sleep(0.015 + 0.005 * rank)
        tmr.end(trainscope.TimeType.BATCH)
        trainscope.log_step_work(samples=SAMPLES, tokens=SAMPLES * SEQ)
"""
SAMPLES, SEQ, FLOPS, PEAK = 8, 64, 4e6, 1e9

LAUNCHER = """
    import os, subprocess, sys
    env = dict(os.environ, WORLD_SIZE="2")
    ranks = [subprocess.Popen([sys.executable, "train.py", sys.argv[1]],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(2)]
    sys.exit(max(abs(rank.wait()) for rank in ranks))
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_RUNS_ROOT", "MLFLOW_TRACKING_URI",
                        "SLURM_JOB_ID")}
    env.update(extra)
    return env


def _start_job(work, root, seconds, name="toptest"):
    work.mkdir(parents=True, exist_ok=True)
    (work / "train.py").write_text(textwrap.dedent(TRAIN).replace("SAMPLES", str(SAMPLES))
                                   .replace("SEQ", str(SEQ)).replace("FLOPS", repr(FLOPS))
                                   .replace("PEAK", repr(PEAK)))
    (work / "launcher.py").write_text(textwrap.dedent(LAUNCHER))
    return subprocess.Popen(
        [CLI, "run", "--root", str(root), "--interval", "0.5", "--name", name, "--",
         sys.executable, "launcher.py", str(seconds)],
        cwd=work, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_regions(root, ranks=(0, 1), timeout=60):
    """The run directory once every rank has appended regions."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        runs = [root / name for name in os.listdir(root)] if root.exists() else []
        if runs and all((runs[0] / f"regions-{r}.csv").exists()
                        and len((runs[0] / f"regions-{r}.csv").read_text().splitlines()) > 20
                        for r in ranks):
            return runs[0]
        time.sleep(0.2)
    raise AssertionError(f"no run with regions of ranks {ranks} under {root} in {timeout} s")


@pytest.fixture(scope="module")
def live_job(tmp_path_factory):
    """A two-rank job that runs for JOB_SECONDS; yields its run directory."""
    base = tmp_path_factory.mktemp("live")
    job = _start_job(base / "job", base / "runs", JOB_SECONDS)
    try:
        yield _wait_for_regions(base / "runs"), job
    finally:
        if job.poll() is None:
            job.terminate()
        job.wait(timeout=60)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A two-rank job of 3 s, run to its end."""
    base = tmp_path_factory.mktemp("finished")
    job = _start_job(base / "job", base / "runs", 3, name="short")
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err[-3000:]
    (run_dir,) = [base / "runs" / name for name in os.listdir(base / "runs")]
    return run_dir


class Tmux:
    """One private tmux server (its own socket) with one window running a command."""

    def __init__(self, command, width=120, height=40):
        self.socket = "trainscope-top-" + uuid.uuid4().hex[:8]
        subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-s", "top", "-x", str(width), "-y", str(height), command],
                       env=_env(), check=True, timeout=30)

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=30, check=False)

    def capture(self):
        return self.tmux("capture-pane", "-p", "-t", "top").stdout

    def wait_for(self, pattern, timeout=30):
        """The pane's text once `pattern` (a regex) is on it."""
        deadline = time.time() + timeout
        text = ""
        while time.time() < deadline:
            text = self.capture()
            if re.search(pattern, text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} not on the pane within {timeout} s:\n{text}")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def resize(self, width, height):
        done = self.tmux("resize-window", "-t", "top", "-x", str(width), "-y", str(height))
        assert done.returncode == 0, done.stderr

    def close(self):
        self.tmux("kill-server")


def _top_in_tmux(tmp_path, target, *flags, width=120, height=40):
    """tmux running `trainscope top TARGET`; its exit status goes to <tmp_path>/top-exit."""
    status = tmp_path / "top-exit"
    flags_text = " ".join(flags)
    command = (f"LC_ALL=C.UTF-8 {CLI} top {target} {flags_text} 2>{tmp_path}/top-stderr; "
               f"echo $? > {status}; sleep 60")
    return Tmux(command, width, height), status


def _wait_exit(status, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if status.exists() and status.read_text().strip():
            return int(status.read_text())
        time.sleep(0.1)
    raise AssertionError(f"trainscope top did not exit within {timeout} s")


def _rank_steps(text):
    """{rank: (status, steps)} from the ranks block: "r0 <host> RUNNING 123 steps"."""
    return {int(r): (status, int(steps))
            for r, status, steps in re.findall(r"\br(\d+) \S+ ([A-Z]+) (\d+) steps", text)}


def _diagnosis_labels(text):
    match = re.search(r"diagnosis: (.*)", text)
    assert match, f"no diagnosis line:\n{text}"
    return [label for label in LABELS if label in match.group(1)]


@needs_tmux
def test_top_follows_a_live_two_rank_job_in_a_terminal(live_job, tmp_path):
    run_dir, _ = live_job
    pane, status = _top_in_tmux(tmp_path, run_dir)
    try:
        first = pane.wait_for(r"diagnosis: .*(" + "|".join(LABELS) + ")")
        assert re.search(r"run toptest \(\w{32}\)\s+RUNNING", first), first
        time.sleep(4)
        second = pane.wait_for(r"diagnosis: ")
        assert "Traceback" not in second
        before, after = _rank_steps(first), _rank_steps(second)
        assert set(before) == {0, 1} and set(after) == {0, 1}, second
        assert all(after[r][0] == "RUNNING" for r in (0, 1)), second
        assert all(after[r][1] > before[r][1] for r in (0, 1)), (first, second)
        # ~40 steps/s per rank: by the second capture the window holds enough steps for a
        # conclusion (a label other than NO-DATA).
        labels = _diagnosis_labels(second)
        assert labels and labels != ["NO-DATA"], second
        # The phase table (IO is data_wait, FORWARD forward) and the per-key table.
        assert re.search(r"^data_wait\s+CPU\s", second, re.M), second
        assert re.search(r"^forward\s+CPU\s", second, re.M), second
        assert re.search(r"^BATCH\s+CPU\s+\d+", second, re.M), second
        assert re.search(r"hosts now", second), second
        pane.keys("q")
        assert _wait_exit(status) == 0
    finally:
        pane.close()


@needs_tmux
def test_keys_change_the_sort_and_window_and_a_resize_to_40x10_still_draws(live_job, tmp_path):
    run_dir, _ = live_job
    pane, status = _top_in_tmux(tmp_path, run_dir)
    try:
        pane.wait_for(r"\(by share\)")
        pane.keys("s")
        pane.wait_for(r"\(by p95\)")
        pane.keys("S")
        pane.wait_for(r"\(by share\)")
        pane.keys("w")
        pane.wait_for(r"window: 50\b")
        pane.keys("W", "W")
        pane.wait_for(r"window: 200\b")
        pane.wait_for(r"window 200 steps")  # the follower was opened again with the new window
        pane.resize(40, 10)
        # The redrawn view (title first), not the old screen tmux shows cut to 40x10 until then.
        small = pane.wait_for(r"^run toptest[\s\S]*q quit")
        lines = small.rstrip("\n").split("\n")
        assert len(lines) <= 10 and all(len(line) <= 40 for line in lines), small
        assert re.search(r"run toptest", small), small
        pane.keys("r")
        time.sleep(1.5)
        assert "q quit" in pane.capture()  # still alive and drawing after a refresh
        pane.resize(120, 40)
        pane.wait_for(r"diagnosis: ")
        pane.keys("q")
        assert _wait_exit(status) == 0
        assert (tmp_path / "top-stderr").read_text() == ""
    finally:
        pane.close()


def test_once_prints_a_plain_snapshot_of_the_live_job(live_job):
    run_dir, _ = live_job
    time.sleep(2)
    done = subprocess.run([CLI, "top", str(run_dir), "--once"], env=_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out  # no terminal control sequences
    assert re.search(r"run toptest \(\w{32}\)", out), out
    assert set(_rank_steps(out)) == {0, 1}, out
    assert _diagnosis_labels(out), out
    assert re.search(r"^key\s+dev\s+count", out, re.M), out
    # The ledger while the run is live: tokens/s, samples/s and MFU (FLOPs and a peak given).
    assert re.search(r"^ledger: [\d.]+ k?tokens/s, [\d.]+ samples/s, .*MFU [\d.]+% of 1 GFLOP/s$",
                     out, re.M), out
    # Not a terminal: the same snapshot without --once.
    piped = subprocess.run([CLI, "top", str(run_dir)], env=_env(), capture_output=True,
                           text=True, timeout=60, check=False)
    assert piped.returncode == 0 and re.search(r"diagnosis: ", piped.stdout), piped.stderr


def test_json_prints_the_diagnosis_document(live_job):
    run_dir, _ = live_job
    done = subprocess.run([CLI, "top", str(run_dir), "--json", "--window", "50",
                           "--threshold", "input_bound_share=0.25"],
                          env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["format"] == "trainscope.diagnosis"
    assert doc["run_dir"] == str(run_dir) and doc["window_steps"] == 50
    assert sorted(r["rank"] for r in doc["ranks"]) == [0, 1]
    names = [label["name"] for label in doc["window"]["labels"] + doc["run"]["labels"]]
    assert names and all(name in LABELS for name in names), names
    # The ledger of the live run, per rank from the same steps: tokens are SEQ x the samples,
    # and MFU is the FLOPs per step x steps/s over the peak (steps/s = tokens/s / tokens a step).
    ledger = doc["ledger"]
    assert sorted(r["rank"] for r in ledger["ranks"]) == [0, 1], ledger
    for r in ledger["ranks"]:
        assert r["steps"] > 0 and r["tokens_per_s"] > 0, r
        assert r["tokens_per_s"] == pytest.approx(SEQ * r["samples_per_s"]), r
        assert r["mfu"] == pytest.approx(r["tokens_per_s"] / (SAMPLES * SEQ) * FLOPS / PEAK), r
    assert ledger["tokens_per_s"] == pytest.approx(sum(r["tokens_per_s"] for r in ledger["ranks"]))
    # Rank 1's steps are longer (by construction): fewer tokens a second.
    by_rank = {r["rank"]: r for r in ledger["ranks"]}
    assert by_rank[1]["tokens_per_s"] < by_rank[0]["tokens_per_s"], ledger


@needs_tmux
def test_a_run_that_ends_while_followed_shows_its_final_status(live_job, tmp_path):
    run_dir, job = live_job
    pane, status = _top_in_tmux(tmp_path, run_dir)
    try:
        pane.wait_for(r"RUNNING")
        job.wait(timeout=JOB_SECONDS + 60)
        assert job.returncode == 0, job.stderr.read()[-3000:]
        ended = pane.wait_for(r"the run ended: FINISHED", timeout=20)
        assert re.search(r"run toptest \(\w{32}\)\s+FINISHED", ended), ended
        time.sleep(2)
        assert not status.exists()  # it stays until q
        pane.keys("q")
        assert _wait_exit(status) == 0
    finally:
        pane.close()


@needs_tmux
def test_a_vanished_run_shows_a_message_naming_it(finished_run, tmp_path):
    copy = tmp_path / "copy" / finished_run.name
    shutil.copytree(finished_run, copy)
    pane, status = _top_in_tmux(tmp_path, copy)
    try:
        pane.wait_for(r"the run ended: FINISHED")
        shutil.rmtree(copy)
        gone = pane.wait_for(r"vanished", timeout=15)
        assert finished_run.name[:20] in gone.replace("\n", ""), gone
        assert re.search(r"run short \(\w{32}\)", gone), gone  # what was read before stays
        pane.keys("q")
        assert _wait_exit(status) == 0
    finally:
        pane.close()
    # --once on a vanished run: exit 1 with the message naming it.
    done = subprocess.run([CLI, "top", str(copy), "--once"], env=_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1 and str(copy) in done.stderr, done.stderr


@needs_tmux
def test_a_run_deleted_and_created_again_at_the_path_is_followed(tmp_path):
    """The directory removed and a new run written at the same path (issue 36: top kept the
    old id and reported false damage, "host-vm.csv:195: 3 fields, expected 5", reading the
    new files from the old offsets): top follows the new run and says so."""
    from run_files import write_run  # pylint: disable=import-outside-toplevel
    run_dir = tmp_path / "run"
    first_id, second_id = "a" * 32, "b" * 32
    write_run(str(run_dir), run_id=first_id, name="first", rows_per_key=300,
              hardware_samples=600)
    pane, status = _top_in_tmux(tmp_path, run_dir, "--interval", "0.3")
    try:
        pane.wait_for(rf"run first \({first_id}\)")
        shutil.rmtree(run_dir)
        write_run(str(run_dir), run_id=second_id, name="second", rows_per_key=200,
                  hardware_samples=1200, start_ms=1762000000000, seed=5)
        shown = pane.wait_for(rf"run second \({second_id}\)", timeout=20)
        assert f"a new run at this path: second ({second_id}) (the run {first_id}" in shown, shown
        assert "fields" not in shown and "showing what was read before" not in shown, shown
        pane.keys("q")
        assert _wait_exit(status) == 0
    finally:
        pane.close()


def test_a_damaged_run_is_a_message_naming_it_and_exit_1(finished_run, tmp_path):
    copy = tmp_path / finished_run.name
    shutil.copytree(finished_run, copy)
    (copy / "run.json").write_text("{not json")
    done = subprocess.run([CLI, "top", str(copy), "--once"], env=_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stdout
    assert "run.json" in done.stderr and str(copy) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "terminate" not in done.stderr


def test_a_path_that_is_no_run_is_exit_1_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for path in (tmp_path / "empty", tmp_path / "file.txt", tmp_path / "missing"):
        done = subprocess.run([CLI, "top", str(path), "--once"], env=_env(), capture_output=True,
                              text=True, timeout=30, check=False)
        assert done.returncode == 1, (path, done.stdout)
        assert done.stderr.startswith(f"trainscope top: {path}"), done.stderr
    bad = subprocess.run([CLI, "top", "--window", "0"], env=_env(), capture_output=True,
                         text=True, timeout=30, check=False)
    assert bad.returncode == 2 and "--window" in bad.stderr, bad.stderr
    bad = subprocess.run([CLI, "top", "--threshold", "no_such_threshold=1"], env=_env(),
                         capture_output=True, text=True, timeout=30, check=False)
    assert bad.returncode == 2 and "no_such_threshold" in bad.stderr, bad.stderr


def test_no_argument_follows_the_newest_run_under_the_root(finished_run, tmp_path):
    root = tmp_path / "trainscope-runs"
    shutil.copytree(finished_run, root / finished_run.name)
    done = subprocess.run([CLI, "top", "--once"], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "run short" in done.stdout and "the newest run under trainscope-runs" in done.stdout
    # TRAINSCOPE_RUNS_ROOT names the root; a ROOT argument is the same.
    env = _env(TRAINSCOPE_RUNS_ROOT=str(root))
    done = subprocess.run([CLI, "top", "--json"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["run_name"] == "short", done.stderr
    done = subprocess.run([CLI, "top", str(root), "--json"], env=_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["run_name"] == "short", done.stderr
    nothing = subprocess.run([CLI, "top", "--once"], cwd=tmp_path / "trainscope-runs",
                             env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert nothing.returncode == 1 and "trainscope-runs" in nothing.stderr, nothing.stderr


SWEEP_TRAIN = """
    import time, trainscope
    tmr = trainscope.Timer()
    end = time.time() + 2.5
    while time.time() < end:
        with tmr.scope(trainscope.TimeType.BATCH):
            time.sleep(0.02)
"""


def test_a_sweep_directory_lists_its_jobs_and_follows_the_running_one(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SWEEP_TRAIN))
    sweep = subprocess.Popen(
        [CLI, "sweep", "--grid", "a=1,2,3", "--slots", "1", "--no-sample", "--dir", "sw", "--",
         sys.executable, "train.py"],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # While the second job runs: one done, one running, one queued, an ETA from the first.
        deadline = time.time() + 90
        out = ""
        while time.time() < deadline:
            done = subprocess.run([CLI, "top", "sw", "--once"], cwd=tmp_path, env=_env(),
                                  capture_output=True, text=True, timeout=60, check=False)
            out = done.stdout
            # The running job's run shown: on a busy machine the sweep marks a job
            # RUNNING a while before its process has created its run to follow.
            if (re.search(r"3 jobs: 1 running, 1 done, 0 failed, 1 queued", out)
                    and re.search(r"^run \S+ \(\w{32}\)\s+RUNNING", out, re.M)):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"no snapshot with one job done and one running:\n{out}")
        assert done.returncode == 0, done.stderr
        assert re.search(r"ETA \d+:\d\d:\d\d \(median job \d+:\d\d:\d\d\)", out), out
        jobs = re.findall(r"^([> ]) (\S+)\s+(RUNNING|FINISHED|QUEUED)\s+(\S+)\s+a=(\d)$", out,
                          re.M)
        assert sorted(status for _, _, status, _, _ in jobs) == ["FINISHED", "QUEUED", "RUNNING"]
        # The running job is the followed one (">"), and its run is the one shown.
        (followed,) = [job for job in jobs if job[0] == ">"]
        assert followed[2] == "RUNNING", out
        assert re.search(rf"^run \S+ \(\w{{32}}\)\s+RUNNING", out, re.M), out
    finally:
        _, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 0, err[-3000:]
    done = subprocess.run([CLI, "top", str(tmp_path / "sw"), "--once"], env=_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "3 jobs: 0 running, 3 done, 0 failed, 0 queued" in done.stdout, done.stdout
    assert done.stdout.count(" FINISHED ") >= 3, done.stdout
    assert re.search(r"run \S+ \(\w{32}\)\s+FINISHED", done.stdout), done.stdout
