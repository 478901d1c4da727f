#!/usr/bin/env python3
"""A PyTorch training loop timed with trainscope: Deep500's example, unchanged.

This is the training loop from Deep500's README with one line changed, the
import: ``from deep500.utils import timer_torch as timer`` became
``import trainscope.torch as timer``. BATCH, FORWARD and BACKWARD are timed
on the CPU and (with a GPU) with CUDA events on torch's current stream; IO
is the time the loop waits for the DataLoader; EPOCH uses ``scope()``, the
context-manager form that Deep500 lacks.

    PYTHONPATH=<build>/python python3 examples/python_train.py [--epochs N]

Exits 77 (ctest's "skipped") when torch is not installed.
"""

import argparse
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python_train.py needs torch (pip install torch)")
    sys.exit(77)

import trainscope.torch as timer  # was: from deep500.utils import timer_torch as timer


def make_loader(device, batch_size=128, samples=4096, features=32, classes=4):
    """Noisy clouds around overlapping centres: learnable, but not to zero loss."""
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(classes, features, generator=generator) * 0.3
    labels = torch.randint(classes, (samples,), generator=generator)
    inputs = centres[labels] + torch.randn(samples, features, generator=generator)
    dataset = torch.utils.data.TensorDataset(inputs, labels)
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, generator=generator,
        pin_memory=device.type == "cuda")


def train_epoch(loader, net, criterion, optimizer, tmr, device):
    """Deep500's train_epoch: BATCH includes the wait for the loader."""
    # The loader is the for statement, so the first BATCH and IO regions open
    # before it and each later one at the end of the previous iteration.
    tmr.start(timer.TimeType.BATCH, gpu=True)
    tmr.start(timer.TimeType.IO)
    loss_sum = torch.zeros((), device=device)
    for idx, (inputs, targets) in enumerate(loader):
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        tmr.end(timer.TimeType.IO)

        tmr.start(timer.TimeType.FORWARD, gpu=True)
        output = net(inputs)
        loss = criterion(output, targets)
        tmr.end(timer.TimeType.FORWARD, gpu=True)

        tmr.start(timer.TimeType.BACKWARD, gpu=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tmr.end(timer.TimeType.BACKWARD, gpu=True)

        # Summed on the device: loss.item() each batch would make the CPU wait
        # for the GPU and hide the asynchrony being measured.
        loss_sum += loss.detach()
        tmr.end(timer.TimeType.BATCH, gpu=True)
        # Deep500 needs tmr.complete_all() every few batches to avoid running
        # out of CUDA events; trainscope's event pool grows and end() never
        # waits, so there is nothing to do here.
        if idx != len(loader) - 1:
            tmr.start(timer.TimeType.BATCH, gpu=True)
            tmr.start(timer.TimeType.IO)
    return loss_sum.item() / len(loader)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = make_loader(device)
    net = nn.Sequential(
        nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    tmr = timer.CPUGPUTimer()
    print(f"training on {device}; GPU timing: {tmr.gpu_description()}")
    net.train()
    for epoch in range(args.epochs):
        with tmr.scope(timer.TimeType.EPOCH):  # ends even if the epoch raises
            loss = train_epoch(loader, net, criterion, optimizer, tmr, device)
        print(f"epoch {epoch + 1}/{args.epochs}: mean loss {loss:.4f}")

    # Reading statistics waits for outstanding GPU regions first.
    print("\nDeep500 format (print_all_time_stats):")
    tmr.print_all_time_stats()
    print("\nTable format:")
    tmr.print_all_time_stats(format="table")

    # TimeStats carries more than Deep500's five fields.
    batch = tmr.get_time_stats(timer.TimeType.BATCH)
    print(f"\nBATCH on the CPU: {batch.count} batches, median {batch.median * 1e3:.3f} ms "
          f"(95% CI {batch.median_ci_low * 1e3:.3f} to {batch.median_ci_high * 1e3:.3f} ms)")

    # Every region of every batch was recorded: this script doubles as a test.
    batches = args.epochs * len(loader)
    for key in (timer.TimeType.BATCH, timer.TimeType.IO, timer.TimeType.FORWARD,
                timer.TimeType.BACKWARD):
        count = tmr.get_time_stats(key).count
        if count != batches:
            sys.exit(f"{key.name}: {count} CPU regions, expected {batches}")
    if tmr.get_time_stats(timer.TimeType.EPOCH).count != args.epochs:
        sys.exit("EPOCH: wrong count")
    if tmr.gpu_available() and tmr.get_time_stats(timer.TimeType.FORWARD, gpu=True).count != batches:
        sys.exit("FORWARD: GPU regions missing")


if __name__ == "__main__":
    main()
