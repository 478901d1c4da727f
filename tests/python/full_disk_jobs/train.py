"""A training whose region rows fill its run directory's disk (a small tmpfs).

    python train.py MODE FULL_MARKER GO_MARKER

MODE: "with" (with trainscope.start_run()), "plain" (start_run() never ended:
the run ends at exit) or "raise" (with start_run(), then an exception).
After the last step it creates FULL_MARKER (outside the full disk) and waits
for GO_MARKER, so the test can read the live run on the full disk.
"""

import os
import sys
import time

import trainscope

STEPS = 3000
REGIONS_PER_STEP = 100


def train():
    tmr = trainscope.Timer()  # attached to the active run
    for step in range(STEPS):
        for _ in range(REGIONS_PER_STEP):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
        trainscope.log_metric("loss", 1.0 / (step + 1), step=step)
    time.sleep(0.5)  # a flush or two: the rows reach the (full) disk
    with open(sys.argv[2], "w", encoding="utf-8") as full:
        full.write(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    mode = sys.argv[1]
    if mode == "plain":
        trainscope.start_run(run_name="full-disk")
        train()
        return
    with trainscope.start_run(run_name="full-disk"):
        train()
        if mode == "raise":
            raise ValueError("boom after the disk filled")


if __name__ == "__main__":
    main()
