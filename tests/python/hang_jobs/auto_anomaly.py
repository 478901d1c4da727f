"""A plain PyTorch loop for `trainscope run --auto` (no trainscope in it): 80 steps of
about 20 ms (a sleep and a small model's forward, backward and optimizer step), step
--slow-step 20 times slower (-1: none).
"""

import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--slow-step", type=int, default=40)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(80)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    for i, (x, y) in enumerate(loader):
        time.sleep(0.4 if i == args.slow_step else 0.02)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
