"""trainscope.diagnose on jobs whose truth is known by construction
(tests/python/diagnosis_jobs/): each job runs once under `trainscope run` and its
diagnosis must carry the label built in, with its kind, its rank and its number
within a margin of the one built in (a data-wait share within 5 points, a
straggler's lag and a memory slope within 20%), and no label of a defect the job
does not have. The margins hold beside other load (a two-core CPU burner).
bench/diagnosis_detection.py runs the same cases 20 times each for the
detection and false-alarm rates.

Also: the Python object against the C++ document (to_json / read_diagnosis),
bad threshold and phase names, a live read of a running job, and
`trainscope diagnose RUN --json` against trainscope.diagnose.

Needs the CLI binary: TRAINSCOPE_CLI=<build>/tools/trainscope (skipped otherwise);
the torch jobs need torch.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import pytest

import trainscope
from trainscope import diagnosis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "diagnosis_jobs"))
import diagnosis_cases as cases  # noqa: E402  (the jobs' directory, added above)

CLI = os.environ.get("TRAINSCOPE_CLI")
needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the job uses torch (DataLoader, gloo)")

LIVE_STEPS = 20  # steps a rank must have recorded for the live read


@pytest.fixture(scope="module")
def case_run(tmp_path_factory):
    """case name -> the run directory of that case's job (each job runs once)."""
    done = {}

    def get(name):
        if name not in done:
            done[name] = cases.run(CLI, cases.CASES[name], tmp_path_factory.mktemp(name))
        return done[name]

    return get


@pytest.fixture(scope="module")
def steady(tmp_path_factory):
    """The steady compute-bound job, diagnosed while it runs and after it ended:
    (run directory, the live Diagnosis)."""
    root = tmp_path_factory.mktemp("steady")
    process = cases.start(CLI, cases.CASES["steady"], root)
    live, error, deadline = None, None, time.monotonic() + 120
    try:
        while process.poll() is None and time.monotonic() < deadline:
            runs = [r for r in os.listdir(root) if not r.startswith(".")]
            if runs:
                try:
                    d = trainscope.diagnose(os.path.join(root, runs[0]))
                    if d.ranks and min(r.steps for r in d.ranks) >= LIVE_STEPS:
                        live = d
                        break
                except (ValueError, RuntimeError, OSError) as e:  # not written yet
                    error = e
            time.sleep(0.05)
        out, err = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err[-3000:]
    assert live is not None, f"the job ended before a live read saw {LIVE_STEPS} steps " \
                             f"(last error: {error})"
    return cases.only_run(root), live


def _check(case_name, d):
    wrong = cases.CASES[case_name].check(d)
    assert not wrong, "\n".join(wrong) + "\n" + d.to_json(indent=2)[:6000]


def _phase(scope, name, device="CPU"):
    rows = [r for r in scope.phases if r.phase == name and r.device == device]
    assert len(rows) == 1, (name, device, scope.phases)
    return rows[0]


def _interval_holds(label):
    v = label.value
    assert v.low <= v.value <= v.high, label


# ---------------------------------------------------------------------------
# The cases


@needs_cli
@needs_torch
def test_a_dataloader_bound_job_is_input_bound_by_its_built_in_share(case_run):
    case = cases.CASES["input"]
    d = trainscope.diagnose(case_run("input"))
    assert d.status == "FINISHED" and d.world_size == 1
    _check("input", d)
    share = case.expected()  # 0.4: 1 - compute * workers / load
    label = d.run.find("INPUT-BOUND")
    assert d.run.labels[0].name == "INPUT-BOUND", d.run.labels  # the primary label
    assert label.threshold_name == "input_bound_share" and label.threshold == 0.2
    assert label.value.low > label.threshold  # the interval, wholly above
    _interval_holds(label)
    assert label.evidence and label.next_step
    # The phase table says the same: the data wait is that share of the step.
    wait = _phase(d.run, "data_wait")
    assert abs(wait.share - share) <= 0.05, wait
    # The primary label is one of INPUT-BOUND, WAIT-HEAVY, COMPUTE-BOUND, BALANCED.
    assert d.run.find("COMPUTE-BOUND") is None, d.run.labels
    assert d.run.steps >= 50 and d.run.warmup >= 1
    # A higher threshold, by name, turns the label off.
    strict = trainscope.diagnose(case_run("input"), thresholds={"input_bound_share": 0.9})
    assert strict.run.find("INPUT-BOUND") is None, strict.run.labels


@needs_cli
@needs_torch
def test_a_compute_bound_job_names_its_largest_phase(case_run):
    run_dir = case_run("compute")
    d = trainscope.diagnose(run_dir)
    _check("compute", d)
    label = d.run.find("COMPUTE-BOUND")
    assert d.run.labels[0] is not None and d.run.labels[0].name == "COMPUTE-BOUND"
    # By construction nearly all of the step is compute (a frozen backbone's forward).
    assert label.value.value >= 0.85 and label.value.low > label.threshold, label
    _interval_holds(label)
    forward = _phase(d.run, "forward")
    for other in ("backward", "optimizer", "data_wait"):
        assert _phase(d.run, other).share < forward.share
    assert forward.share >= 0.5, forward
    # phases={...} reaches the C++ key map: FORWARD timed as the optimizer.
    mapped = trainscope.diagnose(run_dir, phases={"optimizer": "FORWARD"})
    assert mapped.run.find("COMPUTE-BOUND").kind == "optimizer", mapped.run.labels


@needs_cli
@needs_torch
def test_a_steady_job_carries_no_defect(steady):
    run_dir, _ = steady
    d = trainscope.diagnose(run_dir)
    _check("steady", d)  # COMPUTE-BOUND(forward), none of cases.DEFECTS
    for name in cases.DEFECTS:
        if name == "THROUGHPUT-DRIFT" and d.window.find("HOST-PRESSURE") is not None:
            continue  # slowed by other load, which the diagnosis names
        assert d.window.find(name) is None, d.window.labels


@needs_cli
@needs_torch
def test_a_live_read_sees_the_job_running(steady):
    run_dir, live = steady
    assert live.status == "RUNNING"
    assert live.run_dir == run_dir or os.path.samefile(live.run_dir, run_dir)
    assert min(r.steps for r in live.ranks) >= LIVE_STEPS
    assert all(r.status == "RUNNING" for r in live.ranks), live.ranks
    assert live.run.steps > 0 and live.window.steps > 0
    done = trainscope.diagnose(run_dir)
    assert done.status == "FINISHED" and done.run_id == live.run_id
    assert done.ranks[0].steps > live.ranks[0].steps
    assert done.elapsed_ms >= live.elapsed_ms


@needs_cli
@needs_torch
@pytest.mark.parametrize("name,phase", [("straggler_compute", "forward"),
                                        ("straggler_input", "data_wait")])
def test_a_two_rank_job_names_its_straggler_and_its_lag(case_run, name, phase):
    case = cases.CASES[name]
    d = trainscope.diagnose(case_run(name))
    assert d.world_size == 2 and [r.rank for r in d.ranks] == [0, 1]
    assert all(r.status == "FINISHED" for r in d.ranks)
    _check(name, d)
    label = case.found(d)
    _interval_holds(label)
    delay = case.expected()
    assert label.value.low > 0.5 * delay, label  # the interval is about the lag, not 0
    # The phase table: the slow rank is the worst in the slowed phase, by about the delay.
    row = _phase(d.run, phase)
    assert row.worst_rank == 1 and abs(row.worst_rank_s - row.median_rank_s - delay / 2) \
        <= 0.2 * delay, row  # with two ranks the median rank is their mean
    # The other kind of straggler is not claimed.
    others = [l for l in d.run.labels if l.name == "STRAGGLER" and l.kind != case.kind]
    assert not others, others
    assert "rank 1" in d.headline() and "STRAGGLER" in d.headline()


@needs_cli
def test_a_job_whose_memory_grows_shows_its_slope(case_run):
    case = cases.CASES["memory"]
    d = trainscope.diagnose(case_run("memory"))
    _check("memory", d)
    label = case.found(d)
    _interval_holds(label)
    assert label.threshold_name == "memory_creep_mb_per_1k_steps"
    assert label.value.low > label.threshold
    # 1 MB a step: 1,000 MB per 1,000 steps, within 20%.
    assert abs(label.value.value - case.expected()) <= 0.2 * case.expected(), label


@needs_cli
def test_a_job_that_slows_down_drifts(case_run):
    case = cases.CASES["drift"]
    d = trainscope.diagnose(case_run("drift"))
    _check("drift", d)
    label = d.run.find("THROUGHPUT-DRIFT")
    _interval_holds(label)
    assert label.threshold_name in ("throughput_drift_share", "drift_p_value"), label
    assert label.value.value > 0
    assert d.run.find("MEMORY-CREEP") is None and d.run.find("STRAGGLER") is None


# ---------------------------------------------------------------------------
# The object and its document


@needs_cli
@needs_torch
def test_the_json_document_round_trips(case_run, tmp_path):
    d = trainscope.diagnose(case_run("straggler_compute"))
    text = d.to_json()
    document = json.loads(text)
    assert document["format"] == "trainscope.diagnosis" and document["version"] == 1
    assert json.loads(d.to_json(indent=2)) == document
    path = tmp_path / "diagnosis.json"
    path.write_text(text, encoding="utf-8")
    back = trainscope.read_diagnosis(path)
    assert back.to_json() == text
    assert (back.run_dir, back.run_id, back.status, back.headline()) == \
        (d.run_dir, d.run_id, d.status, d.headline())
    for scope in ("window", "run"):
        mine, theirs = getattr(d, scope), getattr(back, scope)
        assert [(l.name, l.kind, l.rank, l.quantity, l.threshold_name) for l in theirs.labels] == \
            [(l.name, l.kind, l.rank, l.quantity, l.threshold_name) for l in mine.labels]
        for a, b in zip(mine.labels, theirs.labels):
            assert tuple(b.value) == pytest.approx(tuple(a.value), rel=1e-6, nan_ok=True)
        assert [(r.phase, r.device) for r in theirs.phases] == \
            [(r.phase, r.device) for r in mine.phases]
    assert diagnosis.parse_diagnosis(text).to_json() == text
    # A damaged document: the error names the file.
    bad = tmp_path / "bad.json"
    bad.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises((ValueError, RuntimeError), match="bad.json"):
        trainscope.read_diagnosis(bad)


@needs_cli
@needs_torch
def test_the_phase_table_as_a_frame(steady):
    pandas = pytest.importorskip("pandas")
    d = trainscope.diagnose(steady[0])
    frame = d.phases_frame()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(d.run.phases)
    assert list(frame.columns[:2]) == ["phase", "device"]
    forward = frame[(frame.phase == "forward") & (frame.device == "CPU")]
    assert forward.share.iloc[0] == _phase(d.run, "forward").share
    assert len(d.phases_frame("window")) == len(d.window.phases)
    # A Run object (trainscope.read_run) is diagnosed as its directory.
    assert trainscope.diagnose(trainscope.read_run(steady[0])).run_id == d.run_id


@needs_cli
@needs_torch
def test_trainscope_diagnose_json_agrees_with_python(case_run):
    run_dir = case_run("straggler_input")
    probe = subprocess.run([CLI, "diagnose", "--help"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        pytest.skip(f"this CLI has no `diagnose` command: {probe.stderr.strip()[:200]}")
    for extra, kwargs in [([], {}),
                          (["--window", "30", "--threshold", "straggler_lag_share=0.5",
                            "--phase", "optimizer=COMM"],
                           {"window": 30, "thresholds": {"straggler_lag_share": 0.5},
                            "phases": {"optimizer": "COMM"}})]:
        done = subprocess.run([CLI, "diagnose", run_dir, "--json"] + extra, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        mine = json.loads(trainscope.diagnose(run_dir, **kwargs).to_json())
        assert json.loads(done.stdout) == mine, extra


BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "diagnosis_detection.py")


@needs_cli
@pytest.mark.skipif(not os.path.exists(BENCH), reason="runs from a repository checkout")
def test_the_detection_bench_prints_its_table(tmp_path):
    done = subprocess.run([sys.executable, BENCH, "--reps", "1", "--cases", "drift", "--json",
                           str(tmp_path / "runs.json")], capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Detection on each case (1 runs each" in done.stdout, done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| drift |")]
    assert "| THROUGHPUT-DRIFT | far |" in row, done.stdout
    (result,) = json.loads((tmp_path / "runs.json").read_text(encoding="utf-8"))
    assert result["case"] == "drift" and "labels" in result, result


def _processes_with(marker):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


@needs_cli
@needs_torch
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_case_past_its_timeout_leaves_none_of_its_ranks_running(tmp_path):
    """cases.run stops a job past its timeout through `trainscope run` (SIGTERM, passed on
    to the ranks): killing only `trainscope run` left both ranks of a two-rank job running."""
    steps = "987653"  # marks this job's processes
    with pytest.raises(AssertionError, match="still running after"):
        cases.run(CLI, cases.CASES["straggler_compute"], tmp_path, timeout=3, steps=steps)
    left = _processes_with(f"--steps\0{steps}\0")
    for pid in left:  # not to leave them to the next tests
        os.kill(pid, 9)
    assert not left, left


@pytest.mark.skipif(not os.path.exists(BENCH), reason="runs from a repository checkout")
def test_the_detection_bench_rates_and_false_alarms(tmp_path):
    """Its Wilson intervals (the textbook values for 0/20 and 20/20), and its tables from
    the runs of an earlier --json, run nothing: a label a job without a defect raises is
    a false alarm, HOST-PRESSURE beside a burner is not, a failed run counts as missed."""
    sys.path.insert(0, os.path.dirname(BENCH))
    try:
        import diagnosis_detection as bench  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    assert bench.wilson(0, 20)[0] == 0.0 and abs(bench.wilson(0, 20)[1] - 0.161) < 1e-3
    assert abs(bench.wilson(20, 20)[0] - 0.839) < 1e-3 and bench.wilson(20, 20)[1] == 1.0

    def label(name):
        return {"name": name, "kind": "", "rank": None, "quantity": "q", "value": 0.5,
                "low": 0.4, "high": 0.6, "threshold": 0.2}
    runs = [{"case": "real_cpu", "rep": rep, "load1": 3.0, "detected": True, "numbers": True,
             "value": 0.9, "threshold": 0.5, "wrong": [],
             "labels": [label("COMPUTE-BOUND"), label("HOST-PRESSURE")] +
                       ([label("INPUT-BOUND")] if rep == 0 else [])} for rep in range(2)]
    runs += [{"case": "comm_2x", "rep": 0, "load1": 3.0, "error": "exit 1"},
             {"case": "comm_2x", "rep": 1, "load1": 3.0, "detected": True, "numbers": True,
              "value": 0.4, "threshold": 0.2, "wrong": [], "labels": [label("COMM-BOUND")]}]
    (tmp_path / "runs.json").write_text(json.dumps(runs), encoding="utf-8")
    done = subprocess.run([sys.executable, BENCH, "--cli", "unused", "--tables-from",
                           str(tmp_path / "runs.json")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    (comm,) = [line for line in lines if line.startswith("| comm_2x |")]
    assert "| 1 | 1/2 = 50%" in comm and "| 2 |" in comm, comm
    (real,) = [line for line in lines if line.startswith("| real_cpu |")]
    assert "INPUT-BOUND 1/2 = 50%" in real and "HOST-PRESSURE 1/2" not in real, real
    (summary,) = [line for line in lines if line.startswith("| INPUT-BOUND |")]
    assert summary.endswith("| 1/2 = 50% [9, 91] |"), summary


# ---------------------------------------------------------------------------
# Names and errors


def test_the_threshold_table_and_the_phase_names():
    table = diagnosis.THRESHOLDS
    assert table["input_bound_share"].default == 0.2
    assert table["straggler_lag_share"].default == 0.05
    assert table["memory_creep_mb_per_1k_steps"].default == 1.0
    assert list(table)[0] == "input_bound_share" and "warmup_steps" in table
    for name, threshold in table.items():
        assert threshold.name == name and threshold.meaning, threshold
        assert math.isfinite(threshold.default) and threshold.default >= 0
    assert diagnosis.PHASES == ("data_wait", "h2d", "forward", "backward", "optimizer", "comm",
                                "comm_exposed", "sync", "rest")
    assert "STRAGGLER" in diagnosis.LABELS and "NO-DATA" in diagnosis.LABELS
    assert "COMM-BOUND" in diagnosis.LABELS and table["comm_bound_share"].default == 0.2
    assert "LAUNCH-BOUND" in diagnosis.LABELS
    assert table["launch_bound_cpu_gpu_ratio"].default == 0.8


def test_unknown_names_raise_value_errors_naming_them(tmp_path):
    run_dir = tmp_path / "any"  # the names are checked before the run is read
    with pytest.raises(ValueError, match="no_such_threshold"):
        trainscope.diagnose(run_dir, thresholds={"no_such_threshold": 1.0})
    with pytest.raises(ValueError, match="input_bound_share"):
        trainscope.diagnose(run_dir, thresholds={"input_bound_share": -1.0})
    with pytest.raises(ValueError, match="nonsense"):
        trainscope.diagnose(run_dir, phases={"nonsense": "opt_step"})
    with pytest.raises(ValueError, match="window"):
        trainscope.diagnose(run_dir, window=0)
    with pytest.raises(TypeError, match="run"):
        trainscope.diagnose(42)


def test_a_directory_that_is_no_run_is_named(tmp_path):
    with pytest.raises((FileNotFoundError, ValueError), match="vanished"):
        trainscope.diagnose(tmp_path / "vanished")
    (tmp_path / "empty").mkdir()
    with pytest.raises((FileNotFoundError, ValueError), match="empty"):
        trainscope.diagnose(tmp_path / "empty")
