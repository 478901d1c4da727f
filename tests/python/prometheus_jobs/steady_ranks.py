"""One rank of a job whose steps are known by construction (start two with
../diagnosis_jobs/launch2.py): each step waits `--io-ms` for data (IO) and
computes `--forward-ms` (FORWARD), rank 1 `--rank1-extra-ms` longer; sleeps, so
the figures hold on a busy machine. Runs until the file `--stop` exists (or
`--steps` steps); with `--samples`/`--tokens` each step logs its work, with
`--flops` and `--peak-flops` the ledger has an MFU. tests/python/test_prometheus.py
scrapes it with Prometheus.
"""

import argparse
import os
import time

import trainscope


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--io-ms", type=float, default=20.0)
    p.add_argument("--forward-ms", type=float, default=30.0)
    p.add_argument("--rank1-extra-ms", type=float, default=15.0)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--stop", required=True)
    p.add_argument("--lr", type=float, default=0.1, help="a param (a label in the test)")
    p.add_argument("--samples", type=int, help="work per step (log_step_work)")
    p.add_argument("--tokens", type=int, help="work per step (log_step_work)")
    p.add_argument("--flops", type=float, help="FLOPs per step (log_step_flops)")
    p.add_argument("--peak-flops", type=float, help="the peak FLOP/s (the param work/peak_flops)")
    args = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    forward_s = (args.forward_ms + (args.rank1_extra_ms if rank == 1 else 0.0)) / 1e3
    tmr = trainscope.Timer()  # joins TRAINSCOPE_RUN_DIR as rank RANK
    if args.flops:
        trainscope.log_step_flops(args.flops)
    if args.peak_flops and rank == 0:
        trainscope.log_param("work/peak_flops", repr(args.peak_flops))
    work = args.samples is not None or args.tokens is not None
    for _ in range(args.steps):
        if os.path.exists(args.stop):
            break
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.IO):
                time.sleep(args.io_ms / 1e3)
            with tmr.scope(trainscope.TimeType.FORWARD):
                time.sleep(forward_s)
        if work:
            trainscope.log_step_work(samples=args.samples, tokens=args.tokens)


if __name__ == "__main__":
    main()
