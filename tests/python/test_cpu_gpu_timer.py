"""trainscope.CPUGPUTimer from Python. GPU-only checks skip without a GPU."""

import io
import textwrap

import pytest

import trainscope
from trainscope import TimeType

HAS_GPU = trainscope.CPUGPUTimer().gpu_available()
needs_no_gpu = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU and a CUDA build")

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def test_gpu_flag_mismatch_raises_value_error_and_leaves_the_region_open():
    timer = trainscope.CPUGPUTimer()
    timer.start(TimeType.BATCH, gpu=True)
    with pytest.raises(ValueError, match="gpu flag mismatch for timing region type BATCH"):
        timer.end(TimeType.BATCH)
    timer.end(TimeType.BATCH, gpu=True)
    timer.start(TimeType.FORWARD)
    with pytest.raises(ValueError, match="started with gpu=False, ended with gpu=True"):
        timer.end(TimeType.FORWARD, gpu=True)
    timer.end(TimeType.FORWARD)
    assert timer.get_time_stats(TimeType.BATCH).count == 1
    assert timer.get_time_stats(TimeType.FORWARD).count == 1


def test_deep500_errors_on_the_cpu_gpu_timer():
    timer = trainscope.CPUGPUTimer()
    timer.start(TimeType.IO)
    with pytest.raises(RuntimeError, match="Detected nesting for timing region type IO"):
        timer.start(TimeType.IO, gpu=True)
    with pytest.raises(RuntimeError, match="Unbalanced end for timing region type EPOCH"):
        timer.end(TimeType.EPOCH)
    with pytest.raises(ValueError, match="ALL"):
        timer.start(TimeType.ALL, gpu=True)
    timer.end(TimeType.IO)
    assert timer.keys() == [TimeType.IO]


def test_print_layout_has_a_cpu_and_a_gpu_section():
    timer = trainscope.CPUGPUTimer()
    for _ in range(3):
        timer.start(TimeType.BATCH, gpu=True)
        timer.start(TimeType.IO)
        timer.end(TimeType.IO)
        timer.end(TimeType.BATCH, gpu=True)
    out = io.StringIO()
    timer.print_all_time_stats(file=out)
    lines = out.getvalue().splitlines()
    gpu_keys = ["BATCH"] if HAS_GPU else []
    expected_names = ["CPU", "IO", "BATCH", "---", "GPU", *gpu_keys, "---"]
    assert [line for line in lines if not line.startswith("min: ")] == expected_names
    assert sum(line.startswith("min: ") for line in lines) == 2 + len(gpu_keys)


def test_gpu_keys_and_stats_are_separate_from_cpu_ones():
    timer = trainscope.CPUGPUTimer()
    timer.start(TimeType.FORWARD, gpu=True)
    timer.end(TimeType.FORWARD, gpu=True)
    timer.complete_all()
    assert timer.keys() == [TimeType.FORWARD]
    assert timer.get_time_stats(TimeType.FORWARD).count == 1
    gpu_count = 1 if HAS_GPU else 0
    assert timer.keys(gpu=True) == [TimeType.FORWARD] * gpu_count
    assert timer.get_time_stats(TimeType.FORWARD, gpu=True).count == gpu_count
    assert len(timer.get_time(TimeType.FORWARD, gpu=True)) == gpu_count
    assert timer.outstanding() == 0


@needs_no_gpu
def test_without_a_gpu_gpu_regions_are_timed_on_the_cpu_only():
    timer = trainscope.CPUGPUTimer()
    assert not timer.gpu_available() and timer.gpu_description()
    timer.start(TimeType.BATCH, gpu=True)
    timer.end(TimeType.BATCH, gpu=True)
    assert timer.get_time_stats(TimeType.BATCH).count == 1
    assert (timer.outstanding(), timer.blocking_waits(), timer.events_created()) == (0, 0, 0)
    assert timer.harvest() == 0


@needs_no_gpu
def test_require_gpu_raises_runtime_error_without_a_gpu():
    with pytest.raises(RuntimeError, match="require_gpu"):
        trainscope.CPUGPUTimer(require_gpu=True)


@needs_no_gpu
def test_cpu_only_warning_is_a_python_warning_once_per_process(run_python):
    result = run_python("-c", textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        import trainscope
        with warnings.catch_warnings(record=True) as caught:
            for _ in range(2):
                timer = trainscope.CPUGPUTimer()
                timer.start(trainscope.TimeType.BATCH, gpu=True)
                timer.end(trainscope.TimeType.BATCH, gpu=True)
        print(len(caught), caught[0].category.__name__, caught[0].message)
    """))
    assert result.returncode == 0, result.stderr
    count, category, message = result.stdout.split(" ", 2)
    assert (count, category) == ("1", "TrainscopeWarning")
    assert "timed on the CPU only" in message


@needs_no_gpu
def test_warnings_as_errors_do_not_break_start(run_python):
    result = run_python("-W", "error", "-c", textwrap.dedent("""
        import trainscope
        timer = trainscope.CPUGPUTimer()
        timer.start(trainscope.TimeType.BATCH, gpu=True)
        timer.end(trainscope.TimeType.BATCH, gpu=True)
        print(timer.get_time_stats(trainscope.TimeType.BATCH).count)
    """))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"
    assert "timed on the CPU only" in result.stderr


def test_stream_arguments():
    class FakeTorchStream:  # what torch.cuda.Stream exposes
        cuda_stream = 0

    timer = trainscope.CPUGPUTimer(stream=0)
    timer.start(TimeType.BATCH, gpu=True, stream=FakeTorchStream())
    timer.end(TimeType.BATCH, gpu=True, stream=None)
    timer.set_stream(FakeTorchStream())
    for bad in ("0", 1.5, object()):
        with pytest.raises(TypeError, match="stream must be"):
            timer.start(TimeType.IO, gpu=True, stream=bad)
        with pytest.raises(TypeError, match="stream must be"):
            trainscope.CPUGPUTimer(stream=bad)
    assert timer.keys() == [TimeType.BATCH]


def test_stream_provider_is_consulted_only_for_recorded_gpu_regions():
    calls = []
    timer = trainscope.CPUGPUTimer()
    timer._set_stream_provider(lambda: calls.append(1) or 0)  # pylint: disable=protected-access
    timer.start(TimeType.BATCH, gpu=True)
    timer.end(TimeType.BATCH, gpu=True)
    timer.start(TimeType.IO)
    timer.end(TimeType.IO)
    assert len(calls) == (2 if HAS_GPU else 0)


def test_merge_and_reset():
    first, second = trainscope.CPUGPUTimer(), trainscope.CPUGPUTimer()
    for timer in (first, second):
        timer.start(TimeType.BATCH, gpu=True)
        timer.end(TimeType.BATCH, gpu=True)
    first.merge(second)
    assert first.get_time_stats(TimeType.BATCH).count == 2
    with pytest.raises(ValueError, match="itself"):
        first.merge(first)
    with pytest.raises(TypeError):
        first.merge(trainscope.Timer())
    first.start(TimeType.EPOCH, gpu=True)
    first.reset()
    assert first.keys() == [] and first.keys(gpu=True) == []
    first.start(TimeType.EPOCH)  # the open region is gone with the reset
    first.end(TimeType.EPOCH)


def test_save_all_time_stats(tmp_path):
    timer = trainscope.CPUGPUTimer()
    timer.start(TimeType.EPOCH)
    timer.end(TimeType.EPOCH)
    path = tmp_path / "stats.txt"
    timer.save_all_time_stats(path)
    assert path.read_text() == timer.format_all_time_stats()
    with pytest.raises(FileExistsError):
        timer.save_all_time_stats(path)


def test_scope_passes_the_gpu_flag():
    timer = trainscope.CPUGPUTimer()
    with timer.scope(TimeType.FORWARD, gpu=True):
        with pytest.raises(ValueError, match="started with gpu=True"):
            timer.end(TimeType.FORWARD)
    assert timer.get_time_stats(TimeType.FORWARD).count == 1


@needs_gpu
def test_gpu_regions_are_timed_with_events():
    timer = trainscope.CPUGPUTimer(require_gpu=True)
    for _ in range(5):
        timer.start(TimeType.BATCH, gpu=True)
        timer.end(TimeType.BATCH, gpu=True)
    timer.complete_all()
    assert timer.outstanding() == 0
    assert timer.get_time_stats(TimeType.BATCH, gpu=True).count == 5
    assert timer.events_created() >= 2
