"""CUDA training jobs of a known shape for `trainscope run --auto` (issue 39;
tests/python/test_gpu_labels.py, run by scripts/gpu-suite.sh). No trainscope in it.

    python gpu_shapes.py matmul|tiny|input [--batches N]

matmul: a 4096-wide MLP on 1024-row batches, the GPU busy (the step is the device's
        matmuls; the host waits for it at loss.item(), untimed): COMPUTE-BOUND(gpu)
tiny:   a 64-wide MLP of 40 layers on 8-row batches: hundreds of kernels of a few
        microseconds each, the GPU waiting for the host to launch them: LAUNCH-BOUND
input:  the matmul job's model fed by a Dataset that sleeps 40 ms a batch: INPUT-BOUND
Prints one JSON line: the shape, the batches and the CUDA device's name.
"""

import argparse
import json
import time

import torch
from torch import nn


class Data(torch.utils.data.Dataset):
    def __init__(self, n, rows, width, sleep_s):
        self.n, self.rows, self.width, self.sleep_s = n, rows, width, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.rows, self.width, generator=g), torch.randn(self.rows, 1,
                                                                            generator=g)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shape", choices=["matmul", "tiny", "input"])
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    if args.shape == "tiny":
        width, rows, layers, sleep_s = 64, 8, 40, 0.0
    else:
        width, rows, layers, sleep_s = 4096, 1024, 6, 0.04 if args.shape == "input" else 0.0
    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*blocks, nn.Linear(width, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    # batch_size=None: each item is a whole batch (the Dataset makes it).
    loader = torch.utils.data.DataLoader(Data(args.batches, rows, width, sleep_s),
                                         batch_size=None, num_workers=0)
    loss_fn = nn.MSELoss()
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # the host's wait for the device
    torch.cuda.synchronize()
    print(json.dumps({"shape": args.shape, "batches": args.batches,
                      "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
