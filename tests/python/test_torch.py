"""trainscope.torch: Deep500's timer_torch. CUDA checks skip without a GPU."""

import pytest

torch = pytest.importorskip("torch")

import trainscope  # noqa: E402  (after the skip: this module needs torch)
import trainscope.torch as timer  # noqa: E402

CUDA = torch.cuda.is_available() and trainscope.CPUGPUTimer().gpu_available()

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def test_reexports_everything_with_a_torch_cpu_gpu_timer():
    for name in trainscope.__all__:
        assert hasattr(timer, name), name
    assert timer.TimeType is trainscope.TimeType
    assert timer.Timer is trainscope.Timer
    assert timer.CPUGPUTimer is not trainscope.CPUGPUTimer
    assert issubclass(timer.CPUGPUTimer, trainscope.CPUGPUTimer)
    # ... and adds the zero-code instrumentation (docs/auto.md).
    assert set(timer.__all__) == set(trainscope.__all__) | {"instrument", "Instrumentation",
                                                             "capture_on_anomaly"}


def test_torch_timer_times_regions_like_the_base_one():
    tmr = timer.CPUGPUTimer(warmup=0)
    tmr.start(timer.TimeType.BATCH, gpu=True)
    torch.ones(64, 64) @ torch.ones(64, 64)
    tmr.end(timer.TimeType.BATCH, gpu=True)
    assert tmr.get_time_stats(timer.TimeType.BATCH).count == 1
    with pytest.raises(ValueError, match="gpu flag mismatch"):
        tmr.start(timer.TimeType.FORWARD, gpu=True)
        tmr.end(timer.TimeType.FORWARD)


@pytest.mark.skipif(not CUDA, reason="needs torch with CUDA and a CUDA build of trainscope")
def test_events_are_recorded_on_torchs_current_stream():
    tmr = timer.CPUGPUTimer(require_gpu=True)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        tmr.start(timer.TimeType.FORWARD, gpu=True)
        torch.cuda._sleep(50_000_000)  # pylint: disable=protected-access  (~25 ms of GPU time)
        tmr.end(timer.TimeType.FORWARD, gpu=True)
    tmr.complete_all()
    # On the legacy default stream the events would not wait for `side`'s
    # kernel (torch's streams do not synchronize with it), so the GPU time
    # would be about zero; on `side` it spans the kernel.
    assert tmr.get_time_stats(timer.TimeType.FORWARD, gpu=True).min > 5e-3


@pytest.mark.skipif(not CUDA, reason="needs torch with CUDA and a CUDA build of trainscope")
def test_an_explicit_stream_wins_over_the_current_stream():
    tmr = timer.CPUGPUTimer(require_gpu=True)
    side = torch.cuda.Stream()
    idle = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        tmr.start(timer.TimeType.IO, gpu=True, stream=idle)
        torch.cuda._sleep(50_000_000)  # pylint: disable=protected-access
        tmr.end(timer.TimeType.IO, gpu=True, stream=idle.cuda_stream)
    tmr.complete_all()
    # The events went to `idle`, which has no work: not the ~25 ms on `side`.
    assert tmr.get_time_stats(timer.TimeType.IO, gpu=True).max < 5e-3


@pytest.mark.skipif(not CUDA, reason="needs torch with CUDA and a CUDA build of trainscope")
def test_gpu_time_matches_torch_cuda_events_on_the_same_work():
    tmr = timer.CPUGPUTimer(require_gpu=True)
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        x @ x  # warm-up: cuBLAS handle and kernel selection stay out of the numbers
    torch.cuda.synchronize()
    reference = []
    for _ in range(20):
        before = torch.cuda.Event(enable_timing=True)
        after = torch.cuda.Event(enable_timing=True)
        before.record()
        tmr.start(timer.TimeType.FORWARD, gpu=True)
        x @ x
        tmr.end(timer.TimeType.FORWARD, gpu=True)
        after.record()
        after.synchronize()
        reference.append(before.elapsed_time(after) / 1e3)
    ours = tmr.get_time(timer.TimeType.FORWARD, gpu=True)
    assert len(ours) == len(reference)
    for mine, theirs in zip(ours, reference):
        # Our events sit inside torch's, on the same stream: never longer, and
        # within 1% or 2 us of them.
        assert mine <= theirs + 1e-6
        assert abs(mine - theirs) <= max(0.01 * theirs, 2e-6)
