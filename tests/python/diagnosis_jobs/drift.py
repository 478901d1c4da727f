"""A job that slows down over time: step i waits start + (end - start) * i / (steps - 1)
milliseconds (FORWARD), so the step time grows linearly from `--start-ms` to
`--end-ms` over the run: THROUGHPUT-DRIFT, steps/s falling by 1 - start/end.
Long steps (40 to 80 ms) keep the late wake-ups of a busy machine (a few ms added
to every step) small against the growth.
"""

import trainscope
import _job


def main():
    p = _job.parser(__doc__)
    p.add_argument("--start-ms", type=float, default=40.0)
    p.add_argument("--end-ms", type=float, default=80.0)
    args = p.parse_args()
    tmr = trainscope.Timer()
    for step in range(args.steps):
        ms = args.start_ms + (args.end_ms - args.start_ms) * step / max(1, args.steps - 1)
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.FORWARD):
                _job.wait(ms / 1e3)


if __name__ == "__main__":
    main()
