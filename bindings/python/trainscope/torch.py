"""trainscope for PyTorch: ``import trainscope.torch as timer``.

Deep500's ``from deep500.utils import timer_torch as timer``. Everything in
trainscope, except that CPUGPUTimer records its CUDA events on torch's
current CUDA stream (``torch.cuda.current_stream()``, read at each gpu=True
start/end) rather than on the legacy default stream, so regions inside
``with torch.cuda.stream(s):`` time the work queued on ``s``; and zero-code
instrumentation (docs/auto.md): ``trainscope.torch.instrument(...)``.
"""

import trainscope
from trainscope import *  # noqa: F401,F403  (re-export: this module replaces timer_torch)
from trainscope._torch_auto import Instrumentation, instrument
from trainscope._torch_timer import CPUGPUTimer

__all__ = list(trainscope.__all__) + ["Instrumentation", "instrument", "capture_on_anomaly"]
__version__ = trainscope.__version__


def capture_on_anomaly(factor=5.0, steps=3, max_captures=3, max_bytes=100 * 1000 * 1000,
                       run=None, on_labels=True):
    """A torch.profiler capture of the `steps` steps after one slower than `factor` x the
    rolling p99, into the run (captures/capture-r<rank>-s<step>.json, Chrome trace), at most
    `max_captures` and `max_bytes`; call .step() at the end of every step (`trainscope run
    --auto` does it by itself). Under `trainscope run` it also captures the steps after a
    STRAGGLER, MEMORY-CREEP or THROUGHPUT-DRIFT label appears (the launcher's request:
    captures/capture-r<rank>-s<step>-<label>.json). `run`: the active run (start_run(), or
    the one a timer joined) by default; `on_labels=False`: slow steps only. docs/auto.md,
    "Anomaly capture"."""
    # pylint: disable=import-outside-toplevel
    from trainscope import _anomaly
    from trainscope import run as _runs
    active = run if run is not None else _runs._active  # pylint: disable=protected-access
    if active is None:
        active = _runs._implicit_run()  # pylint: disable=protected-access
    return _anomaly.AnomalyCapture(active.dir, active.rank, factor=factor, steps=steps,
                                   max_captures=max_captures, max_bytes=max_bytes,
                                   on_labels=on_labels)
