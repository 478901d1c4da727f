"""What a label's capture costs a rank while no capture runs (issue 40, docs/auto.md,
"Anomaly capture").

    PYTHONPATH=<build>/python python bench/capture_request_cost.py [--rounds R]

Each AnomalyCapture (`--auto`, trainscope.torch.capture_on_anomaly()) runs a daemon thread
that looks at <run>/capture-request.json once a second (trainscope._anomaly._RequestPoller).
This times that look, median of R x 2,000 calls each: with no request file (one os.stat
that fails: the usual case), with the file unchanged (one os.stat), and the one read and
parse when the file changed (a file of three requests). The training thread's side is one
attribute read per step (the deque of labels asked): step() is timed with the poll on and
off, interleaved, median per call. One look a second: its share of a core is its time x 1/s.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

from trainscope._anomaly import AnomalyCapture, REQUEST_FILE

CALLS = 2000


def per_call(fn, calls=CALLS):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as run_dir:
        on = AnomalyCapture(run_dir, 0, steps=3, on_labels=True)
        off = AnomalyCapture(run_dir, 0, steps=3, on_labels=False)
        poller = on._poller  # pylint: disable=protected-access
        poller.stop()  # the thread stays out of the timing; the look is called here
        path = os.path.join(run_dir, REQUEST_FILE)
        doc = {"format": "trainscope.capture_request", "version": 1,
               "requests": [{"label": label, "step": 100 + i, "ranks": [1, 2], "time_ms": 0}
                            for i, label in enumerate(("STRAGGLER", "MEMORY-CREEP",
                                                       "THROUGHPUT-DRIFT"))]}
        absent, same, changed, step_on, step_off = [], [], [], [], []
        for _ in range(args.rounds):
            if os.path.exists(path):
                os.remove(path)
            absent.append(per_call(poller.poll))
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            poller.poll()
            same.append(per_call(poller.poll))

            def read_again():
                poller._stamp = None  # pylint: disable=protected-access
                poller.poll()
            changed.append(per_call(read_again, 200))
            # The step path: the ranks named are 1 and 2, this one is 0: nothing is asked.
            step_on.append(per_call(on.step, 20000))
            step_off.append(per_call(off.step, 20000))
        on.close()
        off.close()
    us = lambda v: f"{statistics.median(v) * 1e6:.2f} us"  # noqa: E731
    print(f"poll, no request file: {us(absent)} (one failed os.stat), once a second: "
          f"{statistics.median(absent) * 100:.5f}% of a core")
    print(f"poll, file unchanged:  {us(same)} (one os.stat)")
    print(f"poll, file changed:    {us(changed)} (read and parse, 3 requests; once per label)")
    print(f"step(), poll on:  {us(step_on)} per call; poll off: {us(step_off)} per call "
          f"(difference {(statistics.median(step_on) - statistics.median(step_off)) * 1e9:.0f} ns)")


if __name__ == "__main__":
    main()
