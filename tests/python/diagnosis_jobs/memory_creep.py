"""A job whose memory grows by a known amount per step: each step keeps a
reference to a new bytearray of `--mb-per-step` MB (10^6 bytes, as the RSS
readings), every page written, so the process RSS grows by that much per step:
MEMORY-CREEP(host), slope = mb_per_step * 1,000 MB per 1,000 steps. The step
itself waits `--step-ms` (FORWARD, BACKWARD). RSS is read by `trainscope run`'s
hardware sampling (run it with --interval 0.2 for enough readings).
"""

import time

import trainscope
import _job

PAGE = 4096


def main():
    p = _job.parser(__doc__)
    p.add_argument("--mb-per-step", type=float, default=1.0)
    p.add_argument("--step-ms", type=float, default=20.0)
    args = p.parse_args()
    size = int(args.mb_per_step * 1e6)
    step_s = args.step_ms / 1e3
    kept = []  # the leak
    tmr = trainscope.Timer()
    for _ in range(args.steps):
        began = time.perf_counter()
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.FORWARD):
                chunk = bytearray(size)
                chunk[::PAGE] = b"\x01" * len(range(0, size, PAGE))  # resident, not just mapped
                kept.append(chunk)
                _job.wait_until(began + 0.6 * step_s)
            with tmr.scope(trainscope.TimeType.BACKWARD):
                _job.wait_until(began + step_s)


if __name__ == "__main__":
    main()
