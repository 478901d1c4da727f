"""A plain PyTorch loop for `trainscope run --auto` (no trainscope in it) whose label is
known by construction: --mode creep keeps 1 MB (every page written) per step
(MEMORY-CREEP of the process RSS), drift waits 20 ms + 0.5 ms x step (THROUGHPUT-DRIFT),
steady waits 20 ms. Each step also runs a small model's forward, backward and optimizer
step. It runs --steps steps, or, with --until-captured, until a capture file appears in the
run's captures/ (then 10 steps more, for the capture to end) or --steps pass.
"""

import argparse
import os
import time

import torch

PAGE = 4096


def _captured():
    run_dir = os.environ.get("TRAINSCOPE_RUN_DIR", "")
    folder = os.path.join(run_dir, "captures")
    return run_dir and os.path.isdir(folder) and any(
        n.endswith(".json") for n in os.listdir(folder))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=("creep", "drift", "steady"), default="steady")
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--until-captured", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(args.steps)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    kept = []  # the creep
    left = None  # steps after the capture appeared
    for i, (x, y) in enumerate(loader):
        if args.mode == "creep":
            chunk = bytearray(1000 * 1000)
            chunk[::PAGE] = b"\x01" * len(range(0, len(chunk), PAGE))  # resident
            kept.append(chunk)
        time.sleep(0.02 + (0.0005 * i if args.mode == "drift" else 0.0))
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if args.until_captured and left is None and i % 10 == 0 and _captured():
            left = 10
        if left is not None:
            left -= 1
            if left <= 0:
                break


if __name__ == "__main__":
    main()
