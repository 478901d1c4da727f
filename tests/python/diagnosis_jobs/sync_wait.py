"""A job whose host waits for its device every step: FORWARD waits `--compute-ms`
(the compute, as a GPU would run it) and then a `SYNC` region waits `--sync-ms`
(the host's wait for the device: `loss.item()` on a CUDA tensor, timed as SYNC by
`--auto` on a GPU; here timed by hand, as a CPU machine has no device to wait
for). By construction the step's sync share is sync / (compute + sync): past
`wait_heavy_share` (0.40) it is WAIT-HEAVY with that share, below 0.5 of it
COMPUTE-BOUND(forward) (bench/diagnosis_detection.py).
"""

import trainscope
import _job


def main():
    p = _job.parser(__doc__)
    p.add_argument("--compute-ms", type=float, default=10.0)
    p.add_argument("--sync-ms", type=float, default=40.0)
    args = p.parse_args()
    tmr = trainscope.Timer()
    for _ in range(args.steps):
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.FORWARD):
                _job.wait(args.compute_ms / 1e3)
            with tmr.scope("SYNC"):
                _job.wait(args.sync_ms / 1e3)


if __name__ == "__main__":
    main()
