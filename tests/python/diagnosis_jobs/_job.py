"""What the diagnosis jobs share: the command line of the built-in quantities and
the one precise wait. Each job is a training loop whose truth is known by
construction (tests/python/test_diagnosis.py, bench/diagnosis_detection.py);
they run under `trainscope run`, which the Timer joins (TRAINSCOPE_RUN_DIR).
"""

import argparse
import time


def parser(doc):
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="training steps")
    return p


def wait(seconds):
    """Waits `seconds` without using the CPU (as a GPU kernel or a remote read would):
    the built-in quantity of the job, whatever else runs on the machine."""
    if seconds > 0:
        time.sleep(seconds)


def wait_until(deadline):
    """Waits until time.perf_counter() reaches `deadline`: a step's phases waiting
    up to deadlines from the step's start add one late wake-up per step on a busy
    machine, not one per phase."""
    wait(deadline - time.perf_counter())
