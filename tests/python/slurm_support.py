"""The `slurm` fixture: srun/sbatch on the local one-node Slurm of the tests.

.ci/run starts that cluster with scripts/slurm-local.sh and exports SLURM_CONF;
by hand:

    eval "$(bash scripts/slurm-local.sh start)"   # ... and later: stop

Without it the tests that use the fixture skip, with the reason: the one
.ci/run put in TRAINSCOPE_SLURM_UNAVAILABLE, or why `sinfo` failed.
Registered for all Python tests by conftest.py.
"""

import os
import shutil
import signal
import subprocess
import uuid

import pytest

UNAVAILABLE_ENV = "TRAINSCOPE_SLURM_UNAVAILABLE"
START_HINT = 'start one with: eval "$(bash scripts/slurm-local.sh start)"'


class Slurm:
    """Runs Slurm client commands on the cluster of SLURM_CONF (in os.environ).

    slurm(*argv, timeout=120) runs `srun --job-name=<unique> *argv` and returns
    the CompletedProcess (text, stdout and stderr captured, not checked); on
    timeout it ends srun, cancels the job and fails the test with the output so
    far. slurm.command(*argv) runs any other client command (sbatch, scontrol,
    scancel, ...) the same way, without the job name.
    """

    def __init__(self, conf):
        self.conf = conf

    def __call__(self, *args, timeout=120, **kwargs):
        name = f"trainscope-test-{uuid.uuid4().hex[:12]}"
        return self._run(["srun", f"--job-name={name}", *map(str, args)], timeout, name, **kwargs)

    def command(self, *args, timeout=60, **kwargs):
        return self._run([str(a) for a in args], timeout, None, **kwargs)

    def _run(self, argv, timeout, job_name, **kwargs):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                                   **kwargs)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # srun forwards SIGTERM to its tasks and ends its step; then make
            # sure the job is gone too, so it does not hold the node's CPUs.
            os.killpg(process.pid, signal.SIGTERM)
            try:
                stdout, stderr = process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                stdout, stderr = process.communicate()
            if job_name:
                subprocess.run(["scancel", f"--name={job_name}"], capture_output=True,
                               timeout=30, check=False)
            pytest.fail(f"timed out after {timeout} s: {' '.join(argv)}\n"
                        f"--- stdout\n{stdout}\n--- stderr\n{stderr}")
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


@pytest.fixture(scope="session")
def slurm():
    """A Slurm object (see its doc) for the cluster of SLURM_CONF; skips the
    test, with the reason, when there is no reachable cluster."""
    reason = os.environ.get(UNAVAILABLE_ENV)
    if reason:
        pytest.skip(f"no local Slurm: {reason}")
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        pytest.skip(f"no local Slurm: SLURM_CONF is not set ({START_HINT})")
    if not os.path.isfile(conf):
        pytest.skip(f"no local Slurm: SLURM_CONF={conf} does not exist ({START_HINT})")
    missing = [c for c in ("srun", "sinfo", "sbatch", "scontrol", "scancel") if not shutil.which(c)]
    if missing:
        pytest.skip(f"no local Slurm: {', '.join(missing)} not on PATH (apt-get install slurm-client)")
    try:
        info = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                              timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"no local Slurm: sinfo (SLURM_CONF={conf}) timed out")
    if info.returncode != 0:
        pytest.skip(f"no local Slurm: sinfo (SLURM_CONF={conf}) failed: "
                    f"{(info.stderr or info.stdout).strip()} ({START_HINT})")
    return Slurm(conf)
