"""The diagnosis's proof cases: each a job of tests/python/diagnosis_jobs/ with its
built-in quantities, run under `trainscope run`, and what its diagnosis must say
(the label, its kind and rank, and its number within a margin of the one built
in). Shared by tests/python/test_diagnosis.py (each case once) and
bench/diagnosis_detection.py (each case N times: detection and false-alarm rates).
"""

import os
import signal
import subprocess
import sys

JOBS_DIR = os.path.dirname(os.path.abspath(__file__))
# Labels a steady compute-bound job with no defect must never carry. THROUGHPUT-DRIFT
# is a false alarm only when nothing else slows the job down: beside other load (a busy
# CI machine) its steps really do slow, and HOST-PRESSURE names why (see compute.py).
DEFECTS = ("INPUT-BOUND", "STRAGGLER", "MEMORY-CREEP", "THROUGHPUT-DRIFT")
SAMPLE_INTERVAL_S = 0.2  # `trainscope run --interval`: enough RSS readings in a few seconds
WARMUP_STEPS = 5  # the diagnosis's default warmup_steps


class Case:
    """One job and its truth. `args` are the job's built-in quantities (its flags);
    `label`, `kind` and `rank` what the diagnosis must find; `truth(args)` the
    number the label's value must be within `margin` of (absolute when
    `margin_abs`, else relative)."""

    def __init__(self, name, script, args, label, kind=None, rank=None, truth=None, margin=None,
                 margin_abs=False, ranks=1, absent=(), auto=False):
        self.name = name
        self.script = script
        self.args = dict(args)
        self.label = label
        self.kind = kind
        self.rank = rank
        self.truth = truth
        self.margin = margin
        self.margin_abs = margin_abs
        self.ranks = ranks
        self.absent = tuple(absent)
        self.auto = auto  # run under `trainscope run --auto` (a job with no trainscope in it)

    def argv(self, **overrides):
        args = dict(self.args, **overrides)
        out = [os.path.join(JOBS_DIR, self.script)]
        for flag, value in args.items():
            out += [f"--{flag.replace('_', '-')}", str(value)]
        if self.ranks == 2:
            out = [os.path.join(JOBS_DIR, "launch2.py")] + out
        return [sys.executable] + out

    def expected(self):
        return None if self.truth is None else self.truth(self.args)

    def found(self, diagnosis):
        """The case's label in the run scope, with the right kind and rank, or None."""
        label = diagnosis.run.find(self.label)
        if label is None:
            return None
        if self.kind is not None and label.kind != self.kind:
            return None
        if self.rank is not None and label.rank != self.rank:
            return None
        return label

    def number_ok(self, label):
        expected = self.expected()
        if expected is None:
            return True
        error = abs(label.value.value - expected)
        return error <= (self.margin if self.margin_abs else self.margin * abs(expected))

    def check(self, diagnosis):
        """What is wrong with the diagnosis of this case's run: a list of lines (empty: right)."""
        wrong = []
        labels = [(l.name, l.kind, l.rank) for l in diagnosis.run.labels]
        label = self.found(diagnosis)
        if label is None:
            wrong.append(f"{self.name}: no {self.label}"
                         f"{'' if self.kind is None else f'({self.kind})'}"
                         f"{'' if self.rank is None else f' rank {self.rank}'} in {labels}")
        elif not self.number_ok(label):
            wrong.append(f"{self.name}: {self.label} {label.quantity} = {label.value!r}, built in "
                         f"{self.expected():.4g} (margin {self.margin}"
                         f"{'' if self.margin_abs else ' relative'})")
        for name in self.absent:
            if name == "THROUGHPUT-DRIFT" and diagnosis.run.find("HOST-PRESSURE") is not None:
                continue  # the drift is real, and its cause named
            if diagnosis.run.find(name) is not None:
                wrong.append(f"{self.name}: false {name}: {diagnosis.run.find(name)!r}")
        return wrong


def _input_share(args):
    return max(0.0, 1.0 - args["compute_ms"] * args["workers"] / args["load_ms"])


def _creep_mb_per_1k(args):
    return args["mb_per_step"] * 1000.0


def _delay_s(args):
    return args["delay_ms"] / 1e3


def _drift_share(args):
    """The growth of the step time over the steps the diagnosis judges (after its
    warm-up): the step time at the last step over the one at the first, less one."""
    steps, start, end = args["steps"], args["start_ms"], args["end_ms"]
    first = start + (end - start) * WARMUP_STEPS / (steps - 1)
    return end / first - 1.0


CASES = {
    "input": Case("input", "input_bound.py",
                  {"steps": 60, "load_ms": 200.0, "compute_ms": 60.0, "workers": 2},
                  "INPUT-BOUND", truth=_input_share, margin=0.05, margin_abs=True),
    # Matmuls on the CPU: its step time follows the machine's other load, so only the
    # defects that load cannot make are absent by construction.
    "compute": Case("compute", "compute.py", {"steps": 150}, "COMPUTE-BOUND", kind="forward",
                    absent=("INPUT-BOUND", "STRAGGLER", "MEMORY-CREEP")),
    "straggler_compute": Case("straggler_compute", "straggler.py",
                              {"steps": 100, "slow": "forward", "delay_ms": 25.0,
                               "compute_ms": 15.0},
                              "STRAGGLER", kind="compute", rank=1, truth=_delay_s, margin=0.2,
                              ranks=2),
    "straggler_input": Case("straggler_input", "straggler.py",
                            {"steps": 100, "slow": "loader", "delay_ms": 25.0,
                             "compute_ms": 15.0},
                            "STRAGGLER", kind="input", rank=1, truth=_delay_s, margin=0.2,
                            ranks=2),
    "memory": Case("memory", "memory_creep.py", {"steps": 150, "mb_per_step": 1.0,
                                                 "step_ms": 20.0},
                   "MEMORY-CREEP", kind="host", rank=0, truth=_creep_mb_per_1k, margin=0.2),
    "drift": Case("drift", "drift.py", {"steps": 100, "start_ms": 40.0, "end_ms": 80.0},
                  "THROUGHPUT-DRIFT", truth=_drift_share, margin=0.2),
    # The compute job with its backbone on a "GPU" (a wait): steady by construction.
    "steady": Case("steady", "compute.py", {"steps": 150, "backbone_ms": 20.0}, "COMPUTE-BOUND",
                   kind="forward", absent=DEFECTS),
}


def job_env():
    """The environment of a job: no run inherited, one thread per process (the
    machine may have two cores for everything)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT")}
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def run_command(cli, case, root, **overrides):
    return [cli, "run", "--root", os.fspath(root), "--interval", str(SAMPLE_INTERVAL_S), "--name",
            case.name] + (["--auto"] if case.auto else []) + ["--"] + case.argv(**overrides)


def start(cli, case, root, **overrides):
    """The case running under `trainscope run` (a Popen; output captured)."""
    return subprocess.Popen(run_command(cli, case, root, **overrides), cwd=JOBS_DIR,
                            env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # its group: killed whole


def only_run(root):
    runs = [name for name in os.listdir(root) if not name.startswith(".")]
    if len(runs) != 1:
        raise AssertionError(f"{root}: expected one run, found {runs}")
    return os.path.join(root, runs[0])


def run(cli, case, root, timeout=180, **overrides):
    """Runs the case to its end; returns its run directory. AssertionError with the
    job's stderr when it fails."""
    process = start(cli, case, root, **overrides)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM: `trainscope run` passes it on to every process of the job and kills what
        # is left after its --kill-after (10 s); a SIGKILL alone would leave the ranks running.
        process.terminate()
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        raise AssertionError(f"{case.name}: still running after {timeout} s:\n{err[-3000:]}")
    if process.returncode != 0:
        raise AssertionError(f"{case.name}: exit {process.returncode}:\n{err[-3000:]}")
    return only_run(root)
