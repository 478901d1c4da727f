"""A job under `trainscope run` whose run directory is on a really full disk.

The run directory lives on a small tmpfs that the job's region rows fill
(full_disk_jobs/train.py). The tmpfs is mounted in a mount namespace of the
test's own (`unshare --mount`, as root; `unshare --user --map-root-user
--mount` otherwise), where this file runs as a driver (`--driver`): it starts
the job, reads the live run on the full disk, lets the job end and prints what
it saw as JSON. The tests then check: the exit code is the training's, the
line `trainscope run` prints agrees with the run directory, every metric and
the summary are kept, region rows are counted as dropped, a live run is never
called crashed, and stderr.log holds a failed run's traceback.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "full_disk_jobs", "train.py")
TMPFS_SIZE = "4m"
STEPS, REGIONS_PER_STEP = 3000, 100


def _namespace_command():
    """The unshare prefix that lets the driver mount a tmpfs, or None and why not."""
    if shutil.which("unshare") is None:
        return None, "unshare (util-linux) is not installed"
    prefixes = [["unshare", "--mount"]] if os.geteuid() == 0 else []
    prefixes.append(["unshare", "--user", "--map-root-user", "--mount"])
    reasons = []
    for prefix in prefixes:
        probe = subprocess.run(prefix + ["sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                               capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode == 0:
            return prefix, None
        reasons.append(f"{' '.join(prefix)}: {probe.stderr.strip() or probe.returncode}")
    return None, "cannot mount a tmpfs: " + "; ".join(reasons)


def _wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def _driver(work, mode):
    """Runs inside the mount namespace; prints one JSON object."""
    import trainscope  # pylint: disable=import-outside-toplevel
    seen = {"live": []}
    mount = os.path.join(work, "tmpfs")
    os.makedirs(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", mount],
                   check=True)
    run_dir = os.path.join(mount, "run")
    full, go = os.path.join(work, "full"), os.path.join(work, "go")
    with open(os.path.join(work, "cli.err"), "wb") as cli_err:
        job = subprocess.Popen(  # pylint: disable=consider-using-with
            [os.environ["TRAINSCOPE_CLI"], "run", "--no-sample", "--no-diagnosis", "--run-dir",
             run_dir, "--", sys.executable, JOB, mode, full, go],
            stdout=subprocess.DEVNULL, stderr=cli_err)
        if _wait_for(lambda: os.path.exists(full) or job.poll() is not None, 300) and \
                job.poll() is None:
            stat = os.statvfs(mount)
            seen["free_bytes"] = stat.f_bavail * stat.f_frsize

            def live():
                run = trainscope.read_run(run_dir)
                rank = run.ranks.iloc[0]
                seen["live"].append({"status": run.status, "crashed": bool(run.crashed),
                                     "heartbeat_ms": int(rank["heartbeat_ms"])})
                return run

            first = live()
            first_beat = int(first.ranks.iloc[0]["heartbeat_ms"])
            # The heartbeat goes on on the full disk (a stale one reads as a crash).
            _wait_for(lambda: live().ranks.iloc[0]["heartbeat_ms"] > first_beat, 20)
        with open(go, "w", encoding="utf-8"):
            pass
        seen["returncode"] = job.wait(timeout=300)
    with open(os.path.join(work, "cli.err"), encoding="utf-8", errors="replace") as text:
        seen["cli_stderr"] = text.read()
    run = trainscope.read_run(run_dir)
    seen["status"] = run.status
    seen["metrics"] = len(run.metrics)
    seen["regions"] = len(run.regions)
    batch = run.summaries[(run.summaries["key"] == "BATCH") & (run.summaries["device"] == "CPU")]
    seen["summary_count"] = int(batch["count"].iloc[0]) if len(batch) else None
    with open(os.path.join(run_dir, "rank-0.json"), encoding="utf-8") as rank:
        seen["rank_file"] = json.load(rank)
    with open(os.path.join(run_dir, "stderr.log"), encoding="utf-8", errors="replace") as log:
        seen["stderr_log"] = log.read()
    seen["leftovers"] = [n for n in os.listdir(run_dir) if ".tmp-" in n]
    print(json.dumps(seen))


@pytest.fixture(scope="module")
def namespace():
    prefix, why = _namespace_command()
    if prefix is None:
        pytest.skip(why)
    return prefix


def _run(namespace, tmp_path, mode):
    env = dict(os.environ)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(namespace + [sys.executable, os.path.abspath(__file__), "--driver",
                                       str(tmp_path), mode],
                          capture_output=True, text=True, timeout=600, check=False, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    total = STEPS * REGIONS_PER_STEP
    dropped = seen["rank_file"].get("dropped_region_rows", 0)
    print(f"[figures] {mode}: region rows kept {seen['regions']}, dropped {dropped} of {total}; "
          f"metrics kept {seen['metrics']} of {STEPS}; free while full {seen.get('free_bytes')}")
    return seen


def _check_full_disk_run(seen, status):
    total = STEPS * REGIONS_PER_STEP
    assert seen.get("free_bytes", 1 << 30) < (64 << 10), seen  # the disk really was full
    # Read live on the full disk: never crashed, and its heartbeat went on.
    assert seen["live"] and all(s["status"] == "RUNNING" and not s["crashed"]
                                for s in seen["live"]), seen["live"]
    assert seen["live"][-1]["heartbeat_ms"] > seen["live"][0]["heartbeat_ms"], seen["live"]
    assert seen["status"] == status, seen["cli_stderr"]
    last = seen["cli_stderr"].strip().splitlines()[-1]
    assert last.startswith("trainscope run: exit code") and last.endswith(status), last
    assert seen["metrics"] == STEPS                     # every log_metric point
    assert seen["summary_count"] == total               # every region's statistics
    dropped = seen["rank_file"].get("dropped_region_rows", 0)
    assert dropped > 0 and seen["regions"] + dropped == total, (seen["regions"], dropped)
    assert seen["rank_file"]["status"] == status
    # The job's own warning went to its stderr log on the full disk; `trainscope run`
    # says on its terminal what the run lost.
    assert "the disk was full (" in seen["cli_stderr"], seen["cli_stderr"]
    assert not seen["leftovers"], seen["leftovers"]


def test_a_finished_training_on_a_full_disk_exits_0_finished_with_metrics_and_summary(
        namespace, tmp_path):
    seen = _run(namespace, tmp_path, "with")
    assert seen["returncode"] == 0, seen["cli_stderr"]
    _check_full_disk_run(seen, "FINISHED")
    assert "Traceback" not in seen["cli_stderr"]


def test_a_run_never_ended_reads_as_trainscope_run_prints_it(namespace, tmp_path):
    seen = _run(namespace, tmp_path, "plain")
    assert seen["returncode"] == 0, seen["cli_stderr"]
    _check_full_disk_run(seen, "FINISHED")


def test_a_failed_training_keeps_its_traceback_in_stderr_log(namespace, tmp_path):
    seen = _run(namespace, tmp_path, "raise")
    assert seen["returncode"] == 1, seen["cli_stderr"]
    _check_full_disk_run(seen, "FAILED")
    assert "Traceback" in seen["stderr_log"], seen["stderr_log"]
    assert "ValueError: boom after the disk filled" in seen["stderr_log"], seen["stderr_log"]


def test_end_warns_and_returns_what_it_could_not_write_instead_of_raising(tmp_path):
    code = """
        import shutil, warnings, trainscope
        run = trainscope.start_run(root=%r)
        trainscope.log_metric("loss", 1.0)
        shutil.rmtree(run.dir)                      # nothing can be written any more
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            failure = run.end()
        assert failure is not None and run.dir in failure, failure  # it names the file
        assert run.end_error == failure and run.end() == failure
        assert any(issubclass(w.category, trainscope.TrainscopeWarning) and failure in str(w.message)
                   for w in caught), [str(w.message) for w in caught]
        assert trainscope.active_run() is None
        print("ended without raising")
    """ % str(tmp_path / "runs")
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINSCOPE_RUN_DIR",
                                                             "MLFLOW_TRACKING_URI")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "ended without raising" in done.stdout
    # Python's warning; the C++ Run does not repeat it when it is destroyed.
    assert "trainscope: warning: run " not in done.stderr, done.stderr


def test_trainscope_run_prints_the_status_its_run_directory_has(tmp_path):
    """The command exits 0, but its rank died (kill -9) and the directory says FAILED:
    the line printed says so too, and the exit code stays the command's."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent("""
        import os, signal, subprocess, sys
        rank = ("import os, signal, trainscope; trainscope.log_metric('x', 1); "
                "os.kill(os.getpid(), signal.SIGKILL)")
        subprocess.run([sys.executable, "-c", rank], check=False)
        sys.exit(0)
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINSCOPE_RUN_DIR",
                                                             "MLFLOW_TRACKING_URI")}
    run_dir = tmp_path / "run"
    done = subprocess.run([os.environ["TRAINSCOPE_CLI"], "run", "--no-sample", "--no-diagnosis",
                           "--run-dir", str(run_dir), "--", sys.executable, str(job)], env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    import trainscope  # pylint: disable=import-outside-toplevel
    assert trainscope.read_run(str(run_dir)).status == "FAILED"
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"trainscope run: exit code 0, run {run_dir} FAILED", done.stderr


if __name__ == "__main__" and sys.argv[1:2] == ["--driver"]:
    _driver(sys.argv[2], sys.argv[3])
