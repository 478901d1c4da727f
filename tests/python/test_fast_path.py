"""Argument handling of the METH_FASTCALL start/end (bindings/python/fast_path.cpp)."""

import inspect

import pytest

import trainscope
from trainscope import TimeType

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def test_key_and_gpu_by_position_or_keyword():
    timer = trainscope.CPUGPUTimer()
    timer.start(TimeType.BATCH, True)
    timer.end(key=TimeType.BATCH, gpu=True)
    timer.start(key="data_aug", gpu=0)
    timer.end("data_aug", False, None)
    cpu = trainscope.Timer()
    cpu.start(key=TimeType.IO)
    cpu.end(TimeType.IO)
    assert timer.keys() == [TimeType.BATCH, "data_aug"] and cpu.keys() == [TimeType.IO]


@pytest.mark.parametrize("call, message", [
    (lambda t: t.start(), "missing required argument 'key'"),
    (lambda t: t.start(TimeType.BATCH, False, None, 1), "at most 3 arguments"),
    (lambda t: t.start(TimeType.BATCH, True, gpu=True), "multiple values for argument 'gpu'"),
    (lambda t: t.end(TimeType.BATCH, device=0), "unexpected keyword argument 'device'"),
    (lambda t: t.start(gpu=True), "missing required argument 'key'"),
])
def test_bad_calls_on_the_cpu_gpu_timer_raise_type_error(call, message):
    timer = trainscope.CPUGPUTimer()
    with pytest.raises(TypeError, match=message):
        call(timer)
    timer.start(TimeType.BATCH)
    timer.end(TimeType.BATCH)
    assert timer.get_time_stats(TimeType.BATCH).count == 1


def test_the_cpu_timer_takes_no_gpu_argument():
    timer = trainscope.Timer()
    with pytest.raises(TypeError, match="at most 1 argument"):
        timer.start(TimeType.BATCH, True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpu'"):
        timer.end(TimeType.BATCH, gpu=False)


def test_gpu_flag_truthiness_errors_propagate():
    class Undecided:
        def __bool__(self):
            raise ZeroDivisionError("no truth value")

    timer = trainscope.CPUGPUTimer()
    with pytest.raises(ZeroDivisionError):
        timer.start(TimeType.BATCH, gpu=Undecided())
    timer.start(TimeType.BATCH)  # nothing was opened
    timer.end(TimeType.BATCH)


def test_methods_check_the_type_of_self():
    with pytest.raises(TypeError):
        trainscope.Timer.start(object(), TimeType.BATCH)
    with pytest.raises(TypeError):
        trainscope.CPUGPUTimer.end(trainscope.Timer(), TimeType.BATCH)


def test_subclasses_use_the_fast_methods_and_must_initialise_the_base():
    class Counting(trainscope.Timer):
        pass

    timer = Counting()
    timer.start(TimeType.EPOCH)
    timer.end(TimeType.EPOCH)
    assert timer.get_time_stats(TimeType.EPOCH).count == 1

    class Forgetful(trainscope.CPUGPUTimer):
        def __init__(self):  # pylint: disable=super-init-not-called
            pass

    with pytest.raises(TypeError, match="__init__"):
        Forgetful()


def test_signatures_are_introspectable():
    assert list(inspect.signature(trainscope.Timer.start).parameters) == ["self", "key"]
    assert list(inspect.signature(trainscope.CPUGPUTimer.end).parameters) == [
        "self", "key", "gpu", "stream"]


def test_str_subclass_keys_use_their_string_value():
    class Name(str):
        pass

    timer = trainscope.Timer()
    timer.start(Name("custom"))
    timer.end("custom")
    assert timer.keys() == ["custom"]
