"""trainscope.hf: the Hugging Face Trainer callback and install(), on real transformers.

A tiny BERT built from a config (no download) trains 16 optimizer steps of 2
gradient-accumulation micro-batches each, with an evaluation every 8 steps, under
`trainscope run` (tests/python/framework_jobs/hf_train.py); the run is read back
here and held against what the Trainer itself did (its log_history, written by the
job): one BATCH per optimizer step, its substeps and optimizer step inside it,
epochs, evaluation outside the steps, the logs as metrics at their global step,
the TrainingArguments as params, and a diagnosis that has steps to read.

The jobs need a python with torch 2.x and transformers
(tests/python/requirements-frameworks.txt): TRAINSCOPE_FRAMEWORK_PYTHON, and the
CLI: TRAINSCOPE_CLI; skipped otherwise.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

import trainscope

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "framework_jobs")
CLI = os.environ.get("TRAINSCOPE_CLI")
FRAMEWORK_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_frameworks = pytest.mark.skipif(
    not (CLI and FRAMEWORK_PYTHON),
    reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x and transformers "
           "(tests/python/requirements-frameworks.txt) and TRAINSCOPE_CLI to the trainscope binary")

STEPS = 16
ACCUM = 2
EVAL_STEPS = 8
LEARNING_RATE = "5e-4"  # as the command line spells it (the CLI logs it as a param)
TIMEOUT_S = 240


def _env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def _cli_has_auto():
    if not CLI:
        return False
    out = subprocess.run([CLI, "run", "--help"], capture_output=True, text=True, check=False)
    return "--auto" in out.stdout + out.stderr


def _run_job(root, mode, cli_options=()):
    """Runs hf_train.py under `trainscope run`: (run directory, the job's truth)."""
    os.makedirs(root, exist_ok=True)
    truth_path = os.path.join(root, "truth.json")
    command = [CLI, "run", "--root", os.path.join(root, "runs"), "--no-sample", "--name",
               f"hf-{mode}", *cli_options, "--", FRAMEWORK_PYTHON,
               os.path.join(JOBS, "hf_train.py"), "--mode", mode, "--out", truth_path,
               "--steps", str(STEPS), "--accum", str(ACCUM), "--eval-steps", str(EVAL_STEPS),
               "--learning_rate", LEARNING_RATE]
    done = subprocess.run(command, cwd=root, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-4000:]}"
    runs = os.listdir(os.path.join(root, "runs"))
    assert len(runs) == 1, runs
    with open(truth_path, encoding="utf-8") as f:
        truth = json.load(f)
    return os.path.join(root, "runs", runs[0]), truth


@pytest.fixture(scope="module")
def hf_job(tmp_path_factory):
    """mode -> (run directory, truth, Run); each mode's job runs once."""
    done = {}

    def get(mode, cli_options=()):
        if mode not in done:
            run_dir, truth = _run_job(str(tmp_path_factory.mktemp(f"hf-{mode}")), mode,
                                      cli_options)
            done[mode] = (run_dir, truth, trainscope.read_run(run_dir))
        return done[mode]

    return get


def _rows(run, key):
    regions = run.regions
    rows = regions[(regions.key == key) & (regions.device == "CPU")]
    return [(int(r.start_unix_ns), int(r.start_unix_ns) + int(r.duration_ns))
            for r in rows.itertuples()]


def _inside(inner, outer):
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def _containers(row, outers):
    return [o for o in outers if _inside(row, o)]


def _overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


def _evaluations(truth):
    return [entry for entry in truth["log_history"] if "eval_loss" in entry]


def _check_steps(run, truth):
    """The structure every mode must have: one BATCH per optimizer step, ACCUM
    substeps nested in each, evaluation outside them."""
    assert truth["global_step"] == STEPS
    batches = _rows(run, "BATCH")
    assert len(batches) == STEPS, f"{len(batches)} BATCH rows for {STEPS} optimizer steps"
    substeps = _rows(run, "substep")
    assert len(substeps) == ACCUM * STEPS
    for batch in batches:
        inside = [s for s in substeps if _inside(s, batch)]
        assert len(inside) == ACCUM, (batch, inside)
    for substep in substeps:
        assert len(_containers(substep, batches)) == 1, substep
    evaluations = _evaluations(truth)
    assert len(evaluations) == STEPS // EVAL_STEPS
    eval_epochs = _rows(run, "eval/EPOCH")
    eval_batches = _rows(run, "eval/BATCH")
    assert len(eval_epochs) == len(evaluations)
    assert len(eval_batches) == len(evaluations) * truth["eval_batches"]
    for row in eval_batches:
        assert len(_containers(row, eval_epochs)) == 1, row
    for row in eval_epochs + eval_batches:
        assert not any(_overlaps(row, batch) for batch in batches), \
            f"evaluation {row} overlaps a training step"
    return batches, substeps


def _check_optimizer_and_epochs(run, truth, batches, substeps):
    # The optimizer step: one inside each BATCH, after its micro-batches.
    optimizer = _rows(run, "OPTIMIZER")
    assert len(optimizer) == STEPS
    for batch in batches:
        inside = [o for o in optimizer if _inside(o, batch)]
        assert len(inside) == 1, (batch, inside)
        last_substep_end = max(s[1] for s in substeps if _inside(s, batch))
        assert inside[0][0] >= last_substep_end
    # Epochs: the Trainer's, each holding its optimizer steps.
    steps_per_epoch = truth["train_batches_per_epoch"] // ACCUM
    epochs = _rows(run, "EPOCH")
    assert len(epochs) == STEPS // steps_per_epoch == 2
    for epoch in epochs:
        assert sum(_inside(b, epoch) for b in batches) == steps_per_epoch
    # The region rows count their steps: substeps carry their BATCH's index.
    regions = run.regions
    assert sorted(regions[regions.key == "substep"].step.tolist()) == \
        sorted(list(range(STEPS)) * ACCUM)


def _check_phases(run, batches, substeps):
    """The data wait at the loader, outside the steps (the Trainer fetches the
    accumulation group before on_step_begin) and outside evaluation (eval/IO), and
    the model's forward and backward inside each micro-batch."""
    io = _rows(run, "IO")
    epochs = _rows(run, "EPOCH")
    eval_epochs = _rows(run, "eval/EPOCH")
    assert not any(_overlaps(row, e) for row in io for e in eval_epochs), \
        "the evaluation's fetches are timed as a training step's data wait (IO), not eval/IO"
    # Each micro-batch's fetch (+ one per epoch: accelerate's loader fetches one ahead).
    assert ACCUM * STEPS <= len(io) <= ACCUM * STEPS + len(epochs), len(io)
    assert not any(_overlaps(row, batch) for row in io for batch in batches)
    assert all(len(_containers(r, eval_epochs)) == 1 for r in _rows(run, "eval/IO"))
    for key in ("FORWARD", "BACKWARD"):
        rows = _rows(run, key)
        assert len(rows) == ACCUM * STEPS, (key, len(rows))
        assert all(len(_containers(r, substeps)) == 1 for r in rows), key
    eval_batches = _rows(run, "eval/BATCH")
    eval_forward = _rows(run, "eval/FORWARD")
    assert len(eval_forward) == len(eval_batches)
    assert all(len(_containers(r, eval_batches)) == 1 for r in eval_forward)
    d = trainscope.diagnose(run.dir)
    assert d.run.find("NO-DATA") is None, d.run.labels
    phases = {p.phase for p in d.run.phases if p.device == "CPU"}
    assert {"data_wait", "forward", "backward", "optimizer"} <= phases, phases
    assert d.run.labels[0].name != "WAIT-HEAVY", d.run.labels  # the compute is timed


@needs_frameworks
def test_the_callback_records_steps_substeps_optimizer_epochs_and_evaluation(hf_job):
    _, truth, run = hf_job("callback")
    assert run.status == "FINISHED" and run.world_size == 1
    batches, substeps = _check_steps(run, truth)
    _check_optimizer_and_epochs(run, truth, batches, substeps)
    # Where trainscope.torch.instrument exists, the callback also times the data wait
    # and the model's forward and backward while the Trainer trains.
    if truth["instrument_available"]:
        _check_phases(run, batches, substeps)
    else:
        assert _rows(run, "IO") == [] and _rows(run, "FORWARD") == []


@needs_frameworks
def test_the_trainers_logs_are_metrics_at_their_global_step(hf_job):
    _, truth, run = hf_job("callback")
    metrics = run.metrics
    logged = {(r.key, int(r.step)): r.value for r in metrics.itertuples()}
    training_logs = [e for e in truth["log_history"] if "loss" in e]
    assert [e["step"] for e in training_logs] == [4, 8, 12, 16]  # logging_steps=4
    for entry in training_logs:
        for key in ("loss", "learning_rate", "grad_norm", "epoch"):
            assert logged[(key, entry["step"])] == pytest.approx(entry[key], rel=1e-12), \
                (key, entry)
    for entry in _evaluations(truth):
        assert logged[("eval_loss", entry["step"])] == pytest.approx(entry["eval_loss"],
                                                                     rel=1e-12)
    final = truth["log_history"][-1]
    assert logged[("train_loss", STEPS)] == pytest.approx(final["train_loss"], rel=1e-12)
    # Every number the Trainer logged, as many times as it logged it, and nothing else
    # (but step_loss, below, and the ledger's work/ of each step, docs/ledger.md).
    expected = sorted((k, e["step"]) for e in truth["log_history"] for k in e if k != "step")
    assert sorted((r.key, int(r.step)) for r in metrics.itertuples()
                  if r.key != "step_loss" and not r.key.startswith("work/")) == expected


@needs_frameworks
def test_the_training_loss_of_every_step_is_a_metric(hf_job):
    """Issue 37: with the Trainer's default logging_steps (500) a short run had no loss
    at all; step_loss is every optimizer step's, whatever the logging steps."""
    _, truth, run = hf_job("callback")
    metrics = run.metrics
    step_loss = {int(r.step): r.value for r in metrics.itertuples() if r.key == "step_loss"}
    assert sorted(step_loss) == list(range(1, STEPS + 1))
    # The Trainer's own loss (every 4 steps) is the mean of its steps' losses.
    for entry in (e for e in truth["log_history"] if "loss" in e):
        window = [step_loss[s] for s in range(entry["step"] - 3, entry["step"] + 1)]
        assert sum(window) / 4 == pytest.approx(entry["loss"], abs=1e-3), entry


@needs_frameworks
def test_the_training_arguments_are_params(hf_job):
    run_dir, truth, run = hf_job("callback")
    params = run.params
    expected = {"per_device_train_batch_size": "4", "gradient_accumulation_steps": "2",
                "total_train_batch_size": "8", "max_steps": str(STEPS),
                "num_train_epochs": "2", "precision": "fp32", "seed": "7", "world_size": "1",
                "lr_scheduler_type": "linear"}
    assert {k: params.get(k) for k in expected} == expected
    # `trainscope run` logged the command's `--learning_rate 5e-4`; the Trainer's 0.0005
    # is the same value, so the callback does not fight it (params are write-once).
    assert float(params["learning_rate"]) == 5e-4
    with open(os.path.join(run_dir, "stderr.log"), encoding="utf-8", errors="replace") as f:
        stderr = f.read()
    assert "trainscope.hf" not in stderr and "not logged" not in stderr, stderr[-3000:]
    assert "TrainscopeWarning" not in stderr, stderr[-3000:]


@needs_frameworks
def test_the_diagnosis_reads_the_trainers_steps(hf_job):
    run_dir, _, _ = hf_job("callback")
    d = trainscope.diagnose(run_dir)
    assert d.status == "FINISHED" and d.world_size == 1
    assert [r.steps for r in d.ranks] == [STEPS]
    assert d.run.find("NO-DATA") is None, d.run.labels
    assert d.run.steps == STEPS - d.run.warmup
    phases = {p.phase for p in d.run.phases if p.device == "CPU"}
    assert "optimizer" in phases, phases


@needs_frameworks
def test_install_gives_an_unmodified_script_one_callback(hf_job):
    _, truth, run = hf_job("install")
    assert truth["callbacks"].count("trainscope.hf.TrainscopeCallback") == 1, truth["callbacks"]
    _check_steps(run, truth)
    assert float(run.params["learning_rate"]) == 5e-4


@needs_frameworks
def test_install_patches_every_trainer_once_and_remove_undoes_it(tmp_path):
    done = subprocess.run([FRAMEWORK_PYTHON, os.path.join(JOBS, "hf_install_check.py")],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts == {
        # neither `import trainscope.hf` nor install() imports the Trainer (and torch)
        "trainer_imported_by_hf": False,
        "trainer_imported_by_install": False,
        "install_idempotent": True,
        "patched_on_import": True,  # ... it is patched when the script imports it
        "plain": 1,  # each Trainer has exactly one TrainscopeCallback:
        "subclass": 1,
        "user_instance": 1,  # the user's own, not a second one
        "user_class": 1,
        "evaluation_patched": True,
        "after_remove": 0,
        "init_restored": True,
        "evaluation_restored": True,
        "reinstall_new_handle": True,
        "reinstalled": 1,
        # a hook that fails returns None (control unchanged) and warns once per hook
        "broken_results": [True, True, True, True],
        "broken_warnings": ["on_epoch_begin failed and is not recorded",
                            "on_step_begin failed and is not recorded"],
    }, done.stderr[-3000:]


@needs_frameworks
def test_with_pytorch_instrumented_process_wide_the_steps_stay_the_callbacks(hf_job):
    # What `--auto`'s bootstrap does, by hand: trainscope.torch.instrument() (every
    # loader, module call, backward and optimizer), then install().
    _, truth, run = hf_job("global")
    assert truth["callbacks"].count("trainscope.hf.TrainscopeCallback") == 1, truth["callbacks"]
    batches, substeps = _check_steps(run, truth)  # one BATCH per optimizer step, still
    _check_optimizer_and_epochs(run, truth, batches, substeps)  # OPTIMIZER: once, not twice
    _check_phases(run, batches, substeps)


@needs_frameworks
@pytest.mark.skipif(not _cli_has_auto(), reason="this trainscope CLI has no `run --auto` yet")
def test_auto_instruments_an_unmodified_trainer_script(hf_job):
    _, truth, run = hf_job("auto", cli_options=("--auto",))
    assert truth["callbacks"].count("trainscope.hf.TrainscopeCallback") == 1, truth["callbacks"]
    batches, substeps = _check_steps(run, truth)
    _check_optimizer_and_epochs(run, truth, batches, substeps)
    _check_phases(run, batches, substeps)


def test_importing_trainscope_hf_without_transformers_names_the_package():
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed in this python")
    done = subprocess.run([sys.executable, "-c", "import trainscope.hf"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "transformers" in last, done.stderr[-2000:]
    # trainscope itself does not need it
    ok = subprocess.run([sys.executable, "-c", "import trainscope"], capture_output=True,
                        text=True, timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr[-2000:]
