"""A training loop with neither a DataLoader nor torch.optim, for `trainscope run --auto`
(tests/python/test_auto.py), shaped as pytorch/examples' word_language_model:

    python manual_loop.py [-b BATCH] [-e EPOCHS] [-n BATCHES] [--lr LR] [--two-models]
                          [--raise-in-forward] [--eval]

Batches are sliced from one tensor, the update is `p.data.add_(p.grad, alpha=-lr)`,
the loss is a criterion module (nn.CrossEntropyLoss), the options are argparse short
ones. --two-models: a second model of another class (an auxiliary head) is called
outermost too, so FORWARD mixes two callers. --raise-in-forward: a child module of the
model raises KeyboardInterrupt in its forward at the third batch (the traceback shows
trainscope's frames, with --auto=layers one for the model's call and one for the child's). Prints one JSON line with what it did.
"""

import argparse
import json
import sys

import torch
from torch import nn


class Check(nn.Module):
    def __init__(self, raise_at=None):
        super().__init__()
        self.raise_at = raise_at
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.raise_at is not None and self.calls == self.raise_at:
            raise KeyboardInterrupt("stopped in forward")
        return x


class Net(nn.Module):
    def __init__(self, raise_at=None):
        super().__init__()
        self.check = Check(raise_at)
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.decoder = nn.Linear(32, 4)

    def forward(self, x):
        return self.decoder(self.encoder(self.check(x)))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 4)

    def forward(self, x):
        return self.linear(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", "--batch-size", type=int, default=4)
    parser.add_argument("-e", "--epochs", type=int, default=1)
    parser.add_argument("-n", dest="batches", type=int, default=12)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--two-models", action="store_true")
    parser.add_argument("--raise-in-forward", action="store_true")
    parser.add_argument("--eval", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Net(raise_at=3 if args.raise_in_forward else None)
    head = Head()
    criterion = nn.CrossEntropyLoss()
    data = torch.randn(args.batches * args.batch_size, 16)
    target = torch.randint(0, 4, (args.batches * args.batch_size,))
    done = {"backwards": 0, "forwards": 0, "losses": 0, "eval_forwards": 0}
    params = list(model.parameters()) + (list(head.parameters()) if args.two_models else [])
    for _ in range(args.epochs):
        for i in range(0, data.size(0), args.batch_size):
            x, y = data[i:i + args.batch_size], target[i:i + args.batch_size]
            for p in params:
                p.grad = None
            out = model(x)
            done["forwards"] += 1
            if args.two_models:
                out = out + head(x)
                done["forwards"] += 1
            loss = criterion(out, y)
            done["losses"] += 1
            loss.backward()
            done["backwards"] += 1
            with torch.no_grad():
                for p in params:
                    p.data.add_(p.grad, alpha=-args.lr)
        if args.eval:
            with torch.no_grad():
                for i in range(0, data.size(0), args.batch_size):
                    criterion(model(data[i:i + args.batch_size]), target[i:i + args.batch_size])
                    done["eval_forwards"] += 1
    sys.stdout.write(json.dumps(done) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
