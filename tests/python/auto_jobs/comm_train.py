"""A two-rank DDP job (gloo, CPU) with no trainscope in it, for `trainscope run
--auto` (tests/python/test_comm.py): two gradient buckets, the first (the last
layer's) ready while backward still computes the first layer's for
--backward-s; a communication hook of the job's own that delays a bucket's
all-reduce by --delay-s after it completes (--delay-bucket: which); --late-s:
rank 1 enters each step's all-reduce that late; --hook: none (DDP's default,
timed by trainscope's own), before (registered before the first forward) or
after (after the first step). Run by diagnosis_jobs/launch2.py as two ranks.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel


class SlowBackward(torch.autograd.Function):
    """The identity, whose backward takes `seconds` (backward's compute between the
    two buckets)."""

    @staticmethod
    def forward(ctx, x, seconds):  # pylint: disable=arguments-differ
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        if ctx.seconds:
            time.sleep(ctx.seconds)
        return grad, None


class Model(torch.nn.Module):
    def __init__(self, backward_s):
        super().__init__()
        self.first = torch.nn.Linear(64, 64)
        # Over DDP's first bucket cap (1 MiB): its gradients are a bucket of their own.
        self.last = torch.nn.Linear(64, 4200)
        self.backward_s = backward_s

    def forward(self, x):  # pylint: disable=arguments-differ
        return self.last(SlowBackward.apply(self.first(x), self.backward_s))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--delay-bucket", type=int, default=1, help="0: the first ready")
    parser.add_argument("--backward-s", type=float, default=0.0)
    parser.add_argument("--late-s", type=float, default=0.0)
    parser.add_argument("--hook", choices=("none", "before", "after"), default="none")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(Model(args.backward_s))
    calls = {"hook": 0}

    def delayed_hook(state, bucket):
        calls["hook"] += 1
        future = default_hooks.allreduce_hook(state, bucket)
        if not args.delay_s or bucket.index() != args.delay_bucket:
            return future

        def wait(done):
            time.sleep(args.delay_s)
            return done.value()
        return future.then(wait)

    if args.hook == "before":
        model.register_comm_hook(None, delayed_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 64)
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        if rank == 1 and args.late_s:
            time.sleep(args.late_s)
        loss.backward()
        optimizer.step()
        if step == 0 and args.hook == "after":
            model.register_comm_hook(None, delayed_hook)
    if args.hook != "none":
        # The job's own hook ran for every bucket it was there for.
        assert calls["hook"] >= 2, calls
    total = torch.tensor([float(calls["hook"])])
    dist.all_reduce(total)
    print(f"rank {rank} hook calls {calls['hook']} total {total.item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
