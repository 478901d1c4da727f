"""trainscope for Keras / TensorFlow: ``import trainscope.keras as timer``.

Deep500's ``from deep500.utils import timer_tf as timer``: everything in
trainscope plus ``TimerCallback(timer, gpu=False)`` for ``model.fit``::

    tmr = timer.CPUGPUTimer()
    model.fit(..., callbacks=[timer.TimerCallback(tmr, gpu=True)])

Importing this module imports neither TensorFlow nor Keras. TimerCallback is
built on first access (module ``__getattr__``) as a subclass of the Keras
``Callback`` in use, because Keras' CallbackList relies on private methods of
that base class, which a look-alike class would have to copy for every Keras
version. The Keras chosen is ``tensorflow.keras`` if TensorFlow is already
imported, else the ``keras`` package, else ``tensorflow.keras``. Where
neither is installed, TimerCallback is a plain class with the same hooks
(nothing could call it from ``fit`` there, but code and tests can).
"""

import sys

import trainscope
from trainscope import *  # noqa: F401,F403  (re-export: this module replaces timer_tf)

__all__ = [*trainscope.__all__, "TimerCallback"]  # noqa: F405  (built by __getattr__)
__version__ = trainscope.__version__


class _TimerHooks:
    """Deep500's TimerCallback hooks: EPOCH per epoch, BATCH per training batch."""

    def __init__(self, timer, gpu=False):
        super().__init__()
        self.timer = timer
        # A CPU-only Timer has no gpu argument; the flag is then ignored.
        self._gpu_kwargs = {"gpu": gpu} if isinstance(timer, trainscope.CPUGPUTimer) else {}

    def on_epoch_begin(self, epoch, logs=None):
        self.timer.start(trainscope.TimeType.EPOCH)

    def on_epoch_end(self, epoch, logs=None):
        self.timer.end(trainscope.TimeType.EPOCH)
        self.timer.complete_all()

    def on_train_batch_begin(self, batch, logs=None):
        self.timer.start(trainscope.TimeType.BATCH, **self._gpu_kwargs)

    def on_train_batch_end(self, batch, logs=None):
        self.timer.end(trainscope.TimeType.BATCH, **self._gpu_kwargs)
        if batch % 10 == 0:  # bounds the outstanding GPU events, as Deep500
            self.timer.complete_all()


def _keras_callback_base():
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None:
        try:
            import keras  # pylint: disable=import-outside-toplevel
            return keras.callbacks.Callback
        except ImportError:
            pass
        try:
            import tensorflow  # pylint: disable=import-outside-toplevel
        except ImportError:
            return None
    return tensorflow.keras.callbacks.Callback


def _build_timer_callback():
    base = _keras_callback_base()
    bases = (_TimerHooks,) if base is None else (_TimerHooks, base)
    return type("TimerCallback", bases, {
        "__module__": __name__,
        "__qualname__": "TimerCallback",
        "__doc__": "Keras callback timing EPOCH and BATCH regions on `timer` "
                   "(gpu: time batches on the GPU too).",
    })


def __getattr__(name):
    if name == "TimerCallback":
        cls = _build_timer_callback()
        globals()["TimerCallback"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"TimerCallback"})
