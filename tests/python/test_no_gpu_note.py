"""No NVIDIA GPU is a normal state (issue 26): `trainscope run` says it once, in plain
words ("no NVIDIA GPU/driver found: GPU metrics and GPU timing are off"), before the
command's output; the command's CPU-only GPU timers and the runs a sweep starts say
nothing more, and nobody is told that a driver that does not exist is too old.

Runs on a machine without an NVIDIA driver (skipped where one is installed).
"""

import ctypes
import os
import subprocess
import sys

import pytest

from run_files import trainscope_cli

def _loads(library):
    try:
        ctypes.CDLL(library)
        return True
    except OSError:
        return False


# As trainscope probes: the driver's own libraries (the toolkit's stubs are no driver).
NO_DRIVER = not _loads("libnvidia-ml.so.1") and not _loads("libcuda.so.1")
pytestmark = pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is installed here")
NOTE = "no NVIDIA GPU/driver found"
GPU_JOB = ("import trainscope\n"
           "t = trainscope.CPUGPUTimer()\n"
           "for _ in range(3):\n"
           "    t.start('BATCH', gpu=True); t.end('BATCH', gpu=True)\n"
           "print('trained')\n")


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRAINSCOPE_RUN") and k != "TRAINSCOPE_NO_GPU_NOTED"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _cli(*args, cwd=None):
    return subprocess.run([trainscope_cli(), *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=120, check=False)


def test_a_run_says_it_once_in_plain_words(tmp_path):
    done = _cli("run", "--root", str(tmp_path), "--", sys.executable, "-c", GPU_JOB)
    assert done.returncode == 0, done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if NOTE in line]
    assert said == ["trainscope: warning: no NVIDIA GPU/driver found: GPU metrics and GPU "
                    "timing are off"], done.stdout + done.stderr
    (run_dir,) = [tmp_path / name for name in os.listdir(tmp_path)]
    job_err = (run_dir / "stderr.log").read_text(encoding="utf-8")
    assert NOTE not in job_err and "insufficient" not in job_err, job_err
    assert "trained" in (run_dir / "stdout.log").read_text(encoding="utf-8")


def test_a_timer_on_its_own_says_it_in_plain_words_once():
    done = subprocess.run([sys.executable, "-c", GPU_JOB], capture_output=True, text=True,
                          env=_env(), timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "TrainscopeWarning" in line]
    assert len(said) == 1 and said[0].endswith(
        "no NVIDIA GPU/driver found: gpu=true regions are timed on the CPU only"), done.stderr
    assert "insufficient" not in done.stderr


def test_a_sweep_says_it_once_for_all_its_runs(tmp_path):
    done = _cli("sweep", "--grid", "a=1,2,3", "--dir", str(tmp_path / "sweep"), "--",
                sys.executable, "-c", GPU_JOB)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert sum(NOTE in line for line in output.splitlines()) == 1, output
    runs = tmp_path / "sweep" / "runs"
    for name in os.listdir(runs):
        job_err = (runs / name / "stderr.log").read_text(encoding="utf-8")
        assert NOTE not in job_err, (name, job_err)
