"""A steady, real CPU training with no trainscope in it and no defect, for
`trainscope run --auto` (bench/diagnosis_detection.py: the false alarms): an MLP
(`--width` wide, `--layers` deep) trained with SGD on batches of `--batch` from a
DataLoader over tensors in memory, one CPU thread. Its step is compute (forward,
backward, optimizer), its data wait near 0 and its memory flat after the first
steps: COMPUTE-BOUND, and no INPUT-BOUND, STRAGGLER, MEMORY-CREEP, COMM-BOUND or
WAIT-HEAVY. Its step time follows the machine's other load (HOST-PRESSURE says so).
"""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = TensorDataset(torch.randn(args.batch * 8, args.width),
                         torch.randint(0, 10, (args.batch * 8,)))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=0)
    step = 0
    while step < args.steps:
        for inputs, targets in loader:
            if step == args.steps:
                break
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            step += 1


if __name__ == "__main__":
    main()
