"""A plain PyTorch training script with no trainscope in it, for `trainscope run --auto`
(tests/python/test_auto.py):

    python plain_train.py [--batches N] [--epochs E] [--workers W] [--eval] [--ddp]
                          [--gan] [--no-loader] [--accumulate K] [--device cuda]

A small MLP on synthetic data; its Dataset calls an nn.Module in __getitem__ (as
torchvision transforms do), so a DataLoader worker that recorded would show as extra
FORWARD rows. --ddp: torch.distributed (gloo) with RANK/WORLD_SIZE from the
environment (tests/python/diagnosis_jobs/launch2.py or torchrun), DDP wrapper and an
explicit all_reduce per epoch. --gan: the model is called twice per step.
--no-loader: batches made in the loop (steps delimited by the optimizer).
--device cuda: the model and each batch on the GPU (every rank on cuda:0: two ranks
share one GPU; --ddp stays on gloo, which reduces CUDA tensors too).
Prints one JSON line with what it did, for the test to compare with the run.
"""

import argparse
import json
import os
import sys

import torch
from torch import nn


class Noise(nn.Module):
    def forward(self, x):
        return x + 0.01 * torch.randn_like(x)


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
        self.transform = Noise()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(16, generator=g)
        return self.transform(x), torch.tensor(i % 4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--ddp", action="store_true")
    parser.add_argument("--gan", action="store_true")
    parser.add_argument("--no-loader", action="store_true")
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    if args.ddp:
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        dist.init_process_group("gloo")
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 32), nn.ReLU()),
                          nn.Linear(32, 4)).to(args.device)
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    batch = 4
    loader = torch.utils.data.DataLoader(Data(args.batches * batch), batch_size=batch,
                                         num_workers=args.workers)
    done = {"steps": 0, "optimizer_steps": 0, "forwards": 0, "eval_forwards": 0, "epochs": 0}
    for _ in range(args.epochs):
        if args.no_loader:
            batches = [(torch.randn(batch, 16), torch.randint(0, 4, (batch,)))
                       for _ in range(args.batches)]
        else:
            batches = loader
        for i, (x, y) in enumerate(batches):
            x, y = x.to(args.device), y.to(args.device)
            out = model(x)
            done["forwards"] += 1
            if args.gan:
                out = out + model(x)
                done["forwards"] += 1
            loss = loss_fn(out, y) / args.accumulate
            done["forwards"] += 1  # the loss module is a module call too
            loss.backward()
            if (i + 1) % args.accumulate == 0:
                optimizer.step()
                optimizer.zero_grad()
                done["optimizer_steps"] += 1
            done["steps"] += 1
        if args.ddp:
            import torch.distributed as dist  # pylint: disable=import-outside-toplevel
            t = torch.ones(1)
            dist.all_reduce(t)
        if args.eval:
            with torch.no_grad():
                for x, _ in loader:
                    model(x.to(args.device))
                    done["eval_forwards"] += 1
        done["epochs"] += 1
    if args.ddp:
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        dist.destroy_process_group()
    done["rank"] = int(os.environ.get("RANK", "0"))
    # One write of the whole line: the ranks share this stdout.
    sys.stdout.write(json.dumps(done) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
