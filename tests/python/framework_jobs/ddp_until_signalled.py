"""A two-rank gloo DDP job that trains until it is signalled (tests/python/test_job_signals.py).

Each rank reads batches from a DataLoader with 2 workers (forked after the
process group exists: they hold its sockets too), times each step with a
trainscope.Timer (so the rank joins the launcher's run and trainscope's
SIGTERM/SIGHUP handlers are installed) and prints "rank R step N" every 20 steps.
"""

import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

import trainscope


class Endless(Dataset):
    def __len__(self):
        return 10**9

    def __getitem__(self, index):
        time.sleep(0.002)
        return torch.randn(16), torch.randn(1)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Endless(), batch_size=8, num_workers=2)
    timer = trainscope.Timer()
    print(f"rank {rank} pid {os.getpid()}", flush=True)
    for step, (x, y) in enumerate(loader):
        with timer.scope("BATCH"):
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if step % 20 == 0:
            print(f"rank {rank} step {step}", flush=True)


if __name__ == "__main__":
    main()
