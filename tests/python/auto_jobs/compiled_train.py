"""A torch.compile'd model trained by a plain loop, for `trainscope run --auto`
(tests/python/test_auto.py; torch 2.x):

    python compiled_train.py [--steps N] [--part]

An MLP compiled whole (default), or, with --part, a model whose `body` alone is
compiled (its layer keys must read `layer/body`, never `_orig_mod`). Backend
"eager": Dynamo captures the graphs (what instrumentation could break) without
generating code. Prints one JSON line: Dynamo's unique graphs and graph breaks, the
steps done.
"""

import argparse
import json
import sys

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--part", action="store_true")
    args = parser.parse_args()
    import torch._dynamo  # pylint: disable=import-outside-toplevel
    from torch._dynamo.utils import counters  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    if args.part:
        model = nn.Module()
        model.stem = nn.Linear(16, 32)
        model.body = torch.compile(nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU()),
                                   backend="eager")
        model.head = nn.Linear(32, 4)
        model.forward = lambda x: model.head(model.body(model.stem(x)))
        net = model
    else:
        net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 32),
                                                                         nn.ReLU()),
                            nn.Linear(32, 4))
        model = torch.compile(net, backend="eager")
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    for _ in range(args.steps):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    out = {"steps": args.steps,
           "graphs": int(counters["stats"]["unique_graphs"]),
           "graph_breaks": int(sum(counters["graph_break"].values())),
           "break_reasons": sorted(counters["graph_break"])[:5]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
