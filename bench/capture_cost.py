"""What an anomaly capture costs (issue 40, docs/diagnosis.md, "Anomaly captures").

    PYTHONPATH=<build>/python python bench/capture_cost.py [--rounds R] [--steps N]

A capture is torch.profiler (CPU activities, and CUDA where a GPU is; no stacks, no
shapes, no memory) over the N steps after a slow one, saved as a Chrome trace. Each round
drives trainscope's AnomalyCapture as a run does: 64 ordinary steps of a small MLP (its
p99 judged), one slow step (a sleep), then the N captured steps, timed from the slow
step's end to the end of the N-th step (which stops the profiler and writes the trace).
The same round also times N ordinary steps with no capture. Rounds interleave both; the
figures are medians over rounds: the captured steps' extra time in all, per step, as a
ratio, and the trace's size. The cost does not touch steps without a capture.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
from torch import nn

from trainscope._anomaly import AnomalyCapture


def make_step(width):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width),
                          nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, width)
    y = torch.randint(0, 10, (64,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def one_round(step, steps, run_dir):
    capture = AnomalyCapture(run_dir, 0, steps=steps, max_captures=1)
    for _ in range(64):
        step()
        capture.step()
    # N ordinary steps (the baseline; not shown to the capture, so that a noisy one cannot
    # start it: they count into the slow step's period).
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    plain = time.perf_counter() - t0
    # A slow step: its end starts the capture of the next N.
    time.sleep(max(0.2, 20 * plain))
    capture.step()
    if capture._profiler is None:  # pylint: disable=protected-access
        raise SystemExit("the slow step did not start a capture")
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
        capture.step()
    captured = time.perf_counter() - t0
    if len(capture.captures) != 1:
        raise SystemExit("no capture was written")
    size = os.path.getsize(capture.captures[0])
    shutil.rmtree(os.path.join(run_dir, "captures"))
    return plain, captured, size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=3, help="steps captured (--capture-steps)")
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(1)
    step = make_step(args.width)
    plain, captured, sizes = [], [], []
    with tempfile.TemporaryDirectory() as run_dir:
        one_round(step, args.steps, run_dir)  # warm-up: the profiler's first start is slower
        for _ in range(args.rounds):
            p, c, s = one_round(step, args.steps, run_dir)
            plain.append(p)
            captured.append(c)
            sizes.append(s)
    p, c = statistics.median(plain), statistics.median(captured)
    extra = statistics.median([b - a for a, b in zip(plain, captured)])
    print(f"torch {torch.__version__}, MLP width {args.width}, batch 64, 1 thread, "
          f"{args.rounds} rounds of {args.steps} captured steps")
    print(f"  {args.steps} steps without a capture: median {p * 1e3:.2f} ms "
          f"({p / args.steps * 1e3:.2f} ms a step)")
    print(f"  {args.steps} steps captured (profiler start to trace written): median "
          f"{c * 1e3:.2f} ms")
    print(f"  the capture's cost: {extra * 1e3:.2f} ms in all (median of the rounds' "
          f"differences), {extra / args.steps * 1e3:.2f} ms a step, x{c / p:.2f}")
    print(f"  trace: median {statistics.median(sizes) / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
