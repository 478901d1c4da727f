"""One rank of a two-rank gloo job (start it with launch2.py) in which rank
`--slow-rank` is slower by `--delay-ms` every step, in its forward
(`--slow forward`: a wait inside FORWARD) or in its loader (`--slow loader`: its
Dataset takes the delay to produce each batch, timed as IO by the timed loader).
The ranks then synchronise in COMM (the gradient all-reduce, outside the
compute phases), where the fast rank waits the delay. By construction:
STRAGGLER(compute or input, the slow rank), lag = the delay. `--slow none` is a
balanced two-rank job. Every step also computes for `--compute-ms` (a wait in
FORWARD, as a GPU would) plus a small model's real forward and backward.
`--capture-on-anomaly`: trainscope.torch.capture_on_anomaly() and .step() at each step's
end (tests/python/test_label_capture.py: STRAGGLER's capture, asked from code).
"""

import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

import trainscope
import _job


class Batches(Dataset):
    """Whole batches (batch_size=None), each taking `load_s` to produce."""

    def __init__(self, count, load_s):
        self.count = count
        self.load_s = load_s
        self.data = torch.randn(16, 32)

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        _job.wait(self.load_s)
        return self.data, self.data[:, :1]


def main():
    p = _job.parser(__doc__)
    p.add_argument("--slow", choices=["forward", "loader", "none"], default="forward")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--delay-ms", type=float, default=25.0)
    p.add_argument("--compute-ms", type=float, default=15.0)
    p.add_argument("--capture-on-anomaly", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == args.slow_rank
    delay_s = args.delay_ms / 1e3
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    load_s = delay_s if slow and args.slow == "loader" else 0.0
    loader = DataLoader(Batches(args.steps, load_s), batch_size=None, num_workers=0)
    tmr = trainscope.Timer()  # joins TRAINSCOPE_RUN_DIR as rank RANK
    world = dist.get_world_size()
    capture = None
    if args.capture_on_anomaly:
        from trainscope import torch as ts_torch  # pylint: disable=import-outside-toplevel
        capture = ts_torch.capture_on_anomaly(steps=3)
    for inputs, targets in tmr.timed(loader):
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.FORWARD):
                began = time.perf_counter()
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                # One wait (one wake-up) per step, the straggler's longer by the delay.
                _job.wait_until(began + args.compute_ms / 1e3 +
                                (delay_s if slow and args.slow == "forward" else 0.0))
            with tmr.scope(trainscope.TimeType.BACKWARD):
                optimizer.zero_grad()
                loss.backward()
            with tmr.scope(trainscope.TimeType.COMM):  # the fast rank waits here
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                    param.grad /= world
            with tmr.scope("OPTIMIZER"):
                optimizer.step()
        if capture is not None:
            capture.step()
    if capture is not None:
        capture.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
