"""The framework integrations' shared base (trainscope._framework, issue 38): what
trainscope.hf and trainscope.lightning do alike, checked on both; and the one import
hook (trainscope._import_hook) that hf.install() and `--auto`'s bootstrap use."""

import importlib
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORK = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_frameworks = pytest.mark.skipif(
    not FRAMEWORK, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with transformers and "
                          "Lightning (tests/python/requirements-frameworks.txt)")


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    root = tmp_path_factory.mktemp("books")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_AUTO", "TRAINSCOPE_RUNS_ROOT")}
    done = subprocess.run([FRAMEWORK, os.path.join(HERE, "framework_jobs", "framework_books.py"),
                           str(root)], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_frameworks
@pytest.mark.parametrize("framework", ["hf", "lightning"])
def test_a_second_start_of_an_open_key_ends_it_and_starts_it_again(books, framework):
    # Lightning ignored the second start (one EPOCH spanning both), hf restarted it:
    # now both leave one region per start.
    assert books[framework]["regions"].get("EPOCH") == 2, books[framework]


@needs_frameworks
@pytest.mark.parametrize("framework", ["hf", "lightning"])
def test_the_steps_are_the_callbacks_while_it_trains_and_given_back(books, framework):
    assert books[framework]["owners"] == [framework, None]


@needs_frameworks
@pytest.mark.parametrize("framework,logged", [("hf", "max_grad_norm"),
                                              ("lightning", "lightning.max_epochs")])
def test_params_are_checked_against_the_run(books, framework, logged):
    # The run has learning_rate "0.01" (the command line's); the framework's 0.01 is the
    # same value: not logged again, no warning. Its other params are logged.
    seen = books[framework]
    assert seen["params"]["learning_rate"] == "0.01"
    assert logged in seen["params"], seen["params"]
    assert seen["warnings"] == [], seen["warnings"]


def test_the_import_hook_calls_after_the_module_runs_and_restores_its_loader(tmp_path,
                                                                             monkeypatch):
    from trainscope._import_hook import ImportHook  # pylint: disable=import-outside-toplevel
    (tmp_path / "ts_hooked_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hook = ImportHook(("ts_hooked_module",),
                      lambda name, module: seen.append((name, module.VALUE)))
    hook.install()
    try:
        module = importlib.import_module("ts_hooked_module")
    finally:
        hook.remove()
        sys.modules.pop("ts_hooked_module", None)
    assert seen == [("ts_hooked_module", 42)]
    assert "_AfterExec" not in type(module.__loader__).__name__
    assert hook not in sys.meta_path


def test_an_import_hook_that_fails_leaves_the_import_as_it_was(tmp_path, monkeypatch):
    from trainscope._import_hook import ImportHook  # pylint: disable=import-outside-toplevel
    (tmp_path / "ts_hooked_failing.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fail(name, module):
        raise RuntimeError("broken on purpose")

    hook = ImportHook(("ts_hooked_failing",), fail).install()
    try:
        module = importlib.import_module("ts_hooked_failing")
    finally:
        hook.remove()
        sys.modules.pop("ts_hooked_failing", None)
    assert module.VALUE == 7


RECORDER_TIMER = """
import sys, tempfile
import torch
import trainscope
from trainscope import _auto
torch.cuda.is_available = lambda: True  # as on a GPU host: the recorder builds a CPUGPUTimer
trainscope.built_with_cuda = lambda: True
with trainscope.start_run(root=tempfile.mkdtemp()):
    timer = _auto.recorder().timer()
print(type(timer).__module__, type(timer).__name__, "trainscope.torch" in sys.modules)
"""


def test_the_recorder_builds_its_gpu_timer_without_importing_trainscope_torch():
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_AUTO")}
    done = subprocess.run([sys.executable, "-c", RECORDER_TIMER], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    # trainscope.torch's CPUGPUTimer (torch's current stream), trainscope.torch not imported
    assert done.stdout.split() == ["trainscope.torch", "CPUGPUTimer", "False"], done.stdout
