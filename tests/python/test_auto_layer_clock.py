"""Layer regions timed from C (issue 37, costs: trainscope._core._LayerClock).

instrument(layers=N) starts and ends each layer's forward region in C and hooks
its output with a C callable that starts the layer's backward; on torch 1.13 the
hook goes straight into the tensor's hook dict (no RemovableHandle). What the
training sees must not change: the user's own hooks on the same outputs still run
(before and after ours) and their handles still remove them, gradients are the
same, a parent that returns its child's output holds the child's backward, calls
under no_grad record eval/ keys and no backward, and a layer called inside itself
gives one warning and runs on.

Needs torch.
"""

import importlib.util
import os
import warnings

import pytest

import trainscope

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="instrumenting PyTorch needs torch")


def rows(run, key):
    frame = run.regions
    frame = frame[(frame["key"] == key) & (frame["device"] == "CPU")]
    return frame.sort_values("start_unix_ns")


def spans(frame):
    return list(zip(frame["start_unix_ns"], frame["start_unix_ns"] + frame["duration_ns"]))


@needs_torch
def test_user_hooks_and_gradients_unchanged(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel

    calls = []

    class Hooked(torch.nn.Module):
        """Registers the user's hook on its own output (before trainscope's)."""

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            out = self.lin(x)
            out.register_hook(lambda grad: calls.append("inner") or None)
            return torch.relu(out) * 1.0

    torch.manual_seed(0)
    model = torch.nn.Sequential(Hooked(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)

    def gradients(register_after):
        model.zero_grad()
        out = model(x)
        handle = out.register_hook(lambda grad: calls.append("outer") or None)
        removed = out.register_hook(lambda grad: calls.append("removed") or None)
        removed.remove()
        if register_after:
            handle.remove()
        out.sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    bare = gradients(False)
    assert calls == ["outer", "inner"]
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="hooks") as active:
        with ts_torch.instrument(model=model, layers=2, layer_backward_every=1):
            calls.clear()
            timed = gradients(False)
            assert calls == ["outer", "inner"]  # the user's hooks, once each, none removed
            calls.clear()
            gradients(True)  # the user's handle removes the user's hook only
            assert calls == ["inner"]
        run_dir = active.dir
    for a, b in zip(bare, timed):
        assert torch.equal(a, b)
    run = trainscope.read_run(run_dir)
    for key in ("layer/0", "layer/1", "layer/0.lin"):
        assert len(rows(run, key)) == 2, key
        assert len(rows(run, key + "/backward")) == 2, key


@needs_torch
def test_parent_holds_child_backward_and_eval_has_none(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel

    class Wrapper(torch.nn.Module):
        """Returns its child's output as is: one hook starts both backwards."""

        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.inner(x)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Wrapper(), torch.nn.Linear(4, 1))
    steps = 3
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="parent") as active:
        with ts_torch.instrument(layers=2, layer_backward_every=1):
            for _ in range(steps):
                model(torch.randn(2, 4)).sum().backward()
            with torch.no_grad():
                model(torch.randn(2, 4))
        run_dir = active.dir
    run = trainscope.read_run(run_dir)
    parent, child = rows(run, "layer/1/backward"), rows(run, "layer/1.inner/backward")
    assert len(parent) == steps and len(child) == steps
    for (cs, ce), (ps, pe) in zip(spans(child), spans(parent)):
        assert ps <= cs and ce <= pe  # the child's backward inside its parent's
    # The last layer's backward ends before the wrapper's starts (they never overlap).
    for (ls, le), (ps, _) in zip(spans(rows(run, "layer/2/backward")), spans(parent)):
        assert le <= ps
    for key in ("layer/0", "layer/1", "layer/1.inner", "layer/2"):
        assert len(rows(run, "eval/" + key)) == 1, key
        assert len(rows(run, key)) == steps, key
    assert len(rows(run, "eval/layer/0/backward")) == 0


@needs_torch
def test_a_layer_inside_itself_warns_once_and_runs_on(tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import trainscope.torch as ts_torch  # pylint: disable=import-outside-toplevel
    from trainscope import _auto  # pylint: disable=import-outside-toplevel

    class Recursive(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, again=True):
            out = self.lin(x)
            return self(out, again=False) if again else out

    _auto.recorder()._warned = set()  # warnings of earlier tests in this process
    model = torch.nn.Sequential(Recursive())
    with trainscope.start_run(root=os.fspath(tmp_path), run_name="self") as active:
        with ts_torch.instrument(layers=1, layer_backward_every=1):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(2):
                    model(torch.randn(2, 4)).sum().backward()
        run_dir = active.dir
    refused = [w for w in caught if "'layer/0' not recorded" in str(w.message)]
    assert len(refused) == 1, [str(w.message) for w in caught]
    run = trainscope.read_run(run_dir)
    assert len(rows(run, "layer/0")) == 2  # the outer call, each step


def test_the_clock_on_a_cpu_gpu_timer_uses_gpu_regions():
    """The recorder's timer is a CPUGPUTimer when CUDA is there: layer regions are then
    gpu=True (timed on the CPU alone without a GPU, with the timer's one warning)."""
    from trainscope import _core  # pylint: disable=import-outside-toplevel

    class Recorder:  # what the clock asks: the live timer, and whether evaluating
        evaluating = False

        def __init__(self, timer):
            self.timer = timer

        def live(self):
            return self.timer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (no GPU: gpu=True regions on the CPU)
        timer = trainscope.CPUGPUTimer()
        clock = _core._LayerClock()  # pylint: disable=protected-access
        clock.configure(lambda: True, None, Recorder(timer), type(None), False)
        index = clock.add("layer/x", "eval/layer/x", "layer/x/backward", "x")
        assert clock.open(index) == index
        # A second start of the same key is refused by the timer, with its reason kept.
        assert clock.open(index) is False
        key, message = clock.error()
        assert key == "layer/x" and message
        with pytest.raises(ValueError):  # it is a gpu=True region: a CPU end is refused
            timer.end("layer/x")
        assert clock.close(index, None) is True
        assert clock.close(index, None) is False  # nothing open any more
    assert timer.get_time_stats("layer/x").count == 1
