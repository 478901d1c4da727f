"""A compute-bound job with no defect: a frozen backbone (`--backbone` layers of
`--width` matmuls on a batch of `--batch`, forward only) and a trainable head
(forward, backward, optimizer), one CPU thread, batches from memory through the
timed loader (the data wait is measured and near 0). By construction the step is
compute (FORWARD the largest phase: the backbone has no backward) and its memory
flat: COMPUTE-BOUND(forward) and no INPUT-BOUND, STRAGGLER or MEMORY-CREEP.

Its step time is steady as long as the CPU is not shared: on a busy machine other
processes slow the matmuls down as they come and go. `--backbone-ms T` runs the
backbone where the host only waits for it, as on a GPU (a wait of T ms instead of
the matmuls): then the step time is steady by construction, whatever else runs,
and the job has no THROUGHPUT-DRIFT either (the head still computes on the CPU).
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainscope
import _job


def main():
    p = _job.parser(__doc__)
    p.add_argument("--backbone", type=int, default=4, help="frozen layers (forward only)")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=48)
    p.add_argument("--backbone-ms", type=float, default=0.0,
                   help="> 0: the backbone is a wait of this long (as on a GPU), not matmuls")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = [layer for _ in range(args.backbone)
              for layer in (torch.nn.Linear(args.width, args.width), torch.nn.ReLU())]
    backbone = torch.nn.Sequential(*layers).requires_grad_(False)  # frozen: forward only
    head = torch.nn.Linear(args.width, 10)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(args.batch * 4, args.width),
                         torch.randint(0, 10, (args.batch * 4,)))
    loader = DataLoader(data, batch_size=args.batch, num_workers=0)
    tmr = trainscope.Timer()
    step = 0
    while step < args.steps:
        for inputs, targets in tmr.timed(loader):
            if step == args.steps:
                break
            with tmr.scope(trainscope.TimeType.BATCH):
                with tmr.scope(trainscope.TimeType.FORWARD):
                    if args.backbone_ms > 0:
                        _job.wait(args.backbone_ms / 1e3)
                        features = inputs
                    else:
                        features = backbone(inputs)
                    loss = torch.nn.functional.cross_entropy(head(features), targets)
                with tmr.scope(trainscope.TimeType.BACKWARD):
                    optimizer.zero_grad()
                    loss.backward()
                with tmr.scope("OPTIMIZER"):
                    optimizer.step()
            step += 1


if __name__ == "__main__":
    main()
