"""The work of each step (issue 42, docs/ledger.md): samples and tokens per step
recorded by `trainscope run --auto` from the batches that enter the model (padding
excluded by the attention mask), or by the user (trainscope.log_step_work); the
FLOPs of one step counted with FlopCounterMode (torch >= 2.1: the framework venv)
against analytic counts, and the reason said where torch cannot count.

Needs torch and TRAINSCOPE_CLI; the FLOP counts need TRAINSCOPE_FRAMEWORK_PYTHON.
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
from trainscope import _core

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENS = os.path.join(HERE, "auto_jobs", "token_train.py")
FLOPS = os.path.join(HERE, "auto_jobs", "flops_train.py")
CLI = os.environ.get("TRAINSCOPE_CLI")
FRAMEWORK = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="instrumenting PyTorch needs torch")
needs_framework = pytest.mark.skipif(
    not FRAMEWORK, reason="counting FLOPs needs torch >= 2.1 (FlopCounterMode): set "
                          "TRAINSCOPE_FRAMEWORK_PYTHON to the framework venv's python")


def run_auto(root, command, extra_env=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra_env or {})
    done = subprocess.run([CLI, "run", "--root", os.fspath(root), "--no-sample", "--quiet",
                           "--auto", "--"] + command, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = [name for name in os.listdir(root) if not name.startswith(".")]
    assert len(runs) == 1, runs
    return os.path.join(root, runs[0]), json.loads(done.stdout.strip().splitlines()[-1])


def work_of(run_dir):
    metrics = trainscope.read_run(run_dir).metrics
    samples = metrics[metrics["key"] == _core._STEP_SAMPLES_METRIC].sort_values("step")
    tokens = metrics[metrics["key"] == _core._STEP_TOKENS_METRIC].sort_values("step")
    return samples, tokens


@needs_cli
@needs_torch
@pytest.mark.parametrize("mask", [True, False])
def test_auto_counts_samples_and_tokens_per_step_as_the_script_does(tmp_path, mask):
    run_dir, seen = run_auto(tmp_path, [sys.executable, TOKENS, "-n", "12"] +
                             ([] if mask else ["--no-mask"]))
    samples, tokens = work_of(run_dir)
    # One row per step (12 batches), at steps 0..11, summing to the script's own count:
    # padding excluded when the mask is given, batch x sequence without it.
    assert list(samples["step"]) == list(range(seen["steps"]))
    assert samples["value"].sum() == seen["samples"]
    assert tokens["value"].sum() == seen["tokens"]
    if mask:
        assert seen["tokens"] < seen["samples"] * 32  # the padding is real
    else:
        assert seen["tokens"] == seen["samples"] * 32
    assert abs(tokens["value"].sum() - seen["tokens"]) <= 0.01 * seen["tokens"]


@needs_cli
@needs_torch
def test_work_the_user_logs_is_the_only_work_recorded(tmp_path):
    run_dir, seen = run_auto(tmp_path, [sys.executable, TOKENS, "-n", "6",
                                        "--user"])
    samples, tokens = work_of(run_dir)
    # The user's rows alone: the automatic count of the process stopped at the first.
    assert len(samples) == 6 and len(tokens) == 6
    assert tokens["value"].sum() == seen["tokens"]


def test_log_step_work_refuses_a_bad_figure_naming_it(tmp_path, no_inherited_run):
    with trainscope.start_run(root=str(tmp_path)) as run:
        with pytest.raises(ValueError, match="tokens = -5 is not a count"):
            trainscope.log_step_work(samples=4, tokens=-5)
        trainscope.log_step_work(samples=4, tokens=100, step=0)
        trainscope.log_step_flops(3.5e9)
        run_dir = run.dir
    samples, tokens = work_of(run_dir)
    assert list(samples["value"]) == [4.0] and list(tokens["value"]) == [100.0]
    assert trainscope.read_run(run_dir).params[_core._STEP_FLOPS_PARAM] == "3.5e+09"


@needs_cli
@needs_torch
def test_where_torch_cannot_count_flops_the_run_says_why(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    if hasattr(importlib.import_module("torch.utils"), "flop_counter") or \
            importlib.util.find_spec("torch.utils.flop_counter") is not None:
        pytest.skip(f"torch {torch.__version__} can count FLOPs")
    run_dir, _ = run_auto(tmp_path, [sys.executable, TOKENS, "-n", "6"])
    run = trainscope.read_run(run_dir)
    assert _core._STEP_FLOPS_PARAM not in run.params
    assert "has no torch.utils.flop_counter.FlopCounterMode" in \
        run.tags["trainscope.work.flops"], run.tags


@needs_cli
@needs_framework
@pytest.mark.parametrize("model", ["mlp", "conv", "block"])
def test_flops_of_one_step_match_the_analytic_count(tmp_path, model):
    run_dir, seen = run_auto(tmp_path, [FRAMEWORK, FLOPS, "--model", model])
    run = trainscope.read_run(run_dir)
    assert "trainscope.work.flops" not in run.tags, run.tags
    counted = float(run.params[_core._STEP_FLOPS_PARAM])
    assert run.params["work/flops_source"] == _core._FLOPS_FROM_COUNTER
    assert abs(counted - seen["flops"]) <= 0.02 * seen["flops"], (counted, seen)


@needs_cli
@needs_framework
def test_flops_are_not_counted_when_turned_off(tmp_path):
    run_dir, _ = run_auto(tmp_path, [FRAMEWORK, FLOPS, "--model", "mlp"],
                          {"TRAINSCOPE_FLOPS": "off"})
    assert _core._STEP_FLOPS_PARAM not in trainscope.read_run(run_dir).params


@needs_cli
@needs_torch
def test_tokens_per_second_match_the_scripts_own_count(tmp_path):
    # The script times its own steps (first batch to the loader's end) and counts its
    # own unpadded tokens; the ledger divides the recorded tokens by the steps' periods.
    run_dir, seen = run_auto(tmp_path, [sys.executable, TOKENS, "-n", "30", "-b", "16",
                                        "-s", "64", "-w", "64", "-v", "2000"],
                             {"TRAINSCOPE_FLOPS": "off"})
    ledger = trainscope.ledger(run_dir)
    assert ledger["steps"] == 30
    own = seen["tokens"] / seen["seconds"]
    assert abs(ledger["tokens_per_s"] - own) <= 0.01 * own, (ledger, seen)
    assert abs(ledger["samples_per_s"] - seen["samples"] / seen["seconds"]) <= \
        0.01 * seen["samples"] / seen["seconds"]
    assert "no work recorded" not in ledger["line"]
    # `trainscope diagnose` prints the same line, and why the FLOPs are missing.
    done = subprocess.run([CLI, "diagnose", run_dir], capture_output=True, text=True,
                          timeout=120, check=True)
    line = next(text for text in done.stdout.splitlines() if text.startswith("ledger: "))
    assert line == ledger["line"]
    assert "tokens/s" in line and "FLOPs" in line, line
    # ... and the diagnosis holds it typed: Python's and the JSON document's (issue 42).
    typed = trainscope.diagnose(run_dir).ledger
    assert typed["line"] == ledger["line"] and typed["steps"] == ledger["steps"]
    assert typed["tokens_per_s"] == pytest.approx(ledger["tokens_per_s"])
    done = subprocess.run([CLI, "diagnose", run_dir, "--json"], capture_output=True, text=True,
                          timeout=120, check=True)
    document = json.loads(done.stdout)["ledger"]
    assert document["line"] == ledger["line"]
    assert document["tokens_per_s"] == pytest.approx(ledger["tokens_per_s"])
    assert document["mfu"] is None  # FLOPs not counted
    assert [r["rank"] for r in document["ranks"]] == [r["rank"] for r in ledger["ranks"]]


@needs_cli
@needs_framework
@pytest.mark.parametrize("model", ["mlp", "gemm"])
def test_cpu_mfu_against_the_measured_gemm_peak(tmp_path, model):
    # A fresh cache: the probe runs in this job, beside the same load.
    run_dir, seen = run_auto(tmp_path / "runs", [FRAMEWORK, FLOPS, "--model", model, "-n", "8"],
                             {"TRAINSCOPE_CACHE_DIR": str(tmp_path / "cache")})
    ledger = trainscope.ledger(run_dir)
    assert ledger["device"] == "cpu"
    assert ledger["peak_source"].startswith("cpu GEMM probe (torch.mm fp32 1024")
    assert ledger["steps"] == 7  # 8 optimizer steps, less the counted one (3)
    print(model, ledger["line"])
    assert 0 < ledger["mfu"] <= 1, ledger
    if model == "gemm":
        # GEMM-bound at the probe's size: well into the peak (about 0.8 measured idle).
        assert ledger["mfu"] > 0.25, ledger
    # --peak-flops wins.
    given = trainscope.ledger(run_dir, peak_flops=ledger["peak_flops"] * 2)
    assert given["peak_source"] == "--peak-flops"
    assert given["mfu"] == pytest.approx(ledger["mfu"] / 2)


@needs_cli
@needs_torch
def test_compare_has_a_tokens_per_second_row(tmp_path):
    # Two runs of one job, the second with twice the sequence: more tokens a step.
    a, _ = run_auto(tmp_path / "a", [sys.executable, TOKENS, "-n", "20", "-s", "32", "--no-mask"],
                    {"TRAINSCOPE_FLOPS": "off"})
    b, _ = run_auto(tmp_path / "b", [sys.executable, TOKENS, "-n", "20", "-s", "64", "--no-mask"],
                    {"TRAINSCOPE_FLOPS": "off"})
    done = subprocess.run([CLI, "compare", a, b, "--json"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = [row for pair in json.loads(done.stdout)["pairs"] for row in pair["rows"]]
    names = [row["name"] for row in rows]
    assert "tokens/s" in names, names


def test_search_runs_has_the_ledgers_figures_as_columns(tmp_path, no_inherited_run):
    # A run with known work per step (4 samples of 32 tokens, FLOPs and a peak given) and
    # one without work.
    with trainscope.start_run(run_name="work", root=str(tmp_path)) as run:
        timer = trainscope.Timer()
        trainscope.log_step_flops(2e6)
        trainscope.log_param(_core._PEAK_FLOPS_PARAM, "1e9")
        for _ in range(12):
            with timer.scope(trainscope.TimeType.BATCH):
                time.sleep(0.005)
            trainscope.log_step_work(samples=4, tokens=4 * 32)
        work_dir = run.dir
    with trainscope.start_run(run_name="none", root=str(tmp_path)):
        timer = trainscope.Timer()
        for _ in range(3):
            with timer.scope(trainscope.TimeType.BATCH):
                time.sleep(0.001)
    frame = trainscope.search_runs(str(tmp_path))
    rows = {row["name"]: row for _, row in frame.iterrows()}
    assert set(rows) == {"work", "none"}, frame
    work = rows["work"]
    # The ledger's own figures (its reader, not a second formula), with the known work.
    ledger = trainscope.ledger(work_dir)
    assert ledger["steps"] > 0 and ledger["tokens_per_s"] > 0, ledger
    assert work["ledger.tokens_per_s"] == pytest.approx(ledger["tokens_per_s"], rel=1e-12)
    assert work["ledger.samples_per_s"] == pytest.approx(ledger["samples_per_s"], rel=1e-12)
    assert work["ledger.mfu"] == pytest.approx(ledger["mfu"], rel=1e-12)
    assert work["ledger.tokens_per_s"] == pytest.approx(32 * work["ledger.samples_per_s"])
    assert work["ledger.mfu"] == pytest.approx(work["ledger.tokens_per_s"] / 128 * 2e6 / 1e9)
    none = rows["none"]
    assert all(math.isnan(none[c]) for c in
               ("ledger.tokens_per_s", "ledger.samples_per_s", "ledger.mfu")), none
    # The run filter takes the columns, as it takes metrics.*.
    kept = trainscope.search_runs(str(tmp_path), "ledger.tokens_per_s > 0")
    assert list(kept["name"]) == ["work"]
    assert trainscope.search_runs(str(tmp_path), "ledger.mfu > 1").empty
