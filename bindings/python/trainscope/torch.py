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

__all__ = list(trainscope.__all__) + ["Instrumentation", "instrument"]
__version__ = trainscope.__version__
