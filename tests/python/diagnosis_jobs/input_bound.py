"""A DataLoader-bound job: `--workers` loader workers each take `--load-ms` for a
batch (a sleep in __getitem__: a slow read or decode), and the step computes for
`--compute-ms` (waits in FORWARD and BACKWARD, as a GPU would). The loader
delivers a batch every load/workers, the step needs compute of it, so every step
waits the rest: the data-wait share built in is 1 - compute * workers / load
(the defaults: 1 - 60 * 2 / 200 = 0.40). Long steps (100 ms) keep the late
wake-ups of a busy machine (a few ms) small against the share. Timed with the timed loader
(`tmr.timed(loader)`: IO and the step key `iteration`).
"""

import time

import torch
from torch.utils.data import DataLoader, Dataset

import trainscope
import _job


class SlowBatches(Dataset):
    """Whole batches (batch_size=None), each taking `load_s` to produce."""

    def __init__(self, count, load_s):
        self.count = count
        self.load_s = load_s

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        _job.wait(self.load_s)
        return torch.full((16, 8), float(index))


def built_in_share(load_ms, compute_ms, workers):
    return max(0.0, 1.0 - compute_ms * workers / load_ms)


def main():
    p = _job.parser(__doc__)
    p.add_argument("--load-ms", type=float, default=200.0)
    p.add_argument("--compute-ms", type=float, default=60.0)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(1)
    loader = DataLoader(SlowBatches(args.steps, args.load_ms / 1e3), batch_size=None,
                        num_workers=args.workers)
    tmr = trainscope.Timer()
    compute_s = args.compute_ms / 1e3
    for batch in tmr.timed(loader):
        began = time.perf_counter()
        with tmr.scope(trainscope.TimeType.FORWARD):
            batch.sum()
            _job.wait_until(began + 0.6 * compute_s)
        with tmr.scope(trainscope.TimeType.BACKWARD):
            _job.wait_until(began + compute_s)


if __name__ == "__main__":
    main()
