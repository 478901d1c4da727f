"""Known models trained for a few steps (no DataLoader: steps from the optimizer),
for the FLOPs of one step that `trainscope run --auto` counts
(tests/python/test_step_work.py, docs/ledger.md):

    python flops_train.py --model mlp|conv|block|gemm [-n STEPS]

Prints one JSON line with the analytic FLOPs of one training step (forward and
backward of the matrix products and convolutions, 2 per multiply-add): backward
is twice forward for every layer (the gradients of its input and of its weight)
except the first layer, whose input needs no gradient (the weight's alone).
"""

import argparse
import json

import torch
from torch import nn


def mlp(batch):
    widths = [64, 256, 256, 10]
    layers = []
    for index, (width_in, width_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(width_in, width_out))
        if index < len(widths) - 2:
            layers.append(nn.ReLU())
    matmuls = [2 * batch * a * b for a, b in zip(widths, widths[1:])]
    flops = 3 * sum(matmuls) - matmuls[0]
    return nn.Sequential(*layers), torch.randn(batch, widths[0]), flops


def gemm(_batch):
    """GEMM-bound: two 1024 x 1024 layers on a batch of 512 (the CPU probe's size)."""
    width, batch = 1024, 512
    model = nn.Sequential(nn.Linear(width, width), nn.Linear(width, width))
    matmul = 2 * batch * width * width
    return model, torch.randn(batch, width), 3 * 2 * matmul - matmul


def conv(batch):
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU(),
                          nn.Flatten(), nn.Linear(32 * 16 * 16, 10))
    conv1 = 2 * batch * 16 * 32 * 32 * 3 * 3 * 3
    conv2 = 2 * batch * 32 * 16 * 16 * 16 * 3 * 3
    linear = 2 * batch * 32 * 16 * 16 * 10
    flops = 2 * conv1 + 3 * conv2 + 3 * linear
    return model, torch.randn(batch, 3, 32, 32), flops


class Block(nn.Module):
    """One transformer block: attention (4 heads) and a feed-forward, residuals."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.o = nn.Linear(width, width)
        self.ff1 = nn.Linear(width, hidden)
        self.ff2 = nn.Linear(hidden, width)

    def split(self, x):
        batch, seq, width = x.shape
        return x.reshape(batch, seq, self.heads, width // self.heads).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
        attended = torch.matmul(scores.softmax(dim=-1), v)
        attended = attended.transpose(1, 2).reshape(x.shape)
        h = x + self.o(attended)
        return h + self.ff2(torch.relu(self.ff1(h)))


def block(batch):
    seq, width, heads, hidden = 64, 128, 4, 512
    projection = 2 * batch * seq * width * width
    attention = 2 * batch * heads * seq * seq * (width // heads)  # q k^T, and attention x v
    feed = 2 * batch * seq * width * hidden  # each of the two
    forward = 4 * projection + 2 * attention + 2 * feed
    # q, k, v take x (no gradient): their weights' gradients only.
    flops = 3 * forward - 3 * projection
    return Block(width, heads, hidden), torch.randn(batch, seq, width), flops


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "conv", "block", "gemm"], required=True)
    parser.add_argument("-n", dest="steps", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    model, inputs, flops = {"mlp": mlp, "conv": conv, "block": block, "gemm": gemm}[args.model](8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        loss = model(inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(json.dumps({"flops": flops, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
