"""A neighbour that really competes for the CPU, for the benches that need one
(compare_calibration.py, diagnosis_detection.py).

Linux autogroup (on where AUTOGROUP reads 1) schedules each session as one group:
`trainscope run` gives its command a session of its own, so a burner started in
another session shares the CPUs with the job's session as one group and barely slows
the job (the diagnosis bench's HOST-PRESSURE case found 1 run in 20 on a quiet machine,
rightly: every step of its job had a wait of 0). A neighbour on a shared runner is in no
common group with the job, so NoAutogroup switches autogroup off while a bench runs,
where the process may (root), and puts it back after; `state` says what was done.
"""

import subprocess
import sys
import time

AUTOGROUP = "/proc/sys/kernel/sched_autogroup_enabled"


class Burner:
    """`processes` processes spinning, unpinned, while the block runs (none when 0)."""

    def __init__(self, processes, python=sys.executable):
        self.count = processes
        self.python = python
        self.procs = []

    def __enter__(self):
        self.procs = [subprocess.Popen([self.python, "-c", "while True: pass"])
                      for _ in range(self.count)]
        if self.procs:
            time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


class NoAutogroup:
    """Autogroup off while the block runs (see the top of this file)."""

    def __enter__(self):
        self.before = None
        try:
            with open(AUTOGROUP, encoding="utf-8") as f:
                self.before = f.read().strip()
        except OSError:
            self.state = "no autogroup on this kernel"
            return self
        if self.before == "0":
            self.state = "autogroup off"
            return self
        try:
            with open(AUTOGROUP, "w", encoding="utf-8") as f:
                f.write("0")
            self.state = "autogroup switched off while it ran"
        except OSError as e:
            self.state = f"autogroup on (could not switch it off: {e}): the burner may not compete"
            self.before = None
        return self

    def __exit__(self, *exc):
        if self.before not in (None, "0"):
            with open(AUTOGROUP, "w", encoding="utf-8") as f:
                f.write(self.before)
