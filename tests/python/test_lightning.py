"""PyTorch Lightning under trainscope (issue 23): trainscope.lightning.TrainscopeCallback.

Tiny Lightning fits (tests/python/framework_jobs/lightning_train.py: a small MLP on
synthetic data, CPU, no logger or checkpoint files) run under `trainscope run`
with the framework venv's python; the run is read here and must have one BATCH
per optimizer step with the phases inside it, epochs, evaluation outside the
training steps, the hparams as params and the self.log values as metrics at
their steps, and a diagnosis that sees the same steps and phases as the regions
say. Also: the entry-point factories, install()/remove(), two callbacks in one
Trainer and a failing hook (tests/python/framework_jobs/lightning_attach.py),
and the ImportError without Lightning.

Needs TRAINSCOPE_FRAMEWORK_PYTHON (a python with torch 2.x and Lightning:
tests/python/requirements-frameworks.txt) and TRAINSCOPE_CLI=<build>/tools/trainscope;
skipped otherwise.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import warnings

import pytest

import trainscope

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "framework_jobs")
REPO = os.path.dirname(os.path.dirname(HERE))
CLI = os.environ.get("TRAINSCOPE_CLI")
FRAMEWORK = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_framework = pytest.mark.skipif(
    not FRAMEWORK, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x and "
                          "Lightning (tests/python/requirements-frameworks.txt)")
needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")

WARMUP = 5  # the diagnosis's default warmup_steps
# The fits, 16 optimizer steps in 4 epochs each: name -> (job flags,
# accumulate_grad_batches, `trainscope run` flags). "auto": no code at all, the
# callback from `trainscope run --auto` (its bootstrap calls install()), the
# phases from its PyTorch patches.
CASES = {
    "steps": (["--max-steps", "16", "--attach", "callback", "--package", "lightning"], 1, []),
    "accumulate": (["--max-steps", "16", "--batches-per-epoch", "8", "--accumulate", "2",
                    "--attach", "install", "--package", "pytorch_lightning"], 2, []),
    "auto": (["--max-steps", "16", "--attach", "none", "--package", "lightning"], 1,
             ["--auto"]),
}


def _env(**extra):
    env = dict(os.environ)
    for name in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                 "TRAINSCOPE_AUTO"):
        env.pop(name, None)
    # The framework python imports this trainscope (a build tree's python/ directory).
    parent = os.path.dirname(os.path.dirname(os.path.abspath(trainscope.__file__)))
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if parent not in paths and os.path.basename(parent) not in ("site-packages",
                                                                "dist-packages"):
        paths.insert(0, parent)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """case name -> (run directory, what the training did), each fit run once."""
    done = {}

    def get(name):
        if name not in done:
            flags, _, cli_flags = CASES[name]
            root = tmp_path_factory.mktemp(f"lightning-{name}")
            truth_path = root / "truth.json"
            proc = subprocess.run(
                [CLI, "run", "--root", str(root / "runs"), "--name", f"lightning-{name}",
                 "--no-sample", "--quiet", *cli_flags, "--", FRAMEWORK,
                 os.path.join(JOBS, "lightning_train.py"), "--out", str(truth_path),
                 "--root-dir", str(root / "lightning"), *flags],
                env=_env(), cwd=str(root), capture_output=True, text=True, timeout=240,
                check=False)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
            runs = os.listdir(root / "runs")
            assert len(runs) == 1, runs
            with open(truth_path, encoding="utf-8") as f:
                truth = json.load(f)
            done[name] = (str(root / "runs" / runs[0]), truth)
        return done[name]

    return get


def _cpu_rows(run, key):
    regions = run.regions
    rows = regions[(regions.key == key) & (regions.device == "CPU")]
    return rows.sort_values("start_unix_ns")


def _intervals(rows):
    starts = rows.start_unix_ns.to_numpy()
    return list(zip(starts, starts + rows.duration_ns.to_numpy()))


def _inside(interval, outer):
    return outer[0] <= interval[0] and interval[1] <= outer[1]


def _overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


# ---------------------------------------------------------------------------
# The fits


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_batch_per_optimizer_step_with_its_phases_inside(fitted, case):
    run_dir, truth = fitted(case)
    accumulate = CASES[case][1]
    run = trainscope.read_run(run_dir)
    assert run.status == "FINISHED"
    assert truth["trainscope_callbacks"] == 1
    steps = truth["optimizer_steps"]
    batches = len(truth["train"])
    assert steps == batches // accumulate == 16, truth
    batch_rows = _cpu_rows(run, "BATCH")
    assert len(batch_rows) == steps
    assert batch_rows.step.tolist() == list(range(steps))  # one thread, in order
    steps_iv = _intervals(batch_rows)
    per_step = {key: [0] * steps for key in ("FORWARD", "BACKWARD", "OPTIMIZER", "substep")}
    for key in per_step:
        for iv in _intervals(_cpu_rows(run, key)):
            holder = [i for i, s in enumerate(steps_iv) if _inside(iv, s)]
            assert len(holder) == 1, (key, iv, steps_iv)
            per_step[key][holder[0]] += 1
    assert per_step["FORWARD"] == [accumulate] * steps
    assert per_step["BACKWARD"] == [accumulate] * steps
    assert per_step["OPTIMIZER"] == [1] * steps
    assert per_step["substep"] == ([accumulate] * steps if accumulate > 1 else [0] * steps)
    assert len(_cpu_rows(run, "substep")) == (batches if accumulate > 1 else 0)
    # One data wait per training batch (Lightning's fetch), each before its batch's work.
    assert len(_cpu_rows(run, "IO")) == batches
    # Epochs: each step in one.
    epochs = _intervals(_cpu_rows(run, "EPOCH"))
    assert len(epochs) == truth["epochs"] == 4
    for s in steps_iv:
        assert sum(_inside(s, e) for e in epochs) == 1
    with open(os.path.join(run_dir, "stderr.log"), encoding="utf-8") as f:
        assert "TrainscopeWarning" not in f.read()


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_phases_of_a_step_do_not_overlap(fitted, case):
    run_dir, _ = fitted(case)
    run = trainscope.read_run(run_dir)
    phases = [(key, iv) for key in ("IO", "FORWARD", "BACKWARD", "OPTIMIZER")
              for iv in _intervals(_cpu_rows(run, key))]
    phases.sort(key=lambda p: p[1][0])
    for (key_a, a), (key_b, b) in zip(phases, phases[1:]):
        assert a[1] <= b[0], (key_a, a, key_b, b)  # each ends before the next starts
    # And the optimizer steps after the step's last backward.
    keys = [key for key, _ in phases if key != "IO"]
    steps = [i for i, key in enumerate(keys) if key == "OPTIMIZER"]
    assert all(keys[i - 1] == "BACKWARD" for i in steps), keys


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_evaluation_has_keys_of_its_own_outside_training_steps(fitted, case):
    run_dir, truth = fitted(case)
    run = trainscope.read_run(run_dir)
    validations = len(truth["val"])
    assert validations == 4  # one at each epoch's end
    # The sanity check (1 batch) and each validation (limit_val_batches=2).
    assert len(_cpu_rows(run, "eval/EPOCH")) == validations + 1
    eval_batches = _intervals(_cpu_rows(run, "eval/BATCH"))
    assert len(eval_batches) == 1 + 2 * validations
    eval_fetches = _intervals(_cpu_rows(run, "eval/IO"))
    assert len(eval_fetches) == len(eval_batches)
    steps_iv = _intervals(_cpu_rows(run, "BATCH"))
    for iv in eval_batches + eval_fetches:
        assert not any(_overlaps(iv, s) for s in steps_iv), iv
    # Validation is no training data wait, forward or step.
    assert len(_cpu_rows(run, "IO")) == len(truth["train"])


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_hparams_are_params(fitted, case):
    run_dir, truth = fitted(case)
    params = trainscope.read_run(run_dir).params
    assert truth["hparams"] == {"hidden_dim": "16", "lr": "0.05", "batch_size": "4"}
    for key, value in truth["hparams"].items():
        assert params[key] == value, params
    assert params["lightning.accumulate_grad_batches"] == str(CASES[case][1])
    assert params["lightning.max_steps"] == str(truth["optimizer_steps"])
    assert params["lightning.world_size"] == "1"


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_self_log_values_are_metrics_at_their_step(fitted, case):
    run_dir, truth = fitted(case)
    metrics = trainscope.read_run(run_dir).metrics
    steps = truth["optimizer_steps"]
    # (and the ledger's work/ of each step, docs/ledger.md)
    assert {k for k in metrics.key.astype(str) if not k.startswith("work/")} == \
        {"train_loss", "val_loss"}
    # train_loss after each optimizer step: the loss of that step's last batch.
    train = metrics[metrics.key == "train_loss"].sort_values("step")
    assert train.step.tolist() == list(range(1, steps + 1))
    last_loss = {}
    for batch in truth["train"]:
        last_loss[batch["steps_before"] + 1] = batch["loss"]
    for step, value in zip(train.step, train.value):
        assert math.isclose(value, last_loss[step], rel_tol=1e-6), (step, value, last_loss)
    # val_loss once per validation (not the sanity check), its mean, at the steps taken.
    val = metrics[metrics.key == "val_loss"].sort_values("step")
    assert val.step.tolist() == [v["step"] for v in truth["val"]]
    for value, expected in zip(val.value, truth["val"]):
        assert math.isclose(value, expected["val_loss"], rel_tol=1e-5), (value, expected)


@needs_framework
@needs_cli
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_diagnosis_reads_it_like_a_hand_instrumented_run(fitted, case):
    import numpy as np  # pylint: disable=import-outside-toplevel
    run_dir, truth = fitted(case)
    d = trainscope.diagnose(run_dir)
    steps = truth["optimizer_steps"]
    assert d.status == "FINISHED" and d.world_size == 1
    assert [r.steps for r in d.ranks] == [steps]
    assert d.run.warmup == WARMUP and d.run.steps == steps - WARMUP
    assert d.run.labels[0].name in ("INPUT-BOUND", "WAIT-HEAVY", "COMPUTE-BOUND", "BALANCED"), \
        d.run.labels
    # Each phase's share is what the regions say: the phase's time in the steps after
    # the warm-up over those steps' periods (BATCH start to the next BATCH start).
    run = trainscope.read_run(run_dir)
    batch = _cpu_rows(run, "BATCH")
    starts = batch.start_unix_ns.to_numpy()
    periods = np.append(np.diff(starts), batch.duration_ns.to_numpy()[-1])
    for phase, key in (("data_wait", "IO"), ("forward", "FORWARD"), ("backward", "BACKWARD"),
                       ("optimizer", "OPTIMIZER")):
        rows = [p for p in d.run.phases if p.phase == phase and p.device == "CPU"]
        assert len(rows) == 1, (phase, d.run.phases)
        regions = _cpu_rows(run, key)
        owner = np.searchsorted(starts, regions.start_unix_ns.to_numpy(), side="right") - 1
        mine = regions.duration_ns.to_numpy()[owner >= WARMUP].sum() / periods[WARMUP:].sum()
        assert rows[0].share > 0
        assert math.isclose(rows[0].share, mine, rel_tol=1e-9), (phase, rows[0].share, mine)


# ---------------------------------------------------------------------------
# Getting the callback into a Trainer


def _entry_points_dist(root):
    """A distribution on the path with the entry points pyproject.toml declares, as an
    installed trainscope has them."""
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11+)")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        groups = tomllib.load(f)["project"]["entry-points"]
    dist = root / "trainscope_entry_points-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trainscope-entry-points\n"
                                   "Version: 0\n", encoding="utf-8")
    lines = []
    for group in ("lightning.pytorch.callbacks_factory", "pytorch_lightning.callbacks_factory"):
        assert group in groups, groups
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in groups[group].items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root)


@pytest.fixture(scope="module")
def attached(tmp_path_factory):
    """auto ("1" or None) -> what lightning_attach.py saw."""
    done = {}

    def get(auto):
        if auto not in done:
            root = tmp_path_factory.mktemp(f"lightning-attach-{auto}")
            env = _env(**({"TRAINSCOPE_AUTO": auto} if auto else {}))
            env["PYTHONPATH"] = os.pathsep.join([_entry_points_dist(root / "site"),
                                                 env["PYTHONPATH"]])
            proc = subprocess.run([FRAMEWORK, os.path.join(JOBS, "lightning_attach.py"),
                                   str(root / "scratch")],
                                  env=env, cwd=str(root), capture_output=True, text=True,
                                  timeout=240, check=False)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
            done[auto] = json.loads(proc.stdout.strip().splitlines()[-1])
        return done[auto]

    return get


@needs_framework
@pytest.mark.parametrize("auto", [None, "1"])
def test_the_entry_points_add_one_callback_only_under_auto(attached, auto):
    seen = attached(auto)
    assert seen["auto"] == auto
    expected = 1 if auto else 0
    assert seen["factory_lightning"] == ["lightning.pytorch.callbacks.callback"] * expected
    assert seen["factory_pytorch_lightning"] == \
        ["pytorch_lightning.callbacks.callback"] * expected
    # Through Lightning's own loading of entry points (each package its group).
    assert seen["entry_point_lightning"] == expected
    assert seen["entry_point_pytorch_lightning"] == expected
    assert seen["entry_point_kind"] == [True] * expected


@needs_framework
@pytest.mark.parametrize("auto", [None, "1"])
def test_install_gives_every_trainer_exactly_one_callback_and_remove_undoes_it(attached, auto):
    seen = attached(auto)
    assert seen["install_same_handle"] is True
    assert seen["install_packages"] == ["lightning.pytorch", "pytorch_lightning"]
    # One each, also beside the entry point's (under auto) and the user's own.
    assert seen["install_lightning"] == 1
    assert seen["install_pytorch_lightning"] == 1
    assert seen["install_pytorch_lightning_kind"] == [True]
    assert seen["install_beside_users"] == (2 if auto else 1)  # the entry point adds its own
    assert seen["install_keeps_users"] is True
    expected = 1 if auto else 0  # what the entry point alone adds
    assert seen["removed_lightning"] == expected
    assert seen["removed_pytorch_lightning"] == expected
    assert seen["removed_restores_init"] is True
    assert seen["reinstall_new_handle"] is True


@needs_framework
@pytest.mark.parametrize("auto", [None, "1"])
def test_two_callbacks_in_one_trainer_record_once(attached, auto):
    seen = attached(auto)
    assert seen["two_callbacks_count"] == (2 if auto else 1)
    assert seen["two_callbacks_steps"] == 4
    regions = seen["two_callbacks_regions"]
    for key in ("BATCH", "IO", "FORWARD", "BACKWARD", "OPTIMIZER"):
        assert regions[key] == 4, regions
    assert regions["EPOCH"] == 1, regions
    assert seen["two_callbacks_warnings"] == []
    # The data wait through the loops' own fetch bracket, not the profiler.
    assert seen["two_callbacks_fetch_bracket"] == {"loops": True, "profiler": False}


@needs_framework
def test_the_data_wait_through_the_profiler_where_loops_lack_their_fetch_bracket(attached):
    seen = attached(None)
    regions = seen["via_profiler_regions"]
    assert regions["IO"] == regions["BATCH"] == 4, regions
    assert regions["eval/IO"] == regions["eval/BATCH"] == 2, regions
    assert seen["via_profiler_warnings"] == []
    assert seen["via_profiler_fetch_bracket"] == {"loops": False, "profiler": True}
    assert seen["via_profiler_undone"] is True


@needs_framework
def test_a_failing_hook_warns_once_and_training_goes_on(attached):
    seen = attached(None)
    assert seen["broken_steps"] == 6
    messages = seen["broken_warnings"]
    assert messages and all("broken on purpose" in m for m in messages), messages
    assert len(messages) == len(set(messages))  # each hook once, not once per batch
    assert any("on_train_batch_start" in m for m in messages), messages


def test_without_lightning_an_import_error_names_the_package(monkeypatch):
    if any(importlib.util.find_spec(p) is not None for p in ("lightning", "pytorch_lightning")):
        pytest.skip("Lightning is installed in the test venv")
    import trainscope.lightning as tl  # pylint: disable=import-outside-toplevel
    with pytest.raises(ImportError, match="pip install lightning"):
        tl.TrainscopeCallback  # pylint: disable=pointless-statement
    with pytest.raises(ImportError, match="pip install lightning"):
        tl.install()
    monkeypatch.delenv("TRAINSCOPE_AUTO", raising=False)
    assert tl.lightning_callbacks_factory() == []
    monkeypatch.setenv("TRAINSCOPE_AUTO", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tl.lightning_callbacks_factory() == []  # never breaks the Trainer
    assert any("lightning" in str(w.message) for w in caught), caught


TIMED_FIT = """
import sys
import torch, lightning as L
import trainscope
from torch.utils.data import DataLoader, TensorDataset

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def training_step(self, batch, index):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

tmr = trainscope.Timer()
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = tmr.timed(DataLoader(data, batch_size=8, num_workers=2))
with trainscope.start_run(root=sys.argv[1]) as run:
    trainer = L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(), loader)
    print("RUN", run.dir)
"""


@needs_framework
@needs_cli
def test_a_timed_loader_given_to_fit_records_every_epoch_as_a_pass(tmp_path):
    # Lightning stops at the last batch of its last epoch without asking for more:
    # that pass ends with the run rather than going unrecorded (it was 2 of 3).
    script = tmp_path / "fit.py"
    script.write_text(TIMED_FIT)
    done = subprocess.run([FRAMEWORK, str(script), str(tmp_path / "runs")], env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("RUN"))
    analysed = json.loads(subprocess.run([CLI, "stalls", run_dir, "--json"], capture_output=True,
                                         text=True, timeout=60, check=True).stdout)
    assert [(p["pass"], p["batches"]) for p in analysed["passes"]] == [(1, 8), (2, 8), (3, 8)]
    logged = [m for m in trainscope.read_run(run_dir).metrics.itertuples()
              if m.key == "stalls/batches"]
    assert [(m.step, m.value) for m in logged] == [(1, 8.0), (2, 8.0), (3, 8.0)]
