"""Deep500's complete PyTorch example, running on trainscope.

train_epoch and train_model below are copied verbatim from Deep500's README
("A More Complete Example"); only the import of the timer module differs
(Deep500: ``from deep500.utils import timer_torch as timer``). The driver
after them trains a tiny MLP on synthetic data for ``args.num_epochs``
epochs: on CUDA when torch has it (a loader wrapper moves the batches there),
else on the CPU, where the example's gpu=True regions are timed on the CPU
only, with one TrainscopeWarning.

    python deep500_dropin.py --num-epochs 2 --mlflow-tracking-uri URI
"""
import argparse
import os
import unittest.mock

import torch
# Adjust import depending on your model.
import trainscope.torch as timer


def train_epoch(loader, net, criterion, optimizer, tmr):
    # Batches, forward, and backward are timed on both CPU and GPU.
    # Because we want the batch time to include I/O, we start timing here.
    # Timing for each subsequent iteration is handled at the end of the loop.
    tmr.start(timer.TimeType.BATCH, gpu=True)  # Timing region for one batch.
    # Timing I/O operates similar to batch timing.
    # Note: This only times the visible delay for I/O, not overall I/O time.
    tmr.start(timer.TimeType.IO)  # Timing region for I/O for this batch.
    for idx, (inputs, targets) in enumerate(loader):
        tmr.end(timer.TimeType.IO)
        tmr.start(timer.TimeType.FORWARD, gpu=True)  # Timing region for forward prop.
        output = net(inputs)
        loss = criterion(output, targets)
        tmr.end(timer.TimeType.FORWARD, gpu=True)
        tmr.start(timer.TimeType.BACKWARD, gpu=True)  # Timing region for backprop.
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tmr.end(timer.TimeType.BACKWARD, gpu=True)

        # See above on batch and I/O timing.
        # We start timing the next batch except at the last iteration.
        tmr.end(timer.TimeType.BATCH, gpu=True)
        if idx % 10 == 0:
            # Prevent CUDA event exhaustion.
            tmr.complete_all()
        if idx != len(loader) - 1:
            tmr.start(timer.TimeType.BATCH, gpu=True)
            tmr.start(timer.TimeType.IO)

def train_model(args, loader, net, criterion, optimizer):
    net.train()
    tmr = timer.CPUGPUTimer()  # Create timer.
    # Note: Use timer.Timer() for CPU-only timing.
    for epoch in range(args.num_epochs):
        tmr.start(timer.TimeType.EPOCH)  # Timing region for one epoch.
        # Note we pass the timer as a parameter, rather than creating a new one.
        train_epoch(loader, net, criterion, optimizer, tmr)
        tmr.end(timer.TimeType.EPOCH)
    tmr.print_all_time_stats()  # Print all gathered stats to stdout.
    tmr.log_mlflow_all('train')  # Log the means of each region type to MLFlow.


# ---- Driver (not part of Deep500's example) ----


class DeviceLoader:
    """A DataLoader whose batches are moved to `device` (len() as the loader's)."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for inputs, targets in self.loader:
            yield inputs.to(self.device), targets.to(self.device)


def build(device, num_samples=96, batch_size=8, features=16, classes=4):
    """Synthetic classification data, a 2-layer MLP, its loss and optimizer."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(num_samples, features, generator=generator)
    targets = torch.randint(0, classes, (num_samples,), generator=generator)
    dataset = torch.utils.data.TensorDataset(inputs, targets)
    loader = DeviceLoader(
        torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                    generator=generator), device)
    net = torch.nn.Sequential(torch.nn.Linear(features, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, classes)).to(device)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    return loader, net, criterion, optimizer


def run(num_epochs=2, device=None):
    """Runs train_model; returns (the timer it created, batches per epoch).

    train_model keeps its timer to itself, so timer.CPUGPUTimer is wrapped for
    the call to hand the instance (of the real class) back to the caller.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    loader, net, criterion, optimizer = build(device)
    args = argparse.Namespace(num_epochs=num_epochs)
    created = []
    timer_class = timer.CPUGPUTimer

    def recording_timer(*timer_args, **timer_kwargs):
        created.append(timer_class(*timer_args, **timer_kwargs))
        return created[-1]

    with unittest.mock.patch.object(timer, "CPUGPUTimer", recording_timer):
        train_model(args, loader, net, criterion, optimizer)
    return created[0], len(loader)


def main():
    parser = argparse.ArgumentParser(description="Deep500's PyTorch example on trainscope")
    parser.add_argument("--num-epochs", type=int, default=2)
    parser.add_argument("--mlflow-tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"),
                        help="where train_model's log_mlflow_all goes (default: "
                             "$MLFLOW_TRACKING_URI)")
    args = parser.parse_args()
    if not args.mlflow_tracking_uri:
        parser.error("train_model logs to MLflow: give --mlflow-tracking-uri or set "
                     "MLFLOW_TRACKING_URI")
    import mlflow  # pylint: disable=import-outside-toplevel

    mlflow.set_tracking_uri(args.mlflow_tracking_uri)
    with mlflow.start_run():
        run(args.num_epochs)


if __name__ == "__main__":
    main()
