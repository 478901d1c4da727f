"""trainscope.torch.CPUGPUTimer: trainscope.CPUGPUTimer on torch's current CUDA stream
(here, so that the recorder (trainscope._auto) builds it without importing
trainscope.torch, which imports the zero-code patches that import the recorder)."""

import torch

import trainscope


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


CPUGPUTimer.__module__ = "trainscope.torch"
