"""The GPU paths of the bindings on a simulated GPU (virtual clock, any machine).

CPUGPUTimer(_core._SimulatedGpu()) times gpu=True regions with events
of a _SimulatedGpu: an event recorded on a stream fires when the work
enqueued on that stream before it is done, so GPU times show which stream the
bindings recorded on.
"""

import io
import sys
import types

import pytest

import trainscope
from trainscope import TimeType, _core

MS = 1_000_000  # ns


def simulated(completion_delay_ns=0, harvest_per_end=4):
    gpu = _core._SimulatedGpu()  # pylint: disable=protected-access
    gpu.set_completion_delay(completion_delay_ns)
    return gpu, trainscope.CPUGPUTimer(gpu, harvest_per_end=harvest_per_end)


def gpu_region(tmr, gpu, key, work_ns, work_stream, **kwargs):
    tmr.start(key, gpu=True, **kwargs)
    gpu.enqueue_work(work_stream, work_ns)
    tmr.end(key, gpu=True, **kwargs)


def test_events_go_to_the_stream_named_in_the_call():
    gpu, tmr = simulated()
    assert tmr.gpu_available()
    gpu_region(tmr, gpu, TimeType.FORWARD, 5 * MS, work_stream=7, stream=7)
    gpu_region(tmr, gpu, TimeType.BACKWARD, 5 * MS, work_stream=8, stream=7)
    assert tmr.get_time(TimeType.FORWARD, gpu=True) == [pytest.approx(5e-3, rel=1e-12)]
    assert tmr.get_time(TimeType.BACKWARD, gpu=True) == [0.0]  # the work was elsewhere
    assert gpu.records() == 4


def test_timer_stream_and_stream_provider():
    gpu, tmr = simulated()
    tmr.set_stream(3)
    gpu_region(tmr, gpu, TimeType.BATCH, 2 * MS, work_stream=3)
    tmr._set_stream_provider(lambda: 4)  # pylint: disable=protected-access
    gpu_region(tmr, gpu, TimeType.IO, 3 * MS, work_stream=4)
    gpu_region(tmr, gpu, TimeType.OTHER, 3 * MS, work_stream=4, stream=3)  # explicit wins
    assert tmr.get_time_stats(TimeType.BATCH, gpu=True).mean == pytest.approx(2e-3, rel=1e-12)
    assert tmr.get_time_stats(TimeType.IO, gpu=True).mean == pytest.approx(3e-3, rel=1e-12)
    assert tmr.get_time_stats(TimeType.OTHER, gpu=True).mean == 0.0


def test_stream_provider_errors_propagate_and_change_nothing():
    gpu, tmr = simulated()

    def broken():
        raise OSError("no stream")

    tmr._set_stream_provider(broken)  # pylint: disable=protected-access
    with pytest.raises(OSError, match="no stream"):
        tmr.start(TimeType.BATCH, gpu=True)
    tmr._set_stream_provider(lambda: "stream?")  # pylint: disable=protected-access
    with pytest.raises(TypeError, match="stream must be"):
        tmr.start(TimeType.BATCH, gpu=True)
    tmr._set_stream_provider(None)  # pylint: disable=protected-access
    gpu_region(tmr, gpu, TimeType.BATCH, MS, work_stream=0)
    assert tmr.get_time_stats(TimeType.BATCH, gpu=True).count == 1
    assert gpu.records() == 2


def test_reads_wait_for_outstanding_regions():
    gpu, tmr = simulated(completion_delay_ns=10**9)
    for _ in range(3):
        gpu_region(tmr, gpu, TimeType.BATCH, MS, work_stream=0)
    assert tmr.outstanding() == 3 and tmr.harvest() == 0
    stats = tmr.get_time_stats(TimeType.BATCH, gpu=True)  # waits, without the GIL
    assert stats.count == 3 and stats.mean == pytest.approx(1e-3, rel=1e-12)
    assert tmr.outstanding() == 0 and tmr.blocking_waits() >= 1
    gpu_region(tmr, gpu, TimeType.BATCH, MS, work_stream=0)
    tmr.complete_all()
    assert tmr.get_time_stats(TimeType.BATCH, gpu=True).count == 4


def test_finished_regions_are_harvested_without_waiting():
    gpu, tmr = simulated(harvest_per_end=0)
    gpu_region(tmr, gpu, TimeType.BATCH, MS, work_stream=0)
    assert tmr.outstanding() == 1
    gpu.advance(2 * MS)
    assert tmr.harvest() == 1 and tmr.outstanding() == 0 and tmr.blocking_waits() == 0


def test_flag_mismatch_leaves_the_gpu_region_open_and_nothing_pending():
    gpu, tmr = simulated()
    tmr.start(TimeType.FORWARD, gpu=True)
    with pytest.raises(ValueError, match="gpu flag mismatch"):
        tmr.end(TimeType.FORWARD)
    assert tmr.outstanding() == 0 and gpu.records() == 1
    tmr.end(TimeType.FORWARD, gpu=True)
    assert tmr.get_time_stats(TimeType.FORWARD, gpu=True).count == 1


def test_printing_and_merging_complete_outstanding_regions():
    gpu, tmr = simulated(completion_delay_ns=10**9)
    gpu_region(tmr, gpu, TimeType.FORWARD, MS, work_stream=0)
    out = io.StringIO()
    tmr.print_all_time_stats(out)
    names = [line for line in out.getvalue().splitlines() if not line.startswith("min: ")]
    assert names == ["CPU", "FORWARD", "---", "GPU", "FORWARD", "---"]
    other_gpu, other = simulated(completion_delay_ns=10**9)
    gpu_region(other, other_gpu, TimeType.FORWARD, MS, work_stream=0)
    gpu_region(tmr, gpu, TimeType.FORWARD, MS, work_stream=0)
    tmr.merge(other)
    assert tmr.get_time_stats(TimeType.FORWARD, gpu=True).count == 3
    assert other.outstanding() == 0


def test_logged_means_name_cpu_and_gpu_keys_like_deep500(monkeypatch):
    gpu, tmr = simulated()
    gpu_region(tmr, gpu, TimeType.BATCH, 4 * MS, work_stream=0)
    tmr.start("data_aug")
    tmr.end("data_aug")
    logged = {}
    monkeypatch.setitem(sys.modules, "mlflow", types.SimpleNamespace(log_metrics=logged.update))
    tmr.log_mlflow_all("train")
    assert logged == {
        "train/CPU/BATCH": tmr.get_time_stats(TimeType.BATCH).mean,
        "train/CPU/data_aug": tmr.get_time_stats("data_aug").mean,
        "train/GPU/BATCH": pytest.approx(4e-3, rel=1e-12),
    }


def _union_run(root, steps, period_s=0.0):
    """A run of `steps` steps on the simulated GPU, each step on the device: FORWARD [0, 3)
    ms with LOSS [2, 3) inside it, the stream idle 5 ms, BACKWARD [8, 10) on a second stream
    beside OPTIMIZER [8, 10): spans 3+1+2+2 = 8 ms, busy 5 ms; each step lasts at least
    period_s on the host's clock. Returns its directory."""
    import time  # pylint: disable=import-outside-toplevel
    gpu, tmr = simulated(harvest_per_end=0)
    with trainscope.start_run(root=root) as run:
        run.attach(tmr)
        for _ in range(steps):
            tmr.start(TimeType.BATCH)
            tmr.start(TimeType.FORWARD, gpu=True, stream=0)
            gpu.enqueue_work(0, 2 * MS)
            gpu_region(tmr, gpu, "LOSS", MS, work_stream=0, stream=0)
            tmr.end(TimeType.FORWARD, gpu=True, stream=0)
            gpu.advance(8 * MS)
            tmr.start(TimeType.BACKWARD, gpu=True, stream=5)
            gpu_region(tmr, gpu, "OPTIMIZER", 2 * MS, work_stream=0, stream=0)
            gpu.enqueue_work(5, 2 * MS)
            tmr.end(TimeType.BACKWARD, gpu=True, stream=5)
            gpu.advance(10 * MS)
            tmr.harvest()
            if period_s:
                time.sleep(period_s)
            tmr.end(TimeType.BATCH)
        tmr.complete_all()
        return run.dir


def test_a_run_records_device_starts_and_steps_measure_the_device_union(tmp_path, monkeypatch):
    """Issue 39: each GPU row's device start and stream reach read_run, and Run.steps
    holds the union of a step's device intervals beside the event spans summed:
    FORWARD [0, 3) ms with LOSS [2, 3) inside it, the stream idle 5 ms, BACKWARD
    [8, 10) on a second stream beside OPTIMIZER [8, 10): spans 3+1+2+2 = 8 ms,
    busy 5 ms."""
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    read = trainscope.read_run(_union_run(tmp_path, steps=4))
    regions = read.regions
    gpu_rows = regions[regions.device == "GPU"]
    assert len(gpu_rows) == 16 and not gpu_rows.gpu_start_ns.isna().any()
    assert regions[regions.device == "CPU"].gpu_start_ns.isna().all()
    by_key = {k: list(gpu_rows[gpu_rows.key == k].gpu_start_ns) for k in
              ("FORWARD", "LOSS", "BACKWARD", "OPTIMIZER")}
    for fwd, loss, bwd, opt in zip(*by_key.values()):
        assert (loss - fwd, bwd - fwd, opt - fwd) == (2 * MS, 8 * MS, 8 * MS)
    streams = {k: set(gpu_rows[gpu_rows.key == k].stream) for k in ("FORWARD", "BACKWARD")}
    assert streams["FORWARD"] == {0} and len(streams["BACKWARD"]) == 1
    assert streams["BACKWARD"] != {0}
    steps = read.steps
    assert len(steps) == 4
    assert steps.gpu_busy_s.tolist() == pytest.approx([8e-3] * 4, rel=1e-9)
    assert steps.gpu_union_s.tolist() == pytest.approx([5e-3] * 4, rel=1e-9)


def test_compare_has_each_steps_gpu_busy_share_from_the_device_union(tmp_path, monkeypatch):
    """Issue 39: compare's `gpu-busy` row is the steps room's per-step busy share (the union
    of the device intervals over the period: here 5 ms of a step of about 25 ms), not the
    event spans' (8 ms)."""
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    run_dir = _union_run(tmp_path, steps=12, period_s=0.025)
    steps = trainscope.read_run(run_dir).steps
    union_share = (steps.gpu_union_s / steps.period_s).median()
    spans_share = (steps.gpu_busy_s / steps.period_s).median()
    rows = trainscope.compare(run_dir, run_dir)
    busy = rows[rows["quantity"] == "gpu-busy"]
    assert len(busy) == 1, list(rows["quantity"])
    median = busy.iloc[0]["median_a"]
    assert median == pytest.approx(union_share, rel=0.1)
    assert median < 0.8 * spans_share
