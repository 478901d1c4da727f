"""trainscope for PyTorch: ``import trainscope.torch as timer``.

Deep500's ``from deep500.utils import timer_torch as timer``. Everything in
trainscope, except that CPUGPUTimer records its CUDA events on torch's
current CUDA stream (``torch.cuda.current_stream()``, read at each gpu=True
start/end) rather than on the legacy default stream, so regions inside
``with torch.cuda.stream(s):`` time the work queued on ``s``.
"""

import torch

import trainscope
from trainscope import *  # noqa: F401,F403  (re-export: this module replaces timer_torch)

__all__ = trainscope.__all__
__version__ = trainscope.__version__


def _current_stream():
    return torch.cuda.current_stream().cuda_stream


class CPUGPUTimer(trainscope.CPUGPUTimer):
    """trainscope.CPUGPUTimer on torch's current CUDA stream.

    An explicit ``stream`` (here, to set_stream, or to start/end) takes
    precedence over the current stream.
    """

    __slots__ = ()

    def __init__(self, *, stream=None, **kwargs):
        super().__init__(stream=stream, **kwargs)
        self._follow_current_stream(stream is None)

    def set_stream(self, stream):
        """Records on `stream` from now on; None goes back to torch's current stream."""
        super().set_stream(stream)
        self._follow_current_stream(stream is None)

    def _follow_current_stream(self, follow):
        # Without CUDA in torch there is no current stream to ask for.
        self._set_stream_provider(_current_stream if follow and torch.cuda.is_available() else None)


# Zero-code instrumentation (docs/auto.md): trainscope.torch.instrument(...).
from trainscope._torch_auto import Instrumentation, instrument  # noqa: E402

__all__ = list(__all__) + ["Instrumentation", "instrument"]
