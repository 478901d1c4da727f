"""The durable record keeps every region of a fast loop: a burst and a sustained rate.

Counts rows of regions-0.csv, never speeds: the paced loop aims at 1M regions/s
and, on a slow machine, only takes longer.
"""

import os
import time

import pytest

import trainscope

BURST = 1_000_000
PACED_RATE = 1_000_000  # regions per second
PACED_SECONDS = 5
PACE_BATCH = 1000  # regions between two looks at the clock


pytestmark = pytest.mark.usefixtures("no_inherited_run")


def _region_rows(run_dir):
    """Data rows of the rank's regions file (lines after the header)."""
    lines = 0
    with open(os.path.join(run_dir, "regions-0.csv"), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            lines += block.count(b"\n")
    return lines - 1


def test_a_burst_of_a_million_empty_regions_leaves_a_million_rows(tmp_path, capfd):
    with trainscope.start_run(root=tmp_path, flush_interval=1.0) as run:
        tmr = trainscope.Timer()
        start, end, key = tmr.start, tmr.end, trainscope.TimeType.BATCH
        for _ in range(BURST):
            start(key)
            end(key)
    assert tmr.get_time_stats(key).count == BURST
    assert _region_rows(run.dir) == BURST
    assert "dropped" not in capfd.readouterr().err


def test_a_loop_paced_at_a_million_regions_per_second_leaves_every_row(tmp_path, capfd):
    batches = PACED_RATE * PACED_SECONDS // PACE_BATCH
    with trainscope.start_run(root=tmp_path, flush_interval=1.0) as run:
        tmr = trainscope.Timer()
        start, end, key = tmr.start, tmr.end, "paced"
        clock = time.perf_counter
        begin = clock()
        for batch in range(batches):
            due = begin + batch * PACE_BATCH / PACED_RATE
            while clock() < due:  # busy-wait: sleeping is far too coarse
                pass
            for _ in range(PACE_BATCH):
                start(key)
                end(key)
    assert tmr.get_time_stats(key).count == batches * PACE_BATCH
    assert _region_rows(run.dir) == batches * PACE_BATCH
    assert "dropped" not in capfd.readouterr().err
