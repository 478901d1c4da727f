"""trainscope.keras.TimerCallback, driven through its hooks as model.fit would."""

import importlib.util
import textwrap

import pytest

import trainscope
import trainscope.keras as timer

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")

HAS_KERAS = any(importlib.util.find_spec(name) is not None for name in ("keras", "tensorflow"))


class SpyTimer(trainscope.CPUGPUTimer):
    """Counts complete_all() calls."""

    def __init__(self):
        super().__init__()
        self.completions = 0

    def complete_all(self):
        self.completions += 1
        super().complete_all()


def fit(callback, epochs, batches):
    for epoch in range(epochs):
        callback.on_epoch_begin(epoch)
        for batch in range(batches):
            callback.on_train_batch_begin(batch)
            callback.on_train_batch_end(batch, logs={"loss": 0.0})
        callback.on_epoch_end(epoch, logs={})


def test_importing_the_module_imports_no_keras_or_tensorflow(run_python):
    result = run_python("-c", textwrap.dedent("""
        import sys
        import trainscope.keras as timer
        assert timer.TimeType.EPOCH == 1 and timer.CPUGPUTimer and timer.Timer
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow")))
    """))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_callback_times_epochs_and_batches_and_completes_like_deep500():
    tmr = SpyTimer()
    fit(timer.TimerCallback(tmr, gpu=True), epochs=2, batches=25)
    assert tmr.get_time_stats(timer.TimeType.EPOCH).count == 2
    assert tmr.get_time_stats(timer.TimeType.BATCH).count == 50
    # Every epoch end, and batches 0, 10 and 20 of each epoch.
    assert tmr.completions == 2 + 2 * 3


def test_callback_passes_the_gpu_flag_to_batches_only():
    tmr = trainscope.CPUGPUTimer()
    callback = timer.TimerCallback(tmr, gpu=True)
    callback.on_epoch_begin(0)
    callback.on_train_batch_begin(0)
    with pytest.raises(ValueError, match="started with gpu=True"):
        tmr.end(timer.TimeType.BATCH)
    with pytest.raises(ValueError, match="started with gpu=False"):
        tmr.end(timer.TimeType.EPOCH, gpu=True)


def test_callback_accepts_a_cpu_only_timer():
    tmr = trainscope.Timer()
    fit(timer.TimerCallback(tmr, gpu=True), epochs=1, batches=3)
    assert tmr.get_time_stats(timer.TimeType.BATCH).count == 3
    assert tmr.keys() == [timer.TimeType.BATCH, timer.TimeType.EPOCH]


@pytest.mark.skipif(HAS_KERAS, reason="checks the fallback used where Keras is not installed")
def test_without_keras_the_callback_is_a_plain_class():
    hooks = timer._TimerHooks  # pylint: disable=protected-access
    assert timer.TimerCallback.__mro__[1:] == (hooks, object)
    assert "TimerCallback" in dir(timer)


@pytest.mark.skipif(not HAS_KERAS, reason="needs keras or tensorflow")
def test_with_keras_the_callback_is_a_keras_callback():
    callbacks = importlib.import_module("keras.callbacks" if importlib.util.find_spec("keras")
                                        else "tensorflow.keras.callbacks")
    assert issubclass(timer.TimerCallback, callbacks.Callback)


def test_unknown_attributes_still_raise():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        timer.NoSuchThing  # pylint: disable=pointless-statement
