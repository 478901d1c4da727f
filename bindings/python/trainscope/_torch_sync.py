"""The host's waits for the GPU, timed as SYNC (docs/auto.md; the steps room's
``sync`` phase, docs/steps.md).

``trainscope.torch.instrument()`` (and so ``trainscope run --auto``) wraps the
calls that make the host wait for the device: ``torch.cuda.synchronize``,
``Tensor.item``, ``.cpu()``, ``.tolist()`` and ``.numpy()`` of a CUDA tensor,
``torch.cuda.Event.synchronize`` and ``torch.cuda.Stream.synchronize``. Each
such call in the training loop, between the phases (no FORWARD, BACKWARD,
OPTIMIZER, ... region open: a sync inside the model's forward is forward's
time), on the main thread (the loop's: another thread's wait is not the step's),
is one SYNC region. trainscope never adds a synchronization of its own:
the wrapper times the call the program makes, on the CPU only (a GPU event
around a wait for the GPU would measure nothing). A tensor on the CPU is passed
straight through and nothing is timed (the wrapper's cost is one attribute
read).
"""

import functools
import threading

from trainscope._auto import BATCH, EPOCH, recorder

SYNC = "SYNC"  # steps::kSyncKey
# Keys that may be open around a SYNC region: the step and the epoch (any other
# open key is a phase the wait belongs to).
_AROUND = frozenset((BATCH, EPOCH))

_rec = recorder()
_compiling = [lambda: False]  # instrument_syncs' check: torch.compile traces (nothing timed)

TENSOR_METHODS = ("item", "cpu", "tolist", "numpy")


_MAIN = threading.main_thread().ident  # the training loop's thread (the recorder's timer's)


def _between_phases():
    if threading.get_ident() != _MAIN:  # another thread's wait (a metrics thread): not the step's
        return False
    open_keys = _rec._open  # pylint: disable=protected-access
    return not open_keys or open_keys <= _AROUND


def _timed(original):
    """A call that waits for the device: timed as SYNC when between phases."""
    @functools.wraps(original)
    def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed wait
        rec = _rec
        if not _between_phases() or _compiling[0]():
            return original(*args, **kwargs)
        started = rec.start(SYNC)
        try:
            return original(*args, **kwargs)
        finally:
            if started:
                rec.end(SYNC)
    return trainscope_timed_call


def _timed_if_cuda(original):
    """A tensor method: timed only for a CUDA tensor (a CPU tensor is untouched)."""
    timed = _timed(original)

    @functools.wraps(original)
    def trainscope_timed_call(self, *args, **kwargs):  # trainscope's one frame
        if not self.is_cuda:
            return original(self, *args, **kwargs)
        return timed(self, *args, **kwargs)
    return trainscope_timed_call


def instrument_syncs(handle, compiling=None):
    """Wraps the host-device waits (undone by handle.remove()); True when any was.
    compiling: a check that torch.compile traces now (nothing is timed then)."""
    import torch  # pylint: disable=import-outside-toplevel
    if compiling is not None:
        _compiling[0] = compiling
    # pylint: disable=protected-access
    any_patched = False
    for name in TENSOR_METHODS:
        if hasattr(torch.Tensor, name):
            any_patched = handle._patch(torch.Tensor, name, _timed_if_cuda,
                                        f"Tensor.{name} (SYNC)") or any_patched
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and hasattr(cuda, "synchronize"):
        any_patched = handle._patch(cuda, "synchronize", _timed,
                                    "torch.cuda.synchronize (SYNC)") or any_patched
    for owner in ("Event", "Stream"):
        cls = getattr(cuda, owner, None)
        if cls is not None and hasattr(cls, "synchronize"):
            any_patched = handle._patch(cls, "synchronize", _timed,
                                        f"torch.cuda.{owner}.synchronize (SYNC)") or any_patched
    return any_patched
