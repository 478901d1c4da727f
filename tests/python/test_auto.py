"""Zero-code instrumentation of plain PyTorch (issue 23, docs/auto.md):
`trainscope run --auto` on a script with no trainscope in it
(tests/python/auto_jobs/plain_train.py), and trainscope.torch.instrument() from code.

The run must hold one BATCH per fetched training batch with the phases inside it,
a FORWARD per outermost module call (a model called twice counts twice, nested
modules and the DDP wrapper once), BACKWARD and OPTIMIZER per step, eval/ keys for
evaluation under no_grad and outside every step, nothing from DataLoader workers,
COMM for collectives, layer/ keys with --auto=layers; and the misuse cases run the
command unchanged with one line saying why.

Needs torch (Debian's 1.13 here) and, for `trainscope run`, TRAINSCOPE_CLI.
"""

import importlib.util
import os
import subprocess
import sys
import warnings

import pytest

import trainscope
from run_files import printed_json_objects as job_report

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "auto_jobs", "plain_train.py")
MANUAL = os.path.join(HERE, "auto_jobs", "manual_loop.py")
COMPILED = os.path.join(HERE, "auto_jobs", "compiled_train.py")
LAUNCH2 = os.path.join(HERE, "diagnosis_jobs", "launch2.py")
CLI = os.environ.get("TRAINSCOPE_CLI")
needs_cli = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="instrumenting PyTorch needs torch")


def job_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def run_cli(root, auto, command, expect=0, quiet=True, env=None):
    """`trainscope run [--auto...] -- command` under root: (run dir or None, stdout, stderr).
    expect: the exit status (None: any); quiet=False: with the end-of-run summary; env:
    variables added to the command's environment."""
    argv = [CLI, "run", "--root", os.fspath(root), "--no-sample"] + (["--quiet"] if quiet else [])
    if auto is not None:
        argv.append(auto)
    argv += ["--"] + command
    done = subprocess.run(argv, env=dict(job_env(), **(env or {})), capture_output=True, text=True, timeout=240,
                          check=False)
    assert expect is None or done.returncode == expect, done.stderr[-4000:]
    runs = [name for name in os.listdir(root) if not name.startswith(".")]
    return (os.path.join(root, runs[0]) if runs else None), done.stdout, done.stderr




def rows(run, key, rank=None, device="CPU"):
    frame = run.regions
    frame = frame[(frame["key"] == key) & (frame["device"] == device)]
    if rank is not None:
        frame = frame[frame["rank"] == rank]
    return frame.sort_values("start_unix_ns")


def inside(inner, outer):
    """How many inner rows lie wholly inside some outer row."""
    spans = list(zip(outer["start_unix_ns"], outer["start_unix_ns"] + outer["duration_ns"]))
    count = 0
    for start, duration in zip(inner["start_unix_ns"], inner["duration_ns"]):
        if any(s <= start and start + duration <= e for s, e in spans):
            count += 1
    return count


@needs_cli
@needs_torch
def test_plain_script_with_workers_and_eval(tmp_path):
    batches = 10
    run_dir, out, err = run_cli(tmp_path, "--auto", [
        sys.executable, JOB, "--batches", str(batches), "--epochs", "2", "--workers", "2",
        "--eval"])
    did = job_report(out)[0]
    run = trainscope.read_run(run_dir)
    assert run.tags["trainscope.auto"] == "on"
    # One BATCH per training batch, each holding its forward, backward and optimizer step.
    batch = rows(run, "BATCH")
    assert len(batch) == did["steps"] == 2 * batches
    # The loss module (nn.CrossEntropyLoss) is LOSS, not a second FORWARD (issue 37).
    for key, per_step in (("FORWARD", 1), ("LOSS", 1), ("BACKWARD", 1), ("OPTIMIZER", 1)):
        phase = rows(run, key)
        assert len(phase) == per_step * did["steps"], key
        assert inside(phase, batch) == len(phase), key
    # Each fetch of a batch is IO (the one that finds the loader empty is none); the
    # data wait of a step lies in the step before it, the first one before any step.
    assert len(rows(run, "IO")) == 2 * batches
    assert inside(rows(run, "IO"), batch) == 2 * (batches - 1)
    # Evaluation: eval/ keys, outside every training step.
    eval_forward = rows(run, "eval/FORWARD")
    assert len(eval_forward) == did["eval_forwards"] == 2 * batches
    assert inside(eval_forward, batch) == 0
    assert len(rows(run, "eval/IO")) == 2 * batches
    # The workers (whose Dataset calls a module) recorded nothing: all rows are rank 0's
    # main process, and there are no more FORWARD rows than the main process made.
    assert set(run.regions["rank"]) == {0}
    # The diagnosis reads it as a hand-instrumented run.
    d = trainscope.diagnose(run_dir)
    assert d.run.steps > 0
    assert "NO-DATA" not in [label.name for label in d.run.labels]
    assert "is not" not in err


@needs_cli
@needs_torch
def test_gan_like_double_call_counts_both_and_no_loader_steps_by_optimizer(tmp_path):
    run_dir, out, _ = run_cli(tmp_path / "gan", "--auto", [
        sys.executable, JOB, "--batches", "5", "--gan"])
    run = trainscope.read_run(run_dir)
    did = job_report(out)[0]
    assert len(rows(run, "FORWARD")) + len(rows(run, "LOSS")) == did["forwards"] == 3 * 5
    assert len(rows(run, "LOSS")) == 5
    # One model called twice: one caller, nothing mixed.
    assert not any(tag.startswith("trainscope.auto.callers.") for tag in run.tags)
    # Without a DataLoader, a step runs from the first forward, then from one optimizer
    # step to the next.
    run_dir, out, err = run_cli(tmp_path / "noloader", "--auto", [
        sys.executable, JOB, "--batches", "7", "--no-loader"])
    run = trainscope.read_run(run_dir)
    assert len(rows(run, "IO")) == 0
    assert len(rows(run, "OPTIMIZER")) == 7
    assert len(rows(run, "BATCH")) == 7
    assert run.tags["trainscope.auto.steps"] == "optimizer"
    assert "steps from the optimizer (no training DataLoader)" in err


@needs_cli
@needs_torch
@pytest.mark.parametrize("python", ["this", "framework"])
def test_layers_down_to_a_depth(tmp_path, python):
    """On torch 1.13 a layer's backward starts at a tensor hook, on torch 2.x at a
    pre-hook of its output's node: the same rows either way."""
    if python == "framework" and not os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON"):
        pytest.skip("set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x")
    interpreter = sys.executable if python == "this" else os.environ["TRAINSCOPE_FRAMEWORK_PYTHON"]
    every = {"TRAINSCOPE_LAYER_BACKWARD_EVERY": "1"}  # layer backward on every step
    run_dir, _, _ = run_cli(tmp_path, "--auto=layers=1", [interpreter, JOB, "--batches", "4"],
                            env=every)
    run = trainscope.read_run(run_dir)
    keys = set(run.regions["key"])
    assert {"layer/0", "layer/1", "layer/2", "layer/3"} <= keys
    assert not any(k.startswith("layer/2.") for k in keys)  # depth 1 only
    assert len(rows(run, "layer/0")) == 4
    # Backward per layer: from its output's gradient to its input's, inside BACKWARD.
    backward = rows(run, "layer/3/backward")
    assert len(backward) == 4
    assert inside(backward, rows(run, "BACKWARD")) == 4
    assert len(rows(run, "layer/0/backward")) == 4  # the first layer ends with the backward
    # Each layer's backward ends where the next one's starts: they never overlap.
    ends = {key: rows(run, key) for key in ("layer/0/backward", "layer/1/backward",
                                            "layer/2/backward", "layer/3/backward")}
    for later, earlier in (("layer/3/backward", "layer/2/backward"),
                           ("layer/2/backward", "layer/1/backward")):
        for a, b in zip(ends[later].itertuples(), ends[earlier].itertuples()):
            assert a.start_unix_ns + a.duration_ns <= b.start_unix_ns + 1000  # (rounding)
    run_dir2, _, _ = run_cli(tmp_path / "deep", "--auto=layers", [interpreter, JOB,
                                                                     "--batches", "2"], env=every)
    deep = trainscope.read_run(run_dir2)
    assert "layer/2.0" in set(deep.regions["key"])  # depth 2
    # A child's backward lies inside its parent's.
    assert inside(rows(deep, "layer/2.0/backward"), rows(deep, "layer/2/backward")) == 2


@needs_cli
@needs_torch
@pytest.mark.parametrize("python", ["this", "framework"])
def test_layer_backward_on_exactly_the_sampled_steps(tmp_path, python):
    """Issue 37, costs: layer forward every step, layer backward on the run's steps 0, K,
    2K, ... (TRAINSCOPE_LAYER_BACKWARD_EVERY=K, default 8), said by a tag."""
    if python == "framework" and not os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON"):
        pytest.skip("set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x")
    interpreter = sys.executable if python == "this" else os.environ["TRAINSCOPE_FRAMEWORK_PYTHON"]
    batches = 10
    run_dir, _, _ = run_cli(tmp_path, "--auto=layers=1", [interpreter, JOB, "--batches",
                                                          str(batches)],
                            env={"TRAINSCOPE_LAYER_BACKWARD_EVERY": "3"})
    run = trainscope.read_run(run_dir)
    assert run.tags["trainscope.auto.layer_backward_every"] == "3"
    steps = sorted(rows(run, "BATCH")["step"])
    assert steps == list(range(batches))
    for layer in ("layer/0", "layer/1", "layer/2", "layer/3"):
        assert sorted(rows(run, layer)["step"]) == steps, layer  # forward: every step
        assert sorted(rows(run, layer + "/backward")["step"]) == [0, 3, 6, 9], layer
    # The views say it: the diagnosis's key rows and its text.
    d = trainscope.diagnose(run_dir)
    every = {k.key: k.sampled_every for k in d.keys}
    assert every["layer/3/backward"] == 3 and every["layer/3"] == 1 and every["BATCH"] == 1
    assert "timed on 1 step in 3" in str(d)
    # The default: one step in 8 (steps 0 and 8 of 10).
    run_dir, _, _ = run_cli(tmp_path / "default", "--auto=layers=1",
                            [interpreter, JOB, "--batches", str(batches)])
    run = trainscope.read_run(run_dir)
    assert run.tags["trainscope.auto.layer_backward_every"] == "8"
    assert sorted(rows(run, "layer/3/backward")["step"]) == [0, 8]


@needs_cli
@needs_torch
def test_two_rank_ddp_job(tmp_path):
    run_dir, out, _ = run_cli(tmp_path, "--auto", [
        sys.executable, LAUNCH2, JOB, "--batches", "5", "--ddp"])
    run = trainscope.read_run(run_dir)
    assert sorted(r["rank"] for r in job_report(out)) == [0, 1]
    for rank in (0, 1):
        assert len(rows(run, "BATCH", rank)) == 5
        # model(x) through the DDP wrapper is one FORWARD, the loss module LOSS.
        assert len(rows(run, "FORWARD", rank)) == 5
        assert len(rows(run, "LOSS", rank)) == 5
        assert len(rows(run, "COMM", rank)) == 1  # the explicit all_reduce
    d = trainscope.diagnose(run_dir)
    assert len(d.ranks) == 2


@needs_cli
@needs_torch
def test_a_loop_without_loader_or_optimizer_takes_steps_from_backward(tmp_path):
    """Issue 37: word_language_model's shape (batches sliced from a tensor, p.data.add_
    for SGD, a criterion module, argparse short options) got FORWARD and BACKWARD but no
    step: "0 steps", and NO-DATA advising the --auto the run already used."""
    run_dir, out, err = run_cli(tmp_path, "--auto", [
        sys.executable, MANUAL, "-b", "4", "-e", "2", "-n", "10", "--eval"], quiet=False)
    did = job_report(out)[0]
    run = trainscope.read_run(run_dir)
    # One step per backward: the first from the first forward, then backward to backward;
    # the evaluation drops the step the last backward opened.
    assert did["backwards"] == 20
    assert len(rows(run, "BATCH")) == 20
    assert len(rows(run, "FORWARD")) == 20
    assert len(rows(run, "LOSS")) == 20
    assert inside(rows(run, "BACKWARD"), rows(run, "BATCH")) == 20
    assert inside(rows(run, "eval/FORWARD"), rows(run, "BATCH")) == 0
    # What --auto found: in the run, on stderr, at the end and in diagnose.
    assert run.tags["trainscope.auto.steps"] == "backward"
    assert "no torch.optim optimizer" in run.tags["trainscope.auto.found"]
    assert "trainscope --auto: steps from backward" in err
    assert "--auto: steps from backward" in err.split("trainscope: run ", 1)[1]  # the summary
    # The summary counts every step and says which were dropped as warm-up.
    assert "20 steps (5 warm-up steps dropped from the statistics: 15 counted)" in err
    # No GPU here: the advice is the CPU's.
    assert "--nsys" not in err and "mixed precision" not in err
    d = trainscope.diagnose(run_dir)
    assert "NO-DATA" not in [label.name for label in d.run.labels]
    text = subprocess.run([CLI, "diagnose", run_dir], capture_output=True, text=True,
                          check=True).stdout
    assert "--auto: steps from backward" in text
    # Params: what argparse parsed, by dest name (short options too).
    assert run.params["batch_size"] == "4"
    assert run.params["epochs"] == "2"
    assert run.params["batches"] == "10"
    assert run.params["two_models"] == "False"


@needs_cli
@needs_torch
def test_a_key_that_mixes_two_modules_says_so(tmp_path):
    run_dir, _, err = run_cli(tmp_path, "--auto", [
        sys.executable, MANUAL, "-n", "12", "--two-models"], quiet=False)
    run = trainscope.read_run(run_dir)
    assert len(rows(run, "FORWARD")) == 24
    assert run.tags["trainscope.auto.callers.FORWARD"] == "Net, Head"
    assert "trainscope.auto.callers.LOSS" not in run.tags
    forward_line = [line for line in err.splitlines() if line.strip().startswith("FORWARD")]
    assert forward_line and "(mixes Net, Head)" in forward_line[0], err[-2000:]
    d = trainscope.diagnose(run_dir)
    assert [k.callers for k in d.keys if k.key == "FORWARD"][0] == "Net, Head"


@needs_cli
@needs_torch
def test_a_no_step_auto_run_is_not_advised_auto(tmp_path):
    # Evaluation only: --auto finds no training step.
    code = ("import torch\nm = torch.nn.Linear(4, 2)\nwith torch.no_grad():\n"
            "    for _ in range(5): m(torch.randn(2, 4))\n")
    run_dir, _, err = run_cli(tmp_path, "--auto", [sys.executable, "-c", code], quiet=False)
    d = trainscope.diagnose(run_dir)
    labels = {label.name: label for label in d.run.labels}
    assert "NO-DATA" in labels
    assert "--auto" not in labels["NO-DATA"].next_step
    assert "--auto found no training step" in err


@needs_cli
@needs_torch
def test_a_traceback_shows_one_frame_per_patched_call(tmp_path):
    """Issue 37: a KeyboardInterrupt's traceback showed trainscope's `wrapper` and
    `_region` frames: a user reads them as the cause."""
    _, _, err = run_cli(tmp_path, "--auto=layers", [sys.executable, MANUAL, "--raise-in-forward"],
                        expect=None)
    frames = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")]
    ours = [line for line in frames if "trainscope" in line and "manual_loop" not in line]
    assert ours, err[-3000:]
    assert all(line.endswith("in trainscope_timed_call") for line in ours), ours
    # One frame of ours per patched call (the model's, its child layer's): never two in
    # a row.
    assert len(ours) == 2, ours
    for before, after in zip(frames, frames[1:]):
        assert not (before in ours and after in ours), frames
    assert "KeyboardInterrupt: stopped in forward" in err


FRAMEWORK_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_framework = pytest.mark.skipif(
    not FRAMEWORK_PYTHON, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x "
    "(tests/python/requirements-frameworks.txt) for torch.compile")


@needs_cli
@needs_framework
@pytest.mark.parametrize("mode", ["--auto", "--auto=layers"])
def test_torch_compile_sees_the_model_as_it_is(tmp_path, mode):
    """Issue 37: --auto=layers took a compiled MLP from 1 graph and 0 breaks to 5 graphs
    and 27 breaks, and named its keys layer/_orig_mod.0. Plain --auto must stay at 1 and 0."""
    for variant in ([], ["--part"]):
        run_dir, out, err = run_cli(tmp_path / (mode + "".join(variant)), mode, [
            FRAMEWORK_PYTHON, COMPILED, "--steps", "8"] + variant)
        did = job_report(out)[0]
        assert did["graphs"] == 1, (did, err[-3000:])
        assert did["graph_breaks"] == 0, did
        run = trainscope.read_run(run_dir)
        keys = set(run.regions["key"])
        assert not any("_orig_mod" in key for key in keys), keys
        assert len(rows(run, "FORWARD")) == 8
        assert len(rows(run, "LOSS")) == 8
        assert len(rows(run, "BATCH")) == 8
        if mode == "--auto=layers" and variant:
            # The compiled part is one layer; the eager parts around it are layers too.
            assert {"layer/stem", "layer/body", "layer/head"} <= keys, keys
            assert len(rows(run, "layer/body")) == 8
        if mode == "--auto=layers" and not variant:
            assert not any(key.startswith("layer/") for key in keys), keys


@needs_cli
@pytest.mark.skipif(not FRAMEWORK_PYTHON, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python "
                    "with torch 2.x (tests/python/requirements-frameworks.txt) for torchrun")
def test_two_ranks_under_the_real_torchrun(tmp_path):
    run_dir, out, err = run_cli(tmp_path, "--auto", [
        FRAMEWORK_PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        JOB, "--batches", "5", "--ddp"])
    assert sorted(r["rank"] for r in job_report(out)) == [0, 1], err[-3000:]
    run = trainscope.read_run(run_dir)
    for rank in (0, 1):
        assert len(rows(run, "BATCH", rank)) == 5
        assert len(rows(run, "FORWARD", rank)) == 5
        assert len(rows(run, "LOSS", rank)) == 5
        assert len(rows(run, "OPTIMIZER", rank)) == 5
        assert inside(rows(run, "BACKWARD", rank), rows(run, "BATCH", rank)) == 5
        assert len(rows(run, "COMM", rank)) == 1
    d = trainscope.diagnose(run_dir)
    assert sorted(r.rank for r in d.ranks) == [0, 1]


@needs_cli
def test_misuse_runs_the_command_unchanged(tmp_path):
    # Not Python: one line, the command's own output and exit status.
    run_dir, out, err = run_cli(tmp_path / "echo", "--auto", ["/bin/echo", "hello"])
    assert out.strip() == "hello"
    assert "is not a Python program" in err
    # Python without torch: runs, nothing recorded, no error.
    run_dir, out, err = run_cli(tmp_path / "notorch", "--auto",
                                [sys.executable, "-c", "import json; print(json.dumps(1))"])
    assert out.strip() == "1"
    assert "Traceback" not in err
    # A bad mode is a usage error naming it.
    done = subprocess.run([CLI, "run", "--root", os.fspath(tmp_path / "bad"), "--auto=layers=0",
                           "--", sys.executable, "-c", "pass"], capture_output=True, text=True,
                          check=False, env=job_env())
    assert done.returncode == 2
    assert "layers=0" in done.stderr
    # The user's own sitecustomize still runs, after the hooks are in place.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    env_py = "import os; print(os.environ.get('USER_SITE_RAN'))"
    argv = [CLI, "run", "--root", os.fspath(tmp_path / "site-run"), "--no-sample", "--quiet",
            "--auto", "--", sys.executable, "-c", env_py]
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env=dict(job_env(), PYTHONPATH=f"{site}:{os.environ['PYTHONPATH']}"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


@needs_torch
def test_instrument_from_code_and_remove(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel

    original_call = torch.nn.Module.__call__
    original_backward = torch.Tensor.backward
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(3, 4), torch.randint(0, 2, (3,))) for _ in range(5)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="instrument") as active:
        handle = ts_torch.instrument(model=model, optimizer=optimizer, loader=loader, layers=1)
        assert torch.nn.Module.__call__ is original_call  # objects given: no global patch
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        handle.remove()
        run_dir = active.dir
        # After remove(), nothing is recorded and every patch is undone.
        assert torch.Tensor.backward is original_backward
        assert "forward" not in model.__dict__ and "step" not in optimizer.__dict__
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    # DataLoader workers forked from this process (whose recorder has a timer) record
    # nothing and never wait on the parent's threads (the timer is not destroyed there).
    workers = torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=2,
                                          timeout=60)
    with ts_torch.instrument():
        assert sum(len(batch) for batch in workers) == 8
    run = trainscope.read_run(run_dir)
    assert len(rows(run, "BATCH")) == 5
    assert len(rows(run, "FORWARD")) == 5
    assert len(rows(run, "BACKWARD")) == 5
    assert len(rows(run, "OPTIMIZER")) == 5
    assert len(rows(run, "layer/0")) == 5
    assert inside(rows(run, "FORWARD"), rows(run, "BATCH")) == 5


@needs_torch
def test_a_patch_that_fails_disables_itself_and_training_goes_on(tmp_path, monkeypatch):
    import torch  # pylint: disable=import-outside-toplevel
    from torch.utils.data import dataloader  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel
    from trainscope import _auto  # pylint: disable=import-outside-toplevel

    _auto.recorder()._warned = set()  # warnings of earlier tests in this process
    # An unknown PyTorch: the loader's iterator class is gone.
    monkeypatch.setattr(dataloader, "_BaseDataLoaderIter", None)
    model = torch.nn.Linear(4, 2)
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="broken") as active:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handle = ts_torch.instrument()
        try:
            assert any("DataLoader fetch is not instrumented" in str(w.message) for w in caught)
            model(torch.randn(2, 4)).sum().backward()
            # A timer that refuses a region costs one warning, never the training.
            rec = _auto.recorder()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rec.start("FORWARD")  # FORWARD is open now: the model call cannot start it
                model(torch.randn(2, 4)).sum().backward()
                model(torch.randn(2, 4)).sum().backward()
                rec.end("FORWARD")
            assert len([w for w in caught if "FORWARD" in str(w.message)]) == 1
        finally:
            handle.remove()
        run_dir = active.dir
    run = trainscope.read_run(run_dir)
    assert len(rows(run, "FORWARD")) == 2  # the first call and the hand-opened region
    assert len(rows(run, "BACKWARD")) == 3


@needs_torch
def test_a_closure_passed_to_the_optimizer_is_no_optimizer_time(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel

    model = torch.nn.Linear(4, 2)
    optimizers = {"SGD": torch.optim.SGD(model.parameters(), lr=0.1),
                  "LBFGS": torch.optim.LBFGS(model.parameters(), max_iter=3)}
    x, y = torch.randn(8, 4), torch.randn(8, 2)

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with trainscope.start_run(root=os.fspath(tmp_path), run_name="closure") as active:
        with ts_torch.instrument():
            for name, optimizer in optimizers.items():  # noqa: B007 (closure reads it)
                for _ in range(3):
                    optimizer.step(closure)
        run_dir = active.dir
    run = trainscope.read_run(run_dir)
    optimizer_rows = rows(run, "OPTIMIZER")
    assert len(rows(run, "FORWARD")) >= 6
    assert inside(rows(run, "FORWARD"), optimizer_rows) == 0
    assert inside(rows(run, "BACKWARD"), optimizer_rows) == 0
    assert len(optimizer_rows) >= 6  # at least one per step; LBFGS's pause at each closure call


@needs_torch
def test_with_a_gpu_each_region_is_one_gpu_region_timed_on_both_clocks(tmp_path, monkeypatch):
    """The recorder on a (simulated) GPU: each key is one gpu=True region, which the
    timer times on the CPU and on the GPU. Starting a CPU region and then a GPU one of
    the same key failed (a key is open once), so no region had a GPU time (found on
    an H100, issue 27)."""
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel
    from trainscope import _auto, _core  # pylint: disable=import-outside-toplevel

    gpu = _core._SimulatedGpu()  # pylint: disable=protected-access

    def build(self):
        self._gpu = True  # pylint: disable=protected-access
        return trainscope.CPUGPUTimer(gpu)

    monkeypatch.setattr(_auto.Recorder, "_build", build)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(6)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", trainscope.TrainscopeWarning)  # no region lost
        with trainscope.start_run(root=os.fspath(tmp_path), run_name="simulated-gpu") as active:
            with ts_torch.instrument():
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            run_dir = active.dir
    run = trainscope.read_run(run_dir)
    for key, count in (("FORWARD", 6), ("BACKWARD", 6), ("OPTIMIZER", 6), ("BATCH", 6),
                       ("IO", 6)):  # one per batch: the exhausting fetch is none
        cpu, on_gpu = rows(run, key), rows(run, key, device="GPU")
        assert len(cpu) == len(on_gpu) == count, (key, len(cpu), len(on_gpu))


@needs_torch
def test_on_cuda_every_region_is_also_timed_on_the_gpu(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel

    if not (torch.cuda.is_available() and trainscope.built_with_cuda()):
        pytest.skip("needs a CUDA device and a CUDA build of trainscope (the GPU suite runs it)")
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 4)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(64, 256), torch.randint(0, 4, (64,))) for _ in range(6)]
    loader = torch.utils.data.DataLoader(data, batch_size=None, pin_memory=True)
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="cuda") as active:
        with ts_torch.instrument():
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)),
                                                         y.cuda(non_blocking=True))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        torch.cuda.synchronize()
        run_dir = active.dir
    run = trainscope.read_run(run_dir)
    for key in ("FORWARD", "BACKWARD", "OPTIMIZER", "BATCH"):
        cpu, gpu = rows(run, key), rows(run, key, device="GPU")
        assert len(gpu) == len(cpu) > 0, key
        assert (gpu["duration_ns"] > 0).all(), key
